"""Decoding the seed's users and orders as ksqlDB's JSON format does, one test per input class.

The worker reads every declared source with :class:`streamapp.sql.engine.Reader`, built from the
plan; these are the seed's two sources (``DEMO_USER``, ``DEMO_USER_ORDERS``).  Each expectation
comes from ksqlDB's code (``KsqlJsonDeserializer``, ``JsonSerdeUtils.toLong``/``toDouble`` in
confluentinc/ksql) and Java's ``Long.parseLong``/``Double.parseDouble``/``BigDecimal.toString``,
written out here by hand; ``test_json_row_oracle.py`` checks the same rules against the Kafka
Streams program's own reader on generated inputs.
"""
from __future__ import annotations

import json
import math
from typing import Any

import pytest

from streamapp.errors import StreamappError
from streamapp.model.records import MAX_NUMBER_LENGTH, RecordError, parse_long
from streamapp.sql.engine import Query, Reader, Record
from streamapp.sql.planner import plan_text
from streamapp.sql.topology import seed_text

#: The seed's plan, and the readers of its table (users) and its stream (orders), as the worker builds them.
PLAN = plan_text(seed_text(), "the seed's statements")
USERS, ORDERS = Reader(PLAN.source("DEMO_USER")), Reader(PLAN.source("DEMO_USER_ORDERS"))

GOOD_ORDER = {"ts": 1677844043886, "product_id": 1669, "qty": 6, "unit_price": 68.67, "channel": "store"}


def order_bytes(**changes: object) -> bytes:
    value = {**GOOD_ORDER, **changes}
    return json.dumps({k: v for k, v in value.items() if v is not ...}).encode()


def user_of(value: bytes | None, key: bytes | None = b"u") -> dict[str, Any] | None:
    """A user's columns (its key column included) as the table reads them; None for a tombstone."""
    read_key, row = USERS.read(key, value, 7)
    if row is None:
        return None
    columns, event_time = row
    assert (read_key, event_time) == (columns["USER_ID"], 7)  # no TIMESTAMP=: the record's timestamp
    return columns


def order_of(value: bytes | None, key: bytes | None = b"u") -> dict[str, Any] | None:
    """An order's columns (its key column included); None for a null value.  Its event time is its TS."""
    read_key, row = ORDERS.read(key, value, 7)
    if row is None:
        return None
    columns, event_time = row
    assert (read_key, event_time) == (columns["USER_ID"], columns["TS"])  # TIMESTAMP='ts'
    return columns


def user(user_id: str | None, name: str | None, age: int | None) -> dict[str, Any]:
    """The columns the users table reads for a user."""
    return {"USER_ID": user_id, "NAME": name, "AGE": age}


def order(user_id: str | None, ts: int, product_id: int | None, qty: int | None, unit_price: float | None,
          channel: str | None) -> dict[str, Any]:
    """The columns the orders stream reads for an order."""
    return {"USER_ID": user_id, "TS": ts, "PRODUCT_ID": product_id, "QTY": qty, "UNIT_PRICE": unit_price,
            "CHANNEL": channel}


def refusal(reader: Reader, key: bytes | None, value: bytes | None) -> RecordError:
    """The RecordError ``reader`` raises for a record (the test fails if it reads it)."""
    with pytest.raises(RecordError) as info:
        reader.read(key, value, 7)
    return info.value


def test_demo_order_decodes() -> None:
    assert order_of(order_bytes(), b"u1") == order("u1", 1677844043886, 1669, 6, 68.67, "store")


def test_demo_user_decodes_and_tombstones_are_none() -> None:
    assert user_of(b'{"name": "Luella Clements", "age": 65}', b"u1") == user("u1", "Luella Clements", 65)
    assert USERS.read(b"u1", None, 7) == ("u1", None)
    assert USERS.read(b"u1", b"null", 7) == ("u1", None)  # JSON null is a tombstone too
    assert USERS.read(b"u1", b" null ", 7) == ("u1", None)


def test_integer_unit_price_becomes_float_and_extra_fields_are_ignored() -> None:
    columns = order_of(order_bytes(unit_price=7, coupon="X"))
    assert columns is not None and set(columns) == {"USER_ID", "TS", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL"}
    assert columns["UNIT_PRICE"] == 7.0 and isinstance(columns["UNIT_PRICE"], float)


# -- nullable and missing fields -------------------------------------------------------------------


def test_a_null_or_missing_user_field_is_null() -> None:
    assert user_of(b'{"name": null, "age": 30}') == user("u", None, 30)
    assert user_of(b'{"age": 30}') == user("u", None, 30)
    assert user_of(b'{"name": "x"}') == user("u", "x", None)
    assert user_of(b"{}") == user("u", None, None)


@pytest.mark.parametrize("name", ["product_id", "qty", "unit_price", "channel"])
@pytest.mark.parametrize("absent", [None, ...], ids=["null", "missing"])
def test_a_null_or_missing_order_column_is_null(name: str, absent: object) -> None:
    columns = order_of(order_bytes(**{name: absent}))
    assert columns is not None and columns[name.upper()] is None
    assert columns["TS"] == GOOD_ORDER["ts"]


# -- field names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [
    (b'{"NAME": "x", "AGE": 3}', user("u", "x", 3)),
    (b'{"Name": "x", "aGe": 3}', user("u", "x", 3)),
    (b'{"NAME": "exact", "name": "lower", "age": 1}', user("u", "exact", 1)),       # the exact upper-case name wins
    (b'{"name": "lower", "NAME": "exact", "age": 1}', user("u", "exact", 1)),
    (b'{"name": "first", "Name": "last", "age": 1}', user("u", "last", 1)),         # else the last match (not the first)
    (b'{"name": "a", "name": "b", "age": 1}', user("u", "b", 1)),                   # a repeated field: the last value
    (b'{"name": "a", "Name": "b", "name": "c", "age": 1}', user("u", "b", 1)),      # ... in its first position
    (b'{"user_name": "x", "age": 1}', user("u", None, 1)),
])
def test_field_names_match_case_insensitively(value: bytes, expected: dict[str, Any]) -> None:
    assert user_of(value) == expected


