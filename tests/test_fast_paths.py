"""The fast paths give exactly what the plain ones give: the plan's JSON decoder (the worker's), on the seed's
orders and on every type it takes as it is, against ksqlDB's rules field by field (no Faust).
"""
from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.model.records import MAX_NUMBER_LENGTH, MAX_TIMESTAMP_MS, RecordError, bigint, column, decode_object, double, varchar
from streamapp.sql import plan as p
from streamapp.sql.engine import Query, Reader, Row
from streamapp.sql.formats import Codec, json_text
from test_records import ORDERS, order, order_of


texts = st.text(max_size=30).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
ints = st.integers(min_value=-(2**70), max_value=2**70)
floats = st.floats(allow_nan=True, allow_infinity=True)


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
#: Orders as producers write them, each field of its column's own type (the fast path's), names in either case.
typical_orders = st.builds(
    lambda fields, upper: json.dumps({k.upper() if upper else k: v for k, v in fields.items()}).encode(),
    st.fixed_dictionaries({"ts": st.integers(0, 2**63 - 1), "product_id": st.integers(-(2**63), 2**63 - 1),
                           "qty": st.integers(-(2**63), 2**63 - 1), "unit_price": floats | st.integers(-(2**53), 2**53),
                           "channel": texts}), st.booleans())


#: ksqlDB's reading of each of the seed's column types from a JSON node (JsonSerdeUtils, KsqlJsonDeserializer).
RULES: dict[str, Callable[[Any, str], Any]] = {"STRING": varchar, "BIGINT": bigint, "DOUBLE": double}


def by_the_rules(reader: Reader, key: bytes | None, value: bytes | None) -> tuple[Any, Row | None]:
    """What ``reader`` must read, worked out field by field with ksqlDB's rules and no fast path: the KAFKA STRING
    key's UTF-8, the value's JSON object, each column's field by name, the ``TIMESTAMP=`` column as event time."""
    source = reader.source
    key_column = source.key_columns[0].name
    try:
        read_key = None if key is None else varchar(key.decode("utf-8"), key_column)
    except UnicodeDecodeError:
        raise RecordError("key is not UTF-8", "key") from None
    document = decode_object(value)
    if document is None:
        return read_key, None
    columns = {c.name: RULES[c.type](column(document, c.name), c.name) for c in source.value_columns}
    columns[key_column] = read_key
    event_time = 7 if source.timestamp is None else columns[source.timestamp]
    if event_time is None or not 0 <= event_time <= MAX_TIMESTAMP_MS:
        raise RecordError("no usable event time", source.timestamp)
    return read_key, (columns, event_time)


