"""A declared windowed stream-stream join, run by one agent for both sides' topics (issue 37, ring R1).

Thin: what a record writes is the pure engine's (:class:`streamapp.sql.stream_join.StreamJoin`), handed the
state of the record's partition held in RocksDB (:class:`RocksState`): both topics are co-partitioned, so a
key's records of both sides meet in one partition, as in a Kafka Streams task.  A side's window store keeps a
record by segment (half the retention), key bytes, big-endian time and offset
(:mod:`streamapp.worker.window_stores`); an expired segment is dropped whole; every write goes to the store's
changelog too, which Faust restores from.  A record whose outputs are refused leaves no state behind,
and under exactly_once partition p of both sides shares one transaction (outputs, changelogs, both offsets):
a dropped one's RocksDB writes are put back.  See docs/explanation/worker-internals.md#stream-stream-joins.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import faust
from faust.types import TP

from streamapp.partitioners.sticky import NullKeyPartitions
from streamapp.sql import plan as p
from streamapp.sql.engine import Record
from streamapp.sql.stream_join import JoinState, StreamJoin
from streamapp.sql.topology import StreamStreamJoin
from streamapp.worker.app import StreamappApp
from streamapp.worker.faust_internals import partition_db
from streamapp.worker.batch_sender import BatchSender
from streamapp.worker.transactions import OpenTransaction, Transactions, in_transactions
from streamapp.worker.transactions import install as transactions_install
from streamapp.worker.transport import ConsumerRecord, Handler, InOrder
from streamapp.worker.window_stores import (META, Change, RocksOuter, RocksWindow, Writes, key_bytes_of,
                                            read_stream_times, stream_times_value)

from .dead_lettering import DeadLettering, OutputChecks

logger = logging.getLogger(__name__)

#: Most records of a handler call: a windowed join's record costs a few hundred microseconds, and the event loop
#: (heartbeats, the web views) runs between calls.
JOIN_CALL_SIZE = 512
#: What a record writes: (output, key, value, timestamp) per joined record.
Written = list[tuple[str, bytes | None, bytes | None, int]]
#: Each write's key and its value before it (None: it had none), in write order: (table, partition, key, value).
#: A list, not a dict by key: one append a write, where a key's first write is rarely its second (each record's
#: keys hold its offset); :func:`put_back` undoes the writes last first, so each key ends as before its first.
Journal = list[tuple[faust.Table, int, bytes, bytes | None]]


class Journaled(Writes):
    """:class:`Writes` that keep each key's value before each write (:func:`put_back` restores them)."""

    def __init__(self, table: faust.Table, partition: int, changes: list[Change], journal: Journal) -> None:
        super().__init__(table, partition, changes)
        self.journal = journal

    def put(self, key: bytes, value: bytes) -> None:
        self.journal.append((self.table, self.partition, key, self.db.get(key)))
        super().put(key, value)

    def add(self, key: bytes, value: bytes) -> None:
        """A new key's value before is None: not read (each window and outer store put read one)."""
        self.journal.append((self.table, self.partition, key, None))
        super().put(key, value)

    def delete(self, key: bytes, value: bytes | None = None) -> None:
        self.journal.append((self.table, self.partition, key, self.db.get(key) if value is None else value))
        super().delete(key)

    def dropping(self, items: Iterator[tuple[bytes, bytes]]) -> None:
        self.journal.extend((self.table, self.partition, key, value) for key, value in items)


def put_back(journal: Journal) -> int:
    """Every key of ``journal`` as it was before its writes, the last write undone first (straight to RocksDB: the
    changelog never had them); how many keys."""
    for table, partition, key, value in reversed(journal):
        db = partition_db(table, partition)
        if value is None:
            db.delete(key)
        else:
            db.put(key, value)
    count = len({(id(table), partition, key) for table, partition, key, _ in journal})
    journal.clear()
    return count


