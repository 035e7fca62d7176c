"""The join record against ksqlDB's CSAS output format (../shared/reference/ksqldb.md), without Faust."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamapp.model.join import COLUMNS, faust_timestamp, join_record
from streamapp.model.records import Order, User

ORDER = Order(user_id="2b4f5c1e9a0d4f3e8c7b6a5d4e3f2a1b", ts=1677844114148, product_id=1584, qty=1,
              unit_price=9.08, channel="store")


def test_miss_is_ksqldbs_documented_record() -> None:
    """The reference's own example of a miss, byte for byte (Jackson writes compact JSON)."""
    record = join_record(ORDER, None)
    assert record.key == b"2b4f5c1e9a0d4f3e8c7b6a5d4e3f2a1b"
    assert record.value == (
        b'{"NAME":null,"AGE":null,"PRODUCT_ID":1584,"QTY":1,"UNIT_PRICE":9.08,"CHANNEL":"store","TS":1677844114148}'
    )
    assert record.timestamp_ms == 1677844114148
    assert record.matched is False


def test_hit_fills_user_columns_in_select_order() -> None:
    record = join_record(ORDER, User(ORDER.user_id, "Luella Clements", 65))
    value = json.loads(record.value)
    assert list(value) == ["NAME", "AGE", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS"]
    assert value == {"NAME": "Luella Clements", "AGE": 65, "PRODUCT_ID": 1584, "QTY": 1, "UNIT_PRICE": 9.08,
                     "CHANNEL": "store", "TS": 1677844114148}
    assert "USER_ID" not in value
    assert record.matched is True
    assert tuple(value) == COLUMNS


def test_unit_price_is_a_double_even_when_written_as_an_integer() -> None:
    order = Order("u1", 1, 2, 3, float(68), "web")
    assert b'"UNIT_PRICE":68.0' in join_record(order, None).value


def test_non_ascii_names_and_keys_stay_utf8() -> None:
    record = join_record(Order("ü-1", 5, 1, 1, 1.5, "web"), User("ü-1", "Zoë Ñúñez", 30))
    assert record.key == "ü-1".encode("utf-8")
    assert json.loads(record.value.decode("utf-8"))["NAME"] == "Zoë Ñúñez"
    assert "Zoë".encode("utf-8") in record.value


@given(st.integers(min_value=0, max_value=253_402_300_799_999))  # up to 9999-12-31T23:59:59.999Z
def test_faust_timestamp_round_trips_to_the_exact_millisecond(ts: int) -> None:
    """Faust's producer sends ``int(seconds * 1000.0)``; that must be ``ts`` exactly."""
    assert int(faust_timestamp(ts) * 1000.0) == ts


def test_naive_seconds_would_lose_a_millisecond() -> None:
    """Why faust_timestamp exists: plain ts/1000 truncates below ts for some timestamps (1001 ms -> 1000)."""
    rng = random.Random(1)
    samples = [rng.randrange(10**7) for _ in range(10_000)] + [1001]
    assert any(int(ts / 1000 * 1000.0) != ts for ts in samples)
    assert all(int(faust_timestamp(ts) * 1000.0) == ts for ts in samples)


@pytest.mark.parametrize("user", [None, User("k", "n", 1)])
def test_columns_property_decodes_the_value(user: User | None) -> None:
    record = join_record(Order("k", 3, 4, 5, 6.5, "partner"), user)
    assert record.columns == json.loads(record.value)


def test_null_columns_are_written_as_explicit_nulls() -> None:
    """Every ksqlDB column is nullable: a user with a null name, an order without channel or qty are joined."""
    record = join_record(Order("k", 3, None, None, None, None), User("k", None, 30))
    assert record.value == b'{"NAME":null,"AGE":30,"PRODUCT_ID":null,"QTY":null,"UNIT_PRICE":null,"CHANNEL":null,"TS":3}'
    assert record.matched is True  # a row with null columns is still a row: the order found its user


def test_a_user_row_from_the_decoder_joins_as_read() -> None:
    """The decoder's output (case-insensitive names, coerced values) is what the join writes."""
    from streamapp.model.records import decode_order, decode_user
    user = decode_user(b"k", b'{"NAME": 42, "Age": "7"}')
    order = decode_order(b"k", b'{"TS": "9", "unit_price": "NaN", "channel": ["a", null], "extra": 1}')
    assert join_record(order, user).value == (
        b'{"NAME":"42","AGE":7,"PRODUCT_ID":null,"QTY":null,"UNIT_PRICE":"NaN","CHANNEL":"[a, null]","TS":9}')


@pytest.mark.parametrize(("price", "written"), [(float("nan"), b'"NaN"'), (float("inf"), b'"Infinity"'),
                                                (float("-inf"), b'"-Infinity"')])
def test_non_finite_doubles_are_strings_as_jackson_writes_them(price: float, written: bytes) -> None:
    assert b'"UNIT_PRICE":' + written + b',"CHANNEL"' in join_record(Order("k", 1, 1, 1, price, "web"), None).value
