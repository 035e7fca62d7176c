"""The plan's engine on the seed's joins: what the worker runs for every record, without Kafka.

Under hypothesis, the readers built from the seed's statements accept exactly what ksqlDB's
JSON rules read field by field (``test_fast_paths.by_the_rules``), with the same values, and
refuse the rest with a RecordError; any bytes raise nothing else.  The output records are
ksqlDB's, byte for byte (../shared/reference/ksqldb.md).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp.model.records import MAX_NESTING, RecordError
from streamapp.sql.engine import Query, Reader, Record
from streamapp.worker.tables import faust_timestamp
from test_fast_paths import by_the_rules, outcome, same
from test_records import ORDERS, PLAN, USERS, order_of
from test_reliability_decoders import deep, hostile_values, keys, values

MERGED = Query(PLAN, PLAN.joins[0])
SETTINGS = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
ORDER = b'{"ts": 1677844114148, "product_id": 1584, "qty": 1, "unit_price": 9.08, "channel": "store"}'
KEY = b"2b4f5c1e9a0d4f3e8c7b6a5d4e3f2a1b"


@pytest.mark.parametrize("reader", [USERS, ORDERS], ids=["users", "orders"])
@SETTINGS
@given(key=keys, value=values)
def test_the_plans_decoders_accept_and_read_exactly_what_ksqldbs_rules_do(reader: Reader, key: bytes | None,
                                                                         value: bytes | None) -> None:
    read = outcome(lambda r, k, v: r.read(k, v, 7), reader, key, value)
    assert same(read, outcome(by_the_rules, reader, key, value)), read


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(key=keys, value=hostile_values)
def test_any_bytes_join_or_raise_a_record_error_in_one_line(key: bytes | None, value: bytes) -> None:
    for topic in ("demo_user", "demo_user_orders"):
        try:
            for output in MERGED.process(Record(topic, key, value, 5)):
                json.loads(output.record.value)  # type: ignore[arg-type]
                output.record.value.decode("utf-8")  # type: ignore[union-attr]
        except RecordError as error:
            assert error.reason and "\n" not in error.reason and len(error.reason) < 300, error.reason


def test_a_miss_is_ksqldbs_documented_record() -> None:
    [output] = Query(PLAN, PLAN.joins[0]).process(Record("demo_user_orders", KEY, ORDER, 1))
    assert (output.record.key, output.record.timestamp, output.matched) == (KEY, 1677844114148, False)
    assert output.record.value == (
        b'{"NAME":null,"AGE":null,"PRODUCT_ID":1584,"QTY":1,"UNIT_PRICE":9.08,"CHANNEL":"store","TS":1677844114148}')


def test_a_hit_fills_the_user_columns_and_keeps_utf8() -> None:
    query = Query(PLAN, PLAN.joins[0])
    query.process(Record("demo_user", "ü-1".encode(), '{"name": "Zoë Ñúñez", "age": 30}'.encode(), 0))
    [output] = query.process(Record("demo_user_orders", "ü-1".encode(), ORDER.replace(b"9.08", b"68"), 1))
    assert output.matched and output.record.key == "ü-1".encode()
    assert output.record.value == ('{"NAME":"Zoë Ñúñez","AGE":30,"PRODUCT_ID":1584,"QTY":1,"UNIT_PRICE":68.0,'
                                   '"CHANNEL":"store","TS":1677844114148}').encode()


@pytest.mark.parametrize("price, written", [("\"NaN\"", b'"NaN"'), ("\"Infinity\"", b'"Infinity"'),
                                            ("\"-Infinity\"", b'"-Infinity"'), ("1e400", b'"Infinity"')])
def test_non_finite_doubles_are_strings_as_jackson_writes_them(price: str, written: bytes) -> None:
    value = ORDER.replace(b"9.08", price.encode())
    [output] = Query(PLAN, PLAN.joins[0]).process(Record("demo_user_orders", KEY, value, 1))
    assert b'"UNIT_PRICE":' + written + b"," in output.record.value  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["[", "{"])
def test_nesting_at_the_limit_is_read_and_beyond_it_refused(kind: str) -> None:
    base = b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web", "x": '
    assert order_of(base + deep(MAX_NESTING - 1, kind) + b"}")["CHANNEL"] == "web"  # type: ignore[index]
    with pytest.raises(RecordError, match=f"{MAX_NESTING + 1} deep, deeper than the limit of {MAX_NESTING}"):
        ORDERS.read(b"u", base + deep(MAX_NESTING, kind) + b"}", 0)


@given(st.integers(min_value=0, max_value=253_402_300_799_999))  # up to 9999-12-31T23:59:59.999Z
def test_faust_timestamp_round_trips_to_the_exact_millisecond(ts: int) -> None:
    """Faust's producer sends ``int(seconds * 1000.0)``; that must be ``ts`` exactly."""
    assert int(faust_timestamp(ts) * 1000.0) == ts