class RocksState(JoinState):
    """One partition's join state in RocksDB, built (:meth:`open`) at the partition's first record of an assignment
    and kept from fetch to fetch; its stream times kept in RocksDB at each fetch's end (:meth:`save`)."""

    def __init__(self, engine: StreamJoin, tables: Sequence[faust.Table], partition: int,
                 changes: Sequence[list[Change]], journal: Journal) -> None:
        """``changes``: each table's list of the partition's changes for its changelog (one a table, in order)."""
        left, right, outer = (Journaled(t, partition, log, journal) for t, log in zip(tables, changes))
        meta = left.db.get(META)
        saved = read_stream_times(meta)
        retention = engine.window.retention
        waits = outer.db if engine.has_outer else None  # compacted as the windows expire
        key_bytes = key_bytes_of()  # a record's store calls share its key's bytes
        stores = {side: RocksWindow(writes, retention, *saved.get(side, (-1, -1)), waits, key_bytes)
                  for side, writes in ((p.LEFT_SIDE, left), (p.RIGHT_SIDE, right))}
        self.rocks_outer = RocksOuter(outer, engine.sink_codec.encode_key, key_bytes) if engine.has_outer else None
        super().__init__(stores, self.rocks_outer, saved.get("stream_time", -1))  # type: ignore[arg-type]
        if meta is not None:
            self.min_time = 0  # restored: unknown, the first look finds it
        self._sides = stores[p.LEFT_SIDE], stores[p.RIGHT_SIDE]  # a record's mark (:meth:`times`), read per record
        self._meta, self._saved = left, meta
        # None kept: written between 2c8774f (the segments) and the commit that keeps the interval, taken as written
        # with this one (a window changed in that time is not seen: its records stay where the old interval put them)
        self._written: int | None = saved.get("segment")
        self._about = engine.query.name, partition

    def open(self) -> RocksState:
        """What a partition's first open does (:meth:`RocksWindow.open`), with one line when its window changed."""
        moved = sum(store.open(self._written) for store in self._sides)
        interval = self._sides[0].interval
        if self._written not in (None, interval):
            logger.info("Window stores of %s, partition %d: %d records rewritten from segments of %d ms into segments "
                        "of %d ms (its WITHIN or GRACE PERIOD changed)", *self._about, moved, self._written, interval)
        return self

    def times(self) -> tuple[Any, ...]:
        """What a record may move besides RocksDB: the stream times and the next look (:meth:`set_times`)."""
        left, right = self._sides
        return self.stream_time, self.min_time, self.next_emit, left.observed, left.swept, right.observed, right.swept

    def set_times(self, times: tuple[Any, ...]) -> None:
        """The times of a mark, for a record undone (its RocksDB writes put back): a side that dropped segments since
        has them back, and its keys are read again."""
        left, right = self._sides
        dropped = [side for side, swept in ((left, times[4]), (right, times[6])) if side.swept != swept]
        self.stream_time, self.min_time, self.next_emit, left.observed, left.swept, right.observed, right.swept = times
        for side in dropped:
            side.reload()

    def save(self) -> None:
        meta = stream_times_value(self.stream_time, {side: (s.observed, s.swept)  # type: ignore[attr-defined]
                                                     for side, s in self.stores.items()}, self._sides[0].interval)
        if meta != self._saved:
            self._meta.put(META, meta)
            self._saved = meta


def _wall_clock() -> int:
    return int(time.monotonic() * 1000)


