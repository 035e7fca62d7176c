"""A declared windowed stream-stream join, run by an agent per side's topic (issue 37, ring R1).

Thin: what a record writes is the pure engine's (:class:`streamapp.sql.stream_join.StreamJoin`), handed the
state of the record's partition held in RocksDB (:class:`RocksState`): both topics are co-partitioned, so a
key's records of both sides meet in one partition, as in a Kafka Streams task.  A side's window store keeps a
record under its key bytes, big-endian time and offset (a key's records of a time range are one range scan),
and a time index by which what the retention let go is deleted as stream time moves; every write goes to the
store's changelog too, which Faust restores from.  See docs/explanation/worker-internals.md#stream-stream-joins.
"""
from __future__ import annotations

import json
import pickle
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import faust
from faust.types import TP

from streamapp.partitioners.sticky import NullKeyPartitions
from streamapp.sql import plan as p
from streamapp.sql.engine import Record as EngineRecord
from streamapp.sql.engine import Row
from streamapp.sql.stream_join import JoinState, StreamJoin, store_key
from streamapp.sql.topology import StreamStreamJoin
from streamapp.worker.app import StreamappApp
from streamapp.worker.faust_internals import partition_db
from streamapp.worker.transport import Handler, Record

from .dead_lettering import DeadLettering, OutputChecks

#: A window store's keys: a record by (key, time, offset); the time index by (time, key, offset); the partition's
#: stream times (in the left side's table).  The outer store's: a record by (time, side, key, offset).  Faust keeps
#: its changelog offset in each database too, under a key of its own (``__faust...``), after these.
_DATA, _INDEX, _META = b"\x00", b"\x01", b"\x02"
#: One change of a store, for its changelog: (table, partition, key, value or None for a delete).
Change = tuple[faust.Table, int, bytes, bytes | None]
#: What a record writes: (output, key, value, timestamp) per joined record.
Written = list[tuple[str, bytes | None, bytes | None, int]]


def _time(timestamp: int) -> bytes:
    """A time as 8 bytes that sort as the times do (negative ones too)."""
    return (timestamp + 2**63).to_bytes(8, "big")


def _seq(seq: int) -> bytes:
    return (seq % 2**64).to_bytes(8, "big")


def _sized(key: bytes) -> bytes:
    return len(key).to_bytes(4, "big") + key


