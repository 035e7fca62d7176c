"""The stream-table LEFT JOIN of one order with its user, as ksqlDB writes it.

Pure: the output record of ``DEMO_USER_ORDERS_MERGED`` (and ``..._REPARTITION``)
for an order and the user found in the same partition, or None on a miss.
Key = USER_ID as plain UTF-8 (ksqlDB's KAFKA STRING key, not repeated in the
value); value = compact JSON with UPPERCASE columns in the CSAS select order and
explicit nulls on a miss and for NULL columns (every column is nullable, as in
ksqlDB); record timestamp = the order's ``ts``.

An order with a null key is written as ksqlDB writes it: key null, the value of a
miss (it looks no user up), timestamp ``ts``, and a partition chosen as the Java
producer under Kafka Streams chooses one for a null key
(:class:`~streamapp.partitioners.sticky.NullKeyPartitions`).

Building a value raises nothing but :class:`~streamapp.records.RecordError`,
whatever the order or the table row holds (a lone surrogate, a row that is not
a user, a non-finite number), so the worker dead-letters that one order.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .records import Order, RecordError, User

#: Value columns of the merged streams, in ksqlDB's select order.
COLUMNS = ("NAME", "AGE", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS")


@dataclass(frozen=True, slots=True)
class JoinedRecord:
    key: bytes | None
    value: bytes
    timestamp_ms: int
    matched: bool

    @property
    def columns(self) -> dict[str, Any]:
        return json.loads(self.value)


def join_columns(order: Order, user: User | None) -> dict[str, Any]:
    return {
        "NAME": user.name if user else None,
        "AGE": user.age if user else None,
        "PRODUCT_ID": order.product_id,
        "QTY": order.qty,
        "UNIT_PRICE": order.unit_price,
        "CHANNEL": order.channel,
        "TS": order.ts,
    }


def _json(value: Any) -> str:
    """``value`` as ``json.dumps(..., ensure_ascii=False)`` writes it, without the encoder's per-call set-up.

    NULL is ``null``; a DOUBLE that is NaN or infinite is the string ksqlDB writes for it
    (Jackson's WRITE_NAN_AS_STRINGS: ``"NaN"``, ``"Infinity"``, ``"-Infinity"``), which JSON can hold.
    """
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value == value and value not in _INFINITIES:
            return float.__repr__(value)
        return _NON_FINITE[repr(value)]
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


_encode_str = json.encoder.encode_basestring
_INFINITIES = (float("inf"), float("-inf"))
#: Python's repr of a non-finite float -> the JSON string ksqlDB writes for that DOUBLE.
_NON_FINITE = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}

#: The user columns of a miss: explicit nulls, as ksqlDB writes them.
MISS_HEAD = '{"NAME":null,"AGE":null'


def _user_head(row: dict[str, Any]) -> str:
    return f'{{"NAME":{_json(row["name"])},"AGE":{_json(row["age"])}'


def order_tail(order: Order) -> str:
    """The value after the user columns; the same for both joins of one order, so built once."""
    try:
        return (f',"PRODUCT_ID":{_json(order.product_id)},"QTY":{_json(order.qty)},'
                f'"UNIT_PRICE":{_json(order.unit_price)},"CHANNEL":{_json(order.channel)},"TS":{_json(order.ts)}}}')
    except (TypeError, ValueError, RecursionError) as exc:
        raise RecordError(f"the order cannot be written as ksqlDB JSON ({_describe(exc)})", "value") from None


def join_value(tail: str, row: dict[str, Any] | None) -> bytes:
    """The output value for an order's :func:`order_tail` and the user's table row (None on a miss).

    Byte for byte the compact ``json.dumps`` of :func:`join_columns`, written by
    string formatting because the worker builds two per order.  A lone surrogate
    (in the order's channel or the user's name: an old row, or one written by
    something else) has no UTF-8 form, so the order is refused, naming the column.
    """
    try:
        return ((MISS_HEAD if row is None else _user_head(row)) + tail).encode("utf-8")
    except UnicodeEncodeError as exc:
        text = exc.object
        column = "NAME" if row is not None and exc.start < len(_user_head(row)) else "CHANNEL"
        raise RecordError(f"column {column} holds a lone surrogate {text[exc.start:exc.end]!r}, which has no "
                          f"UTF-8 form (ksqlDB cannot represent it)", column.lower()) from None
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise RecordError(f"the users table row {_short(row)} is not a user row ({_describe(exc)})", "name") from None


def _short(value: Any, limit: int = 60) -> str:
    text = " ".join(repr(value).split()) if not isinstance(value, str) else " ".join(value.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(exc: BaseException) -> str:
    """``Type: message`` on one short line, for a dead letter's reason."""
    return f"{type(exc).__name__}: {_short(str(exc), 120)}"


def join_record(order: Order, user: User | None) -> JoinedRecord:
    """The LEFT JOIN output for ``order``; ``user`` is the partition-local lookup result."""
    value = join_value(order_tail(order), None if user is None else user.to_table_value())
    if order.user_id is None:  # a null-key order: written with a null key (and no user: nothing to look up)
        return JoinedRecord(None, value, order.ts, user is not None)
    try:
        key = order.user_id.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError(f"key {_short(order.user_id)} holds a lone surrogate: no UTF-8 form", "key") from None
    return JoinedRecord(key, value, order.ts, user is not None)


def faust_timestamp(timestamp_ms: int) -> float:
    """Seconds for Faust's ``send(timestamp=...)``, which sends ``int(seconds * 1000.0)``.

    ``ts / 1000 * 1000`` can come back one below ``ts`` in floating point; half a
    millisecond of headroom makes the truncation land exactly on ``ts``.
    """
    return (timestamp_ms + 0.5) / 1000.0
