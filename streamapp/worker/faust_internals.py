"""Every private name of Faust (and of its aiokafka driver and RocksDB store) the worker uses, and nowhere else.

Faust has no public seam for these.  Each is listed in :data:`PRIVATE_NAMES`, and
``tests/test_faust_internals.py`` fails, naming it, when an upgrade removes one.
Where Faust has a public seam the worker uses it instead: ``web_application_options``
for the middlewares, the web driver's ``production_blueprints`` for the page at
``/``, the ``app.transport`` setter for the batch transport.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from faust.tables.manager import TableManager as FaustTableManager
from faust.transport.consumer import ack_lock
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from faust.worker import Worker as FaustWorker
from mode.utils.futures import notify

from ..kafka.security import aiokafka_options

logger = logging.getLogger(__name__)

#: (class, private attribute) the functions below reach; ``tests/test_faust_internals.py`` checks each one.
PRIVATE_NAMES = (
    ("faust.transport.consumer:Consumer", "_read_offset"),
    ("faust.transport.consumer:Consumer", "_add_gap"),
    ("faust.transport.consumer:Consumer", "_n_acked"),
    # The batch topics' fetch path (streamapp.worker.transport.Consumer): the fetch it takes their records from,
    # the partitions Faust's getmany delivers besides the active ones, and what Faust's ack keeps per partition.
    ("faust.transport.consumer:Consumer", "_wait_next_records"),
    ("faust.transport.consumer:Consumer", "_buffered_partitions"),
    ("faust.transport.consumer:Consumer", "_committed_offset"),
    ("faust.transport.consumer:Consumer", "_acked"),
    ("faust.transport.consumer:Consumer", "_acked_index"),
    ("faust.transport.consumer:Consumer", "_waiting_for_ack"),
    ("faust.stores.rocksdb:Store", "_db_for_partition"),
    # The metrics (streamapp.worker.metrics): a miss's cause asks the partitions a table's store has open, and a
    # revoke's commit is judged by what Faust would still commit.
    ("faust.stores.rocksdb:Store", "_dbs"),
    # exactly_once (streamapp.worker.tables.CleanStops): a partition's database is judged before Faust opens it.
    ("faust.stores.rocksdb:Store", "_open_for_partition"),
    ("faust.transport.consumer:Consumer", "_filter_committable_offsets"),
    ("faust.transport.drivers.aiokafka:Producer", "_ensure_producer"),
    # A rebalance's commit (streamapp.worker.transport.Consumer): the commit under way, and the hooks whose
    # order matters: Faust drops the acked offsets in on_partitions_revoked, and resumes stream partitions
    # before its perform_seek has moved them.
    ("faust.transport.consumer:Consumer", "_commit_fut"),
    ("faust.transport.consumer:Consumer", "on_partitions_revoked"),
    ("faust.transport.consumer:Consumer", "perform_seek"),
    ("faust.transport.consumer:Consumer", "wait_empty"),
    # The commit to the group after Faust's producer flush: held once a batch was refused (streamapp.worker.health).
    ("faust.transport.consumer:ThreadDelegateConsumer", "_commit"),
    # exactly_once (streamapp.worker.transactions): the fence's hook, and the consumer's isolation level.
    ("faust.transport.consumer:ThreadDelegateConsumer", "seek_to_committed"),
    ("faust.transport.consumer:ThreadDelegateConsumer", "_new_consumer_thread"),
    ("faust.transport.drivers.aiokafka:AIOKafkaConsumerThread", "_create_worker_consumer"),
    ("aiokafka.consumer.consumer:AIOKafkaConsumer", "_isolation_level"),
    # The worker's fetch wait (FETCH_WAIT_MS below).
    ("aiokafka.consumer.consumer:AIOKafkaConsumer", "_fetch_max_wait_ms"),
    # A fetch handled call by call tells aiokafka it polled (polled below): its consumer, and the time its poll
    # interval counts from.
    ("faust.transport.consumer:ThreadDelegateConsumer", "_thread"),
    ("faust.transport.drivers.aiokafka:AIOKafkaConsumerThread", "_consumer"),
    ("aiokafka.consumer.consumer:AIOKafkaConsumer", "_subscription"),
    # A topic's partition count in the consumer's metadata (streamapp.worker.web.rechecks): its client.
    ("aiokafka.consumer.consumer:AIOKafkaConsumer", "_client"),
    ("aiokafka.consumer.subscription_state:SubscriptionState", "_last_fetch_ended"),
    # A start and a clean stop without Faust's one-second sleeps (TableManager, Worker below).
    ("faust.tables.manager:TableManager", "_update_channels"),
    ("mode.worker:Worker", "_sentinel_task"),
)


def deliverable(consumer: Any, tp: TP, active: Any) -> bool:
    """Whether Faust's ``Consumer.getmany`` would deliver the fetched records of ``tp``.

    It delivers those of the active partitions (all when ``active`` is None, a
    client-only app) and of the partitions it has buffered; it drops the rest.
    """
    return active is None or tp in active or tp in consumer._buffered_partitions


async def accept_all(consumer: Any, tp: TP, records: Sequence[Any]) -> Sequence[Any]:
    """What Faust's fetch loop (``Consumer._drain_messages``) does with each message's offset before delivering it,
    for one partition's fetched records (in offset order) at once: the records it would deliver.

    Records below the offset already read are dropped (a re-fetch after a seek);
    every gap since that offset and between the records (a transaction's markers,
    a compacted topic) is recorded when the topic's acks are on, so a commit never
    skips an offset that was not acked; the last record becomes the last one read.
    The read offset and the topic's acks are looked up once per partition.
    """
    last = consumer._read_offset[tp]
    if last is not None and records and records[0].offset < last:
        records = [record for record in records if record.offset >= last]
    if not records:
        return records
    if consumer.app.topics.acks_enabled_for(tp.topic):
        previous = last
        for record in records:
            offset = record.offset
            if previous and offset - previous > 1:
                await consumer._add_gap(tp, previous + 1, offset)
            previous = offset
    consumer._read_offset[tp] = records[-1].offset
    return records


def ack_all(consumer: Any, tp: TP, records: Sequence[Any]) -> None:
    """Faust's ``Consumer.ack`` for each of one partition's records, the partition's bookkeeping looked up once.

    As there: nothing when the topic's acks are off (exactly_once's orders);
    otherwise each offset at or above the committed one and not acked yet is
    acked and counted (``_n_acked``, which :func:`commit_if_due` reads), and a
    wait for acks is woken.  The records are never in Faust's set of unacked
    messages (its conductor adds only what it delivers), so none is taken out of it.
    """
    if not records or not consumer.app.topics.acks_enabled_for(tp.topic):
        return
    with ack_lock:
        try:
            committed = consumer._committed_offset[tp]
            index, acked = consumer._acked_index[tp], consumer._acked[tp]
            count = 0
            for record in records:
                offset = record.offset
                if (committed is None or offset >= committed) and offset not in index:
                    index.add(offset)
                    acked.append(offset)
                    count += 1
            consumer._n_acked += count
        finally:
            notify(consumer._waiting_for_ack)


def metadata_partitions(consumer: Any, topic: str) -> int | None:
    """The partition count of ``topic`` in the aiokafka consumer's cluster metadata behind Faust's consumer thread:
    no request, refreshed by the client; None before the thread's consumer started or while the topic is unknown."""
    started = consumer._thread._consumer
    partitions = started._client.cluster.partitions_for_topic(topic) if started is not None else None
    return len(partitions) if partitions else None