def _scan(db: Any, start: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The items of ``db`` with ``start <= key < end``, in key order."""
    for key, value in db.items(from_key=start):
        if key >= end:
            return
        yield key, value


class _Writes:
    """The direct writes of a partition's state to RocksDB, each also kept for the store's changelog."""

    def __init__(self, table: faust.Table, partition: int, changes: list[Change]) -> None:
        self.table, self.partition, self.changes = table, partition, changes
        self.db = partition_db(table, partition)

    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self.changes.append((self.table, self.partition, key, value))

    def delete(self, key: bytes) -> None:
        self.db.delete(key)
        self.changes.append((self.table, self.partition, key, None))


class RocksWindow:
    """One side's window store of one partition in RocksDB (:class:`~streamapp.sql.stream_join.WindowStore`).

    As the in-memory store: a fetch sees nothing older than the store's stream time less the retention; what
    expired is deleted once stream time moved half a retention (Kafka Streams drops a segment at a time).
    """

    def __init__(self, writes: _Writes, retention: int, observed: int, swept: int) -> None:
        self.writes, self.retention, self.observed, self.swept = writes, retention, observed, swept

    def put(self, key: Any, timestamp: int, row: Row, seq: int) -> bool:
        self.observed = max(self.observed, timestamp)
        oldest = self.observed - self.retention + 1
        if timestamp < oldest:
            return False
        if self.observed - self.swept >= max(self.retention // 2, 1):
            self.swept = self.observed
            self.expire(oldest)
        kb = _sized(store_key(key))
        self.writes.put(_DATA + kb + _time(timestamp) + _seq(seq), pickle.dumps(row, protocol=5))
        self.writes.put(_INDEX + _time(timestamp) + kb + _seq(seq), b"1")
        return True

    def fetch(self, key: Any, start: int, end: int) -> list[tuple[int, Row]]:
        start = max(start, self.observed - self.retention + 1)
        if start > end:
            return []
        prefix = _DATA + _sized(store_key(key))
        return [(int.from_bytes(k[-16:-8], "big") - 2**63, pickle.loads(v))
                for k, v in _scan(self.writes.db, prefix + _time(start), prefix + _time(end + 1))]

    def expire(self, oldest: int) -> int:
        """Delete the records older than ``oldest``; how many."""
        gone = [k for k, _ in _scan(self.writes.db, _INDEX, _INDEX + _time(oldest))]
        for k in gone:
            self.writes.delete(k)
            self.writes.delete(_DATA + k[9:-8] + k[1:9] + k[-8:])
        return len(gone)

    def __len__(self) -> int:
        return sum(1 for _ in _scan(self.writes.db, _DATA, _INDEX))


class RocksOuter:
    """The outer store of one partition in RocksDB (:class:`~streamapp.sql.stream_join.OuterStore`): a record
    by (time, this side?, key, offset); its entries in the engine's order (the key's output bytes break ties)."""

    def __init__(self, writes: _Writes, order: Any) -> None:
        self.writes, self._order = writes, order

    @staticmethod
    def _prefix(timestamp: int, this_is_left: bool, key: Any) -> bytes:
        return _DATA + _time(timestamp) + (b"\x01" if this_is_left else b"\x00") + _sized(store_key(key))

    def add(self, timestamp: int, this_is_left: bool, key: Any, row: Row, seq: int) -> None:
        self.writes.put(self._prefix(timestamp, this_is_left, key) + _seq(seq), pickle.dumps((key, row), protocol=5))

    def discard(self, timestamp: int, this_is_left: bool, key: Any) -> None:
        self.pop((timestamp, this_is_left, self._prefix(timestamp, this_is_left, key)))

    def entries(self) -> list[tuple[int, bool, Any]]:
        firsts: dict[bytes, Any] = {}
        for k, v in _scan(self.writes.db, _DATA, _INDEX):  # not Faust's own keys (its changelog offset)
            firsts.setdefault(k[:-8], v)
        entries = [(int.from_bytes(k[1:9], "big") - 2**63, k[9] == 1, k) for k in firsts]
        return sorted(entries, key=lambda e: (e[0], e[1], self._order(pickle.loads(firsts[e[2]])[0]) or b""))

    def pop(self, entry: tuple[int, bool, Any]) -> list[tuple[Any, Row]]:
        prefix = entry[2]
        found = list(_scan(self.writes.db, prefix, prefix + b"\xff" * 9))
        for k, _ in found:
            self.writes.delete(k)
        return [pickle.loads(v) for _, v in found]


class RocksState(JoinState):
    """One partition's join state in RocksDB: its stream times are read at the start of a fetch and kept at its end
    (:meth:`save`)."""

    def __init__(self, engine: StreamJoin, tables: Sequence[faust.Table], partition: int, changes: list[Change]):
        left, right, outer = (_Writes(t, partition, changes) for t in tables)
        meta = left.db.get(_META)
        saved = json.loads(meta) if meta is not None else {}
        retention = engine.window.retention
        stores = {side: RocksWindow(writes, retention, *saved.get(side, (-1, -1)))
                  for side, writes in ((p.LEFT_SIDE, left), (p.RIGHT_SIDE, right))}
        super().__init__(stores, RocksOuter(outer, engine.sink_codec.encode_key) if engine.has_outer else None,  # type: ignore[arg-type]
                         saved.get("stream_time", -1))
        if meta is not None:
            self.min_time = 0  # restored: unknown, the first look finds it
        self._meta, self._saved = left, meta

    def save(self) -> None:
        stores = self.stores
        meta = json.dumps({"stream_time": self.stream_time, **{side: [s.observed, s.swept]  # type: ignore[attr-defined]
                                                               for side, s in stores.items()}}).encode()
        if meta != self._saved:
            self._meta.put(_META, meta)
            self._saved = meta


def _wall_clock() -> int:
    return int(time.monotonic() * 1000)


class StreamJoinRun:
    """One declared stream-stream join in the worker: the engine, fed each side's records in their partition's
    state (one :class:`RocksState` per partition a fetch touches)."""

    def __init__(self, app: StreamappApp, join: StreamStreamJoin, clock: Callable[[], int] = _wall_clock) -> None:
        self.join, self.output = join, join.output
        self.engine = StreamJoin(app.topology.plan, join.query, clock=clock)
        self.tables = [app.join_tables.windows[name] for name in join.stores]
        #: The topic the engine knows each side's records by (the worker may read them under another name).
        self.engine_topic = {join.source_topic: self.engine.left.source.topic,
                             join.right_topic: self.engine.right.source.topic}
        self._states: dict[int, RocksState] = {}
        #: Each partition's oldest waiting time and next look for closed windows, kept from fetch to fetch.
        self._looks: dict[int, tuple[int, int]] = {}
        #: This fetch's changes of the stores, for their changelogs.
        self.changes: list[Change] = []

    def process(self, topic: str, partition: int, msg: Record) -> Written:
        """What a record of ``topic`` writes (RecordError when the engine cannot read it); the stores are updated."""
        state = self._states.get(partition)
        if state is None:
            state = self._states[partition] = RocksState(self.engine, self.tables, partition, self.changes)
            state.min_time, state.next_emit = self._looks.get(partition, (state.min_time, state.next_emit))
        self.engine.state = state
        outputs = self.engine.process(EngineRecord(self.engine_topic[topic], msg.key, msg.value, msg.timestamp,
                                                   partition, msg.offset))
        return [(self.output, o.record.key, o.record.value, o.record.timestamp) for o in outputs]

    def revoked(self, partitions: Iterable[int]) -> None:
        """The partitions went to another worker: what this one knew of their waiting records may be stale."""
        for partition in partitions:
            self._looks.pop(partition, None)

    def stored(self) -> list[Change]:
        """The fetch is done: each partition's stream times kept; its changes handed over (and forgotten here)."""
        for partition, state in self._states.items():
            state.save()
            self._looks[partition] = state.min_time, state.next_emit
        self._states.clear()
        changes, self.changes = self.changes, []
        return changes


