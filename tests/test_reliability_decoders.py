"""The seed's record readers under hypothesis: any bytes are either a valid row or a RecordError naming the field.

Pure (no broker): the plan's :class:`~streamapp.sql.engine.Reader` of each source is what
the worker runs on every input record before the dead-letter decision, so a
reader that raised anything else would stop the agent instead of
dead-lettering one record.  The same holds for JSON with lone surrogates (escaped or as
raw bytes) and nesting far past Python's recursion limit.  (The seed's join on any row is
in ``tests/test_engine_seed.py``.)
"""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp.model.records import MAX_NESTING, RecordError, nesting_depth
from streamapp.partitioners.sticky import STICKY_BATCH_SIZE, NullKeyPartitions
from streamapp.sql.engine import Query, Record
from test_records import ORDERS, PLAN, USERS, order_of, user, user_of

#: What a reader's RecordError may name: the key, the value, or a column as declared.
FIELDS = {"key", "value", "NAME", "AGE", "TS", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL"}
INT64 = (-(2**63), 2**63 - 1)
SETTINGS = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])

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
    for reader in (ORDERS, USERS):
        try:
            reader.read(key, value, 0)
        except RecordError as error:
            assert error.field in FIELDS, error.field
            assert error.reason and "\n" not in error.reason and len(error.reason) < 300, error.reason


@SETTINGS
@given(user_id=user_ids, order=valid_orders)
def test_valid_orders_decode_exactly(user_id: str, order: dict) -> None:
    decoded = order_of(json.dumps(order).encode(), user_id.encode())
    assert decoded is not None
    assert (decoded["USER_ID"], decoded["TS"], decoded["PRODUCT_ID"], decoded["QTY"], decoded["CHANNEL"]) == (
        user_id, order["ts"], order["product_id"], order["qty"], order["channel"])
    assert type(decoded["UNIT_PRICE"]) is float and decoded["UNIT_PRICE"] == float(order["unit_price"])


def _not_a_java_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return not text.strip().lower().endswith(("nan", "infinity"))
    return False


#: JSON that ksqlDB cannot read as a number: booleans, arrays, objects, text that is no number.
not_numbers = (st.booleans() | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
               | st.text().filter(_not_a_java_number))


@SETTINGS
@given(user_id=user_ids, order=valid_orders, data=st.data())
def test_one_wrong_field_is_named(user_id: str, order: dict, data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["ts", "product_id", "qty", "unit_price"]))
    broken = {**order, name: data.draw(not_numbers)}
    with pytest.raises(RecordError) as info:
        ORDERS.read(user_id.encode(), json.dumps(broken).encode(), 0)
    assert info.value.field == name.upper() and repr(name.upper()) in info.value.reason


@SETTINGS
@given(order=valid_orders)
def test_a_null_key_order_is_read_and_a_null_user_is_refused(order: dict) -> None:
    """ksqlDB's LEFT JOIN (Kafka Streams 3.7+, KIP-962) joins a null-key order; its table skips a null-key user."""
    value = json.dumps(order).encode()
    decoded = order_of(value, None)
    assert decoded == {**order_of(value, b"u"), "USER_ID": None}  # type: ignore[dict-item]
    join = Query(PLAN, PLAN.joins[0])
    [output] = join.process(Record(ORDERS.source.topic, None, value, 0))
    assert output.matched is False and output.record.key is None
    assert json.loads(output.record.value)["NAME"] is None  # type: ignore[arg-type]
    with pytest.raises(RecordError) as info:
        join.process(Record(USERS.source.topic, None, b'{"name": "x", "age": 1}', 0))
    assert info.value.field == "key" and "key is null" in info.value.reason
    assert join.table == {}


def test_null_keys_stick_to_a_random_partition_per_topic_for_a_batch_size_then_move() -> None:
    """The Java producer's sticky partitioner (KIP-794): a partition drawn at random, kept for batch.size bytes."""
    draws = iter([4, 1, 2, 0])
    partitions = NullKeyPartitions(lambda n: next(draws))
    per_record = 1_000
    first = [partitions.partition("a", 6, per_record) for _ in range(STICKY_BATCH_SIZE // per_record + 1)]
    assert first == [4] * 17  # 16,000 bytes < 16,384 after 16 records: the 17th still goes there
    assert partitions.partition("b", 6, per_record) == 1  # each topic has its own
    assert partitions.partition("a", 6, per_record) == 2  # 17,000 bytes went to 4: the next record moves
    assert partitions.partition("a", 2, 10) == 0          # a sticky partition beyond the count is drawn again
    seen = {NullKeyPartitions().partition("t", 6, 1) for _ in range(200)}
    assert seen == set(range(6))                         # uniform over every partition, not the empty key's


@SETTINGS
@given(user_id=user_ids, name=st.text(), age=st.integers(*INT64))
def test_valid_users_decode_exactly(user_id: str, name: str, age: int) -> None:
    assert user_of(json.dumps({"name": name, "age": age}).encode(), user_id.encode()) == user(user_id, name, age)
    assert USERS.read(user_id.encode(), None, 0) == (user_id, None)


out_of_range_ints = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))
non_finite = st.sampled_from([math.nan, math.inf, -math.inf])


