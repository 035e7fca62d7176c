"""ksqlDB's column types: a small frozen value that prints as ksqlDB writes the type.

``SqlType.of("varchar")`` is ``STRING``: ksqlDB's aliases (VARCHAR, INTEGER) are
resolved once here, so the rest of streamapp sees one name per type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

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
