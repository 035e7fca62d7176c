"""Decode and validate the two input records: users (``demo_user``) and orders (``demo_user_orders``).

Every rule here mirrors what ksqlDB needs to read the record (a non-empty
STRING key, a JSON object value with typed columns).  A record that breaks a
rule raises :class:`RecordError` whose ``reason`` is one sentence naming the
field and the value, so the worker can dead-letter it instead of stopping.

The decoders raise nothing else, whatever the bytes: what ksqlDB cannot
represent (invalid UTF-8 anywhere in the value, strings with lone surrogates,
nesting deeper than :data:`MAX_NESTING`) is a ``RecordError`` too, so it reaches
the dead-letter topic and never a table.
"""
from __future__ import annotations

import json
import math
import re
from array import array
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Callable

from ..errors import StreamappError

#: Longest part of a bad value quoted in a reason; keeps dead letters and logs readable.
QUOTE_LIMIT = 60

#: Largest record timestamp Kafka can store (a signed 64-bit integer of milliseconds).
MAX_TIMESTAMP_MS = 2**63 - 1
#: ksqlDB's BIGINT is a signed 64-bit integer; a larger JSON number cannot be written by it or read back.
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
#: Deepest nesting of JSON arrays/objects a value may have.  Jackson, which ksqlDB reads
#: JSON with, refuses more than 1000 levels since 2.15 (500 in Jackson 3); Python's json
#: parser recurses and, under the worker's own stack, fails a little below 1000, so 500.
MAX_NESTING = 500


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


#: A JSON string, escapes included: its brackets do not nest anything.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
#: Opening brackets -> +1, closing -> -1 (as a signed byte), anything else -> 0.
_BRACKETS = bytes(1 if c in b"[{" else 255 if c in b"]}" else 0 for c in range(256))


def nesting_depth(value: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest (brackets inside strings do not count).

    Linear in the size of the value and free of recursion, so it is safe on any bytes;
    for text that is not valid JSON it is an estimate, which is enough to refuse it.
    """
    steps = _JSON_STRING.sub(b"", value).translate(_BRACKETS).replace(b"\x00", b"")
    return max(accumulate(array("b", steps)), default=0)


def _check_nesting(value: bytes) -> None:
    # Counting brackets is a fast C scan; only a value with many of them is measured properly.
    if value.count(b"[") + value.count(b"{") > MAX_NESTING:
        depth = nesting_depth(value)
        if depth > MAX_NESTING:
            raise RecordError(f"value nests arrays/objects {depth} deep, deeper than the limit of {MAX_NESTING}",
                              "value")


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone UTF-16 surrogate (from a ``\\ud800`` escape): not encodable as UTF-8."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
    _check_nesting(value)
    encoding = json.detect_encoding(value)
    try:
        # Strict: json.loads(bytes) would let UTF-8-encoded surrogates (b"\\xed\\xa0\\x80") through.
        text = value.decode(encoding)
    except UnicodeDecodeError as exc:
        name = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
        raise RecordError(f"value is not {name} ({exc.reason} at byte {exc.start})", "value") from None
    try:
        decoded = json.loads(text)
    except RecursionError:
        raise RecordError("value nests arrays/objects too deep for the worker to parse", "value") from None
    except ValueError as exc:
        raise RecordError(f"value is not valid JSON ({_one_line(exc)}): {_quote(value)}", "value") from None
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
    """A VARCHAR ksqlDB can hold: a string without lone surrogates (they have no UTF-8 form)."""
    return isinstance(value, str) and not has_lone_surrogate(value)


_TYPE_NAMES: dict[Callable[[Any], bool], str] = {
    _is_int: "an integer within BIGINT (signed 64-bit)",
    _is_number: "a finite number",
    _is_str: "a string (of Unicode characters: no lone surrogates)",
}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= QUOTE_LIMIT * 2 else text[: QUOTE_LIMIT * 2 - 3] + "..."


def _unexpected(exc: Exception) -> RecordError:
    """Last resort, so that a decoder raises nothing but RecordError: the record is dead-lettered, not fatal."""
    return RecordError(f"value could not be decoded ({type(exc).__name__}: {_one_line(exc)})", "value")


def _field(obj: dict[str, Any], name: str, check: Callable[[Any], bool]) -> Any:
    if name not in obj:
        raise RecordError(f"field {name!r} is missing", name)
    value = obj[name]
    if not check(value):
        raise RecordError(f"field {name!r} is {_quote(value)}, expected {_TYPE_NAMES[check]}", name)
    return value


def decode_user(key: bytes | None, value: bytes | None) -> User | None:
    """A user, or None for a tombstone (a null value deletes the user, as in a ksqlDB table)."""
    try:
        user_id = decode_key(key)
        if value is None:
            return None
        obj = decode_object(value)
        return User(user_id, _field(obj, "name", _is_str), _field(obj, "age", _is_int))
    except RecordError:
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure is this record's, not the worker's
        raise _unexpected(exc) from None


def decode_order(key: bytes | None, value: bytes | None) -> Order:
    """An order; its ``ts`` becomes the output record's timestamp, so it must be a valid one.

    The common valid record takes a fast path of exact type checks; anything else
    goes through the field-by-field checks that name what is wrong.  A value with
    many brackets always takes the checked path, which measures its nesting first.
    """
    if key and value is not None and value.count(b"[") + value.count(b"{") <= MAX_NESTING:
        try:
            obj = json.loads(value.decode("utf-8"))
            user_id = key.decode("utf-8")
        except (ValueError, RecursionError):
            pass
        else:
            if type(obj) is dict:
                ts, product_id, qty = obj.get("ts"), obj.get("product_id"), obj.get("qty")
                unit_price, channel = obj.get("unit_price"), obj.get("channel")
                if (type(ts) is int and 0 <= ts <= MAX_TIMESTAMP_MS
                        and type(channel) is str and (channel.isascii() or not has_lone_surrogate(channel))
                        and type(product_id) is int and BIGINT_MIN <= product_id <= BIGINT_MAX
                        and type(qty) is int and BIGINT_MIN <= qty <= BIGINT_MAX
                        and ((type(unit_price) is float and math.isfinite(unit_price))
                             or (type(unit_price) is int and BIGINT_MIN <= unit_price <= BIGINT_MAX))):
                    return Order(user_id, ts, product_id, qty, float(unit_price), channel)
    return _checked_order(key, value)


def _checked_order(key: bytes | None, value: bytes | None) -> Order:
    try:
        return _checked_order_fields(key, value)
    except RecordError:
        raise
    except Exception as exc:  # noqa: BLE001 - any other failure is this record's, not the worker's
        raise _unexpected(exc) from None


def _checked_order_fields(key: bytes | None, value: bytes | None) -> Order:
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
