"""The record decoders under hypothesis: any bytes are either a valid record or a RecordError naming the field.

Pure (no broker): ``streamapp.records.decode_user`` / ``decode_order`` are what
the worker runs on every input record before the dead-letter decision, so a
decoder that raised anything else would stop the agent instead of
dead-lettering one record.
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp.records import RecordError, decode_order, decode_user

FIELDS = {"key", "value", "name", "age", "ts", "product_id", "qty", "unit_price", "channel"}
INT64 = (-(2**63), 2**63 - 1)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20)
)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
order_like = st.fixed_dictionaries({}, optional={f: json_values for f in ("ts", "product_id", "qty", "unit_price", "channel")})
user_like = st.fixed_dictionaries({}, optional={"name": json_values, "age": json_values})
values = st.one_of(
    st.none(),
    st.binary(max_size=64),
    json_values.map(lambda v: json.dumps(v).encode()),
    order_like.map(lambda v: json.dumps(v).encode()),
    user_like.map(lambda v: json.dumps(v).encode()),
)
keys = st.one_of(st.none(), st.binary(max_size=40), st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")))

valid_orders = st.fixed_dictionaries({
    "ts": st.integers(0, INT64[1]),
    "product_id": st.integers(*INT64),
    "qty": st.integers(*INT64),
    "unit_price": st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**15), 10**15),
    "channel": st.text(),
})
user_ids = st.text(min_size=1).filter(lambda t: t.encode("utf-8", "surrogatepass") == t.encode("utf-8", "ignore"))


@SETTINGS
@given(key=keys, value=values)
def test_any_bytes_decode_or_raise_record_error_naming_the_field(key: bytes | None, value: bytes | None) -> None:
    for decode in (decode_order, decode_user):
        try:
            decode(key, value)
        except RecordError as error:
            assert error.field in FIELDS, error.field
            assert error.reason and "\n" not in error.reason and len(error.reason) < 300, error.reason


@SETTINGS
@given(user_id=user_ids, order=valid_orders)
def test_valid_orders_decode_exactly(user_id: str, order: dict) -> None:
    decoded = decode_order(user_id.encode(), json.dumps(order).encode())
    assert (decoded.user_id, decoded.ts, decoded.product_id, decoded.qty, decoded.channel) == (
        user_id, order["ts"], order["product_id"], order["qty"], order["channel"])
    assert decoded.unit_price == float(order["unit_price"])


@SETTINGS
@given(user_id=user_ids, order=valid_orders, data=st.data())
def test_one_wrong_field_is_named(user_id: str, order: dict, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(order)))
    wrong = {"channel": st.integers() | st.none() | st.booleans()}.get(
        name, st.text() | st.none() | st.booleans() | st.lists(st.integers(), max_size=2))
    if name not in ("unit_price", "channel"):
        wrong = wrong | st.floats(allow_nan=False).filter(lambda f: f != int(f) if math.isfinite(f) else True)
    broken = {**order, name: data.draw(wrong)}
    with pytest.raises(RecordError) as info:
        decode_order(user_id.encode(), json.dumps(broken).encode())
    assert info.value.field == name and repr(name) in info.value.reason


@SETTINGS
@given(user_id=user_ids, name=st.text(), age=st.integers(*INT64))
def test_valid_users_decode_exactly(user_id: str, name: str, age: int) -> None:
    user = decode_user(user_id.encode(), json.dumps({"name": name, "age": age}).encode())
    assert user is not None and (user.user_id, user.name, user.age) == (user_id, name, age)
    assert decode_user(user_id.encode(), None) is None


out_of_range_ints = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])


@settings(max_examples=50, deadline=None)
@given(data=st.data(), order=valid_orders)
def test_values_ksqldb_cannot_read_are_rejected(data: st.DataObject, order: dict) -> None:
    name = data.draw(st.sampled_from(["ts", "product_id", "qty", "unit_price", "age"]))
    bad = data.draw(non_finite if name == "unit_price" else out_of_range_ints)
    if name == "age":
        with pytest.raises(RecordError):
            decode_user(b"u1", json.dumps({"name": "x", "age": bad}).encode())
        return
    with pytest.raises(RecordError):
        decode_order(b"u1", json.dumps({**order, name: bad}).encode())
