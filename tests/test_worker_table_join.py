"""Table-table joins in the worker (issue 37, ring R2): what it refuses where, and what it runs.

The guard, the doctor, the Kafka Streams program and the worker take every plan the planner makes (a
stream-stream join on value columns included: the worker re-keys both sides).  The worker's table-table join is
checked on the broker in ``tests/test_worker_table_join_broker.py``.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from streamapp.cli import main
from streamapp.kafka.ksql_equivalent import cluster_plan
from streamapp.settings import Settings
from streamapp.sql import plan as p
from streamapp.sql.topology import topology, worker_refusal

TABLES = """
CREATE TABLE L (ID BIGINT PRIMARY KEY, V STRING) WITH (KAFKA_TOPIC='l_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE R (ID BIGINT PRIMARY KEY, W STRING) WITH (KAFKA_TOPIC='r_{tag}', VALUE_FORMAT='JSON'{key_format});
CREATE TABLE O WITH (KAFKA_TOPIC='o_{tag}') AS SELECT L.ID, V, W FROM L {join} JOIN R ON L.ID = R.ID;
"""
STREAMS = """
CREATE STREAM L (ID BIGINT KEY, V STRING) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');
CREATE STREAM R (ID BIGINT KEY, W STRING) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON');
CREATE STREAM O AS SELECT L.ID, V, W FROM L JOIN R WITHIN 1 SECOND ON L.V = R.W;
"""


def statements(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "joins.sql"
    path.write_text(text, encoding="utf-8")
    return Settings(statements=str(path))


def tables_plan(tmp_path: Path, join: str = "LEFT", key_format: str = "", tag: str = "t") -> Settings:
    return statements(tmp_path, TABLES.format(tag=tag, join=join, key_format=key_format))


def test_the_worker_takes_a_stream_stream_plan_on_value_columns_by_re_keying_both_sides(tmp_path: Path) -> None:
    """It refused such a plan at start until the worker re-keyed stream-stream sides (issue 37)."""
    from streamapp.worker.app import create_app

    settings = statements(tmp_path, STREAMS)
    joins = topology(settings)  # what the guard, the doctor and the reconciliation build too
    assert [q.kind for q in joins.declared.queries] == [p.STREAM_STREAM_JOIN]
    assert cluster_plan(settings).queries == joins.declared.queries
    assert worker_refusal(joins.declared) is None
    [join] = joins.stream_joins
    assert (join.source_topic, join.right_topic) == (f"{settings.app_id}-O-Join-left-repartition",
                                                     f"{settings.app_id}-O-Join-right-repartition")
    assert create_app(settings).topology.stream_joins == joins.stream_joins


def test_the_kafka_streams_plan_of_a_table_table_join_is_the_declared_one_with_the_seeds_renames_only(
        tmp_path: Path) -> None:
    settings = tables_plan(tmp_path)
    plan = cluster_plan(settings)
    assert [s.topic for s in plan.sources] == ["l_t", "r_t", "o_t"]
    assert plan.queries[0].kind == p.TABLE_TABLE_JOIN
    seed = cluster_plan(Settings(users_topic="people"))  # without statements the seed's topic settings rename
    assert "people" in {s.topic for s in seed.sources} and "demo_user" not in {s.topic for s in seed.sources}


def test_a_table_table_join_of_two_key_formats_joins_a_copy_of_the_right_table_rekeyed_into_the_lefts(
        tmp_path: Path) -> None:
    """ksqlDB's ``RightSourceKeyed-SelectKey-repartition``: the copy is the worker's internal topic, which ksqlDB
    does not write under that name (its ``ksqldb_output`` is None), and both tables keep their rows' times."""
    joins = topology(tables_plan(tmp_path, key_format=", KEY_FORMAT='JSON'").replace(app_id="app"))
    [copy] = joins.copies
    assert copy.output == "app-O-RightSourceKeyed-SelectKey-repartition" and copy.ksqldb_output is None
    [join] = joins.table_joins
    assert (join.left.topic, join.right.topic, join.output, join.ksqldb_output) == (
        "l_t", copy.output, "streamapp_o_t", "o_t")
    assert join.right.source.key_format == "KAFKA" and all(t.timestamped for t in joins.tables)
    assert joins.table_topics == ("l_t", copy.output, "r_t")
    assert set(joins.outputs) == {copy.output, "streamapp_o_t"}


def test_the_guard_and_kafka_streams_take_a_table_table_plan_past_planning(
        broker_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``streamapp guard --statements`` checks its pair (here: its topics do not exist yet, exit 1);
    ``streamapp ksql-equivalent --statements`` gets as far as the cluster, where its input topics do not exist yet
    (one line naming them, exit 2).  The guard's checks of the pair: tests/test_guard_table_joins.py."""
    tag = uuid.uuid4().hex[:8]
    settings = tables_plan(tmp_path, join="INNER", tag=tag)
    cluster = ["--statements", str(settings.statements), "--bootstrap-servers", broker_settings.bootstrap_servers]
    assert main(["guard", *cluster, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["problems"] == [f"l_{tag} and r_{tag} does not exist: create it with "
                                                                "the configured count"]
    assert main(["ksql-equivalent", *cluster]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"input topic missing: L=l_{tag}, R=r_{tag}" in err, err


# Updates (topic, key, value or None, timestamp): the documented table's kinds of update and more: a tombstone for a
# key a side never had, updates of a key in one fetch (a run of one topic), an update older than the other row.
UPDATES = [("l", 1, None, 1), ("r", 1, None, 2), ("l", 1, {"V": "A"}, 3), ("l", 1, {"V": "B"}, 4),
           ("r", 1, {"W": "a"}, 5), ("r", 2, {"W": "x"}, 6), ("r", 1, {"W": "b"}, 7), ("l", 1, None, 8),
           ("l", 1, {"V": "C"}, 9), ("r", 1, None, 10), ("r", 1, {"W": "c"}, 2), ("l", 1, None, 13),
           ("l", 2, {"V": "y"}, 14), ("r", 2, None, 15), ("r", 1, None, 16), ("l", 2, None, 17)]


@pytest.mark.parametrize("where", ["", " WHERE V <> 'B'"])
@pytest.mark.parametrize("join", ["INNER", "LEFT", "RIGHT", "FULL"])
def test_each_update_joined_against_rocksdb_writes_what_the_test_runner_writes(
        join: str, where: str, tmp_path: Path) -> None:
    """The agent's path without a broker: each run of one topic's updates is one handler call, whose updates are
    joined (:class:`agents.table_joins.JoinSide`) against the rows in the app's RocksDB tables and the call's own
    rows so far, then stored as the table agent stores them."""
    from itertools import groupby

    from aiokafka.structs import ConsumerRecord

    from agents.table_joins import JoinSide
    from streamapp.sql.engine import Reader
    from streamapp.sql.formats import Codec
    from streamapp.sql.runner import TestRecord, run
    from streamapp.worker.app import create_app
    from streamapp.worker.tables import RowWrites, table_row

    key = "ROWKEY AS ID" if join == "FULL" else "L.ID"
    path = tmp_path / "joins.sql"
    path.write_text(TABLES.format(tag="t", join=join, key_format="").replace(
        "SELECT L.ID, V, W FROM L", f"SELECT {key}, V, W FROM L").replace(" ON L.ID = R.ID;", f" ON L.ID = R.ID{where};"),
        encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    [joined] = app.topology.table_joins
    sides = {table.topic: (JoinSide(app, joined, side), table) for side, table, _ in joined.sides}
    written = []
    for topic, updates in groupby(enumerate(UPDATES), key=lambda update: f"{update[1][0]}_t"):
        side, table = sides[topic]
        codec, reader = Codec(table.source), Reader(table.source)
        writes = RowWrites(app.join_tables.by_name[table.name])
        for offset, (_, k, value, timestamp) in updates:
            raw_key, raw_value = codec.encode_key(k), None if value is None else codec.encode_value(value)
            outputs, _ = side.update(0, ConsumerRecord(topic, 0, offset, timestamp, 0, raw_key, raw_value, None, 0,
                                                       0, []), k)
            written += [(out_key, out_value, out_time) for _, out_key, out_value, out_time in outputs]
            _, row = reader.read(raw_key, raw_value, timestamp)
            side.wrote(0, raw_key, row)
            writes.put(0, raw_key, None if row is None else writes.value(table_row(row[0], table.source, row[1])))
        writes.write()
        side.stored()
    result = run(app.topology.plan, [TestRecord(f"{t}_t", k, v, ts, i) for i, (t, k, v, ts) in enumerate(UPDATES)])
    sink = Codec(app.topology.plan.source("O"))
    assert written == [(sink.encode_key(r.key), None if r.value is None else sink.encode_value(r.value), r.timestamp)
                       for r in result.actual["o_t"]]


def test_a_dropped_transactions_rows_are_put_back_and_a_committed_ones_stay(tmp_path: Path) -> None:
    """exactly_once (:class:`agents.table_joins.UndoLog`): the records of a dropped transaction are read again, and
    must be joined against the rows they were joined against the first time."""
    from agents.table_joins import UndoLog
    from streamapp.worker.app import create_app
    from streamapp.worker.faust_internals import partition_db
    from streamapp.worker.tables import RowWrites

    app = create_app(tables_plan(tmp_path).replace(data_dir=str(tmp_path / "data")))
    table = app.join_tables.by_name["l"]
    undo = UndoLog([table])

    def put(partition: int, rows: dict[bytes, bytes | None]) -> None:
        writes = RowWrites(table)
        for key, value in rows.items():
            undo.touch(partition, key)
            writes.put(partition, key, value)
        writes.write()

    def held(partition: int) -> dict[bytes, bytes | None]:
        return {key: partition_db(table, partition).get(key) for key in (b"a", b"b", b"c")}

    first = RowWrites(table)
    first.put(1, b"a", b"A0")
    first.put(1, b"b", b"B0")
    first.write()
    put(1, {b"a": b"A1", b"c": b"C1"})  # an open transaction's two fetches
    put(1, {b"a": b"A2", b"b": None})
    put(2, {b"a": b"X"})
    undo.ended(1, False)
    assert held(1) == {b"a": b"A0", b"b": b"B0", b"c": None}
    undo.ended(2, True)
    put(2, {b"b": b"Y"})
    undo.ended(2, False)  # only what came after the commit goes back
    assert held(2) == {b"a": b"X", b"b": None, b"c": None}
