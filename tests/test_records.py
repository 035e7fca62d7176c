"""Decoding user and order records as ksqlDB's JSON format does, one test per input class.

Each expectation comes from ksqlDB's code (``KsqlJsonDeserializer``, ``JsonSerdeUtils.toLong``/
``toDouble`` in confluentinc/ksql) and Java's ``Long.parseLong``/``Double.parseDouble``/
``BigDecimal.toString``, written out here by hand; ``test_json_row_oracle.py`` checks the same
rules against the Kafka Streams program's own reader on generated inputs.
"""
from __future__ import annotations

import json
import math

import pytest

from streamapp.errors import StreamappError
from streamapp.model.records import MAX_NUMBER_LENGTH, Order, RecordError, User, decode_order, decode_user

GOOD_ORDER = {"ts": 1677844043886, "product_id": 1669, "qty": 6, "unit_price": 68.67, "channel": "store"}


def order_bytes(**changes: object) -> bytes:
    value = {**GOOD_ORDER, **changes}
    return json.dumps({k: v for k, v in value.items() if v is not ...}).encode()


def user_of(value: bytes) -> User | None:
    return decode_user(b"u", value)


def test_demo_order_decodes() -> None:
    assert decode_order(b"u1", order_bytes()) == Order("u1", 1677844043886, 1669, 6, 68.67, "store")


def test_demo_user_decodes_and_tombstones_are_none() -> None:
    assert decode_user(b"u1", b'{"name": "Luella Clements", "age": 65}') == User("u1", "Luella Clements", 65)
    assert decode_user(b"u1", None) is None
    assert decode_user(b"u1", b"null") is None  # JSON null is a tombstone too
    assert decode_user(b"u1", b" null ") is None


def test_integer_unit_price_becomes_float_and_extra_fields_are_ignored() -> None:
    order = decode_order(b"u", order_bytes(unit_price=7, coupon="X"))
    assert order.unit_price == 7.0 and isinstance(order.unit_price, float)


# -- nullable and missing fields -------------------------------------------------------------------


def test_a_null_or_missing_user_field_is_null() -> None:
    assert user_of(b'{"name": null, "age": 30}') == User("u", None, 30)
    assert user_of(b'{"age": 30}') == User("u", None, 30)
    assert user_of(b'{"name": "x"}') == User("u", "x", None)
    assert user_of(b"{}") == User("u", None, None)


@pytest.mark.parametrize("name", ["product_id", "qty", "unit_price", "channel"])
@pytest.mark.parametrize("absent", [None, ...], ids=["null", "missing"])
def test_a_null_or_missing_order_column_is_null(name: str, absent: object) -> None:
    order = decode_order(b"u", order_bytes(**{name: absent}))
    assert getattr(order, name) is None
    assert order.ts == GOOD_ORDER["ts"]


# -- field names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (b'{"NAME": "x", "AGE": 3}', User("u", "x", 3)),
    (b'{"Name": "x", "aGe": 3}', User("u", "x", 3)),
    (b'{"NAME": "exact", "name": "lower", "age": 1}', User("u", "exact", 1)),       # the exact upper-case name wins
    (b'{"name": "lower", "NAME": "exact", "age": 1}', User("u", "exact", 1)),
    (b'{"name": "first", "Name": "last", "age": 1}', User("u", "last", 1)),         # else the last match (not the first)
    (b'{"name": "a", "name": "b", "age": 1}', User("u", "b", 1)),                   # a repeated field: the last value
    (b'{"name": "a", "Name": "b", "name": "c", "age": 1}', User("u", "b", 1)),      # ... in its first position
    (b'{"user_name": "x", "age": 1}', User("u", None, 1)),
])
def test_field_names_match_case_insensitively(value: bytes, expected: User) -> None:
    assert user_of(value) == expected


def test_order_fields_in_upper_case() -> None:
    value = b'{"TS": 5, "PRODUCT_ID": 7, "Qty": 3, "UNIT_PRICE": 1.5, "CHANNEL": "web"}'
    assert decode_order(b"u", value) == Order("u", 5, 7, 3, 1.5, "web")