class StreamJoinRun:
    """One declared stream-stream join in the worker: the engine, fed each side's records in their partition's
    state (one :class:`RocksState` per partition, kept while it is assigned)."""

    def __init__(self, app: StreamappApp, join: StreamStreamJoin, clock: Callable[[], int] = _wall_clock) -> None:
        self.join, self.output = join, join.output
        self.engine = StreamJoin(app.topology.plan, join.query, clock=clock)
        self.tables = [app.join_tables.windows[name] for name in join.stores]
        #: The topic the engine knows each side's records by (the worker may read them under another name).
        self.engine_topic = {join.source_topic: self.engine.left.source.topic,
                             join.right_topic: self.engine.right.source.topic}
        #: Each partition's state, opened at its first record and kept from fetch to fetch (its stream times, the
        #: outer store's waiting prefixes): forgotten where RocksDB changes under it (a revocation, a dropped
        #: transaction), its waiting prefixes refreshed where a record is undone.
        self._states: dict[int, RocksState] = {}
        #: Each partition's oldest waiting time and next look for closed windows as the last fetch left them.
        self._looks: dict[int, tuple[int, int]] = {}
        #: This fetch's changes of the stores, for their changelogs: each partition's, a list a table (in the order
        #: of :attr:`tables`), so that each is one changelog partition's records in order.  Kept while a partition's
        #: state is forgotten (a revocation): what was written goes out.
        self._changes: dict[int, tuple[list[Change], ...]] = {}
        #: The record being joined: each key's value before it wrote it (:meth:`undo`).
        self._record: Journal = []
        #: exactly_once: each partition's open transaction's values before (:meth:`ended`); None: at_least_once.
        self._open: dict[int, Journal] | None = {} if app.settings.exactly_once else None
        #: exactly_once: each partition's next look as its last committed transaction left it (:meth:`ended`).
        self._committed_looks: dict[int, tuple[int, int]] = {}
        #: A partition whose stores could not be put back: not trusted at its next open (a wipe, a restore).
        self._distrust = app.join_tables.clean_stops.distrust

    def process(self, topic: str, partition: int, msg: ConsumerRecord) -> Written:
        """What a record of ``topic`` writes (RecordError when the engine cannot read it); the stores are updated."""
        state = self._states.get(partition)
        if state is None:
            state = self._states[partition] = RocksState(self.engine, self.tables, partition,
                                                         self._changes_of(partition), self._record).open()
            state.min_time, state.next_emit = self._looks.get(partition, (state.min_time, state.next_emit))
        self.engine.state = state
        outputs = self.engine.process(Record(self.engine_topic[topic], msg.key, msg.value, msg.timestamp,
                                                   partition, msg.offset))
        return [(self.output, o.record.key, o.record.value, o.record.timestamp) for o in outputs]

    def _changes_of(self, partition: int) -> tuple[list[Change], ...]:
        changes = self._changes.get(partition)
        if changes is None:
            changes = self._changes[partition] = tuple([] for _ in self.tables)
        return changes

    @property
    def changes(self) -> list[Change]:
        """The changes not handed over yet (:meth:`stored`), table by table."""
        return [change for changes in self._changes.values() for log in changes for change in log]

    def mark(self, partition: int) -> tuple[Any, ...]:
        """Where the partition's state stands before a record: :meth:`undo` goes back there, :meth:`keep` on."""
        state = self._states.get(partition)
        return (state, None if state is None else state.times(), [len(log) for log in self._changes_of(partition)],
                self.engine.late)

    def undo(self, partition: int, mark: tuple[Any, ...]) -> None:
        """The record's outputs were refused: what it wrote is taken back (RocksDB, the changes, the stream times)."""
        state, times, lengths, self.engine.late = mark
        put_back(self._record)
        for log, length in zip(self._changes_of(partition), lengths):
            del log[length:]
        if state is None:  # opened by the record: opened again by the next
            self._states.pop(partition, None)
        else:
            state.set_times(times)
            if state.rocks_outer is not None:
                state.rocks_outer.reload(state.rocks_outer.waiting)

    def keep(self, partition: int) -> None:
        """The record's writes stay (under exactly_once, until its transaction ends: :meth:`ended`)."""
        if self._open is not None and self._record:
            self._open.setdefault(partition, []).extend(self._record)
        self._record.clear()

    def ended(self, partition: int, committed: bool) -> None:
        """:attr:`~streamapp.worker.transactions.Transactions.on_ended`: a dropped transaction's writes are put back,
        so that RocksDB holds what the changelog holds (its records are read again)."""
        journal = (self._open or {}).pop(partition, [])
        if committed:
            if partition in self._looks:
                self._committed_looks[partition] = self._looks[partition]
            return
        if not journal:
            return
        self._states.pop(partition, None)
        if partition in self._committed_looks:  # its records read again look for closed windows as the first time
            self._looks[partition] = self._committed_looks[partition]
        else:  # none committed here since the partition came: as after a restart
            self._looks.pop(partition, None)
        for log in self._changes.get(partition, ()):
            log.clear()
        try:
            count = put_back(journal)
        except Exception as exc:  # noqa: BLE001 - the partition is gone (revoked): its next owner restores it
            logger.warning("Window stores of partition %d not put back after its transaction was dropped (%r)",
                           partition, exc)
            for table in self.tables:
                self._distrust(table, partition)
            return
        logger.info("Transaction of partition %d dropped: %d window store keys of %s put back as they were",
                    partition, count, self.join.query.name)

    def revoked(self, partitions: Iterable[int]) -> None:
        """The partitions went to another worker: what this one knew of their waiting records may be stale."""
        for partition in partitions:
            self._states.pop(partition, None)
            self._looks.pop(partition, None)
            self._committed_looks.pop(partition, None)

    def stored(self) -> list[Change]:
        """The fetch is done: each partition's stream times kept; its changes handed over (and forgotten here)."""
        return [change for _, _, changes in self.changelogs() for change in changes]

    def changelogs(self) -> list[tuple[faust.Table, int, list[Change]]]:
        """:meth:`stored`'s changes as (table, partition, its changes in order): one changelog partition's each."""
        for partition, state in self._states.items():
            state.save()
            self._looks[partition] = state.min_time, state.next_emit
            self.keep(partition)
        handed = []
        for partition, changes in self._changes.items():
            for table, log in zip(self.tables, changes):
                if log:
                    handed.append((table, partition, log[:]))  # the list the state's writes append to stays its
                    log.clear()
        return handed


