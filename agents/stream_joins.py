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
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

import faust
from faust.types import TP

from streamapp.partitioners.sticky import NullKeyPartitions
from streamapp.sql import plan as p
from streamapp.sql.engine import Record as EngineRecord
from streamapp.sql.stream_join import JoinState, StreamJoin
from streamapp.sql.topology import StreamStreamJoin
from streamapp.worker.app import StreamappApp
from streamapp.worker.transport import Handler, Record
from streamapp.worker.window_stores import META, Change, RocksOuter, RocksWindow, Writes

from .dead_lettering import DeadLettering, OutputChecks

#: What a record writes: (output, key, value, timestamp) per joined record.
Written = list[tuple[str, bytes | None, bytes | None, int]]


class RocksState(JoinState):
    """One partition's join state in RocksDB: its stream times are read at the start of a fetch and kept at its end
    (:meth:`save`)."""

    def __init__(self, engine: StreamJoin, tables: Sequence[faust.Table], partition: int, changes: list[Change]):
        left, right, outer = (Writes(t, partition, changes) for t in tables)
        meta = left.db.get(META)
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
            self._meta.put(META, meta)
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
        last = next((messages[-1] for messages in reversed(list(batches.values())) if messages), None)

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
                counters.record_written(output, partition)
            for run in mine:  # the stores' changes go out with the outputs, before the offsets are acked
                changelog(run.changes)
                run.changes.clear()
                if msg is last:  # and the stream times in the same send: a second one waits for the broker
                    changelog(run.stored())

        try:
            await dead_letters.handle(batches, check, write, sender)
        finally:
            left = [change for run in mine for change in run.stored()]  # the last record was dead-lettered
            if left:
                sender = dead_letters.sender()
                changelog(left)
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
