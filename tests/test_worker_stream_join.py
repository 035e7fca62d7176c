"""Windowed stream-stream joins in the worker (issue 37, ring R1), without a broker: the agent's join
(:class:`agents.stream_joins.StreamJoinRun`) against the app's real RocksDB stores writes what the test runner
writes; the stores expire by the window's retention and a new run (a restart) joins what the stores kept.
The broker's proof: ``tests/test_worker_stream_join_broker.py``.
"""
from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

from streamapp.settings import Settings
from streamapp.worker.window_stores import SEGMENTS

STREAMS = """
CREATE STREAM L (ID BIGINT KEY, A STRING) WITH (KAFKA_TOPIC='l', VALUE_FORMAT='JSON');
CREATE STREAM R (ID BIGINT KEY, B STRING) WITH (KAFKA_TOPIC='r', VALUE_FORMAT='JSON');
CREATE STREAM O WITH (KAFKA_TOPIC='o') AS SELECT {key}, A, B FROM L {join} JOIN R {within} ON L.ID = R.ID;
"""
# (topic, key, value or None, timestamp): matches before and after, out of order, several per key, a null value, a
# null key, records later than the window and its grace, windows closing as stream time moves.
RECORDS = [("l", 1, {"A": "a1"}, 1000), ("r", 1, {"B": "b1"}, 1500), ("r", 2, {"B": "b2"}, 2000),
           ("l", 2, {"A": "a2"}, 9000), ("l", 1, {"A": "a3"}, 1200), ("l", 3, {"A": "a4"}, 3000),
           ("l", 3, None, 3100), ("r", 3, {"B": "b3"}, 4500), ("l", None, {"A": "nk"}, 5000),
           ("r", 1, {"B": "b4"}, 2100), ("r", 4, {"B": "b5"}, 20_000), ("l", 1, {"A": "late"}, 500),
           ("r", 5, {"B": "b6"}, 22_000), ("l", 5, {"A": "a5"}, 21_500), ("r", 2, {"B": "early"}, 100),
           ("l", 6, {"A": "a6"}, 40_000), ("r", 6, {"B": "b7"}, 40_000), ("l", 4, {"A": "a7"}, 60_000)]


def app_of(tmp_path: Path, join: str, within: str) -> Any:
    tmp_path.mkdir(exist_ok=True)
    from streamapp.worker.app import create_app

    key = "ROWKEY AS ID" if join == "FULL" else "R.ID" if join == "RIGHT" else "L.ID"
    path = tmp_path / "joins.sql"
    path.write_text(STREAMS.format(key=key, join=join, within=within), encoding="utf-8")
    return create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))


def feed(run: Any, app: Any, records: list[tuple[str, Any, Any, int]], first: int = 0,
         changes: list[Any] | None = None) -> list[tuple[bytes | None, bytes | None, int]]:
    """Each run of one topic's records is one fetch (its changes handed over at the end), as the agent does."""
    from aiokafka.structs import ConsumerRecord

    from streamapp.sql.formats import Codec

    written = []
    for topic, run_of in groupby(enumerate(records, first), key=lambda r: r[1][0]):
        codec = Codec(app.topology.source_at(topic))
        for offset, (_, k, value, timestamp) in run_of:
            raw_key, raw_value = codec.encode_key(k), None if value is None else codec.encode_value(value)
            msg = ConsumerRecord(topic, 0, offset, timestamp, 0, raw_key, raw_value, None, 0, 0, [])
            written += [(key, out, ts) for _, key, out, ts in run.process(topic, 0, msg)]
        handed = run.stored()
        if changes is not None:
            changes += handed
    return written


def expected(app: Any, records: list[tuple[str, Any, Any, int]]) -> list[tuple[bytes | None, bytes | None, int]]:
    from streamapp.sql.formats import Codec
    from streamapp.sql.runner import TestRecord, run

    result = run(app.topology.plan, [TestRecord(t, k, v, ts, i) for i, (t, k, v, ts) in enumerate(records)])
    sink = Codec(app.topology.plan.source("O"))
    return [(sink.encode_key(r.key), None if r.value is None else sink.encode_value(r.value), r.timestamp)
            for r in result.actual.get("o", [])]


def late_in_memory(app: Any, records: list[tuple[str, Any, Any, int]]) -> int:
    """How many records the pure engine, its stores in memory, found too late."""
    from streamapp.sql.engine import Record
    from streamapp.sql.formats import Codec
    from streamapp.sql.stream_join import StreamJoin

    plan = app.topology.plan
    engine = StreamJoin(plan, plan.queries[0])
    for i, (topic, k, value, timestamp) in enumerate(records):
        codec = Codec(plan.source(topic.upper()))
        engine.process(Record(topic, codec.encode_key(k), None if value is None else codec.encode_value(value),
                              timestamp, 0, i))
    return engine.late