# -- BIGINT ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("node", "expected"), [
    ("30", 30), ("27.9", 27), ("-27.9", -27), ("1e3", 1000), ("2.5E1", 25), ("0.5", 0), ("-0", 0),
    ('"41"', 41), ('"+5"', 5), ('"-0"', 0), ('"007"', 7), ('"\u0663"', 3),  # Long.parseLong takes any Unicode digit
    ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", -(2**63)),       # asLong keeps the low 64 bits, as Java's BigInteger.longValue
    ("18446744073709551621", 5),
    ("1e20", 10**20 % 2**64),
    ("1e19", 10**19 - 2**64),
    ('"9223372036854775807"', 2**63 - 1),
])
def test_bigint_from_any_number_or_a_long_string(node: str, expected: int) -> None:
    assert user_of(f'{{"name": "x", "age": {node}}}'.encode()) == User("u", "x", expected)


@pytest.mark.parametrize("node", [
    "true", "false", "[1]", '{"n": 1}', '"1.5"', '" 5"', '"5 "', '"5_0"', '""', '"abc"', '"0x10"',
    '"9223372036854775808"',  # Long.parseLong refuses what does not fit
    '"\U0001d7d9"',            # a digit beyond the BMP: Java's char-by-char parse sees two surrogates
])
def test_bigint_refuses_what_ksqldb_cannot_read(node: str) -> None:
    with pytest.raises(RecordError) as info:
        user_of(f'{{"name": "x", "age": {node}}}'.encode())
    assert info.value.field == "age" and "expected a BIGINT" in info.value.reason, info.value.reason


# -- DOUBLE ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("node", "expected"), [
    ("7", 7.0), ("68.67", 68.67), ("-0.0", 0.0), ("1e400", math.inf), ("-1e400", -math.inf),
    ("123456789012345678901234567890", 1.2345678901234568e29),
    ('"12.5"', 12.5), ('" 12.5\\n"', 12.5), ('"1e5f"', 1e5), ('"2D"', 2.0), ('".5"', 0.5), ('"5."', 5.0),
    ('"0x1.8p1"', 3.0), ('"-0.0"', -0.0), ('"Infinity"', math.inf), ('"-Infinity"', -math.inf),
])
def test_double_from_any_number_or_a_double_string(node: str, expected: float) -> None:
    price = decode_order(b"u", order_bytes()[:-1] + f', "UNIT_PRICE": {node}}}'.encode()).unit_price
    assert price == expected and math.copysign(1, price) == math.copysign(1, expected), price


def test_double_nan_string_is_nan() -> None:
    assert math.isnan(decode_order(b"u", order_bytes(unit_price="NaN")).unit_price)


@pytest.mark.parametrize("node", ["true", "[]", "{}", '"abc"', '"1_0"', '"Infinityf"', '"1,5"', '""', '"0x1.8"'])
def test_double_refuses_what_ksqldb_cannot_read(node: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_order(b"u", order_bytes()[:-1] + f', "UNIT_PRICE": {node}}}'.encode())
    assert info.value.field == "unit_price" and "expected a DOUBLE" in info.value.reason, info.value.reason


# -- VARCHAR -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("node", "expected"), [
    ('"Zoë 😀"', "Zoë 😀"), ("42", "42"), ("-0", "0"), ("1.50", "1.50"), ("1e5", "1E+5"), ("0.0000001", "1E-7"),
    ("-0.0", "0.0"), ("123456789012345678901234567890", "123456789012345678901234567890"),
    ("true", "true"), ("false", "false"),
    ('{"b": [1, 2.0, null], "a": "x\\u001f\\n/"}', '{"b":[1,2.0,null],"a":"x\\u001F\\n/"}'),  # Jackson's compact JSON
    ('["a", 1, null, [true, "b"], {"k": 1e2}]', '[a, 1, null, [true, b], {"k":1E+2}]'),       # ", "-joined text
    ("[]", "[]"), ("{}", "{}"),
])
def test_varchar_from_any_value_as_its_text(node: str, expected: str) -> None:
    assert decode_order(b"u", order_bytes()[:-1] + f', "CHANNEL": {node}}}'.encode()).channel == expected


# -- ts, the record timestamp -------------------------------------------------------------------------


@pytest.mark.parametrize(("node", "expected"), [('"1677844043886"', 1677844043886), ("1.6778440438869e12", 1677844043886),
                                                ("18446744073709551616", 0)])
def test_ts_is_a_bigint_too(node: str, expected: int) -> None:
    assert decode_order(b"u", order_bytes()[:-1] + f', "TS": {node}}}'.encode()).ts == expected