def runs_of(app: StreamappApp) -> list[StreamJoinRun]:
    return [StreamJoinRun(app, join) for join in app.topology.stream_joins]


def install_topic(app: StreamappApp, dead_letters: DeadLettering, topic: str, runs: Sequence[StreamJoinRun]) -> None:
    """The agent of one side's topic: each stream-stream join it is a side of."""
    counters, null_keys = app.counters, NullKeyPartitions()
    mine = [run for run in runs if topic in run.engine_topic]
    changelogs = {id(t): t.changelog_topic.get_topic_name() for run in mine for t in run.tables}

    async def handle(batches: Mapping[TP, Sequence[Record]]) -> None:
        checks = OutputChecks(await dead_letters.size_limits(), [run.output for run in mine],
                              int(time.time() * 1000))
        sender = dead_letters.sender()

        def check(partition: int, msg: Record) -> tuple[Written, int]:
            written: Written = []
            late = 0
            for run in mine:
                before = run.engine.late
                for output, key, value, timestamp in run.process(topic, partition, msg):
                    checks.check_size(output, key, value, "joined record")
                    written.append((output, key, value, timestamp))
                late += run.engine.late - before
            return written, late

        def changelog(changes: list[Change]) -> None:
            now = int(time.time() * 1000)
            for table, partition, key, value in changes:
                sender.add_to(changelogs[id(table)], partition, key, value, now)

        def write(partition: int, msg: Record, checked: tuple[Written, int]) -> None:
            written, late = checked
            counters.record_read(topic, partition)
            if late:
                counters.record_late(topic, partition, late)
            for output, key, value, timestamp in written:
                if key is None:  # an outer side's null key: the producer's choice, as for a stream-table join
                    where = null_keys.partition(output, app.partition_counts[output], len(value or b""))
                    sender.add_to(output, where, None, value, timestamp, msg)
                else:
                    sender.add(output, key, value, timestamp, msg)
            for run in mine:  # the stores' changes go out with the outputs, before the offsets are acked
                changelog(run.changes)
                run.changes.clear()

        try:
            await dead_letters.handle(batches, check, write, sender)
        finally:
            sender = dead_letters.sender()
            for run in mine:
                changelog(run.stored())
            await sender.send()

    app.batch_agent(app.join_tables.topics[topic])(Handler(handle, event_time=_event_time(mine, topic)))


def _event_time(runs: Sequence[StreamJoinRun], topic: str) -> Any:
    reader = next(run.engine.left if run.join.source_topic == topic else run.engine.right for run in runs)

    def event_time(msg: Record) -> int:
        try:
            _, row = reader.read(msg.key, msg.value, msg.timestamp)
        except Exception:  # noqa: BLE001 - dead-lettered anyway; its place does not matter
            return msg.timestamp
        return msg.timestamp if row is None else row[1]
    return event_time


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    runs = runs_of(app)
    for topic in app.topology.stream_join_topics:
        install_topic(app, dead_letters, topic, runs)

    async def on_revoked(sender: Any, revoked: Iterable[Any], **kwargs: Any) -> None:
        for run in runs:
            run.revoked(tp.partition for tp in revoked if tp.topic in run.engine_topic)

    if runs:
        app.on_partitions_revoked.connect(on_revoked, weak=False)
