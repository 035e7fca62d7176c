"""The repartitioned table takes the row bytes of the records the worker wrote, and they are the bytes decoding gives.

``agents.tables`` does not decode a repartition record this worker wrote
(:class:`streamapp.worker.tables.WrittenRows`): it stores the row bytes it computed
for the users table.  That is only right if decoding the record, as any other,
gives those same bytes: whatever user record the users table accepts, the copy's
output (``DEMO_USER_REPARTITION``'s query) read back as that source must give a
row whose table bytes are the users table's.
"""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp.model.records import RecordError
from streamapp.sql.engine import Query, Reader, Record
from streamapp.worker.tables import WrittenRows, dumps_compact, table_row
from test_records import PLAN, USERS

#: The seed's copy of the users table, and the reader of the topic it writes.
COPY = Query(PLAN, PLAN.writer_of("DEMO_USER_REPARTITION"))  # type: ignore[arg-type]
COPIED = Reader(PLAN.source("DEMO_USER_REPARTITION"))

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
#: User records as producers write them: either case of the column names, any JSON in them, ages as text too.
ages = st.one_of(json_values, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1).map(str))
users = st.fixed_dictionaries({}, optional={"name": json_values, "age": ages, "NAME": json_values, "Age": ages,
                                            "other": json_values})
keys = st.one_of(st.binary(min_size=1, max_size=20), st.text(min_size=1, max_size=20).map(
    lambda t: t.encode("utf-8", "surrogatepass")))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(key=keys, user=users)
def test_a_written_rows_repartition_value_decodes_to_the_same_row_bytes(key: bytes, user: dict[str, object]) -> None:
    record = Record(USERS.source.topic, key, json.dumps(user).encode(), 7)
    try:
        _, row = USERS.row(record)
    except RecordError:
        return  # a dead letter: nothing written
    if row is None:
        return  # a tombstone: nothing remembered
    table_bytes = dumps_compact(table_row(row[0], USERS.source))
    [copied] = COPY.process(record)
    assert copied.record.topic == COPIED.source.topic and copied.record.key == key
    _, again = COPIED.row(copied.record)
    assert again is not None and dumps_compact(table_row(again[0], COPIED.source)) == table_bytes


def test_a_row_is_taken_once_for_the_bytes_it_was_written_with() -> None:
    written = WrittenRows()
    written.add(b"u1", b'{"name": "A", "age": 1}', b'{"name":"A","age":1}')
    written.add(b"u2", b'{"name": "B", "age": 2}', b'{"name":"B","age":2}')
    assert written.take(b"u1", b'{"name": "A", "age": 9}') is None  # other bytes (another writer, a later update)
    assert written.take(b"u1", None) is None
    assert written.take(b"u1", b'{"name": "A", "age": 1}') == b'{"name":"A","age":1}'
    assert written.take(b"u1", b'{"name": "A", "age": 1}') is None  # read again: decoded as any record
    assert written.take(b"u2", b'{"name": "B", "age": 2}') == b'{"name":"B","age":2}'


def test_at_most_the_limit_is_kept_the_oldest_forgotten_first() -> None:
    written = WrittenRows(limit=4)
    for i in range(5):
        written.add(b"u%d" % i, b"v%d" % i, b"r%d" % i)
    assert [written.take(b"u%d" % i, b"v%d" % i) for i in range(5)] == [None, None, b"r2", b"r3", b"r4"]
