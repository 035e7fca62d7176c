"""The worker's fast paths give exactly what the plain ones give.

The join value built by string formatting against ``json.dumps`` of the
columns, the order decoder's fast path against its field-by-field checks (no
Faust).
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.model.join import join_columns, join_record, join_value, order_tail
from streamapp.model.records import Order, RecordError, User, _checked_order, decode_order


texts = st.text(max_size=30).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
ints = st.integers(min_value=-(2**70), max_value=2**70)
floats = st.floats(allow_nan=True, allow_infinity=True)
#: Prices compared with json.dumps, which writes NaN and infinities its own way (tested on their own below).
finite = st.floats(allow_nan=False, allow_infinity=False)
orders = st.builds(Order, user_id=texts.filter(bool), ts=st.integers(min_value=0, max_value=2**62),
                   product_id=st.none() | ints, qty=st.none() | ints, unit_price=st.none() | finite,
                   channel=st.none() | texts)  # every column but ts is nullable
users = st.none() | st.builds(lambda name, age: User("u", name, age), st.none() | texts, st.none() | ints)


@given(orders, users)
def test_join_value_is_compact_json_dumps_byte_for_byte(order: Order, user: User | None) -> None:
    expected = json.dumps(join_columns(order, user), separators=(",", ":"), ensure_ascii=False).encode()
    row = None if user is None else user.to_table_value()
    assert join_value(order_tail(order), row) == expected
    assert join_record(order, user).value == expected


def test_join_value_writes_json_escapes_and_specials_as_json_does() -> None:
    order = Order("u1", 7, 1, 2, -0.0, 'we"b\n\\')
    value = join_value(order_tail(order), {"name": "Zoë \u2028 \x00", "age": 2**64})
    assert value == json.dumps(join_columns(order, User("u1", "Zoë \u2028 \x00", 2**64)),
                               separators=(",", ":"), ensure_ascii=False).encode()
    assert b'"UNIT_PRICE":-0.0' in value


@pytest.mark.parametrize(("price", "text"), [(math.inf, b'"Infinity"'), (-math.inf, b'"-Infinity"'),
                                             (math.nan, b'"NaN"')])
def test_a_price_json_numbers_cannot_hold_is_written_as_ksqldb_writes_it(price: float, text: bytes) -> None:
    """ksqlDB reads ``"NaN"``/``"Infinity"`` into a DOUBLE and writes them back as those strings (Jackson's
    WRITE_NAN_AS_STRINGS); ``json.dumps`` would write bare ``NaN``, which no JSON reader accepts."""
    value = join_value(order_tail(Order("u1", 7, 1, 2, price, "web")), None)
    assert b'"UNIT_PRICE":' + text + b"," in value
    assert json.loads(value)["UNIT_PRICE"] == text.decode().strip('"')


json_values = st.recursive(st.none() | st.booleans() | ints | floats | texts,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=6)
order_fields = st.fixed_dictionaries(
    {}, optional={"ts": json_values | st.integers(-5, 2**63), "product_id": json_values | ints,
                  "qty": json_values | ints, "unit_price": json_values | floats, "channel": json_values | texts,
                  "extra": json_values})
values = st.one_of(st.none(), st.binary(max_size=20), json_values.map(lambda v: json.dumps(v).encode()),
                   order_fields.map(lambda v: json.dumps(v).encode()))
keys = st.none() | st.binary(max_size=8)


@settings(max_examples=500)
@given(keys, values)
def test_fast_decode_accepts_and_refuses_exactly_what_the_checks_do(key: bytes | None, value: bytes | None) -> None:
    def outcome(decode):
        try:
            return decode(key, value)
        except RecordError as error:
            return (error.reason, error.field)

    assert outcome(decode_order) == outcome(_checked_order)


def test_fast_decode_of_a_typical_order() -> None:
    value = b'{"ts": 1677844114148, "product_id": 1584, "qty": 1, "unit_price": 9, "channel": "store"}'
    order = decode_order(b"u1", value)
    assert order == Order("u1", 1677844114148, 1584, 1, 9.0, "store")
    assert type(order.unit_price) is float


@pytest.mark.parametrize(("ts", "read"), [(0, 0), (2**63 - 1, 2**63 - 1), (2**63, None), (2**64, 0), (2**64 + 7, 7),
                                         (-1, None)])
def test_order_timestamps_must_fit_a_kafka_timestamp(ts: int, read: int | None) -> None:
    """``ts`` is read as ksqlDB reads a BIGINT (JsonNode.asLong: the low 64 bits); a negative one is a dead
    letter (Kafka Streams drops it), not a crash on send."""
    value = json.dumps({"ts": ts, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}).encode()
    if read is not None:
        assert decode_order(b"k", value).ts == read
    else:
        with pytest.raises(RecordError) as error:
            decode_order(b"k", value)
        assert error.value.field == "ts" and str(ts) in error.value.reason