def runs_of(app: StreamappApp) -> list[StreamJoinRun]:
    return [StreamJoinRun(app, join) for join in app.topology.stream_joins]


def install_group(app: StreamappApp, dead_letters: DeadLettering, topics: Sequence[str], runs: Sequence[StreamJoinRun],
                  transactions: Transactions | None = None) -> None:
    """One agent for the topics of joins that share a side (:func:`transaction_groups`): each fetch's records of them
    in one call, each partition's in event-time order (:attr:`~streamapp.worker.transport.Handler.joint`), each record
    joined in every join it is a side of (under exactly_once in ``transactions``, a partition's shared by them all)."""
    counters, null_keys = app.counters, NullKeyPartitions()
    mine = {topic: [run for run in runs if topic in run.engine_topic] for topic in topics}
    group = [run for run in runs if set(run.engine_topic) & set(topics)]
    changelogs = {id(t): t.changelog_topic.get_topic_name() for run in group for t in run.tables}

    async def handle(batches: Mapping[TP, Sequence[ConsumerRecord]] | InOrder, sender: BatchSender[ConsumerRecord],
                     producer: Any = None) -> None:
        """The records of ``batches`` joined, their outputs and the stores' changes sent through ``sender``."""
        checks = OutputChecks(await dead_letters.size_limits(), [run.output for run in group],
                              int(time.time() * 1000))
        budgets = checks.budgets
        refused: Counter[tuple[str, int]] = Counter()  # records whose check failed (dead letters), not read
        written_to: Counter[tuple[str, int]] = Counter()  # outputs by (output, source partition)
        flushed = False  # the stores' changes added to the send (before_send)

        def check(partition: int, msg: ConsumerRecord) -> tuple[Written, int]:
            theirs = mine[msg.topic]
            marks = [run.mark(partition) for run in theirs]
            written: Written = []
            late = 0
            try:
                for run in theirs:
                    before = run.engine.late
                    joined = run.process(msg.topic, partition, msg)
                    budget = budgets[run.output]  # within it, an output fits for sure: no exact size asked
                    for output, key, value, _ in joined:
                        if (len(key) if key else 0) + (len(value) if value else 0) > budget:
                            checks.check_size(output, key, value, "joined record")
                    written += joined
                    late += run.engine.late - before
            except Exception:  # a refused record (a dead letter) leaves no state behind
                for run, mark in zip(theirs, marks):
                    run.undo(partition, mark)
                refused[msg.topic, partition] += 1
                raise
            for run in theirs:
                run.keep(partition)
            return written, late

        def write(partition: int, msg: ConsumerRecord, checked: tuple[Written, int]) -> None:
            written, late = checked
            if late:
                counters.record_late(msg.topic, partition, late)
            for output, key, value, timestamp in written:
                if key is None:  # an outer side's null key: the producer's choice, as for a stream-table join
                    where = null_keys.partition(output, app.partition_counts[output], len(value or b""))
                    sender.add_to(output, where, None, value, timestamp, msg)
                else:
                    sender.add(output, key, value, timestamp, msg)
                written_to[output, partition] += 1

        def before_send() -> None:
            """The call's counts, and the stores' changes and stream times: they go out with the outputs, in the same
            send (a second one would wait for the broker), before the offsets are acked."""
            read: Counter[tuple[str, int]] = Counter()
            for tp, messages in batches.items():
                read[tp.topic, tp.partition] += len(messages)
            for (topic, partition), count in (read - refused).items():
                counters.record_read(topic, partition, count)
            for (output, partition), count in written_to.items():
                counters.record_written(output, partition, count)
            nonlocal flushed
            changelog(sender, [handed for run in group for handed in run.changelogs()])
            flushed = True

        dropped = False
        try:
            await dead_letters.handle(batches, check, write, sender, producer=producer,  # type: ignore[arg-type]
                                      before_send=before_send)
        except BaseException:
            dropped = producer is not None  # the transaction's work is dropped: put back (StreamJoinRun.ended)
            raise
        finally:
            if not flushed:  # the call failed before its send: the changes still go (at_least_once) or not at all
                handed = [handed for run in group for handed in run.changelogs()]
                if handed and not dropped:
                    left = dead_letters.sender(producer=producer)
                    changelog(left, handed)
                    await left.send()

    def changelog(sender: BatchSender[ConsumerRecord], handed: list[tuple[faust.Table, int, list[Change]]]) -> None:
        """The stores' changes (:meth:`StreamJoinRun.changelogs`) to their changelogs, a changelog partition's at once."""
        now = int(time.time() * 1000)  # the changelog records' time: the call's (a few milliseconds)
        for table, partition, changes in handed:
            sender.add_all(changelogs[id(table)], partition, ((key, value) for _, _, key, value in changes), now)

    async def handle_fetch(batches: Mapping[TP, Sequence[ConsumerRecord]] | InOrder) -> None:
        if transactions is None:
            await handle(batches, dead_letters.sender())
            return

        async def in_transaction(tp: TP, messages: Sequence[ConsumerRecord], txn: OpenTransaction) -> None:
            """The outputs, dead letters and the stores' changelogs in the transaction of the partition (both
            sides'), which commits the offsets; Faust's recovery of such a changelog:
            :func:`~streamapp.worker.faust_internals.past_markers`."""
            await handle({tp: messages}, dead_letters.sender(producer=txn.producer, on_failure=txn.on_failure),
                         txn.producer)

        await in_transactions(transactions, batches, in_transaction)  # type: ignore[arg-type]

    handler = Handler(handle_fetch, event_time=_event_time(group), joint=",".join(topics), call_size=JOIN_CALL_SIZE)
    for topic in topics:
        stream = app.join_tables.topics[topic]
        if transactions is not None:  # Faust never commits it: its offsets go in the transactions only
            stream.acks = False
        app.batch_agent(stream)(handler)


