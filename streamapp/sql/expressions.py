"""Plan expressions as functions of a join's key and its two rows: what ON, SELECT and WHERE compute in a
table-table or stream-stream join, by ksqlDB's rules (Java's integer division and modulo, SQL's three-valued
logic, NULL in, NULL out)."""
from __future__ import annotations

import math
from typing import Any, Callable

from . import plan as p
from .formats import plain_json
from .engine import Row

def compile_expression(expression: p.Expression) -> Callable[[Any, Row | None, Row | None], Any]:
    """``expression`` as a function of the key and the two rows of a table-table join (a missing row reads NULL)."""
    if isinstance(expression, p.JoinKey):
        return lambda key, left, right: key
    if isinstance(expression, p.AsValue):
        return compile_expression(expression.argument)
    if isinstance(expression, p.Literal):
        value = expression.value
        return lambda key, left, right: value
    if isinstance(expression, p.Compare):
        return _compare(expression.op, compile_expression(expression.left), compile_expression(expression.right))
    if isinstance(expression, p.Logical):
        return _logical(expression.op, tuple(compile_expression(a) for a in expression.args))
    if isinstance(expression, p.Apply):
        return _apply(expression.op, tuple(compile_expression(a) for a in expression.args), expression.detail)
    row = 1 if expression.side == p.LEFT_SIDE else 2  # the argument holding the side's row
    if isinstance(expression, p.RowTime):
        return lambda *args: None if args[row] is None else args[row][1]
    name = expression.name
    return lambda *args: None if args[row] is None else args[row][0].get(name)


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _compare(op: str, left: Callable[..., Any], right: Callable[..., Any]) -> Callable[..., bool | None]:
    """SQL's comparison: NULL when either side is NULL (or the two cannot be compared)."""
    operator = _OPERATORS[op]

    def compare(*rows: Any) -> bool | None:
        a, b = left(*rows), right(*rows)
        if a is None or b is None:
            return None
        try:
            return operator(a, b)
        except TypeError:
            return None
    return compare


def _java_div(a: Any, b: Any) -> Any:
    """``a / b`` as Java divides: integers truncated toward zero (NULL for a division by zero), else a float."""
    if isinstance(a, int) and isinstance(b, int):
        return None if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return a / b if b else None


def _java_mod(a: Any, b: Any) -> Any:
    """``a % b`` as Java computes it: the remainder takes the dividend's sign."""
    if isinstance(a, int) and isinstance(b, int):
        return None if b == 0 else int(math.fmod(a, b))
    return math.fmod(a, b) if b else None


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": _java_div, "%": _java_mod}


def _substring(text: Any, position: Any, length: Any = None) -> Any:
    """ksqlDB's ``SUBSTRING``: 1-based, a negative position counts from the end."""
    if text is None or position is None:
        return None
    start = position - 1 if position > 0 else max(len(text) + position, 0)
    return text[start:] if length is None else text[start:start + max(length, 0)]


def _subscript(array: Any, index: Any) -> Any:
    """``array[i]``: 1-based, a negative index counts from the end; NULL out of range."""
    if array is None or index is None or index == 0 or abs(index) > len(array):
        return None
    return array[index - 1] if index > 0 else array[index]


def _field(struct: Any, name: str) -> Any:
    """``struct->field``: the field by its name, else the one whose upper-cased name it is (JSON's own case)."""
    if struct is None:
        return None
    return struct.get(name, next((v for k, v in struct.items() if k.upper() == name), None))


def _cast(value: Any, target: str) -> Any:
    """``CAST(value AS target)`` of the numbers and text a join key holds (Java's narrowing truncates)."""
    if value is None:
        return None
    if target in ("INT", "BIGINT"):
        return int(value)
    if target == "DOUBLE":
        return float(value)
    if target == "STRING":
        return value if isinstance(value, str) else plain_json(value)
    return value


def _apply(op: str, args: tuple[Callable[..., Any], ...], detail: str) -> Callable[..., Any]:
    """An :class:`~streamapp.sql.plan.Apply` as a function of (key, left row, right row); NULL in, NULL out."""
    if op == "CASE":
        pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - (detail == "ELSE"), 2)]
        default = args[-1] if detail == "ELSE" else (lambda *rows: None)

        def case(*rows: Any) -> Any:
            for test, value in pairs:
                if test(*rows) is True:
                    return value(*rows)
            return default(*rows)
        return case
    if op == "SUBSTRING":
        return lambda *rows: _substring(*(a(*rows) for a in args))

    def strict(function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*rows: Any) -> Any:
            values = [a(*rows) for a in args]
            return None if any(v is None for v in values) else function(*values)
        return call
    if op in _ARITHMETIC:
        return strict(_ARITHMETIC[op])
    simple: dict[str, Callable[..., Any]] = {
        "ABS": abs, "NEGATE": lambda v: -v, "SUBSCRIPT": _subscript, "FIELD": lambda v: _field(v, detail),
        "CAST": lambda v: _cast(v, detail)}
    return strict(simple[op])


def _logical(op: str, args: tuple[Callable[..., Any], ...]) -> Callable[..., bool | None]:
    """AND / OR / NOT in SQL's three-valued logic (NULL is unknown)."""
    if op == "NOT":
        [arg] = args
        return lambda *rows: None if (v := arg(*rows)) is None else not v
    decisive = op == "OR"  # the value that decides an OR (True) or an AND (False) alone

    def combine(*rows: Any) -> bool | None:
        unknown = False
        for arg in args:
            value = arg(*rows)
            if value is None:
                unknown = True
            elif bool(value) is decisive:
                return decisive
        return None if unknown else not decisive
    return combine
