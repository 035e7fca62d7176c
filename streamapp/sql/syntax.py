"""ksqlDB statements as typed values: the grammar (``grammar.lark``) read by lark, turned into frozen dataclasses.

Only the shape of the text is checked here; whether ksqlDB (or streamapp) accepts
what the text says is :mod:`streamapp.sql.planner`'s job.  Unquoted names are
upper-cased and `back-quoted` ones kept as written, as ksqlDB does, so every
name below is already the name ksqlDB resolves.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Union

import lark
from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from .types import SqlType


class SqlError(Exception):
    """A statement streamapp cannot use: ``str()`` is one line naming where and why.

    Subclassed by :class:`streamapp.sql.refusals.PlanError`; both are StreamappErrors there
    (this module stays free of the rest of streamapp so the grammar can be tried alone).
    """


# ---- expressions ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """``name`` or ``qualifier.name`` as written (resolved by the planner); where it starts, for ksqlDB's
    messages that name the line and column (1-based; 0: not from a text)."""

    qualifier: str | None
    name: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    def __str__(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True)
class Literal:
    value: Any  # str, int, Decimal, float, bool or None

    def __str__(self) -> str:
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        return "null" if self.value is None else str(self.value).lower() if isinstance(self.value, bool) else str(self.value)


@dataclass(frozen=True)
class Call:
    """A function call, ``AS_VALUE(x)``; ``name`` upper-cased."""

    name: str
    args: tuple["Expression", ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Comparison:
    op: str
    left: "Expression"
    right: "Expression"

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Other:
    """Any other expression (arithmetic, CASE, CAST, ``->``, ...): its kind and text, for the error, and its parts.

    ``args`` are its operands in order (a CAST's target type, a ``->``'s field name included); ``ops`` the words
    between them (``+``, ``-``, ``WHEN``, ``ELSE``, ...): a join's WHERE and a stream-stream join's ON run them.
    """

    kind: str
    text: str
    args: tuple[Any, ...] = field(default=(), compare=False)
    ops: tuple[str, ...] = field(default=(), compare=False)

    def __str__(self) -> str:
        return self.text


Expression = Union[Column, Literal, Call, Comparison, Other]


# ---- statements ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SelectItem:
    """``*`` (all), ``alias.*`` (source), ``struct->*`` (struct: each field of the struct ``expression``) or one
    expression, with its ``AS`` name if given."""

    kind: str  # "all" | "source" | "struct" | "expression"
    expression: Expression | None = None
    alias: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Relation:
    name: str
    alias: str | None

    @property
    def label(self) -> str:
        """What a qualified column names this source by: its alias, else its name."""
        return self.alias or self.name


@dataclass(frozen=True)
class Duration:
    """``n UNIT`` of a WITHIN or GRACE PERIOD as written: the planner turns it into milliseconds (and refuses a
    unit ksqlDB has not)."""

    amount: Any  # int, or the Decimal/float ksqlDB refuses
    unit: str  # upper-cased


@dataclass(frozen=True)
class JoinWindow:
    """A stream-stream join's ``WITHIN n UNIT`` (before = after = n) or ``WITHIN (before, after)``, and its
    ``GRACE PERIOD`` (None: none written, which ksqlDB runs as Kafka Streams' legacy eager join)."""

    before: Duration
    after: Duration
    grace: Duration | None


@dataclass(frozen=True)
class Join:
    type: str  # INNER | LEFT | RIGHT | FULL
    right: Relation
    on: Expression
    within: str | None  # the WITHIN clause's text: a stream-stream join
    window: JoinWindow | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Query:
    select: tuple[SelectItem, ...]
    source: Relation
    joins: tuple[Join, ...]
    #: Clauses streamapp does not run yet, by keyword (``WHERE``, ``GROUP BY``, ...): each one is refused,
    #: but for a WHERE the query kind runs (``where``).
    clauses: tuple[str, ...]
    emit: str | None
    where: Expression | None = None
    #: GROUP BY's expressions and the HAVING: the planner types them for ksqlDB's refusals, then refuses them.
    group_by: tuple[Expression, ...] = ()
    having: Expression | None = None


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: SqlType
    #: "KEY" (a stream's), "PRIMARY KEY" (a table's), "HEADERS"/"HEADER" or None (a value column).
    constraint: str | None


@dataclass(frozen=True)
class Statement:
    """Where a statement starts in the file and its first words, for every message about it."""

    line: int
    text: str

    @property
    def label(self) -> str:
        words = " ".join(self.text.split())
        return f"line {self.line} ({words[:60] + '...' if len(words) > 63 else words})"


@dataclass(frozen=True)
class CreateSource(Statement):
    kind: str  # STREAM | TABLE
    name: str
    columns: tuple[ColumnDef, ...] | None
    properties: tuple[tuple[str, Any], ...]
    if_not_exists: bool
    or_replace: bool


@dataclass(frozen=True)
class CreateAs(Statement):
    kind: str
    name: str
    properties: tuple[tuple[str, Any], ...]
    query: Query
    if_not_exists: bool
    or_replace: bool


@dataclass(frozen=True)
class InsertInto(Statement):
    """``INSERT INTO stream SELECT ...``: planned for ksqlDB's checks of it, then refused."""

    name: str
    properties: tuple[tuple[str, Any], ...]
    query: Query


@dataclass(frozen=True)
class OtherStatement(Statement):
    """``INSERT``, ``DROP``, ...: read so that the refusal names it."""

    keyword: str


# ---- the parser ----------------------------------------------------------------------------------------------------

@cache
def _parser() -> Lark:
    grammar = resources.files(__package__).joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", start=["script", "type"], propagate_positions=True, maybe_placeholders=False,
                cache=_cache_file())


