"""Decoding and validation of user and order records: every bad input gets a reason naming the field."""
from __future__ import annotations

import json

import pytest

from streamapp.errors import StreamappError
from streamapp.model.records import Order, RecordError, User, decode_order, decode_user

GOOD_ORDER = {"ts": 1677844043886, "product_id": 1669, "qty": 6, "unit_price": 68.67, "channel": "store"}


def order_bytes(**changes: object) -> bytes:
    value = {**GOOD_ORDER, **changes}
    return json.dumps({k: v for k, v in value.items() if v is not ...}).encode()


def test_demo_order_decodes() -> None:
    assert decode_order(b"u1", order_bytes()) == Order("u1", 1677844043886, 1669, 6, 68.67, "store")


def test_demo_user_decodes_and_tombstone_is_none() -> None:
    assert decode_user(b"u1", b'{"name": "Luella Clements", "age": 65}') == User("u1", "Luella Clements", 65)
    assert decode_user(b"u1", None) is None


def test_integer_unit_price_becomes_float_and_extra_fields_are_ignored() -> None:
    order = decode_order(b"u", order_bytes(unit_price=7, coupon="X"))
    assert order.unit_price == 7.0 and isinstance(order.unit_price, float)


@pytest.mark.parametrize(
    ("key", "value", "field", "words"),
    [
        (None, order_bytes(), "key", "key is null"),
        (b"", order_bytes(), "key", "key is empty"),
        (b"\xff\xfe", order_bytes(), "key", "not UTF-8"),
        (b"u", None, "value", "value is null"),
        (b"u", b"{not json", "value", "not valid JSON"),
        (b"u", b"\xff{}", "value", "not UTF-8"),
        (b"u", b"[1, 2]", "value", "JSON list, expected an object"),
        (b"u", order_bytes(ts=...), "ts", "'ts' is missing"),
        (b"u", order_bytes(ts="yesterday"), "ts", "'ts' is 'yesterday', expected an integer"),
        (b"u", order_bytes(ts=-5), "ts", "'ts' is -5"),
        (b"u", order_bytes(qty=True), "qty", "'qty' is True, expected an integer"),
        (b"u", order_bytes(qty=1.5), "qty", "'qty' is 1.5"),
        (b"u", order_bytes(unit_price="9.99"), "unit_price", "expected a finite number"),
        (b"u", order_bytes(channel=None), "channel", "'channel' is None, expected a string"),
        (b"u", order_bytes(product_id=...), "product_id", "'product_id' is missing"),
    ],
)
def test_bad_orders_name_the_field(key: bytes | None, value: bytes | None, field: str, words: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_order(key, value)
    assert info.value.field == field
    assert words in info.value.reason
    assert isinstance(info.value, StreamappError)


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (b'{"age": 3}', "name", "'name' is missing"),
        (b'{"name": "a", "age": "3"}', "age", "'age' is '3', expected an integer"),
        (b'{"name": 5, "age": 3}', "name", "'name' is 5, expected a string"),
        (b'"just a string"', "value", "JSON str"),
        (b"", "value", "not valid JSON"),
    ],
)
def test_bad_users_name_the_field(value: bytes, field: str, words: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_user(b"u", value)
    assert (info.value.field, words in info.value.reason) == (field, True), info.value.reason


def test_long_bad_values_are_shortened_in_the_reason() -> None:
    with pytest.raises(RecordError) as info:
        decode_order(b"u", b"x" * 5000)
    assert len(info.value.reason) < 200
