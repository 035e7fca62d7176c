"""The fast paths give exactly what the plain ones give: the demo's order decoder (the reconciliation's) against
its field-by-field checks, and the plan's JSON decoder (the worker's) against ksqlDB's rules field by field (no Faust).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamapp.model.records import Order, RecordError, _checked_order, decode_order
from streamapp.sql import plan as p
from streamapp.sql.engine import Query
from streamapp.sql.formats import Codec, json_text


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
    except RecordError:
        with pytest.raises(RecordError):
            codec.decode_value(fast)
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


@settings(max_examples=500, deadline=None)
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