def _cache_file() -> str | bool:
    """Where lark keeps the analysed grammar: building the LALR tables costs about a second in every process
    that plans (each worker, CLI command and test runner), loading them 20 ms.  Lark checks the grammar's hash
    in the file and rebuilds it when the grammar changes; the file is the user's own (it is a pickle)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "streamapp"
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return str(base / f"grammar-lark-{lark.__version__}-py{sys.version_info[0]}.{sys.version_info[1]}.cache")


def _name(token: Token) -> str:
    text = str(token)
    if token.type == "QUOTED_IDENTIFIER":
        return text[1:-1].replace("``", "`")
    return text.upper()


def _words(tree: Tree | Token) -> list[Token]:
    return [tree] if isinstance(tree, Token) else list(tree.scan_values(lambda v: isinstance(v, Token)))


_KEYWORD_CLAUSES = {"where": "WHERE", "window": "WINDOW", "group_by": "GROUP BY", "partition_by": "PARTITION BY",
                    "having": "HAVING", "limit": "LIMIT"}


class _ToStatements(Transformer):
    """The parse tree -> :class:`Statement` values (lark calls one method per rule)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text

    def _source_text(self, meta: Any) -> str:
        return self._text[meta.start_pos:meta.end_pos]

    # names and literals
    def name(self, children: list[Token]) -> str:
        return _name(children[0])

    def string(self, children: list[Token]) -> Literal:
        return Literal(str(children[0])[1:-1].replace("''", "'"))

    def number(self, children: list[Token]) -> Literal:
        text = str(children[0])
        if any(c in text for c in ".eE"):
            return Literal(float(text) if any(c in text for c in "eE") else Decimal(text))
        return Literal(int(text))

    def true(self, _: list) -> Literal:
        return Literal(True)

    def false(self, _: list) -> Literal:
        return Literal(False)

    def null(self, _: list) -> Literal:
        return Literal(None)

    # types
    def simple_type(self, children: list) -> SqlType:
        return SqlType.of(children[0], tuple(int(str(c)) for c in children[1:]))

    def array_type(self, children: list) -> SqlType:
        return SqlType("ARRAY", (children[-2],))

    def map_type(self, children: list) -> SqlType:
        return SqlType("MAP", tuple(c for c in children if isinstance(c, SqlType)))

    def struct_type(self, children: list) -> SqlType:
        return SqlType("STRUCT", tuple(c for c in children if isinstance(c, tuple)))

    def struct_field(self, children: list) -> tuple[str, SqlType]:
        return (children[0], children[1])

    def type(self, children: list) -> SqlType:  # the ``type`` start rule
        return children[0]

    # expressions
    @v_args(meta=True)
    def column_ref(self, meta: Any, children: list[str]) -> Column:
        line, column = (0, 0) if meta.empty else (meta.line, meta.column)
        if len(children) == 2:
            return Column(children[0], children[1], line, column)
        return Column(None, children[0], line, column)

    def function_call(self, children: list) -> Call:
        return Call(children[0], tuple(children[1:]))

    @v_args(meta=True)
    def comparison(self, meta: Any, children: list) -> Comparison:
        return Comparison(str(children[1]), children[0], children[2])

    def __default__(self, data: str, children: list, meta: Any) -> Any:
        if data in _OTHER_EXPRESSIONS:
            kind = _OTHER_EXPRESSIONS[data]
            args = tuple(c for c in children if not isinstance(c, Token))
            ops = tuple(str(c).upper() for c in children if isinstance(c, Token))
            return Other(kind, self._source_text(meta) if not meta.empty else str(data), args, ops)
        return Tree(data, children, meta)

    # the query
    def all_columns(self, _: list) -> SelectItem:
        return SelectItem("all")

    def source_columns(self, children: list) -> SelectItem:
        return SelectItem("source", source=children[0])

    def struct_columns(self, children: list) -> SelectItem:
        return SelectItem("struct", expression=children[0])

    def single_column(self, children: list) -> SelectItem:
        rest = [c for c in children[1:] if isinstance(c, str) and not isinstance(c, Token)]
        return SelectItem("expression", children[0], rest[-1] if rest else None)

    def relation(self, children: list) -> Relation:
        names = [c for c in children if not isinstance(c, Token)]
        return Relation(names[0], names[1] if len(names) > 1 else None)

    @v_args(meta=True)
    def join(self, meta: Any, children: list) -> Join:
        kind = children[0]
        join_type = {"inner_join": "INNER", "left_join": "LEFT", "right_join": "RIGHT", "full_join": "FULL"}[kind.data]
        relation = next(c for c in children if isinstance(c, Relation))
        within = next((c for c in children if isinstance(c, Tree) and c.data == "within"), None)
        on = children[-1]
        window = None
        if within is not None:
            durations = [c for c in within.children if isinstance(c, Duration)]
            grace = durations[-1] if any(isinstance(c, Token) and c.type == "GRACE" for c in within.children) else None
            bounds = durations[:-1] if grace is not None else durations
            window = JoinWindow(bounds[0], bounds[-1], grace)
        return Join(join_type, relation, on, self._source_text(within.meta) if within is not None else None, window)

    def duration(self, children: list) -> Duration:
        text = str(children[0])
        return Duration(int(text) if text.isdigit() else Decimal(text), children[1])

    def query(self, children: list) -> Query:
        select = tuple(c for c in children if isinstance(c, SelectItem))
        source = next(c for c in children if isinstance(c, Relation))
        joins = tuple(c for c in children if isinstance(c, Join))
        trees = [c for c in children if isinstance(c, Tree)]
        clauses = tuple(_KEYWORD_CLAUSES[t.data] for t in trees if t.data in _KEYWORD_CLAUSES)
        emit = next((" ".join(str(w).upper() for w in _words(t)) for t in trees if t.data == "emit"), None)
        where, having = (next((c for t in trees if t.data == clause for c in t.children if not isinstance(c, Token)),
                              None) for clause in ("where", "having"))
        group_by = next((tuple(c for c in t.children if not isinstance(c, Token)) for t in trees
                         if t.data == "group_by"), ())
        return Query(select, source, joins, clauses, emit, where, group_by, having)

    # statements
    def prop(self, children: list) -> tuple[str, Any]:
        return (children[0], children[-1].value)

    def with_props(self, children: list) -> tuple[tuple[str, Any], ...]:
        return tuple(c for c in children if isinstance(c, tuple))

    def table_elements(self, children: list) -> tuple[ColumnDef, ...]:
        return tuple(children)

    def column_def(self, children: list) -> ColumnDef:
        constraint = None
        if len(children) > 2:
            constraint = {"key_column": "KEY", "primary_key_column": "PRIMARY KEY", "headers_column": "HEADERS",
                          "header_column": "HEADER"}[children[2].data]
        return ColumnDef(children[0], children[1], constraint)

    def _create_parts(self, children: list) -> dict[str, Any]:
        trees = {c.data: c for c in children if isinstance(c, Tree)}
        return {
            "kind": str(trees["source_kind"].children[0]).upper(),
            "name": next(c for c in children if isinstance(c, str) and not isinstance(c, Token)),
            "properties": next((c for c in children if isinstance(c, tuple) and (not c or isinstance(c[0], tuple))), ()),
            "if_not_exists": "if_not_exists" in trees,
            "or_replace": "or_replace" in trees,
        }

    @v_args(meta=True)
    def create_source(self, meta: Any, children: list) -> CreateSource:
        columns = next((c for c in children if isinstance(c, tuple) and c and isinstance(c[0], ColumnDef)), None)
        parts = self._create_parts([c for c in children if c is not columns])
        return CreateSource(meta.line, self._source_text(meta), columns=columns, **parts)

    @v_args(meta=True)
    def create_as(self, meta: Any, children: list) -> CreateAs:
        query = next(c for c in children if isinstance(c, Query))
        return CreateAs(meta.line, self._source_text(meta), query=query, **self._create_parts(children))

    @v_args(meta=True)
    def insert_into(self, meta: Any, children: list) -> InsertInto:
        name = next(c for c in children if isinstance(c, str) and not isinstance(c, Token))
        properties = next((c for c in children if isinstance(c, tuple)), ())
        query = next(c for c in children if isinstance(c, Query))
        return InsertInto(meta.line, self._source_text(meta), name, properties, query)

    @v_args(meta=True)
    def other_statement(self, meta: Any, children: list) -> OtherStatement:
        return OtherStatement(meta.line, self._source_text(meta), str(children[0]).upper())

    insert_values = other_statement

    def script(self, children: list) -> list[Statement]:
        return [c for c in children if isinstance(c, Statement)]


