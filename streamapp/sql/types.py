"""ksqlDB's column types: a small frozen value that prints as ksqlDB writes the type, and the type rules the planner
checks queries with (widening, a literal's type, which comparisons ksqlDB takes).

``SqlType.of("varchar")`` is ``STRING``: ksqlDB's aliases (VARCHAR, INTEGER) are
resolved once here, so the rest of streamapp sees one name per type.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Union

#: ksqlDB's primitive types, by every name ksqlDB accepts for them.
_PRIMITIVES = {
    "BOOLEAN": "BOOLEAN",
    "INT": "INT", "INTEGER": "INT",
    "BIGINT": "BIGINT",
    "DOUBLE": "DOUBLE",
    "VARCHAR": "STRING", "STRING": "STRING",
    "BYTES": "BYTES",
    "DATE": "DATE", "TIME": "TIME", "TIMESTAMP": "TIMESTAMP",
}
#: The types whose values streamapp carries as their JSON, without reading inside them.
NESTED = ("ARRAY", "MAP", "STRUCT")
#: ksqlDB's largest DECIMAL precision.
MAX_PRECISION = 38


class UnknownType(ValueError):
    """A type ksqlDB does not have; the message names it."""


@dataclass(frozen=True)
class SqlType:
    """``base`` is ``BIGINT``, ``DECIMAL``, ``ARRAY``...; ``params`` the precision and scale, or the element types
    (for STRUCT: ``(name, SqlType)`` pairs)."""

    base: str
    params: tuple[Union[int, "SqlType", tuple[str, "SqlType"]], ...] = ()

    @classmethod
    def of(cls, name: str, sizes: tuple[int, ...] = ()) -> "SqlType":
        upper = name.upper()
        if upper == "DECIMAL":
            if len(sizes) != 2 or not 1 <= sizes[0] <= MAX_PRECISION or not 0 <= sizes[1] <= sizes[0]:
                raise UnknownType(f"DECIMAL needs a precision 1-{MAX_PRECISION} and a scale 0-precision: "
                                 f"DECIMAL({', '.join(map(str, sizes))}) is not one")
            return cls("DECIMAL", sizes)
        if upper not in _PRIMITIVES or sizes:
            raise UnknownType(f"unknown type {name}{'(' + ', '.join(map(str, sizes)) + ')' if sizes else ''}")
        return cls(_PRIMITIVES[upper])

    def __str__(self) -> str:
        if self.base == "DECIMAL":
            return f"DECIMAL({self.params[0]}, {self.params[1]})"
        if self.base == "ARRAY":
            return f"ARRAY<{self.params[0]}>"
        if self.base == "MAP":
            return f"MAP<{self.params[0]}, {self.params[1]}>"
        if self.base == "STRUCT":
            return "STRUCT<" + ", ".join(f"`{name}` {type_}" for name, type_ in self.params) + ">"  # type: ignore[misc]
        return self.base

    @property
    def nested(self) -> bool:
        return self.base in NESTED


# -- the type rules, on types as the plan names them (``DECIMAL(4, 2)``, ``BIGINT``) -------------------------------

#: The numeric types, in the order ksqlDB widens one to the next (INT to BIGINT to DECIMAL to DOUBLE).
NUMBERS = ("INT", "BIGINT", "DECIMAL", "DOUBLE")


def widens(source: str, target: str) -> bool:
    """Whether a ``source`` value is written to a ``target`` column as it is or widened (``LogicalSchema``'s rule)."""
    if source == target:
        return True
    ranks = [next((n for n, number in enumerate(NUMBERS) if t.startswith(number)), None) for t in (source, target)]
    return ranks[0] is not None and ranks[1] is not None and ranks[0] < ranks[1]


def literal_type(value: Any) -> str | None:
    """A constant's ksqlDB type: an integer is an INT when it fits in 32 bits, a decimal point makes a DECIMAL."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INT" if -2**31 <= value < 2**31 else "BIGINT"
    if isinstance(value, Decimal):
        _, digits, exponent = value.as_tuple()
        scale = -int(exponent)
        return f"DECIMAL({max(len(digits), scale)}, {scale})"
    return "DOUBLE" if isinstance(value, float) else "STRING"


def wider(left: str, right: str) -> str:
    """The type of ``left op right`` of two numbers (ksqlDB widens INT to BIGINT to DOUBLE)."""
    for wide in ("DOUBLE", "BIGINT"):
        if wide in (left, right):
            return wide
    return left


def comparable(left: str | None, op: str, right: str | None) -> bool:
    """ksqlDB's ``ComparisonUtil.isValidComparison`` for the types a WHERE of streamapp reads (NULL: any)."""
    if left is None or right is None:
        return True
    kinds = [next((n for n in NUMBERS if t.startswith(n)), t) for t in (left, right)]
    if all(k in NUMBERS for k in kinds):
        return True
    if kinds[0] != kinds[1] or kinds[0] not in ("STRING", "BOOLEAN"):
        return False
    return kinds[0] == "STRING" or op in ("=", "!=")


def message_name(type_: str) -> str:
    """A column type as ksqlDB's messages print it (``INT`` is ``INTEGER`` there)."""
    return re.sub(r"\bINT\b", "INTEGER", type_)