def fetch_lag(consumer: Any, tp: TP) -> tuple[int | None, float]:
    """How many offsets of ``tp`` a fetch can still bring after the position of the aiokafka consumer behind Faust's
    thread (its last stable offset under ``read_committed``, else its high watermark, less its position: past a
    transaction's marker once fetched), and when the broker told that end (the wall-clock ms of the fetch response
    that carried it).  0 told at +inf for a partition not assigned; None while either end is unknown (not fetched
    yet).  Kafka Streams' ``max.task.idle.ms`` waits on the same lag (KIP-695).

    aiokafka leaves a partition with records buffered out of its fetches, so the end told with a fetch's records is
    not told again until they are drained and the next fetch answers: drained, they read as lag 0 though the broker
    may hold more.  :class:`~streamapp.worker.transport.HeldBack` trusts a 0 only when told after them.
    """
    started = consumer._thread._consumer
    if started is None:
        return None, 0.0
    subscription = started._subscription.subscription
    assignment = None if subscription is None else subscription.assignment
    if assignment is None or tp not in assignment.tps:
        return 0, math.inf
    state = assignment.state_value(tp)
    end = state.lso if started._isolation_level == "read_committed" else state.highwater
    told = 0.0 if state.timestamp is None else float(state.timestamp)
    if end is None or not state.has_valid_position:
        return None, told
    return max(0, end - state.position), told


