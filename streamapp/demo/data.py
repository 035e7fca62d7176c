"""The demo's records, generated from the plan: one table row per key, one stream record per table row.

Values follow each column's declared type; the table's keys are the stream's join
keys (its key, or the value column it joins on), so every stream record has a row
to find; the stream's event time is increasing, in its ``TIMESTAMP=`` column when
it declares one.  Records are written with the plan's codecs
(:mod:`streamapp.sql.formats`), so KAFKA, JSON and DELIMITED keys and values are
the bytes ksqlDB would write.  Generation is pure (a seeded ``random.Random``), so
a run can be reproduced, by the tests too.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Sequence

from ..sql import plan as p
from ..sql.formats import Codec
from ..sql.syntax import parse_type
from ..sql.types import SqlType
from .shape import DemoShape

#: A record as a producer sends it: key bytes, value bytes, record timestamp (None: the producer's clock).
Encoded = tuple[bytes | None, bytes | None, int | None]


@dataclass(frozen=True)
class Row:
    """One generated record: its key column's value, its value columns by name, its record timestamp."""

    key: Any
    value: dict[str, Any]
    timestamp: int | None = None


@dataclass(frozen=True)
class Generated:
    """A run's records: the table's rows, and one stream record per row, joined on the row's key."""

    table: tuple[Row, ...]
    stream: tuple[Row, ...]

    @property
    def keys(self) -> tuple[Any, ...]:
        """The table's keys, in order: the join keys every report is about."""
        return tuple(row.key for row in self.table)


def _key_value(type_: SqlType, rng: random.Random) -> Any:
    """A key of ``type_`` from a space wide enough that a run's keys are new to the topics."""
    if type_.base == "STRING":
        return f"{rng.getrandbits(128):032x}"
    if type_.base == "INT":
        return rng.randrange(1, 2**31)
    if type_.base == "DOUBLE":
        return float(rng.randrange(1, 2**53))
    if type_.base == "BYTES":
        return rng.randbytes(16)
    if type_.base == "DECIMAL":
        precision, scale = type_.params
        return Decimal(rng.randrange(1, 10 ** precision)).scaleb(-scale)  # type: ignore[operator]
    return rng.randrange(1, 2**62)  # BIGINT, and the time types ksqlDB keeps as numbers


def _value(type_: SqlType, column: str, rng: random.Random) -> Any:
    """A readable value of ``type_`` (a STRING names its column, so a report shows which is which)."""
    base = type_.base
    if base == "STRING":
        return f"{column.lower()}-{rng.randint(1, 999)}"
    if base in ("INT", "BIGINT"):
        return rng.randint(1, 9999)
    if base == "DOUBLE":
        return round(rng.uniform(1.0, 100.0), 2)
    if base == "BOOLEAN":
        return rng.random() < 0.5
    if base == "DECIMAL":
        precision, scale = type_.params
        return Decimal(rng.randrange(10 ** min(precision, 6))).scaleb(-scale)  # type: ignore[operator, arg-type]
    if base in ("DATE", "TIME", "TIMESTAMP"):
        return rng.randint(0, 10**6)
    return None  # BYTES and the nested types: NULL, which every format writes


def _row(columns: Sequence[p.Column], rng: random.Random, fixed: dict[str, Any]) -> dict[str, Any]:
    return {c.name: fixed[c.name] if c.name in fixed else _value(parse_type(c.type), c.name, rng) for c in columns}


def _distinct(make: Callable[[], Any], count: int) -> list[Any]:
    seen: set[Any] = set()
    values: list[Any] = []
    while len(values) < count:
        value = make()
        if value not in seen:
            seen.add(value)
            values.append(value)
    return values


def make_table(shape: DemoShape, count: int, rng: random.Random) -> tuple[Row, ...]:
    """``count`` table rows with distinct keys; their record timestamps are the producer's."""
    key_type = parse_type(shape.table.key_columns[0].type)
    keys = _distinct(lambda: _key_value(key_type, rng), count)
    return tuple(Row(key, _row(shape.table.value_columns, rng, {})) for key in keys)


def make_stream(shape: DemoShape, table: Sequence[Row], rng: random.Random, start_ms: int) -> tuple[Row, ...]:
    """One stream record per table row, 1 ms apart from ``start_ms``, each joining its row's key.

    The join key is the stream's key, or the value column the joins read it from (the
    stream's own key is then generated too); the event time goes in the ``TIMESTAMP=``
    column when the stream declares one, and is the record's timestamp either way."""
    join_column, stream = shape.join_column, shape.stream
    own_key = parse_type(stream.key_columns[0].type) if stream.key_columns and join_column else None
    own_keys = _distinct(lambda: _key_value(own_key, rng), len(table)) if own_key else []
    rows = []
    for i, row in enumerate(table):
        ts = start_ms + i
        fixed = {join_column: row.key} if join_column else {}
        if stream.timestamp:
            fixed[stream.timestamp] = ts
        key = own_keys[i] if own_key else row.key if stream.key_columns else None
        rows.append(Row(key, _row(stream.value_columns, rng, fixed), ts))
    return tuple(rows)


def generate(shape: DemoShape, count: int, rng: random.Random, start_ms: int) -> Generated:
    """A run's table rows, then its stream records (see the module)."""
    table = make_table(shape, count, rng)
    return Generated(table, make_stream(shape, table, rng, start_ms))


def encode(codec: Codec, rows: Sequence[Row]) -> list[Encoded]:
    """The rows as the producer sends them, written by the source's codec as ksqlDB writes them."""
    return [(codec.encode_key(row.key), codec.encode_value(row.value), row.timestamp) for row in rows]


def key_text(value: Any) -> str:
    """A key as a report shows it (and names its row in ``--json``)."""
    if isinstance(value, bytes):
        return value.hex()
    return "" if value is None else str(value)
