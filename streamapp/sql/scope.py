"""A query's names and expressions resolved against its sources, as ksqlDB resolves, names and types them.

The planner makes one :class:`Scope` per query: its sides (the source, and the joined one), whether it computes
functions and operators (a stream-stream join does) and the synthetic key column a join may add (ksqlDB's
``ROWKEY``).  Its methods turn SELECT, ON and WHERE into :mod:`~streamapp.sql.plan` expressions with their
types, refusing what ksqlDB refuses with ksqlDB's message.  See docs/reference/statements.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from . import plan as p
from . import syntax as s
from . import types
from .refusals import rejected, unsupported

#: The pseudo columns every query may name: the record's timestamp.
PSEUDO_COLUMNS = ("ROWTIME",)
#: The pseudo columns of where a record was read (plan.WHERE_READ): refused but in a stream-stream join, qualified.
UNSUPPORTED_PSEUDO = tuple(c.name for c in p.WHERE_READ)
#: A windowed source's bounds: no source streamapp reads is windowed, so they never resolve.
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")
#: ksqlDB's names of the comparison operators, for its messages.
_COMPARISONS = {"=": "EQUAL", "!=": "NOT_EQUAL", "<": "LESS_THAN", "<=": "LESS_THAN_OR_EQUAL", ">": "GREATER_THAN",
                ">=": "GREATER_THAN_OR_EQUAL"}
#: The aggregate functions a HAVING is typed with: the type each returns (None: its argument's).
_AGGREGATES = {"SUM": None, "MIN": None, "MAX": None, "COUNT": "BIGINT", "COUNT_DISTINCT": "BIGINT",
               "AVG": "DOUBLE"}


@dataclass(frozen=True)
class Side:
    """A source as one side of a query sees it: its alias and whether it is the left or the right one."""

    source: p.Source
    label: str  # the alias, else the source's name: what qualifies its columns
    side: str


@dataclass(frozen=True)
class Scope:
    """What one query's names resolve against; made per query, never changed (a stream-stream join whose ROWKEY
    takes its type from ON makes a second one)."""

    sides: tuple[Side, ...]
    #: Whether the query computes functions and operators (a stream-stream join does).
    rich: bool = False
    #: The synthetic key (name, type) of a FULL join, or of a stream-stream join ON two expressions: a column
    #: SELECT may name.
    synthetic: tuple[str, str] | None = None

    def resolvable(self, statement: s.Statement, query: s.Query) -> None:
        """Every column the projection names exists, checked first as ksqlDB's analyzer does."""
        for item in query.select:
            for ref in columns_in(item.expression):
                known = [x for x in self.sides if ref.qualifier in (None, x.label)]
                if ref.qualifier is None and self.synthetic and ref.name == self.synthetic[0]:
                    continue
                if ref.qualifier is not None and not known:
                    raise rejected(statement, f"Source '{ref.qualifier}' does not exist.")
                if ref.name in WINDOW_BOUNDS or not any(ref.name in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO
                                                        or x.source.column(ref.name) for x in known):
                    raise rejected(statement, f"SELECT column '{ref}' cannot be resolved.")

    def projection(self, statement: s.Statement, select: tuple[s.SelectItem, ...],
                   join: bool) -> list[tuple[str, p.Expression, str]]:
        """(name, expression, type) of each output column, named as ksqlDB names them."""
        found: list[tuple[str, p.Expression, str]] = []
        generated = 0
        taken = {c.name for side in self.sides for c in side.source.columns}
        for item in select:
            if item.kind in ("all", "source"):
                chosen = self.sides if item.kind == "all" else [x for x in self.sides if x.label == item.source]
                if not chosen:
                    raise rejected(statement, f"Source '{item.source}' does not exist.")
                for side in chosen:
                    for column in side.source.columns:
                        name = f"{side.label}_{column.name}" if join else column.name
                        found.append((name, p.ColumnOf(side.side, column.name), column.type))
                continue
            expression = item.expression
            resolved, type_ = self.expression(statement, expression)
            if item.kind == "struct":  # ``x->*``: a column for each field, named by the field
                if not self.rich:
                    raise unsupported(statement, f"{expression}->* outside a stream-stream join")
                found += [(name, p.Apply("FIELD", (resolved,), name), str(field_type))
                          for name, field_type in s.parse_type(type_).params]
                continue
            if item.alias:
                name = item.alias
            elif isinstance(expression, s.Column):
                clashing = join and (expression.name in PSEUDO_COLUMNS + UNSUPPORTED_PSEUDO
                                     or sum(1 for x in self.sides if x.source.column(expression.name)) > 1)
                label = next((x.label for x in self.sides if x.side == side_read(resolved)), None)
                name = f"{label}_{expression.name}" if clashing and expression.qualifier else expression.name
            else:
                while f"KSQL_COL_{generated}" in taken:
                    generated += 1
                name = f"KSQL_COL_{generated}"
                generated += 1
            found.append((name, resolved, type_))
        return found

    def expression(self, statement: s.Statement, expression: s.Expression) -> tuple[p.Expression, str]:
        """(what an expression of SELECT or ON computes, its type): a column or AS_VALUE of one in every query,
        more in a stream-stream join (:meth:`computed`)."""
        if isinstance(expression, s.Column):
            resolved, type_, _ = self.column(statement, expression)
            return resolved, type_
        if isinstance(expression, s.Call) and expression.name == "AS_VALUE" and len(expression.args) == 1:
            inner, type_ = self.expression(statement, expression.args[0])
            return p.AsValue(inner), type_
        if self.rich:
            found = self.computed(statement, expression)
            if found is not None:
                return found
        if isinstance(expression, s.Call):
            runs = "AS_VALUE only" if not self.rich else "AS_VALUE, ABS and SUBSTRING in a stream-stream join"
            raise unsupported(statement, f"function {expression.name} (streamapp runs {runs})")
        if isinstance(expression, s.Literal):
            raise unsupported(statement, f"the literal {expression} in a projection")
        what = expression.kind if isinstance(expression, s.Other) else "a comparison"
        raise unsupported(statement, f"{what} in an expression ({expression})")

    def computed(self, statement: s.Statement, expression: s.Expression) -> tuple[p.Expression, str] | None:
        """A function, operator or constant a stream-stream join computes (in ON or SELECT) and its type, as ksqlDB
        types it; None: not one streamapp runs."""
        if isinstance(expression, s.Literal) and expression.value is not None:
            value = expression.value
            literal = p.Literal(float(value) if isinstance(value, Decimal) else value)
            return literal, types.literal_type(value) or "STRING"
        if isinstance(expression, s.Call) and expression.name in ("ABS", "SUBSTRING"):
            args = [self.expression(statement, a) for a in expression.args]
            type_ = args[0][1] if expression.name == "ABS" else "STRING"
            return p.Apply(expression.name, tuple(a[0] for a in args)), type_
        if not isinstance(expression, s.Other):
            return None
        if expression.kind == "CAST":
            inner, _ = self.expression(statement, expression.args[0])
            target = str(expression.args[1])
            return p.Apply("CAST", (inner,), target), target
        if expression.kind == "CASE":
            args, results = [], []
            for n, arg in enumerate(expression.args):
                is_test = n % 2 == 0 and not ("ELSE" in expression.ops and n == len(expression.args) - 1)
                resolved, type_, _ = (self.predicate(statement, arg) if is_test
                                      else (*self.expression(statement, arg), ""))
                args.append(resolved)
                if not is_test:
                    results.append(type_)
            return p.Apply("CASE", tuple(args), "ELSE" if "ELSE" in expression.ops else ""), results[0]
        operands = [a for a in expression.args if not isinstance(a, str)]
        resolved = [self.expression(statement, a) for a in operands]
        if expression.kind == "arithmetic" and len(resolved) == 1:
            return p.Apply("NEGATE", (resolved[0][0],)), resolved[0][1]
        if expression.kind == "arithmetic":
            result, type_ = resolved[0]
            for op, (operand, operand_type) in zip(expression.ops, resolved[1:]):
                result, type_ = p.Apply(op, (result, operand)), types.wider(type_, operand_type)
            return result, type_
        if expression.kind == "[]":
            element = s.parse_type(resolved[0][1]).params[0]
            return p.Apply("SUBSCRIPT", (resolved[0][0], resolved[1][0])), str(element)
        if expression.kind == "->":
            name = expression.args[1]
            fields = dict(s.parse_type(resolved[0][1]).params)
            if name not in fields:
                raise rejected(statement, f"Could not find field '{name}' in '{operands[0]}'.")
            return p.Apply("FIELD", (resolved[0][0],), name), str(fields[name])
        return None

    def column(self, statement: s.Statement, ref: s.Column) -> tuple[p.Expression, str, Side]:
        """(what a column names, its type, the side it reads): a qualified one that side's, else the one side that
        has it (the synthetic key: the join key, both sides')."""
        if ref.name in UNSUPPORTED_PSEUDO and not (self.rich and ref.qualifier is not None):
            raise unsupported(statement, f"pseudo column {ref.name}")
        if ref.qualifier is None and self.synthetic and ref.name == self.synthetic[0]:
            return p.JoinKey(), self.synthetic[1], self.sides[0]
        if ref.qualifier is not None:
            side = next((x for x in self.sides if x.label == ref.qualifier), None)
            if side is None:
                raise rejected(statement, f"Source '{ref.qualifier}' does not exist.")
            candidates = [side]
        else:
            candidates = [x for x in self.sides if ref.name in PSEUDO_COLUMNS or x.source.column(ref.name)]
            if len(candidates) > 1:
                raise rejected(statement, f"Column '{ref.name}' is ambiguous. Could be any of: "
                                          + ", ".join(f"{x.label}.{ref.name}" for x in candidates))
            if not candidates:
                raise rejected(statement, f"SELECT column '{ref.name}' cannot be resolved.")
        side = candidates[0]
        if ref.name in PSEUDO_COLUMNS:
            return p.RowTime(side.side), "BIGINT", side
        if ref.name in UNSUPPORTED_PSEUDO:  # a stream-stream join's rows hold where their record was read
            return p.ColumnOf(side.side, ref.name), next(c.type for c in p.WHERE_READ if c.name == ref.name), side
        column = side.source.column(ref.name)
        if column is None:
            raise rejected(statement, f"Column '{ref}' cannot be resolved.")
        return p.ColumnOf(side.side, column.name), column.type, side

    def where(self, statement: s.Statement, expression: s.Expression, clause: str = "WHERE") -> p.Expression:
        """A WHERE of comparisons, AND, OR and NOT over columns and constants: what a table-table join filters by
        (``clause``: HAVING for a HAVING, typed the same way over aggregates, for ksqlDB's refusals).

        Typed as ksqlDB types it (``ExpressionTypeManager``): it must be a BOOLEAN, and a comparison must
        compare numbers with numbers, text with text or booleans with booleans (by = or != only).
        """
        resolved, type_, shown = self.predicate(statement, expression, clause)
        if type_ not in ("BOOLEAN", None):
            raise rejected(statement, f"Type error in {clause} expression: Should evaluate to boolean but is "
                                      f"{shown} ({types.message_name(type_)}) instead.")
        return resolved

    def predicate(self, statement: s.Statement, expression: s.Expression,
                  clause: str = "WHERE") -> tuple[p.Expression, str | None, str]:
        """(what a part of a WHERE (or HAVING) computes, its type (None: NULL), how ksqlDB's messages show it)."""
        if isinstance(expression, s.Comparison):
            op = "!=" if expression.op == "<>" else expression.op
            left, right = (self.predicate(statement, x, clause) for x in (expression.left, expression.right))
            if not types.comparable(left[1], op, right[1]):
                raise rejected(statement, f"Error in {clause} expression: Cannot compare {left[2]} "
                                          f"({types.message_name(left[1] or 'NULL')}) to {right[2]} "
                                          f"({types.message_name(right[1] or 'NULL')}) with {_COMPARISONS[op]}.")
            return p.Compare(op, left[0], right[0]), "BOOLEAN", f"({left[2]} {op} {right[2]})"
        if isinstance(expression, s.Other) and expression.kind in ("AND", "OR", "NOT"):
            args = tuple(self.where(statement, a, clause) for a in expression.args)
            return p.Logical(expression.kind, args), "BOOLEAN", expression.text
        if clause == "HAVING" and isinstance(expression, s.Call) and expression.name in _AGGREGATES:
            args = [self.predicate(statement, a, clause) for a in expression.args]
            type_ = _AGGREGATES[expression.name] or (args[0][1] if args else None)
            if type_ is not None:
                return (p.Apply(expression.name, tuple(a[0] for a in args)), type_,
                        f"{expression.name}({', '.join(a[2] for a in args)})")
        if clause == "HAVING" and isinstance(expression, s.Other) and expression.kind == "COUNT(*)":
            return p.Apply("COUNT", ()), "BIGINT", "COUNT(*)"
        if isinstance(expression, s.Literal):
            value = expression.value
            return (p.Literal(float(value) if isinstance(value, Decimal) else value), types.literal_type(value),
                    str(expression))
        if isinstance(expression, s.Column):
            resolved, type_, side = self.column(statement, expression)
            shown = expression.name if isinstance(resolved, p.JoinKey) else f"{side.label}_{expression.name}"
            return resolved, type_, shown
        what = expression.kind if isinstance(expression, s.Other) else "a function call"
        raise unsupported(statement, f"{what} in a {clause} ({expression})")


def side_read(expression: p.Expression) -> str | None:
    """The side an expression reads (None: the join key, which is both sides')."""
    if isinstance(expression, p.AsValue):
        return side_read(expression.argument)
    parts = (expression.args if isinstance(expression, (p.Apply, p.Logical))
             else (expression.left, expression.right) if isinstance(expression, p.Compare) else ())
    if parts:
        return next((side for a in parts if (side := side_read(a)) is not None), None)
    return getattr(expression, "side", None)


def columns_in(expression: s.Expression | None) -> list[s.Column]:
    """Every column an expression names, in the order written (ksqlDB checks them in that order)."""
    if isinstance(expression, s.Column):
        return [expression]
    if isinstance(expression, s.Call):
        return [c for arg in expression.args for c in columns_in(arg)]
    if isinstance(expression, s.Comparison):
        return columns_in(expression.left) + columns_in(expression.right)
    if isinstance(expression, s.Other):
        return [c for arg in expression.args for c in columns_in(arg)]
    return []