def transaction_groups(runs: Sequence[StreamJoinRun]) -> list[tuple[str, ...]]:
    """The topics whose partition p shares one transaction: both sides of a join, and every join that shares a side
    (one agent reads a topic, so the partition's stores of all its joins change together)."""
    groups: list[set[str]] = []
    for run in runs:
        topics = set(run.engine_topic)
        for group in [g for g in groups if g & topics]:
            groups.remove(group)
            topics |= group
        groups.append(topics)
    return [tuple(sorted(group)) for group in groups]


def _event_time(runs: Sequence[StreamJoinRun]) -> Callable[[ConsumerRecord], int]:
    """A record's event time, by the side its topic is of (a topic's first join's reader): its value is decoded
    for it only where the stream takes its time from a column (``TIMESTAMP=``), else it is the record's."""
    readers: dict[str, Any] = {}
    for run in runs:
        readers.setdefault(run.join.source_topic, run.engine.left)
        readers.setdefault(run.join.right_topic, run.engine.right)
    timed = {topic for topic, reader in readers.items() if reader.source.timestamp is not None}

    def event_time(msg: ConsumerRecord) -> int:
        if msg.topic not in timed:
            return msg.timestamp
        try:
            _, row = readers[msg.topic].read(msg.key, msg.value, msg.timestamp)
        except Exception:  # noqa: BLE001 - dead-lettered anyway; its place does not matter
            return msg.timestamp
        return msg.timestamp if row is None else row[1]
    return event_time


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    runs = runs_of(app)
    exactly_once = app.settings.exactly_once
    for group in transaction_groups(runs):
        transactions = transactions_install(app, group, dead_letters.refused_in) if exactly_once else None
        if transactions is not None:
            ours = [run for run in runs if set(run.engine_topic) <= set(group)]

            def ended(partition: int, committed: bool, ours: list[StreamJoinRun] = ours) -> None:
                for run in ours:
                    run.ended(partition, committed)
            transactions.on_ended = ended
        install_group(app, dead_letters, group, runs, transactions)

    async def on_revoked(sender: Any, revoked: Iterable[Any], **kwargs: Any) -> None:
        for run in runs:
            run.revoked(tp.partition for tp in revoked if tp.topic in run.engine_topic)

    if runs:
        app.on_partitions_revoked.connect(on_revoked, weak=False)
    if exactly_once:  # changelogs in transactions: past their commit markers, wiped after a crash
        app.join_tables.clean_stops.add(t for run in runs for t in run.tables)