def polled(consumer: Any) -> None:
    """Tell aiokafka the consumer polled, as the end of a fetch does: its ``max.poll.interval`` (Faust's
    ``broker_max_poll_interval``, 1,000 s) then bounds one batch handler call, not a whole fetch's handling.

    aiokafka's heartbeat routine leaves the group once no fetch has ended for that long
    (``fetcher_idle_time``); the revoke that follows stops Faust's flow, Faust fetches
    nothing more, and aiokafka rejoins only after a fetch: the worker stalls
    (faust-streaming/faust#138).  A fetch holds up to 1 MiB a partition (a hundred
    thousand records) and is handled call by call, each a few hundred records: under
    load the fetch can outlast the interval while every call progresses, as Kafka
    Streams, which polls between its processing loops, would not.  One float stored,
    read by the consumer thread; nothing before the consumer thread has started.
    """
    started = consumer._thread._consumer
    if started is not None:
        started._subscription._last_fetch_ended = time.monotonic()


async def commit_if_due(consumer: Any) -> None:
    """The fetch loop's ``commit_every`` rule: commit once that many messages were acked since the last commit.

    Faust checks it before each message it delivers; batches are delivered by
    :mod:`streamapp.worker.transport`, which checks it after each batch.  The
    count is Faust's own (``ack()`` raises it), the limit its public setting
    ``broker_commit_every``.
    """
    every = consumer.app.conf.broker_commit_every
    if every and consumer._n_acked >= every:
        consumer._n_acked = 0
        await consumer.commit()


async def commit_now(consumer: Any) -> bool:
    """Faust's commit of every acked offset, now: after the commit under way, if any.

    Faust's ``Consumer.commit`` returns without committing when another commit is under
    way (``_commit_fut``), having only waited for it, so what was acked after that one
    took its offsets stays uncommitted.  A rebalance and a stopping worker must commit
    everything acked, so this waits (without cancelling it) for each commit under way
    until none is, then commits; nothing yields between the check and Faust's commit
    taking its turn.
    """
    while True:
        running = consumer._commit_fut
        if running is None:
            return bool(await consumer.commit())
        await asyncio.wait([running])


def partition_db(table: Any, partition: int) -> Any:
    """The RocksDB database of one partition of ``table``: a lookup there never finds a row of another partition.

    Faust's ``table[key]`` reads the partition of the event being processed, and a
    batch of orders is processed outside any event.
    """
    return table.data._db_for_partition(partition)


def open_partition_dbs(table: Any) -> dict[int, Any]:
    """The RocksDB databases ``table``'s store has open, by partition (active and standby): read, never opened here."""
    return dict(getattr(table.data, "_dbs", {}))


def before_open(table: Any, hook: Callable[[int, Path], None]) -> None:
    """``hook(partition, path)`` runs before ``table``'s store opens a partition's RocksDB directory ``path``
    (Faust opens one lazily, at its first use after an assignment or a stop: a recovery's offset, a lookup)."""
    store = table.data
    open_db = store._open_for_partition

    def opening(partition: int) -> Any:
        hook(partition, store.partition_path(partition))
        return open_db(partition)
    store._open_for_partition = opening