@pytest.mark.parametrize("within", ["WITHIN 1 SECOND", "WITHIN (500 MILLISECONDS, 2 SECONDS) GRACE PERIOD 3 SECONDS",
                                    "WITHIN 2 SECONDS GRACE PERIOD 0 SECONDS"])
@pytest.mark.parametrize("join", ["INNER", "LEFT", "RIGHT", "FULL"])
def test_each_record_joined_against_rocksdb_writes_what_the_test_runner_writes(
        join: str, within: str, tmp_path: Path) -> None:
    from agents.stream_joins import StreamJoinRun

    app = app_of(tmp_path, join, within)
    [joined] = app.topology.stream_joins
    run = StreamJoinRun(app, joined, clock=lambda: 0)  # the test driver's clock, which never moves
    written = feed(run, app, RECORDS)
    assert written == expected(app, RECORDS)
    assert written  # the records join: the comparison is not of two empty lists
    late = late_in_memory(app, RECORDS)
    assert run.engine.late == late and (late > 0) == ("GRACE" in within)  # the same records too late, counted alike


def test_a_restarted_run_joins_what_the_stores_kept_and_forgets_what_the_retention_let_go(tmp_path: Path) -> None:
    """A new run over the same RocksDB (the worker after a restart; Faust restores the same rows from the
    changelogs) picks up the stores and stream time; the stores hold what the retention keeps, not the stream."""
    from agents.stream_joins import StreamJoinRun
    from streamapp.worker.faust_internals import partition_db

    def ticking() -> Any:  # a wall clock a second on at each look: every fetch may look for closed windows
        now = [0]

        def clock() -> int:
            now[0] += 1000
            return now[0]
        return clock

    within = "WITHIN 1 SECOND GRACE PERIOD 1 SECOND"
    app, whole = app_of(tmp_path / "restarted", "LEFT", within), app_of(tmp_path / "whole", "LEFT", within)
    [joined] = app.topology.stream_joins
    first, second = RECORDS[:3], RECORDS[3:]
    written = feed(StreamJoinRun(app, joined, clock=ticking()), app, first)
    after = feed(StreamJoinRun(app, joined, clock=ticking()), app, second, first=len(first))
    assert written + after == feed(StreamJoinRun(whole, whole.topology.stream_joins[0], clock=ticking()), whole, RECORDS)
    assert (b"\x00" * 7 + b"\x01", b'{"A":"a3","B":"b1"}', 1500) in after  # a3 joins b1, stored before it
    run = StreamJoinRun(app, joined, clock=ticking())
    many = [("l", i % 7, {"A": f"x{i}"}, i * 100) for i in range(2000)]
    feed(run, app, many, first=100)
    stores = [partition_db(table, 0) for table in run.tables]
    held = sum(1 for key, _ in stores[0].items() if key[:1] == SEGMENTS)
    assert 0 < held <= 3_000 // 100 * 2  # retention 3 s of records every 100 ms, segments of half a retention
    assert stores[0].property_int_value("rocksdb.num-deletes-active-mem-table") == 0  # a segment goes at once
    markers = sum(f["num_deletions"] for f in stores[2].live_files()) + sum(stores[2].property_int_value(
        f"rocksdb.num-deletes-{m}-mem-table{'s' if m == 'imm' else ''}") for m in ("active", "imm"))
    assert markers <= 3_000 // 100 * 2  # the outer store's closed records' markers, compacted as the windows expire
    assert sum(1 for key, _ in stores[2].items() if key[:1] == b"\x00") <= 3_000 // 100 * 2  # the waiting unmatched ones, closed ones gone