def test_order_fields_in_upper_case() -> None:
    value = b'{"TS": 5, "PRODUCT_ID": 7, "Qty": 3, "UNIT_PRICE": 1.5, "CHANNEL": "web"}'
    assert order_of(value) == order("u", 5, 7, 3, 1.5, "web")


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
    columns = user_of(f'{{"name": "x", "age": {node}}}'.encode())
    assert columns == user("u", "x", expected) and type(columns["AGE"]) is int


@pytest.mark.parametrize("node", [
    "true", "false", "[1]", '{"n": 1}', '"1.5"', '" 5"', '"5 "', '"5_0"', '""', '"abc"', '"0x10"',
    '"9223372036854775808"',  # Long.parseLong refuses what does not fit
    '"\U0001d7d9"',            # a digit beyond the BMP: Java's char-by-char parse sees two surrogates
])
def test_bigint_refuses_what_ksqldb_cannot_read(node: str) -> None:
    error = refusal(USERS, b"u", f'{{"name": "x", "age": {node}}}'.encode())
    assert error.field == "AGE" and "'AGE' is " in error.reason and "expected a BIGINT" in error.reason, error.reason


# -- DOUBLE ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("node", "expected"), [
    ("7", 7.0), ("68.67", 68.67), ("-0.0", 0.0), ("1e400", math.inf), ("-1e400", -math.inf),
    ("123456789012345678901234567890", 1.2345678901234568e29),
    ('"12.5"', 12.5), ('" 12.5\\n"', 12.5), ('"1e5f"', 1e5), ('"2D"', 2.0), ('".5"', 0.5), ('"5."', 5.0),
    ('"0x1.8p1"', 3.0), ('"-0.0"', -0.0), ('"Infinity"', math.inf), ('"-Infinity"', -math.inf),
])
def test_double_from_any_number_or_a_double_string(node: str, expected: float) -> None:
    columns = order_of(order_bytes()[:-1] + f', "UNIT_PRICE": {node}}}'.encode())
    assert columns is not None
    price = columns["UNIT_PRICE"]
    assert type(price) is float and price == expected and math.copysign(1, price) == math.copysign(1, expected), price


def test_double_nan_string_is_nan() -> None:
    columns = order_of(order_bytes(unit_price="NaN"))
    assert columns is not None and math.isnan(columns["UNIT_PRICE"])


@pytest.mark.parametrize("node", ["true", "[]", "{}", '"abc"', '"1_0"', '"Infinityf"', '"1,5"', '""', '"0x1.8"'])
def test_double_refuses_what_ksqldb_cannot_read(node: str) -> None:
    error = refusal(ORDERS, b"u", order_bytes()[:-1] + f', "UNIT_PRICE": {node}}}'.encode())
    assert error.field == "UNIT_PRICE" and "expected a DOUBLE" in error.reason, error.reason


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
    columns = order_of(order_bytes()[:-1] + f', "CHANNEL": {node}}}'.encode())
    assert columns is not None and columns["CHANNEL"] == expected


# -- ts, the record timestamp -------------------------------------------------------------------------


@pytest.mark.parametrize(("node", "expected"), [('"1677844043886"', 1677844043886), ("1.6778440438869e12", 1677844043886),
                                                ("18446744073709551616", 0)])
def test_ts_is_a_bigint_too(node: str, expected: int) -> None:
    """``ts`` is read as a BIGINT, and that value is the order's event time (``order_of`` checks it)."""
    columns = order_of(order_bytes()[:-1] + f', "TS": {node}}}'.encode())
    assert columns is not None and columns["TS"] == expected