async def past_markers(app: Any, changelogs: set[str], interval: float = 1.0) -> None:
    """exactly_once: a changelog written in transactions ends with a commit marker, which Faust's recovery (waiting
    for the record at the end offset less one) never reads: a changelog partition of ``changelogs`` whose consumer
    position passed that offset, seen twice with nothing left in the changelog queue, is recovered (what Faust does
    for its own transactions, ``detect_aborted_tx``), once a read of its own finds no committed record left there.

    That read matters on a busy machine: records the consumer already fetched may still be on their way to the
    changelog queue, and Faust drops a record at or below the offset it counts as restored.
    """
    recovery, seen = app.tables.recovery, set()
    while not app.should_stop:
        await asyncio.sleep(interval)
        if not recovery.in_recovery or not app.tables.changelog_queue.empty():
            seen.clear()
            continue
        passed: dict[TP, tuple[int | None, int]] = {}
        for tp, highwater in list(recovery.active_highwaters.items()):
            offset = recovery.active_offsets.get(tp)
            if tp.topic not in changelogs or highwater is None or (offset is not None and offset >= highwater):
                continue
            position = await app.consumer.position(tp)
            if position is None or position <= highwater:
                seen.discard(tp)
            elif tp in seen:
                passed[tp] = (offset, highwater)
            else:
                seen.add(tp)
        if not passed:
            continue
        on_their_way = await committed_records_after(app, passed)
        for tp, (offset, highwater) in passed.items():
            if tp not in on_their_way and recovery.active_offsets.get(tp) == offset:
                logger.info("Changelog %s[%d] recovered up to its last commit marker (offset %d)", tp.topic,
                            tp.partition, highwater)
                recovery.active_offsets[tp] = highwater


#: Seconds a read of a changelog's tail may take (:func:`committed_records_after`); past it, a partition is asked again.
TAIL_READ_TIMEOUT = 30.0


async def committed_records_after(app: Any, ranges: Mapping[TP, tuple[int | None, int]]) -> set[TP]:
    """The partitions of ``ranges`` holding a committed record after the first offset (None: from the start) up to the
    second, read ``read_committed`` by a consumer of their own (a partition not read to its end counts as holding one)."""
    parts = {AioTopicPartition(tp.topic, tp.partition): tp for tp in ranges}
    consumer = AIOKafkaConsumer(**aiokafka_options(app.settings.kafka), isolation_level="read_committed",
                                enable_auto_commit=False, auto_offset_reset="earliest")  # below a compacted start
    await consumer.start()
    try:
        consumer.assign(list(parts))
        for part, tp in parts.items():
            after = ranges[tp][0]
            consumer.seek(part, 0 if after is None else after + 1)
        found: set[TP] = set()
        open_parts = set(parts)
        deadline = time.monotonic() + TAIL_READ_TIMEOUT
        while open_parts and time.monotonic() < deadline:
            for part, records in (await consumer.getmany(*open_parts, timeout_ms=500)).items():
                if any(r.offset <= ranges[parts[part]][1] for r in records):
                    found.add(parts[part])
                    open_parts.discard(part)
            for part in list(open_parts):
                if await consumer.position(part) > ranges[parts[part]][1]:
                    open_parts.discard(part)
        return found | {parts[part] for part in open_parts}
    finally:
        await consumer.stop()


def uncommitted(consumer: Any, tps: Iterable[Any]) -> dict[Any, int]:
    """Acked offsets of ``tps`` that no commit has covered yet (Faust's own filter of what a commit would send)."""
    return dict(consumer._filter_committable_offsets(tps))


def aiokafka_producer(app: Any) -> Any:
    """The started aiokafka producer behind Faust's: whole batches go to it (``create_batch``/``send_batch``).

    Faust flushes it before every commit, so what is queued there is covered by
    the next commit like any ``send``.
    """
    return app.producer._ensure_producer()


#: How long the worker's fetch waits on the broker for records (aiokafka's default; Faust sets 1,500 ms): a fetch
#: that brings none still tells each partition's end, which a windowed join's records held for a partner wait for
#: (:class:`~streamapp.worker.transport.HeldBack`): where a stream pauses, its partner's last records wait this long.
FETCH_WAIT_MS = 500