_OTHER_EXPRESSIONS = {"or_expr": "OR", "and_expr": "AND", "not_": "NOT", "null_check": "IS NULL", "between": "BETWEEN",
                      "like": "LIKE", "in_list": "IN", "sum": "arithmetic", "product": "arithmetic",
                      "negate": "arithmetic", "function_star": "COUNT(*)", "cast": "CAST", "case": "CASE",
                      "dereference": "->", "subscript": "[]"}


def parse(text: str) -> list[Statement]:
    """Every statement of a ``.sql`` text, in order; a syntax error is one :class:`SqlError` line."""
    try:
        tree = _parser().parse(text, start="script")
        return _ToStatements(text).transform(tree)
    except UnexpectedInput as exc:
        raise SqlError(_syntax_message(text, exc)) from None
    except VisitError as exc:  # a value the grammar admits but no type takes (DECIMAL(x) with a bad size, ...)
        meta = getattr(exc.obj, "meta", None)
        where = f"line {meta.line}, column {meta.column}: " if meta is not None and not meta.empty else ""
        raise SqlError(f"{where}{exc.orig_exc}") from None


def parse_type(text: str) -> SqlType:
    """A column type written as ksqlDB writes it (``DECIMAL(4, 2)``, ``ARRAY<STRING>``)."""
    try:
        return _ToStatements(text).transform(_parser().parse(text, start="type"))
    except (UnexpectedInput, VisitError):
        raise SqlError(f"{text!r} is not a ksqlDB type") from None


def _syntax_message(text: str, exc: UnexpectedInput) -> str:
    line, column = exc.line, exc.column
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        return f"line {line}: the statement ends early: syntax error at the end of the text"
    if isinstance(exc, UnexpectedCharacters):
        near = text[exc.pos_in_stream:exc.pos_in_stream + 1]
    else:
        near = str(exc.token)
    if len(near) > 40 or "\n" in near or "\r" in near:  # a quoted string can run over lines: the error is one line
        near = " ".join(near.split())
        near = near if len(near) <= 40 else near[:37] + "..."
    start = text.rfind(";", 0, exc.pos_in_stream) + 1
    statement = " ".join(text[start:exc.pos_in_stream].split())
    context = f" after '{statement[-40:]}'" if statement else ""
    return f"line {line}, column {column}: syntax error at '{near}'{context}"