def outcome(read: Callable[[Reader, bytes | None, bytes | None], Any], reader: Reader, key: bytes | None,
            value: bytes | None) -> Any:
    """What a reading gives: the key and row, or the refusal's field (and the rule's reason, but for the key's and
    the event time's checks, whose words are the reader's own)."""
    try:
        return read(reader, key, value)
    except RecordError as error:
        own = error.field == "key" or error.field == reader.source.timestamp and "event time" in error.reason
        return "refused", error.field, "" if own else error.reason


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types, NaN equal to NaN (a DOUBLE read from "NaN")."""
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and (a == b or isinstance(a, float) and math.isnan(a) and math.isnan(b))


@settings(max_examples=500)
@given(keys, values | typical_orders)
def test_the_seeds_order_reader_reads_exactly_what_ksqldbs_rules_read(key: bytes | None, value: bytes | None) -> None:
    """Orders of every shape, typical ones (the fast path's) among them: the same row, or the same refusal."""
    read = outcome(lambda reader, k, v: reader.read(k, v, 7), ORDERS, key, value)
    assert same(read, outcome(by_the_rules, ORDERS, key, value)), read


def test_fast_decode_of_a_typical_order() -> None:
    value = b'{"ts": 1677844114148, "product_id": 1584, "qty": 1, "unit_price": 9, "channel": "store"}'
    columns = order_of(value, b"u1")
    assert columns == order("u1", 1677844114148, 1584, 1, 9.0, "store")
    assert type(columns["UNIT_PRICE"]) is float


@pytest.mark.parametrize(("ts", "read"), [(0, 0), (2**63 - 1, 2**63 - 1), (2**63, None), (2**64, 0), (2**64 + 7, 7),
                                         (-1, None)])
def test_order_timestamps_must_fit_a_kafka_timestamp(ts: int, read: int | None) -> None:
    """``ts`` is read as ksqlDB reads a BIGINT (JsonNode.asLong: the low 64 bits) and is the order's event time;
    a negative one is a dead letter (Kafka Streams drops it), not a crash on send."""
    value = json.dumps({"ts": ts, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}).encode()
    if read is not None:
        assert ORDERS.read(b"k", value, 7)[1][1] == read  # type: ignore[index]
    else:
        with pytest.raises(RecordError) as error:
            ORDERS.read(b"k", value, 7)
        wrapped = (ts + 2**63) % 2**64 - 2**63
        assert error.value.field == "TS" and f"'TS' is {wrapped}: the record's event time" in error.value.reason


#: A value of every type the plan's fast path takes as it is (the rest always go field by field).
PLAIN_COLUMNS = p.Source("S", p.STREAM, "s", (), (p.Column("B", "BIGINT"), p.Column("I", "INT"), p.Column("D", "DOUBLE"),
                                               p.Column("S", "STRING"), p.Column("F", "BOOLEAN")), "NONE", "JSON")
plan_values = st.fixed_dictionaries({}, optional={name: json_values | ints | floats for name in
                                                  ("b", "I", "d", "S", "f", "B", "D")})


@settings(max_examples=500)
@given(plan_values)
def test_the_plans_fast_decode_reads_exactly_what_ksqldbs_rules_read(fields: dict) -> None:
    """The fast path takes an object of exactly one field per column; one more field sends it field by field."""
    codec = Codec(PLAIN_COLUMNS)
    fast, checked = json.dumps(fields).encode(), json.dumps({**fields, "zz_extra": None}).encode()
    try:
        expected = codec.decode_value(checked)
    except RecordError as error:
        with pytest.raises(RecordError) as refused:
            codec.decode_value(fast)
        assert refused.value.field == error.field
        return
    got = codec.decode_value(fast)
    assert got is not None and expected is not None
    for name, value in expected.items():
        assert type(got[name]) is type(value) and (got[name] == value or (value != value and got[name] != got[name]))


plain_rows = st.fixed_dictionaries({name: st.none() | st.booleans() | ints | floats | texts
                                    for name in ("B", "I", "D", "S", "F")})


@settings(max_examples=500)
@given(plain_rows)
def test_the_plans_value_encoder_writes_what_json_text_writes(row: dict) -> None:
    """Plain rows go through the C encoder; NaN and infinities fall back: either way, json_text's bytes."""
    in_order = {c.name: row[c.name] for c in PLAIN_COLUMNS.value_columns}
    assert Codec(PLAIN_COLUMNS).encode_value(row) == json_text(in_order).encode("utf-8")
    assert Codec(PLAIN_COLUMNS).encode_value(in_order) == json_text(in_order).encode("utf-8")


seed_values = st.none() | st.booleans() | ints | floats | texts
left_rows = st.fixed_dictionaries({name: seed_values for name in ("USER_ID", "TS", "PRODUCT_ID", "QTY", "UNIT_PRICE",
                                                                   "CHANNEL")})
right_rows = st.none() | st.fixed_dictionaries({"NAME": seed_values, "AGE": seed_values})


@settings(max_examples=500)
@given(left_rows, right_rows)
def test_the_joins_value_writer_writes_what_the_sinks_codec_writes(left: dict, right: dict | None) -> None:
    """The seed's two joins written straight from the rows, the order's columns shared between them, against
    the projected row written by the sink's codec (json_text: NaN as "NaN", ...)."""
    from streamapp.settings import Settings
    from streamapp.sql.topology import load_plan

    plan = load_plan(Settings())
    texts: dict[str, str] = {}
    for query in plan.joins:
        table_row = None if right is None else (right, 0)
        key, value, timestamp = Query(plan, query).encode((left, 7), table_row, texts)
        projected = {"NAME": None if right is None else right["NAME"], "AGE": None if right is None else right["AGE"],
                     **{name: left[name] for name in ("PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS")}}
        assert value == json_text(projected).encode("utf-8") and timestamp == 7


#: A number one character longer than Jackson's limit: ksqlDB refuses the value, however well it fits a column.
LONG_NUMBER = "1." + "0" * (MAX_NUMBER_LENGTH - 1) + "1"
#: A source with a DECIMAL column: its fast path reads numbers exactly (as Decimal), DOUBLEs included.
DECIMAL_COLUMNS = p.Source("S", p.STREAM, "s", (), (p.Column("A", "DECIMAL(10, 2)"), p.Column("D", "DOUBLE"),
                                                 p.Column("B", "BIGINT")), "NONE", "JSON")
number_tokens = (st.decimals(allow_nan=False, allow_infinity=False).map(str)
                 | st.sampled_from(["1.0049999999999999", "1.005", "12.50", "-0.0", "0", "1e400", "99999999.995",
                                    "123456789012.5", "1E+2", "0.000000001", "NaN", "-Infinity", LONG_NUMBER]))
json_tokens = json_values.map(json.dumps) | number_tokens
decimal_values = st.fixed_dictionaries({}, optional={name: json_tokens for name in ("a", "d", "b", "A")})


@settings(max_examples=500)
@given(decimal_values)
def test_the_fast_decode_of_a_decimal_source_reads_exactly_what_ksqldbs_rules_read(fields: dict) -> None:
    """Numbers as their exact text reaches each column: 1.0049999999999999 is 1.00 at scale 2, not 1.01."""
    codec = Codec(DECIMAL_COLUMNS)
    body = ",".join(f"{json.dumps(name)}:{token}" for name, token in fields.items())
    fast, checked = f"{{{body}}}".encode(), f"{{{body}{',' if body else ''}\"zz_extra\":null}}".encode()
    try:
        expected = codec.decode_value(checked)
    except RecordError as error:
        with pytest.raises(RecordError) as refused:
            codec.decode_value(fast)
        assert refused.value.field == error.field
        return
    assert same(codec.decode_value(fast), expected)


@pytest.mark.parametrize("source", [PLAIN_COLUMNS, DECIMAL_COLUMNS], ids=["plain", "decimal"])
def test_what_jackson_refuses_is_refused_on_the_fast_path_too(source: p.Source) -> None:
    """A number longer than Jackson's limit, or a bare NaN or Infinity anywhere in the value, makes it no JSON to
    ksqlDB, before any column's rule: the fast path neither reads it nor names a column instead."""
    codec, double = Codec(source), next(c.name for c in source.value_columns if c.type == "DOUBLE")
    row = {c.name: {"BIGINT": 1, "INT": 1, "DOUBLE": 1.5, "STRING": "x", "BOOLEAN": True}.get(c.type, 1)
           for c in source.value_columns}
    assert codec.decode_value(json.dumps(row).encode()) is not None  # the fast path's own value, read
    long = json.dumps({**row, double: 0.5}).replace("0.5", LONG_NUMBER)
    constant = json.dumps({**row, double: [float("inf")], **({"A": 1e300} if "A" in row else {})})
    for text in (long, constant, json.dumps({**row, double: float("nan")})):
        with pytest.raises(RecordError) as refused:
            codec.decode_value(text.encode())
        assert refused.value.field == "value" and "is not valid JSON" in refused.value.reason, text[:80]


def test_a_long_number_is_found_wherever_it_stands_in_a_long_value() -> None:
    """The fast path looks for a long number from every MAX_NUMBER_LENGTH-th byte: one anywhere is found, and a
    number of exactly Jackson's limit is read as ksqlDB reads it."""
    codec = Codec(PLAIN_COLUMNS)
    longest = "1." + "0" * (MAX_NUMBER_LENGTH - 3) + "1"
    for pad in range(0, 2 * MAX_NUMBER_LENGTH + 100, 37):
        value = f'{{"b":1,"i":1,"s":"{"x" * pad}","f":true,"d":{{}}}}'
        with pytest.raises(RecordError) as refused:
            codec.decode_value(value.replace("{}", LONG_NUMBER).encode())
        assert refused.value.field == "value" and "longer than Jackson's limit" in refused.value.reason, pad
        row = codec.decode_value(value.replace("{}", longest).encode())
        assert row is not None and row["D"] == 1.0 and len(row["S"]) == pad  # type: ignore[index]


def test_a_decimal_read_by_the_fast_path_keeps_its_exact_value() -> None:
    codec = Codec(DECIMAL_COLUMNS)
    row = codec.decode_value(b'{"A": 1.0049999999999999, "D": 0.1, "B": 3}')
    assert row == {"A": Decimal("1.00"), "D": 0.1, "B": 3} and str(row["A"]) == "1.00"  # type: ignore[index]
    assert codec.decode_value(b'{"A": 12.5, "D": 2, "B": 3}')["A"] == Decimal("12.50")  # type: ignore[index]
    with pytest.raises(RecordError) as refused:  # more digits than Python's decimal context: refused, not a crash
        codec.decode_value(b'{"A": 1e400, "D": 2, "B": 3}')
    assert refused.value.field == "A" and "does not fit DECIMAL(10, 2)" in refused.value.reason


@settings(max_examples=300)
@given(st.none() | st.decimals(allow_nan=False, allow_infinity=False, places=2) | st.integers(-5, 5), seed_values)
def test_the_joins_value_writer_writes_a_decimal_as_the_sinks_codec_does(amount: Any, email: Any) -> None:
    from streamapp.sql.planner import plan_text

    plan = plan_text("""
        CREATE TABLE c (id BIGINT PRIMARY KEY, email STRING) WITH (KAFKA_TOPIC='c', VALUE_FORMAT='JSON');
        CREATE STREAM pay (id BIGINT KEY, amount DECIMAL(10, 2)) WITH (KAFKA_TOPIC='p', VALUE_FORMAT='JSON');
        CREATE STREAM out AS SELECT pay.id, amount, email FROM pay LEFT JOIN c ON pay.id = c.id EMIT CHANGES;""")
    query = Query(plan, plan.joins[0])
    for right in (None, ({"EMAIL": email}, 0)):
        _, value, _ = query.encode(({"ID": 1, "AMOUNT": amount}, 7), right, {})
        projected = {"AMOUNT": amount, "EMAIL": None if right is None else email}
        assert value == json_text(projected).encode("utf-8")