def read_committed(consumer: Any) -> Any:
    """An aiokafka consumer not started yet, set to read only committed records (``isolation.level``).

    Faust chooses ``read_committed`` only for its own exactly_once, which streamapp
    never sets (docs/research/exactly-once.md); the fetcher reads the level at start.
    """
    consumer._isolation_level = "read_committed"
    return consumer


def fetch_wait(consumer: Any, milliseconds: int = FETCH_WAIT_MS) -> Any:
    """An aiokafka consumer not started yet, its fetches waiting on the broker at most ``milliseconds`` (its
    ``fetch_max_wait_ms``, which Faust sets to 1,500 and the fetcher reads at start)."""
    consumer._fetch_max_wait_ms = milliseconds
    return consumer


class WorkerConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread whose consumer fetches with :data:`FETCH_WAIT_MS` and, under exactly_once,
    reads ``read_committed`` (see :func:`read_committed`)."""

    committed_only = False

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = fetch_wait(super()._create_worker_consumer(transport))
        return read_committed(consumer) if self.committed_only else consumer


class ReadCommittedConsumerThread(WorkerConsumerThread):
    """:class:`WorkerConsumerThread` reading ``read_committed``: exactly_once's."""

    committed_only = True


def new_consumer_thread(consumer: Any, committed_only: bool) -> Any:
    """The consumer thread Faust's aiokafka ``Consumer._new_consumer_thread`` builds, as :class:`WorkerConsumerThread`
    (``committed_only``: reading ``read_committed``)."""
    kind = ReadCommittedConsumerThread if committed_only else WorkerConsumerThread
    return kind(consumer, loop=consumer.loop, beacon=consumer.beacon)


async def seek_fenced(consumer: Any, seek: Callable[[], Awaitable[Mapping[TP, int]]]) -> Mapping[TP, int]:
    """Faust's ``seek_to_committed`` (``seek``), with the exactly-once fence first when the app has one.

    Faust seeks every assigned partition to its committed offset through this
    method, and hands no record of a new assignment to a stream before it; so the
    joined streams' partitions are fenced (InitProducerId, :mod:`streamapp.worker.transactions`)
    right before their committed offsets are read.  A partition with no committed
    offset (or 0) is sought to its start explicitly: aiokafka leaves such a
    partition where an early fetch left it.
    """
    every = getattr(consumer.app, "transactions", None) or {}
    if not every:
        return await seek()
    async with contextlib.AsyncExitStack() as locks:
        ours: dict[str, list[int]] = {}
        held = set()  # co-partitioned topics share one Transactions (a stream-stream join's sides): one lock, one fence
        for topic, transactions in sorted(every.items()):  # each topic's lock, always in the same order
            ours[topic] = [tp.partition for tp in consumer.assignment() if tp.topic == topic]
            if id(transactions) not in held:
                held.add(id(transactions))
                await locks.enter_async_context(transactions.lock)
                await transactions.before_seek(tp.partition for tp in consumer.assignment()
                                               if tp.topic in transactions.topics)
        committed = await seek()
        for topic, transactions in sorted(every.items()):
            offsets = {tp.partition: offset for tp, offset in committed.items() if tp.topic == topic}
            for partition in ours[topic]:
                if not offsets.get(partition):
                    await consumer.seek(TP(topic, partition), 0)
            transactions.based({p: offsets.get(p) for p in ours[topic]}, topic)
        return committed


class TableManager(FaustTableManager):
    """Faust's, less the second its start sleeps first, for tables declared once the app runs: :func:`create_app`
    declares every table before anything starts, and each worker start (and restart) waited that second."""

    async def on_start(self) -> None:
        if not self.should_stop:
            await self._update_channels()  # what Faust's own on_start does after its sleep (faust-streaming 0.15)
            await self.recovery.start()


class Worker(FaustWorker):
    """Faust's worker, less the second its exit sleeps once every task has ended (mode's ``_sentinel_task``):
    each clean stop waited that second; a tenth lets the loop run the callbacks the ended tasks scheduled."""

    async def _sentinel_task(self) -> None:
        await asyncio.sleep(0.1)