@pytest.mark.parametrize(("value", "words"), [
    (order_bytes(ts=...), "'ts' is missing or null"),
    (order_bytes(ts=None), "'ts' is missing or null"),
    (order_bytes(ts=-5), "'ts' is -5, expected epoch milliseconds >= 0"),
    (order_bytes(ts=2**63), "read as -9223372036854775808, expected epoch milliseconds >= 0"),
    (order_bytes(ts="yesterday"), "'ts' is 'yesterday' (a string), expected a BIGINT"),
])
def test_an_order_without_a_usable_ts_is_refused(value: bytes, words: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_order(b"u", value)
    assert info.value.field == "ts" and words in info.value.reason, info.value.reason


# -- what cannot be read at all ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "field", "words"),
    [
        (None, None, "value", "value is null"),  # a null-key order is read (KIP-962: joined, NULL user columns)
        (b"\xff\xfe", order_bytes(), "key", "not UTF-8"),
        (b"u", None, "value", "value is null"),
        (b"u", b"null", "value", "value is null"),
        (b"u", b"{not json", "value", "not valid JSON"),
        (b"u", b"\xff{}", "value", "not UTF-8"),
        (b"u", b"[1, 2]", "value", "JSON list, expected an object"),
        (b"u", b"12", "value", "JSON number, expected an object"),
        (b"u", order_bytes()[:-1] + b', "x": NaN}', "value", "NaN is not a JSON number"),
        (b"u", order_bytes()[:-1] + b', "x": -Infinity}', "value", "-Infinity is not a JSON number"),
        (b"u", order_bytes()[:-1] + b', "x": ' + b"1" * (MAX_NUMBER_LENGTH + 1) + b"}", "value", "Jackson's limit"),
        (b"u", order_bytes(qty=True), "qty", "'qty' is True (a JSON boolean), expected a BIGINT"),
        (b"u", order_bytes(product_id=[1]), "product_id", "(a JSON array), expected a BIGINT"),
        (b"u", order_bytes(unit_price="9,99"), "unit_price", "expected a DOUBLE"),
        (b"u", order_bytes(channel="\ud800"), "channel", "lone surrogate"),
    ],
)
def test_unreadable_orders_name_the_field(key: bytes | None, value: bytes | None, field: str, words: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_order(key, value)
    assert info.value.field == field
    assert words in info.value.reason, info.value.reason
    assert isinstance(info.value, StreamappError)


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (b'{"name": "a", "age": true}', "age", "'age' is True (a JSON boolean), expected a BIGINT"),
        (b'{"name": "a", "age": "3.5"}', "age", "'age' is '3.5' (a string), expected a BIGINT"),
        (b'{"name": "\\udc00", "age": 3}', "name", "lone surrogate"),
        (b'{"name": ["\\ud800"], "age": 3}', "name", "lone surrogate"),
        (b'"just a string"', "value", "JSON str"),
        (b"", "value", "not valid JSON"),
        (b"   ", "value", "not valid JSON"),
    ],
)
def test_unreadable_users_name_the_field(value: bytes, field: str, words: str) -> None:
    with pytest.raises(RecordError) as info:
        decode_user(b"u", value)
    assert (info.value.field, words in info.value.reason) == (field, True), info.value.reason


def test_utf16_and_a_byte_order_mark_are_read_as_jackson_does() -> None:
    text = '{"name": "Zoë", "age": 3}'
    for value in (text.encode("utf-16-le"), text.encode("utf-16"), b"\xef\xbb\xbf" + text.encode()):
        assert user_of(value) == User("u", "Zoë", 3)


def test_long_bad_values_are_shortened_in_the_reason() -> None:
    with pytest.raises(RecordError) as info:
        decode_order(b"u", b"x" * 5000)
    assert len(info.value.reason) < 200


@pytest.mark.parametrize(("text", "expected"), [("0" * 1000 + "5", 5), ("-" + "0" * 30 + "9223372036854775808", -(2**63)),
                                                ("9" * 300_000, None), ("1" + "0" * 19, None)])
def test_long_strings_of_digits_are_read_as_long_parse_long_does(text: str, expected: int | None) -> None:
    """Leading zeros are fine; more digits than a long holds are refused (not Python's 4300-digit ValueError)."""
    from streamapp.model.records import parse_long
    assert parse_long(text) == expected


def test_an_empty_key_is_the_user_id_empty_string() -> None:
    """ksqlDB's KAFKA STRING key reads empty bytes as "" (Kafka's StringDeserializer), a key like any other."""
    assert decode_user(b"", b'{"name": "x", "age": 1}') == User("", "x", 1)
    assert decode_order(b"", order_bytes()).user_id == ""