def test_the_changes_of_the_stores_are_handed_over_for_their_changelogs(tmp_path: Path) -> None:
    """What the agent sends to the stores' changelogs, replayed into empty stores (Faust's restore), is the state
    once the stores open: a window store's expired segments are dropped with no changelog record (its changelog
    deletes by time), so the restored stores drop them when they open, before their first record."""
    from agents.stream_joins import RocksState, StreamJoinRun
    from streamapp.worker.faust_internals import partition_db

    app, restored = (app_of(tmp_path / name, "FULL", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND")
                     for name in ("run", "restored"))
    [joined] = app.topology.stream_joins
    run = StreamJoinRun(app, joined, clock=lambda: 0)
    changes: list[Any] = []
    feed(run, app, RECORDS, changes=changes)
    tables = [restored.join_tables.windows[name] for name in joined.stores]
    for table, partition, key, value in changes:
        db = partition_db(restored.join_tables.windows[table.name], partition)
        db.delete(key) if value is None else db.put(key, value)
    windows = {t.name for t in run.tables[:2]}
    assert all(value is not None for table, _, _, value in changes if table.name in windows)  # expiry: none
    dumped = [dict(partition_db(t, 0).items()) for t in tables]
    assert sum(map(len, dumped[:2])) > sum(map(len, _dump(run)[:2]))  # the expired records came back
    RocksState(run.engine, tables, 0, ([], [], []), []).open()  # as at the join's first record after the restore
    assert [dict(partition_db(t, 0).items()) for t in tables] == _dump(run)


def test_the_stores_write_no_write_ahead_log_their_changelog_is_their_durability(tmp_path: Path) -> None:
    """As Kafka Streams' RocksDB stores: the join's writes reach the memtables only, not the WAL files (issue 37)."""
    from agents.stream_joins import StreamJoinRun
    from streamapp.worker.faust_internals import partition_db

    app = app_of(tmp_path, "FULL", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND")
    [joined] = app.topology.stream_joins
    run = StreamJoinRun(app, joined, clock=lambda: 0)
    feed(run, app, RECORDS * 20)
    for table in run.tables:
        assert list(partition_db(table, 0).keys()), table.name  # written to
        wal = sum(f.stat().st_size for f in Path(table.data.partition_path(0)).glob("*.log"))
        assert wal == 0, (table.name, wal)


def test_a_store_of_the_older_layout_is_rewritten_in_segments_when_it_opens(tmp_path: Path) -> None:
    """A window store written before the segments (a record by key, time and offset; a time index before that), on
    disk or restored from its changelog, is rewritten in segments at its next open: the join finds its records."""
    from agents.stream_joins import StreamJoinRun
    from streamapp.worker.faust_internals import partition_db
    from streamapp.worker.window_stores import DATA, INDEX

    within = "WITHIN 1 SECOND GRACE PERIOD 1 SECOND"
    older, newer = app_of(tmp_path / "older", "LEFT", within), app_of(tmp_path / "newer", "LEFT", within)
    runs = [StreamJoinRun(app, app.topology.stream_joins[0], clock=lambda: 0) for app in (older, newer)]
    first, second = RECORDS[:4], RECORDS[4:]
    assert feed(runs[0], older, first) == feed(runs[1], newer, first)
    for table in runs[0].tables[:2]:  # as the layout before wrote them
        db = partition_db(table, 0)
        for key, value in list(db.items(from_key=SEGMENTS)):
            db.put(DATA + key[9:], value)
            db.delete(key)
        db.put(INDEX + b"\x00" * 24, b"")
    for run in runs:  # and the partition assigned again: its next record opens its stores
        run.revoked([0])
    after = feed(runs[0], older, second, first=4)
    assert after == feed(runs[1], newer, second, first=4)
    assert (b"\x00" * 7 + b"\x01", b'{"A":"a3","B":"b1"}', 1500) in after  # a3 joins b1, stored in the older layout
    assert not [k for table in runs[0].tables[:2] for k in partition_db(table, 0).keys() if k[:1] in (DATA, INDEX)]


def test_a_store_reopened_with_another_window_rewrites_its_segments_and_joins_what_it_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A query's WITHIN changed and the worker restarted (the same query name, so the same stores): its segments'
    interval changed with the retention, and the store opened rewrites its records in the new segments (a record of
    2:30 was in segment 2 of an hour, is in segment 1 of two hours), once, with a delete of each old key in the
    changelog: replayed into empty stores (Faust's restore), the changes give the same stores."""
    from agents.stream_joins import RocksState, StreamJoinRun
    from streamapp.worker.faust_internals import open_partition_dbs, partition_db
    from streamapp.worker.window_stores import SEGMENTS_END, stream_times

    hour = 3_600_000
    stored = [("l", 1, {"A": "a1"}, 45 * 60_000), ("l", 2, {"A": "a2"}, 90 * 60_000),
              ("l", 3, {"A": "a3"}, 150 * 60_000)]
    later = [("r", 3, {"B": "b3"}, 3 * hour), ("r", 2, {"B": "b2"}, 190 * 60_000), ("r", 1, {"B": "b1"}, 160 * 60_000)]
    app = app_of(tmp_path / "run", "INNER", "WITHIN 1 HOUR GRACE PERIOD 0 SECONDS")
    changes: list[Any] = []
    assert feed(StreamJoinRun(app, app.topology.stream_joins[0]), app, stored, changes=changes) == []
    for table in app.join_tables.windows.values():  # the worker stopped: its RocksDB closed
        for db in open_partition_dbs(table).values():
            db.close()
    app = app_of(tmp_path / "run", "INNER", "WITHIN 2 HOURS GRACE PERIOD 0 SECONDS")
    run = StreamJoinRun(app, app.topology.stream_joins[0])
    with caplog.at_level("INFO", logger="agents.stream_joins"):
        joined = [out for i in range(3) for out in feed(run, app, later[i:i + 1], first=3 + i, changes=changes)]
    assert joined == expected(app, stored + later) and len(joined) == 3  # b3 (3:00) joins a3 (2:30) too
    assert [r.getMessage() for r in caplog.records if "rewritten" in r.getMessage()] == [
        "Window stores of O, partition 0: 3 records rewritten from segments of 3600000 ms into segments of 7200000 "
        "ms (its WITHIN or GRACE PERIOD changed)"]  # once: the next two fetches keep the stores opened
    left = partition_db(run.tables[0], 0)
    assert stream_times(left)["segment"] == 2 * hour
    assert sorted(int.from_bytes(k[1:9], "big") - 2**63 for k in left.keys(from_key=SEGMENTS) if k < SEGMENTS_END) \
        == [0, 0, 1]  # 0:45 and 1:30 in the first two hours, 2:30 in the next
    restored = app_of(tmp_path / "restored", "INNER", "WITHIN 2 HOURS GRACE PERIOD 0 SECONDS")
    tables = [restored.join_tables.windows[name] for name in run.join.stores]
    for table, partition, key, value in changes:
        db = partition_db(restored.join_tables.windows[table.name], partition)
        db.delete(key) if value is None else db.put(key, value)
    RocksState(run.engine, tables, 0, ([], [], []), []).open()  # as at the join's first record after the restore
    assert [dict(partition_db(t, 0).items()) for t in tables] == _dump(run)


def test_a_partition_s_stores_are_opened_once_an_assignment_and_again_after_a_revoke_or_a_dropped_transaction(
        tmp_path: Path) -> None:
    """What a partition's first record does (the stores made what this run reads: an older layout rewritten, expired
    segments dropped) runs once while the partition stays assigned, not at each fetch: a record of the older layout
    put in RocksDB behind the join's back stays there through the next fetches, and is rewritten at the first record
    after the partition is revoked and at the first after a dropped transaction (RocksDB changed under the state)."""
    from agents.stream_joins import StreamJoinRun
    from streamapp.worker.faust_internals import partition_db
    from streamapp.worker.window_stores import DATA

    path = tmp_path / "joins.sql"
    path.write_text(STREAMS.format(key="L.ID", join="LEFT", within="WITHIN 1 SECOND GRACE PERIOD 1 SECOND"),
                    encoding="utf-8")
    app = create_app_of(path, tmp_path, "exactly_once")
    run = StreamJoinRun(app, app.topology.stream_joins[0], clock=lambda: 0)
    left = partition_db(run.tables[0], 0)
    older = DATA + len(b"7").to_bytes(4, "big") + b"7" + (9_500 + 2**63).to_bytes(8, "big") + bytes(8)

    def older_left() -> bool:
        return left.get(older) is not None

    feed(run, app, RECORDS[:4])
    left.put(older, left[next(k for k in left.keys(from_key=SEGMENTS))])
    feed(run, app, RECORDS[4:8], first=4)  # four fetches: l, r, l, r
    assert older_left()  # not opened again
    run.revoked([0])
    feed(run, app, RECORDS[8:9], first=8)
    assert not older_left()  # opened at the next assignment's first record: rewritten in its segment
    run.ended(0, True)
    left.put(older, left[next(k for k in left.keys(from_key=SEGMENTS))])
    feed(run, app, RECORDS[9:10], first=9)
    assert older_left()
    run.ended(0, False)
    feed(run, app, RECORDS[9:10], first=9)
    assert not older_left()


def create_app_of(path: Path, tmp_path: Path, guarantee: str) -> Any:
    from streamapp.worker.app import create_app

    return create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data"), processing_guarantee=guarantee))


def _accepted_r1_cases() -> list[Path]:
    """ksqlDB's stream-stream cases (ring R1) whose plan the worker accepts: one stream-stream join, nothing else
    (either side re-keyed or not)."""
    from streamapp.sql.planner import plan_file
    from streamapp.sql.topology import worker_refusal

    qtt = Path(__file__).parent / "qtt"
    cases = []
    for case in sorted(d for d in qtt.iterdir() if (d / "case.json").exists()):
        about = json.loads((case / "case.json").read_text(encoding="utf-8"))
        if about["ring"] != "R1" or about["expected_exception"] is not None:
            continue
        plan = plan_file(case / "statements.sql", about["properties"])
        if worker_refusal(plan) is None and len(plan.queries) == 1:
            cases.append(case)
    return cases


def through_the_worker(app: Any, records: list[Any]) -> tuple[list[Any], list[Any], Any, Any]:
    """(what the worker writes, what the pure engine writes, the run, the engine) for ``records`` (the engine's, of
    the declared topics) of the app's one stream-stream join, each record a fetch.  A topic the worker re-keys goes
    through the stream agent's re-keys (:class:`~streamapp.sql.topology.Rekeyer`) into their repartition topics'
    records first; the join reads those."""
    from aiokafka.structs import ConsumerRecord

    from agents.stream_joins import StreamJoinRun
    from agents.streams import StreamReader
    from streamapp.sql.stream_join import StreamJoin
    from streamapp.sql.topology import Rekeyer

    joins = app.topology
    [joined] = joins.stream_joins
    run = StreamJoinRun(app, joined, clock=lambda: 0)
    engine = StreamJoin(joins.declared, joins.declared.queries[-1])
    worker, pure = [], []
    for offset, record in enumerate(records):
        msg = ConsumerRecord(record.topic, 0, offset, record.timestamp, 0, record.key, record.value, None, 0, 0, [])
        fed = [(record.topic, msg)]
        rekeys = [r for r in joins.rekeys if r.stream == record.topic]
        if rekeys:  # the stream agent's re-keys, then the join reads their repartition topics
            assert record.topic not in run.engine_topic  # one agent reads a topic
            fed = []
            for rekey in rekeys:  # each read as its stream declares the topic's records
                row = StreamReader(rekey.declared, False).row(msg)
                fed.append((rekey.topic, ConsumerRecord(rekey.topic, 0, offset, row[1], 0,
                                                        *Rekeyer(rekey).rekey(row, 0, offset), None, 0, 0, [])))
        for topic, fed_msg in fed:
            worker += [(key, value, ts) for _, key, value, ts in run.process(topic, 0, fed_msg)]
            run.stored()  # a record a fetch: the state goes through RocksDB between every two
        pure += [(o.record.key, o.record.value, o.record.timestamp)
                 for o in engine.process(record._replace(offset=offset))]
    return worker, pure, run, engine


@pytest.mark.parametrize("case", _accepted_r1_cases(), ids=lambda d: d.name)
def test_each_ksqldb_case_the_worker_accepts_is_joined_against_rocksdb_as_the_engine_joins_it(
        case: Path, tmp_path: Path) -> None:
    """The inputs of ksqlDB's case, through the agent's join and its RocksDB stores, write what the pure engine
    writes (which tests/test_qtt.py holds to ksqlDB's outputs).  A side the join re-keys goes through the stream
    agent's re-key into its repartition topic's record first."""
    from streamapp.sql.runner import encode_inputs, read_records
    from streamapp.worker.app import create_app

    app = create_app(Settings(statements=str(case / "statements.sql"), data_dir=str(tmp_path / "data")))
    declared = app.topology.declared
    records = encode_inputs(declared, read_records(case / "input.json", "inputs"), "input")
    assert records
    assert bool(app.topology.rekeys) == (declared.queries[0].repartition or declared.queries[0].repartition_right)
    worker, pure, run, engine = through_the_worker(app, records)
    assert worker == pure and run.engine.late == engine.late


SELF = """
CREATE STREAM S (ID BIGINT KEY, A STRING, B STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
CREATE STREAM T (ID BIGINT KEY, A STRING, B STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
CREATE STREAM U (ID BIGINT KEY, B STRING) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');
"""


@pytest.mark.parametrize("query, rekeyed", [
    ("SELECT S.ID, S.A, T.B AS TB FROM S JOIN T WITHIN 1 SECOND ON S.ID = T.ID", 0),  # one agent feeds both sides
    ("SELECT S.ID, S.A, T.B AS TB FROM S RIGHT JOIN T WITHIN 2 SECONDS GRACE PERIOD 1 SECOND ON S.ID = T.ID", 0),
    ("SELECT S.A, S.ID AS SID, T.B AS TB FROM S LEFT JOIN T WITHIN 1 SECOND GRACE PERIOD 1 SECOND ON S.A = T.B", 2),
    ("SELECT ROWKEY AS K, S.A, T.B AS TB FROM S FULL JOIN T WITHIN 1 SECOND ON S.A = T.B", 2),
    ("SELECT S.ID, S.A, T.B AS TB FROM S JOIN T WITHIN 1 SECOND ON S.ID = T.ID + 1", 2),  # S too: one agent a topic
    ("SELECT S.A, S.ID AS SID, U.B AS UB FROM S JOIN U WITHIN 1 SECOND ON S.A = U.B", 2),  # U: other columns
])
def test_a_self_join_of_two_streams_over_one_topic_is_joined_as_the_engine_joins_it(
        query: str, rekeyed: int, tmp_path: Path) -> None:
    from streamapp.sql.runner import TestRecord, encode_inputs
    from streamapp.worker.app import create_app

    path = tmp_path / "self.sql"
    path.write_text(SELF + f"CREATE STREAM O AS {query};", encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data")))
    assert len(app.topology.rekeys) == rekeyed
    values = [(1, "x", "y", 1000), (2, "y", "x", 1500), (1, "z", "x", 1800), (2, "x", "z", 2100), (3, "x", "z", 9000),
              (1, "y", "q", 9500), (4, None, "y", 9600), (2, "q", "x", 20_000)]
    records = encode_inputs(app.topology.declared, [TestRecord("s", k, {"A": a, "B": b}, ts, i)
                                                    for i, (k, a, b, ts) in enumerate(values)], "input")
    worker, pure, _, _ = through_the_worker(app, records)
    assert worker == pure and len(worker) >= 3


def _dump(run: Any) -> list[dict[bytes, bytes]]:
    from streamapp.worker.faust_internals import partition_db

    return [dict(partition_db(table, 0).items()) for table in run.tables]


def test_a_journal_puts_back_each_key_as_it_was_before_its_first_write_of_several(tmp_path: Path) -> None:
    """A journal keeps every write's value before it, in order (one append a write): put back last first, a key
    written twice (added then deleted, deleted then added, put twice) ends as before the first, and one written once
    too; the changelog's changes are the writes, in order, a table's apart."""
    from agents.stream_joins import Journaled, put_back
    from streamapp.worker.faust_internals import partition_db

    app = app_of(tmp_path, "LEFT", "WITHIN 1 SECOND")
    tables = [app.join_tables.windows[name] for name in app.topology.stream_joins[0].stores]
    db = partition_db(tables[0], 0)
    for key in (b"deleted", b"put", b"kept"):
        db.put(key, b"before")
    journal: list[Any] = []
    changes: list[Any] = []
    writes = Journaled(tables[0], 0, changes, journal)
    other = Journaled(tables[2], 0, [], journal)
    writes.add(b"new", b"1")
    writes.delete(b"new", b"1")
    writes.delete(b"deleted", b"before")
    writes.add(b"deleted", b"2")
    writes.put(b"put", b"3")
    writes.put(b"put", b"4")
    other.add(b"new", b"5")
    assert dict(db.items()) == {b"deleted": b"2", b"put": b"4", b"kept": b"before"}
    assert [(key, value) for _, _, key, value in changes] == [
        (b"new", b"1"), (b"new", None), (b"deleted", None), (b"deleted", b"2"), (b"put", b"3"), (b"put", b"4")]
    assert put_back(journal) == 4 and journal == []  # keys, by table: new twice, deleted, put
    assert dict(db.items()) == {b"deleted": b"before", b"put": b"before", b"kept": b"before"}
    assert dict(partition_db(tables[2], 0).items()) == {}


def test_a_record_whose_output_is_refused_leaves_no_state_behind(tmp_path: Path) -> None:
    """The agent's size check refuses a record after the join wrote its state: undone, the stores, the changes for
    the changelogs and the stream times are as before it, and the records after it join as if it never came."""
    from aiokafka.structs import ConsumerRecord

    from agents.stream_joins import StreamJoinRun
    from streamapp.sql.formats import Codec

    app, alone = app_of(tmp_path / "refused", "LEFT", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND"), \
        app_of(tmp_path / "never", "LEFT", "WITHIN 1 SECOND GRACE PERIOD 1 SECOND")
    run = StreamJoinRun(app, app.topology.stream_joins[0], clock=lambda: 0)
    feed(run, app, RECORDS[:4])
    before, changes = _dump(run), list(run.changes)
    codec = Codec(app.topology.source_at("r"))  # joins a2 (9000) and moves stream time on
    msg = ConsumerRecord("r", 0, 99, 9200, 0, codec.encode_key(2), codec.encode_value({"B": "x" * 100}), None, 0,
                         0, [])
    mark = run.mark(0)
    assert run.process("r", 0, msg)  # its join wrote its state, then joined
    assert _dump(run) != before and run.changes != changes
    run.undo(0, mark)  # what the agent does when a check refuses one of its outputs
    assert _dump(run) == before and run.changes == changes
    rest = feed(run, app, RECORDS[4:], first=4)
    whole = StreamJoinRun(alone, alone.topology.stream_joins[0], clock=lambda: 0)
    assert feed(whole, alone, RECORDS[:4]) + feed(whole, alone, RECORDS[4:], first=4) == expected(app, RECORDS)
    assert rest == expected(app, RECORDS)[len(expected(app, RECORDS[:4])):] and _dump(run) == _dump(whole)


def test_a_window_store_knows_each_segment_s_join_keys_and_forgets_them_with_the_segment(tmp_path: Path) -> None:
    """A fetch scans a segment only where its key may be (:attr:`RocksWindow.keys`, a filter kept in memory): each key
    RocksDB holds passes its segment's, through a stream of many windows (bounded: a dropped segment's goes with it),
    and after a record that dropped a segment is undone (RocksDB put back), a later record joins that segment's."""
    from aiokafka.structs import ConsumerRecord

    from agents.stream_joins import StreamJoinRun
    from streamapp.sql.formats import Codec
    from streamapp.worker.faust_internals import partition_db
    from streamapp.worker.window_stores import KEY_BITS_MIN, SEGMENTS_END

    within = "WITHIN 1 SECOND GRACE PERIOD 1 SECOND"  # retention 3 s: segments of 1.5 s
    app, whole = app_of(tmp_path / "undone", "LEFT", within), app_of(tmp_path / "whole", "LEFT", within)
    run = StreamJoinRun(app, app.topology.stream_joins[0], clock=lambda: 0)
    many = [("l" if i % 3 else "r", i % 7, {"A": f"x{i}"} if i % 3 else {"B": f"y{i}"}, i * 100) for i in range(300)]
    feed(run, app, many)
    for table, store in zip(run.tables, run._states[0].stores.values()):
        held: dict[int, set[bytes]] = {}
        for k in partition_db(table, 0).keys(from_key=SEGMENTS):
            if k < SEGMENTS_END:
                held.setdefault(int.from_bytes(k[1:9], "big") - 2**63, set()).add(k[9:-16])
        assert set(store.keys) == set(held) and len(held) <= 3  # a retention's segments and the one being written
        assert all(store.may_hold(segment, key) for segment, keys in held.items() for key in keys)
        never = [len(str(n)).to_bytes(4, "big") + str(n).encode() for n in range(100, 1100)]  # keys never written
        for segment in held:  # the filter turns them away (bytes' hashes vary by process: not one by one)
            assert sum(store.may_hold(segment, key) for key in never) < 100
        assert {len(bits) for bits in store.keys.values()} == {KEY_BITS_MIN // 8}  # a quiet store's: 1 KiB, not 128

    run, never = (StreamJoinRun(a, a.topology.stream_joins[0], clock=lambda: 0) for a in (app, whole))
    run.revoked([0])
    first = [("l", 1, {"A": "a1"}, 31_000), ("l", 2, {"A": "a2"}, 31_600)]  # segments 20 and 21
    later = [("r", 1, {"B": "b1"}, 31_500)]  # joins a1, in the segment the undone record dropped
    feed(run, app, first, first=400)
    codec = Codec(app.topology.source_at("l"))
    mark = run.mark(0)
    run.process("l", 0, ConsumerRecord("l", 0, 402, 34_600, 0, codec.encode_key(3), codec.encode_value({"A": "a3"}),
                                       None, 0, 0, []))  # stream time 34.6 s: segment 20 (30-31.5 s) expires
    run.undo(0, mark)  # its output refused
    joined = feed(run, app, later, first=403)
    assert joined == feed(never, whole, first + later, first=400)[-1:] and b'"B":"b1"' in joined[0][1]


def test_under_exactly_once_a_dropped_transaction_puts_the_stores_back_as_its_changelog_has_them(
        tmp_path: Path) -> None:
    """A committed transaction's writes stay; a dropped one's are put back (RocksDB equals the changelog, which only
    has the committed ones: read_committed), and its records, read again, write what they wrote the first time."""
    from agents.stream_joins import StreamJoinRun, transaction_groups
    from streamapp.worker.app import create_app

    path = tmp_path / "joins.sql"
    path.write_text(STREAMS.format(key="ROWKEY AS ID", join="FULL", within="WITHIN 1 SECOND GRACE PERIOD 1 SECOND"),
                    encoding="utf-8")
    app = create_app(Settings(statements=str(path), data_dir=str(tmp_path / "data"),
                              processing_guarantee="exactly_once"))  # no longer refused
    assert app.transactions["l"] is app.transactions["r"]  # partition p of both sides: one transaction
    assert app.transactions["l"].topics == ("l", "r") and transaction_groups(
        [StreamJoinRun(app, app.topology.stream_joins[0])]) == [("l", "r")]
    run = StreamJoinRun(app, app.topology.stream_joins[0], clock=lambda: 0)
    committed = feed(run, app, RECORDS[:6])
    run.ended(0, True)
    kept = _dump(run)
    dropped = feed(run, app, RECORDS[6:], first=6)
    assert _dump(run) != kept
    run.ended(0, False)  # aborted or fenced
    assert _dump(run) == kept
    again = feed(run, app, RECORDS[6:], first=6)
    assert again == dropped and committed + again == expected(app, RECORDS)


@pytest.mark.parametrize("undone", ["refused", "dropped"])
def test_a_waiting_record_an_undone_record_matched_is_taken_out_by_the_next_match(undone: str, tmp_path: Path) -> None:
    """The outer store's waiting records are known in memory from fetch to fetch (a match looks in RocksDB only where
    one waits): a record undone (its output refused, or its transaction dropped) puts back the waiting record it
    matched, and the next record that matches it takes it out of RocksDB, as in a run where nothing was undone."""
    from aiokafka.structs import ConsumerRecord

    from agents.stream_joins import StreamJoinRun
    from streamapp.sql.formats import Codec
    from streamapp.worker.app import create_app

    def app_in(name: str) -> Any:
        (tmp_path / name).mkdir()
        path = tmp_path / name / "joins.sql"
        path.write_text(STREAMS.format(key="L.ID", join="LEFT", within="WITHIN 1 SECOND GRACE PERIOD 1 SECOND"),
                        encoding="utf-8")
        guarantee = "exactly_once" if undone == "dropped" else "at_least_once"
        return create_app(Settings(statements=str(path), data_dir=str(tmp_path / name / "data"),
                                   processing_guarantee=guarantee))

    records = [("l", 1, {"A": "a1"}, 1000), ("r", 5, {"B": "b5"}, 1100), ("r", 1, {"B": "b1"}, 1500),
               ("l", 9, {"A": "a9"}, 10_000)]  # a1 waits; b1 matches it; a9 closes its window
    app, whole = app_in("undone"), app_in("whole")
    run = StreamJoinRun(app, app.topology.stream_joins[0], clock=lambda: 0)
    written = feed(run, app, records[:1])
    if undone == "refused":  # in a fetch whose state is open
        codec = Codec(app.topology.source_at("r"))
        msg = [ConsumerRecord("r", 0, offset, ts, 0, codec.encode_key(k), codec.encode_value(v), None, 0, 0, [])
               for offset, (_, k, v, ts) in enumerate(records[1:3], 1)]
        assert not run.process("r", 0, msg[0])
        run.keep(0)
        mark = run.mark(0)
        assert run.process("r", 0, msg[1])  # it matched the waiting a1, which left the outer store
        run.undo(0, mark)  # refused
        written += feed(run, app, records[2:], first=2)
    else:
        run.ended(0, True)
        assert feed(run, app, records[1:3], first=1)
        run.ended(0, False)  # its records are read again
        written += feed(run, app, records[1:], first=1)
    never = StreamJoinRun(whole, whole.topology.stream_joins[0], clock=lambda: 0)
    assert written == feed(never, whole, records) == expected(app, records)
    assert _dump(run) == _dump(never)  # a1 is out of the outer store: matched, never to be written unjoined


def test_late_records_are_counted_per_topic_and_partition_in_stats_and_the_log_line() -> None:
    from streamapp.worker.counters import Counters, summary_line

    counters = Counters()
    counters.record_late("shipments", 4, 2)
    counters.record_late("shipments", 1)
    snap = counters.snapshot()
    assert snap["late"] == {"shipments": {"1": 1, "4": 2}} and snap["totals"]["late"] == {"shipments": 3}
    assert summary_line(snap).endswith("shipments 3 too late for the join window (dropped)")


def test_a_segment_filter_has_32_bits_a_record_of_the_fullest_segment_from_1_to_128_kib() -> None:
    from streamapp.worker.window_stores import KEY_BITS, KEY_BITS_MIN, _filter_size

    assert [_filter_size(n) for n in (0, 1, 256, 257, 1000, 20_000, 10**9)] == [
        KEY_BITS_MIN, KEY_BITS_MIN, KEY_BITS_MIN, 2 * KEY_BITS_MIN, 32_768, KEY_BITS, KEY_BITS]