@settings(max_examples=50)
@given(data=st.data(), order=valid_orders)
def test_numbers_beyond_bigint_wrap_as_ksqldb_reads_them(data: st.DataObject, order: dict) -> None:
    """JsonNode.asLong keeps the low 64 bits of a larger integer (Java's BigInteger.longValue)."""
    name = data.draw(st.sampled_from(["product_id", "qty", "age"]))
    big = data.draw(out_of_range_ints)
    wrapped = (big + 2**63) % 2**64 - 2**63
    if name == "age":
        assert user_of(json.dumps({"name": "x", "age": big}).encode(), b"u1") == user("u1", "x", wrapped)
    else:
        decoded = order_of(json.dumps({**order, name: big}).encode(), b"u1")
        assert decoded is not None and decoded[name.upper()] == wrapped


@settings(max_examples=30)
@given(bad=non_finite, order=valid_orders, name=st.sampled_from(["unit_price", "extra", "age"]))
def test_bare_nan_and_infinity_tokens_are_not_json(bad: float, order: dict, name: str) -> None:
    """Python's json reads ``NaN``/``Infinity`` tokens; Jackson, as ksqlDB runs it, refuses the whole value."""
    for reader in (ORDERS, USERS):
        with pytest.raises(RecordError) as info:
            reader.read(b"u1", json.dumps({**order, "name": "x", name: bad}).encode(), 0)
        assert info.value.field == "value" and "is not a JSON number" in info.value.reason


# --- Nothing escapes: surrogates, invalid UTF-8, deep nesting, and the join on any row ---------

#: Text with lone surrogates as often as not: what a ``\ud800`` escape in JSON decodes to.
surrogate_text = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=12) | st.sampled_from(
    ["\ud800", "a\udfffb", "\udc00\ud800", "\U0001f600\ud83d"])
any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | surrogate_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(surrogate_text, inner, max_size=3),
    max_leaves=8,
)


def deep(depth: int, kind: str) -> bytes:
    return (b"[" * depth + b"]" * depth) if kind == "[" else (b'{"a":' * depth + b"1" + b"}" * depth)


def dumps(value: object, escape: bool) -> bytes:
    """JSON bytes as a producer would send them: escaped (``\\ud800``) or raw (UTF-8 with surrogatepass)."""
    text = json.dumps(value, ensure_ascii=escape, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


def nested_in_field(depth: int, kind: str) -> st.SearchStrategy[bytes]:
    base = {"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web", "name": "n", "age": 3}
    head = json.dumps(base)[:-1].encode()
    return st.just(head + b', "x": ' + deep(depth, kind) + b"}")


hostile_values = st.one_of(
    st.binary(max_size=200),
    st.builds(dumps, any_json, st.booleans()),
    st.builds(dumps, st.fixed_dictionaries({}, optional={f: any_json for f in
                                                          ("ts", "product_id", "qty", "unit_price", "channel",
                                                           "name", "age")}), st.booleans()),
    st.builds(deep, st.integers(MAX_NESTING - 2, 20_000), st.sampled_from(["[", "{"])),
    st.integers(MAX_NESTING - 2, MAX_NESTING + 3).flatmap(lambda d: nested_in_field(d, "[")),
    st.binary(max_size=100).map(lambda b: b"\xed\xa0\x80" + b),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(key=keys, value=hostile_values)
def test_decoders_raise_only_record_errors_on_hostile_json(key: bytes | None, value: bytes) -> None:
    """Any bytes, any JSON: a row whose strings all have a UTF-8 form, or a RecordError; never another exception."""
    for reader in (ORDERS, USERS):
        try:
            _, row = reader.read(key, value, 0)
        except RecordError as error:
            assert error.field in FIELDS, error.field
            assert error.reason and "\n" not in error.reason and len(error.reason) < 300, error.reason
            continue
        if row is not None:
            for text in row[0].values():
                if isinstance(text, str):
                    text.encode("utf-8")  # what ksqlDB cannot represent never gets through
            assert nesting_depth(value) <= MAX_NESTING


@pytest.mark.parametrize("kind", ["[", "{"])
def test_nesting_at_the_limit_is_accepted_and_beyond_it_refused(kind: str) -> None:
    base = b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web", "x": '
    at_limit = base + deep(MAX_NESTING - 1, kind) + b"}"  # the order object itself is one level
    assert nesting_depth(at_limit) == MAX_NESTING
    assert order_of(at_limit) == {"USER_ID": "u", "TS": 5, "PRODUCT_ID": 1, "QTY": 1, "UNIT_PRICE": 1.0, "CHANNEL": "web"}
    with pytest.raises(RecordError, match=f"{MAX_NESTING + 1} deep, deeper than the limit of {MAX_NESTING}"):
        ORDERS.read(b"u", base + deep(MAX_NESTING, kind) + b"}", 0)


def test_brackets_inside_strings_do_not_nest() -> None:
    value = json.dumps({"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "[" * 5000 + '\\"{'}).encode()
    assert nesting_depth(value) == 1
    assert order_of(value)["CHANNEL"] == "[" * 5000 + '\\"{'  # type: ignore[index]


@pytest.mark.parametrize("value", [
    b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "\\ud800"}',
    b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "\xed\xa0\x80"}',
])
def test_lone_surrogates_in_a_column_are_refused(value: bytes) -> None:
    with pytest.raises(RecordError) as info:
        ORDERS.read(b"u", value, 0)
    assert info.value.field in ("CHANNEL", "value")
    assert ("surrogate" in info.value.reason) or ("not UTF-8" in info.value.reason)