@pytest.mark.parametrize(("value", "words"), [
    (order_bytes(ts=...), "'TS' is missing or null: the record's event time (TIMESTAMP=TS)"),
    (order_bytes(ts=None), "'TS' is missing or null: the record's event time (TIMESTAMP=TS)"),
    (order_bytes(ts=-5), "'TS' is -5: the record's event time (TIMESTAMP=TS), expected epoch milliseconds >= 0"),
    (order_bytes(ts=2**63), "'TS' is -9223372036854775808: the record's event time (TIMESTAMP=TS), "
                            "expected epoch milliseconds >= 0"),
    (order_bytes(ts="yesterday"), "'TS' is 'yesterday' (a string), expected a BIGINT"),
])
def test_an_order_without_a_usable_ts_is_refused(value: bytes, words: str) -> None:
    error = refusal(ORDERS, b"u", value)
    assert error.field == "TS" and words in error.reason, error.reason


# -- what cannot be read at all ------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [(None, None), (b"u", None), (b"u", b"null"), (b"u", b" null ")])
def test_an_order_without_a_value_is_no_row_and_joins_nothing(key: bytes | None, value: bytes | None) -> None:
    """ksqlDB drops a stream record with a null value: the reader gives no row, so neither join writes anything."""
    assert ORDERS.read(key, value, 7) == (None if key is None else key.decode(), None)
    for query in PLAN.joins:
        assert Query(PLAN, query).process(Record(ORDERS.source.topic, key, value, 7)) == []


@pytest.mark.parametrize(
    ("key", "value", "field", "words"),
    [
        (b"\xff\xfe", order_bytes(), "key", "not UTF-8"),
        (b"u", b"{not json", "value", "not valid JSON"),
        (b"u", b"\xff{}", "value", "not UTF-8"),
        (b"u", b"[1, 2]", "value", "JSON list, expected an object"),
        (b"u", b"12", "value", "JSON number, expected an object"),
        (b"u", order_bytes()[:-1] + b', "x": NaN}', "value", "NaN is not a JSON number"),
        (b"u", order_bytes()[:-1] + b', "x": -Infinity}', "value", "-Infinity is not a JSON number"),
        (b"u", order_bytes()[:-1] + b', "x": ' + b"1" * (MAX_NUMBER_LENGTH + 1) + b"}", "value", "Jackson's limit"),
        (b"u", order_bytes(qty=True), "QTY", "'QTY' is True (a JSON boolean), expected a BIGINT"),
        (b"u", order_bytes(product_id=[1]), "PRODUCT_ID", "(a JSON array), expected a BIGINT"),
        (b"u", order_bytes(unit_price="9,99"), "UNIT_PRICE", "expected a DOUBLE"),
        (b"u", order_bytes(channel="\ud800"), "CHANNEL", "lone surrogate"),
    ],
)
def test_unreadable_orders_name_the_field(key: bytes | None, value: bytes | None, field: str, words: str) -> None:
    error = refusal(ORDERS, key, value)
    assert error.field == field
    assert words in error.reason, error.reason
    assert isinstance(error, StreamappError)


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        (b'{"name": "a", "age": true}', "AGE", "'AGE' is True (a JSON boolean), expected a BIGINT"),
        (b'{"name": "a", "age": "3.5"}', "AGE", "'AGE' is '3.5' (a string), expected a BIGINT"),
        (b'{"name": "\\udc00", "age": 3}', "NAME", "lone surrogate"),
        (b'{"name": ["\\ud800"], "age": 3}', "NAME", "lone surrogate"),
        (b'"just a string"', "value", "JSON str"),
        (b"", "value", "not valid JSON"),
        (b"   ", "value", "not valid JSON"),
    ],
)
def test_unreadable_users_name_the_field(value: bytes, field: str, words: str) -> None:
    error = refusal(USERS, b"u", value)
    assert (error.field, words in error.reason) == (field, True), error.reason


def test_utf16_and_a_byte_order_mark_are_read_as_jackson_does() -> None:
    text = '{"name": "Zoë", "age": 3}'
    for value in (text.encode("utf-16-le"), text.encode("utf-16"), b"\xef\xbb\xbf" + text.encode()):
        assert user_of(value) == user("u", "Zoë", 3)


def test_long_bad_values_are_shortened_in_the_reason() -> None:
    assert len(refusal(ORDERS, b"u", b"x" * 5000).reason) < 200


@pytest.mark.parametrize(("text", "expected"), [("0" * 1000 + "5", 5), ("-" + "0" * 30 + "9223372036854775808", -(2**63)),
                                                ("9" * 300_000, None), ("1" + "0" * 19, None)])
def test_long_strings_of_digits_are_read_as_long_parse_long_does(text: str, expected: int | None) -> None:
    """Leading zeros are fine; more digits than a long holds are refused (not Python's 4300-digit ValueError)."""
    assert parse_long(text) == expected
    value = json.dumps({"name": "x", "age": text}).encode()  # and so a BIGINT column read from that string
    if expected is None:
        assert refusal(USERS, b"u", value).field == "AGE"
    else:
        assert user_of(value) == user("u", "x", expected)


def test_an_empty_key_is_the_user_id_empty_string() -> None:
    """ksqlDB's KAFKA STRING key reads empty bytes as "" (Kafka's StringDeserializer), a key like any other."""
    assert user_of(b'{"name": "x", "age": 1}', b"") == user("", "x", 1)
    columns = order_of(order_bytes(), b"")
    assert columns is not None and columns["USER_ID"] == ""
