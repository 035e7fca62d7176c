"""Decode and validate the two input records: users (``demo_user``) and orders (``demo_user_orders``).

Every rule here mirrors what ksqlDB needs to read the record (a non-empty
STRING key, a JSON object value with typed columns).  A record that breaks a
rule raises :class:`RecordError` whose ``reason`` is one sentence naming the
field and the value, so the worker can dead-letter it instead of stopping.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from .errors import StreamappError

#: Longest part of a bad value quoted in a reason; keeps dead letters and logs readable.
QUOTE_LIMIT = 60

#: Largest record timestamp Kafka can store (a signed 64-bit integer of milliseconds).
MAX_TIMESTAMP_MS = 2**63 - 1
#: ksqlDB's BIGINT is a signed 64-bit integer; a larger JSON number cannot be written by it or read back.
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1


class RecordError(StreamappError, ValueError):
    """A record the join cannot use; ``reason`` says which field is wrong and why."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class User:
    user_id: str
    name: str
    age: int

    def to_table_value(self) -> dict[str, Any]:
        return {"name": self.name, "age": self.age}


@dataclass(frozen=True, slots=True)
class Order:
    user_id: str
    ts: int
    product_id: int
    qty: int
    unit_price: float
    channel: str


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= QUOTE_LIMIT else text[: QUOTE_LIMIT - 3] + "..."


def decode_key(key: bytes | None) -> str:
    """The user id: ksqlDB's KAFKA STRING key, the raw UTF-8 bytes."""
    if key is None:
        raise RecordError("key is null: a user id is required", "key")
    if not key:
        raise RecordError("key is empty: a user id is required", "key")
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"key {_quote(key)} is not UTF-8 ({exc.reason} at byte {exc.start})", "key") from None


def decode_object(value: bytes | None) -> dict[str, Any]:
    """The JSON object a value must be."""
    if value is None:
        raise RecordError("value is null: expected a JSON object", "value")
    try:
        decoded = json.loads(value)
    except UnicodeDecodeError as exc:
        raise RecordError(f"value is not UTF-8 ({exc.reason} at byte {exc.start})", "value") from None
    except ValueError as exc:
        raise RecordError(f"value is not valid JSON ({exc}): {_quote(value)}", "value") from None
    if not isinstance(decoded, dict):
        raise RecordError(f"value is a JSON {type(decoded).__name__}, expected an object: {_quote(value)}", "value")
    return decoded


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and BIGINT_MIN <= value <= BIGINT_MAX


def _is_number(value: Any) -> bool:
    """A DOUBLE: NaN and Infinity are not JSON (Python's json accepts them; ksqlDB does not)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return _is_int(value)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


_TYPE_NAMES: dict[Callable[[Any], bool], str] = {
    _is_int: "an integer within BIGINT (signed 64-bit)",
    _is_number: "a finite number",
    _is_str: "a string",
}


def _field(obj: dict[str, Any], name: str, check: Callable[[Any], bool]) -> Any:
    if name not in obj:
        raise RecordError(f"field {name!r} is missing", name)
    value = obj[name]
    if not check(value):
        raise RecordError(f"field {name!r} is {_quote(value)}, expected {_TYPE_NAMES[check]}", name)
    return value


def decode_user(key: bytes | None, value: bytes | None) -> User | None:
    """A user, or None for a tombstone (a null value deletes the user, as in a ksqlDB table)."""
    user_id = decode_key(key)
    if value is None:
        return None
    obj = decode_object(value)
    return User(user_id, _field(obj, "name", _is_str), _field(obj, "age", _is_int))


def decode_order(key: bytes | None, value: bytes | None) -> Order:
    """An order; its ``ts`` becomes the output record's timestamp, so it must be a valid one.

    The common valid record takes a fast path of exact type checks; anything else
    goes through the field-by-field checks that name what is wrong.
    """
    if key and value is not None:
        try:
            obj = json.loads(value)
            user_id = key.decode("utf-8")
        except ValueError:
            pass
        else:
            if type(obj) is dict:
                ts, product_id, qty = obj.get("ts"), obj.get("product_id"), obj.get("qty")
                unit_price, channel = obj.get("unit_price"), obj.get("channel")
                if (type(ts) is int and 0 <= ts <= MAX_TIMESTAMP_MS and type(channel) is str
                        and type(product_id) is int and BIGINT_MIN <= product_id <= BIGINT_MAX
                        and type(qty) is int and BIGINT_MIN <= qty <= BIGINT_MAX
                        and ((type(unit_price) is float and math.isfinite(unit_price))
                             or (type(unit_price) is int and BIGINT_MIN <= unit_price <= BIGINT_MAX))):
                    return Order(user_id, ts, product_id, qty, float(unit_price), channel)
    return _checked_order(key, value)


def _checked_order(key: bytes | None, value: bytes | None) -> Order:
    user_id = decode_key(key)
    obj = decode_object(value)
    ts = _field(obj, "ts", _is_int)
    if ts < 0:
        raise RecordError(f"field 'ts' is {ts}, expected epoch milliseconds >= 0", "ts")
    if ts > MAX_TIMESTAMP_MS:
        raise RecordError(f"field 'ts' is {ts}, expected epoch milliseconds <= {MAX_TIMESTAMP_MS} "
                          f"(a Kafka record timestamp is a signed 64-bit integer)", "ts")
    return Order(
        user_id=user_id,
        ts=ts,
        product_id=_field(obj, "product_id", _is_int),
        qty=_field(obj, "qty", _is_int),
        unit_price=float(_field(obj, "unit_price", _is_number)),
        channel=_field(obj, "channel", _is_str),
    )
