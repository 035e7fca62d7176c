"""Exactly-once join output (``processing_guarantee=exactly_once``): one Kafka transaction per stream partition.

One transactional producer per joined stream partition (:func:`transactional_id`, ``{app_id}-{topic}-{p}``)
puts the partition's outputs, dead letters and offset in one transaction (partition p of co-partitioned topics
read together, a stream-stream join's sides, share one: their stores' changelogs and both offsets), committed every
:data:`COMMIT_INTERVAL` seconds or :data:`MAX_ORDERS` orders. aiokafka cannot fence a zombie by group
generation (KIP-447), so :meth:`Transactions.fence` runs InitProducerId before the new owner reads its
offsets (:func:`streamapp.worker.faust_internals.seek_fenced`). A fence never crashes the worker.
See docs/RELIABILITY.md#exactly-once (the design) and docs/research/exactly-once.md (the experiments).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import IllegalOperation, KafkaError, ProducerFenced
from confluent_kafka import Consumer, TopicPartition
from faust.types import TP

from ..kafka.security import aiokafka_options, librdkafka_config
from ..settings import Settings

logger = logging.getLogger(__name__)

#: Seconds an open transaction may run before it is committed (see the module's docstring).
COMMIT_INTERVAL = 0.25
#: Orders after which a transaction is committed however long it has been open (bounds the work a crash redoes).
MAX_ORDERS = 20_000
#: The broker aborts a transaction left open this long (a worker that stalls is fenced, not waited for).
TRANSACTION_TIMEOUT_MS = 15_000
#: Seconds one InitProducerId may take: aiokafka retries a missing coordinator for ever.
FENCE_TIMEOUT = 10.0
#: Attempts at fencing a partition before the rebalance gives up (the worker is then restarted by its supervisor).
FENCE_ATTEMPTS = 6
#: Seconds stopping a producer may take (a fenced one may have nothing left to say to the broker).
STOP_TIMEOUT = 5.0

#: (producer, output topic, output partition, the refused batch's source messages, the error) -> dead letters sent.
OnRefused = Callable[[Any, str, int, list[Any], BaseException], Awaitable[None]]
#: Builds a started-later aiokafka transactional producer for a transactional id.
MakeProducer = Callable[[str], Any]


class FenceError(KafkaError):
    """A partition could not be fenced (InitProducerId failed or timed out): its records are not processed."""


def transactional_id(app_id: str, topic: str, partition: int) -> str:
    """The transactional id of one stream partition: the same for every worker of the app (that is the fence)."""
    return f"{app_id}-{topic}-{partition}"


def transaction_counts(transactions: Mapping[str, "Transactions"]) -> dict[str, int]:
    """The counts of every stream topic's transactions, summed (for /stats and the metrics); co-partitioned topics
    that share their transactions are counted once."""
    totals: dict[str, int] = {}
    for each in {id(t): t for t in transactions.values()}.values():
        for name, count in each.counts.items():
            totals[name] = totals.get(name, 0) + count
    return totals


def is_due(open_for: float, orders: int, interval: float = COMMIT_INTERVAL, max_orders: int = MAX_ORDERS) -> bool:
    """Whether a transaction open for ``open_for`` seconds holding ``orders`` orders is committed now."""
    return orders > 0 and (open_for >= interval or orders >= max_orders)


def producer_factory(settings: Settings) -> MakeProducer:
    """aiokafka transactional producers for ``settings``' brokers and security (acks=all, idempotent)."""
    options = aiokafka_options(settings.kafka)

    def make(tid: str) -> AIOKafkaProducer:
        return AIOKafkaProducer(**options, transactional_id=tid, transaction_timeout_ms=TRANSACTION_TIMEOUT_MS,
                                enable_idempotence=True, acks="all", linger_ms=5, max_batch_size=1_048_576,
                                max_request_size=1_048_576)
    return make


@dataclass
class OpenTransaction:
    """One orders partition's transaction (of each topic it reads in that partition): what it holds so far."""

    partition: int
    producer: Any
    started: float = field(default_factory=time.monotonic)
    #: Orders processed in it.
    orders: int = 0
    #: Per topic, the offset after its last processed order: what its commit stores for the group.
    next_offsets: dict[str, int] = field(default_factory=dict)
    #: Per topic, the committed offset it started from (where its work is read again from if it is dropped).
    base_offsets: dict[str, int] = field(default_factory=dict)
    #: Batches the broker refused: (topic, partition, source messages, error), dead-lettered before the commit.
    refused: list[tuple[str, int, list[Any], BaseException]] = field(default_factory=list)

    def unprocessed(self, topic: str, messages: Sequence[Any]) -> Sequence[Any]:
        """The messages at or after the offset this transaction has reached (its base before its first order).

        A fetch can hand over records read from a position older than the seek
        that followed the fence (aiokafka reads the committed offsets before the
        rebalance callbacks run, and the handler waits for the fence's lock), and
        the seek makes the consumer fetch again what a handled batch held: neither
        may be processed twice.
        """
        start = self.next_offsets.get(topic, self.base_offsets.get(topic))
        if start is None or not messages or messages[0].offset >= start:
            return messages
        return [m for m in messages if m.offset >= start]

    def processed(self, topic: str, next_offset: int, orders: int) -> None:
        self.next_offsets[topic] = next_offset
        self.orders += orders

    def on_failure(self, topic: str, partition: int, sources: list[Any], error: BaseException) -> None:
        """BatchSender's ``on_failure``: remember the refused batch for the commit to dead-letter."""
        self.refused.append((topic, partition, sources, error))


class Transactions:
    """The transactions of the orders partitions this worker holds (see the module's docstring).

    One :attr:`lock` covers processing, commits, fences and revokes: a
    transaction is never committed or aborted while a batch is half in it.
    """

    def __init__(self, topics: str | Sequence[str], group_id: str, app_id: str, make_producer: MakeProducer,
                 on_refused: OnRefused, seek: Callable[[str, int, int], Awaitable[None]] | None = None,
                 assigned: Callable[[], Iterable[int]] = tuple, rebalancing: Callable[[], bool] = lambda: False,
                 committed: Callable[[str, int], Awaitable[int | None]] | None = None,
                 interval: float = COMMIT_INTERVAL) -> None:
        #: The co-partitioned topics whose partition p shares one transaction; the first names it (its id, the logs).
        self.topics = (topics,) if isinstance(topics, str) else tuple(topics)
        self.topic, self.group_id, self.app_id = self.topics[0], group_id, app_id
        self._make_producer = make_producer
        self._on_refused = on_refused
        self._seek = seek
        self._assigned = assigned
        self._rebalancing = rebalancing
        self._committed = committed
        self.interval = interval
        self.lock = asyncio.Lock()
        self.open: dict[int, OpenTransaction] = {}
        #: Counts for /stats and the tests: transactions committed, aborted, partitions fenced, fences suffered.
        self.counts = {"committed": 0, "aborted": 0, "fenced": 0, "producer_fenced": 0, "revoke_failed": 0}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Told each committed transaction's duration (flush, offsets, commit): the metrics' commit latency.
        self.on_committed: Callable[[float], None] | None = None
        #: Told (partition, True) when a transaction holding work is committed, (partition, False) when its work is
        #: dropped (aborted, fenced): a table-table join's side undoes its RocksDB rows then (agents/tables.py).
        self.on_ended: Callable[[int, bool], None] | None = None

    # -- ownership ---------------------------------------------------------------------------------

    def get(self, partition: int) -> OpenTransaction | None:
        """The partition's open transaction; None while it is not fenced (its records must wait)."""
        return self.open.get(partition)

    async def before_seek(self, assigned: Iterable[int]) -> None:
        """Before the consumer seeks to the committed offsets (call under the lock): the fence's half of the rule.

        Open partitions no longer assigned are released; those still assigned
        commit what they hold (the seek would otherwise read it again into the
        same open transaction); every assigned partition not open is fenced.
        """
        ours = set(assigned)
        await self._release(set(self.open) - ours)
        for partition in sorted(ours & set(self.open)):
            txn = self.open[partition]
            try:
                await self._commit(txn)
            except KafkaError as exc:
                logger.warning("Transaction of %s[%d] not committed before a seek (%r): fenced again",
                               self.topic, partition, exc)
                self.open.pop(partition)
                await self._abort(txn)
                await _stop(txn.producer)
        await self.fence(ours)

    async def fence(self, partitions: Iterable[int]) -> None:
        """Fence each partition not yet open here: InitProducerId, then an open transaction (call under the lock).

        Must complete before the committed offsets of these partitions are read
        (the rule in the module's docstring).
        """
        for partition in sorted(set(partitions) - set(self.open)):
            self.open[partition] = await self._start(partition)
            self.counts["fenced"] += 1

    async def _start(self, partition: int) -> OpenTransaction:
        quiet_fenced_futures(asyncio.get_running_loop())
        tid = transactional_id(self.app_id, self.topic, partition)
        error: BaseException | None = None
        for attempt in range(FENCE_ATTEMPTS):
            producer = self._make_producer(tid)
            try:
                await asyncio.wait_for(producer.start(), FENCE_TIMEOUT)
                await asyncio.wait_for(producer.begin_transaction(), FENCE_TIMEOUT)
                return OpenTransaction(partition, producer)
            except (KafkaError, asyncio.TimeoutError, OSError) as exc:
                error = exc
                logger.warning("Fencing %s (attempt %d of %d) failed: %r", tid, attempt + 1, FENCE_ATTEMPTS, exc)
                await _stop(producer)
        raise FenceError(f"transactional id {tid}: InitProducerId failed {FENCE_ATTEMPTS} times ({error!r})")

    def based(self, committed: Mapping[int, int | None], topic: str | None = None) -> None:
        """Record where each open transaction's work in ``topic`` (the first) starts: the committed offsets the seek
        after the fence read."""
        for partition, offset in committed.items():
            txn = self.open.get(partition)
            if txn is not None and txn.orders == 0:
                txn.base_offsets[topic or self.topic] = offset if offset is not None and offset > 0 else 0

    async def release(self, partitions: Iterable[int]) -> None:
        """Partitions revoked: commit what each holds (we still own them), then stop its producer."""
        async with self.lock:
            await self._release(partitions)

    async def _release(self, partitions: Iterable[int]) -> None:
        for partition in sorted(set(partitions) & set(self.open)):
            txn = self.open.pop(partition)
            try:
                await self._commit(txn, begin_next=False)
            except Exception as exc:  # noqa: BLE001 - the next owner redoes it; never crash a rebalance
                logger.warning("Transaction of %s[%d] not committed at revoke (%r): its next owner redoes it",
                               self.topic, partition, exc)
                self.counts["revoke_failed"] += 1
                await self._abort(txn)
            await _stop(txn.producer)

    # -- committing --------------------------------------------------------------------------------

    async def commit_due(self, force: bool = False) -> None:
        """Commit every open transaction that is due (:func:`is_due`), or every one holding work with ``force``."""
        async with self.lock:
            now = time.monotonic()
            for partition, txn in list(self.open.items()):
                if not (txn.orders > 0 if force else is_due(now - txn.started, txn.orders, self.interval)):
                    continue
                try:
                    await self._commit(txn)
                except (ProducerFenced, IllegalOperation):  # fenced, or aiokafka's transaction is broken for good
                    await self._fenced(txn)
                except KafkaError as exc:
                    logger.warning("Transaction of %s[%d] failed (%r): aborted, its orders are read again",
                                   self.topic, partition, exc)
                    await self._redo(txn)
                except Exception as exc:  # noqa: BLE001 - never crash the worker: the work is read again
                    logger.warning("Transaction of %s[%d] failed (%r): dropped, its orders are read again",
                                   self.topic, partition, exc)
                    await self._fenced(txn)

    async def failed(self, partition: int, exc: BaseException) -> None:
        """Processing a partition's batch failed in its transaction (call under the lock): drop its open work.

        A fenced producer refuses every send (aiokafka raises ``IllegalOperation``
        once its transaction is fatally broken); the worker must not crash for it.
        """
        txn = self.open.get(partition)
        if txn is not None:
            logger.warning("Batch of %s[%d] failed in its transaction (%r): the open work is dropped",
                           self.topic, partition, exc)
            await self._fenced(txn)

    async def _commit(self, txn: OpenTransaction, begin_next: bool = True) -> None:
        producer = txn.producer
        if txn.orders:
            began = time.perf_counter()
            await producer.flush()
            await asyncio.sleep(0)  # the delivery callbacks of the last batches
            while txn.refused:  # their orders become dead letters, in this transaction
                refused, txn.refused = txn.refused, []
                for *_, error in refused:  # refused because the transaction is dead: nothing to dead-letter
                    if isinstance(error, (ProducerFenced, IllegalOperation)):
                        raise ProducerFenced()
                for topic, partition, sources, error in refused:
                    await self._on_refused(producer, topic, partition, sources, error)
                await producer.flush()
                await asyncio.sleep(0)
            await producer.send_offsets_to_transaction(
                {AioTopicPartition(topic, txn.partition): offset for topic, offset in txn.next_offsets.items()},
                self.group_id)
            await producer.commit_transaction()
            self.counts["committed"] += 1
            if self.on_committed is not None:
                self.on_committed(time.perf_counter() - began)
            if self.on_ended is not None:
                self.on_ended(txn.partition, True)
            txn.base_offsets.update(txn.next_offsets)
            txn.orders = 0
            if begin_next:
                await producer.begin_transaction()
        txn.started = time.monotonic()

    async def _abort(self, txn: OpenTransaction) -> bool:
        if self.on_ended is not None:  # its work is dropped, whether the broker hears the abort or times it out
            self.on_ended(txn.partition, False)
        try:
            await asyncio.wait_for(txn.producer.abort_transaction(), FENCE_TIMEOUT)
            self.counts["aborted"] += 1
            return True
        except Exception as exc:  # noqa: BLE001 - the broker aborts it at the timeout, or the next fence does
            logger.warning("Abort of the transaction of %s[%d] failed: %r", self.topic, txn.partition, exc)
            return False

    async def _redo(self, txn: OpenTransaction) -> None:
        """Abort the transaction and read its orders again from where it started (a new transaction)."""
        if await self._abort(txn):
            try:
                await txn.producer.begin_transaction()
                txn.orders, txn.next_offsets, txn.refused, txn.started = 0, {}, [], time.monotonic()
                if txn.base_offsets and self._seek is not None:
                    for topic, offset in txn.base_offsets.items():
                        await self._seek(topic, txn.partition, offset)
                    return
            except ProducerFenced:
                pass
        await self._fenced(txn)

    async def _fenced(self, txn: OpenTransaction) -> None:
        """Another producer took the transactional id (or the broker timed our transaction out): drop the work.

        Never a crash.  If the partition is still ours and no rebalance is under
        way (a timed-out transaction), it is fenced again and read again from its
        committed offset; otherwise the rebalance's seek fences it if it comes back.
        """
        self.counts["producer_fenced"] += 1
        if self.on_ended is not None:
            self.on_ended(txn.partition, False)
        self.open.pop(txn.partition, None)
        logger.warning("Producer of %s[%d] fenced: its open work is dropped (read again by the partition's owner)",
                       self.topic, txn.partition)
        await _stop(txn.producer)
        if txn.partition in set(self._assigned()) and not self._rebalancing() and self._committed is not None:
            try:
                self.open[txn.partition] = await self._start(txn.partition)
                for topic in self.topics:
                    offset = await self._committed(topic, txn.partition) or 0  # none committed: from the log's start
                    self.open[txn.partition].base_offsets[topic] = offset
                    if self._seek is not None:
                        await self._seek(topic, txn.partition, offset)
            except Exception as exc:  # noqa: BLE001 - left unfenced: the next rebalance fences it
                self.open.pop(txn.partition, None)
                logger.warning("Fencing %s[%d] again failed (%r): left to the next rebalance", self.topic,
                               txn.partition, exc)

    async def close(self) -> None:
        """Worker stopping: commit what is open, stop every producer."""
        await self.release(list(self.open))


async def in_transactions(transactions: Transactions, batches: Mapping[Any, Sequence[Any]],
                          handle: Callable[[Any, Sequence[Any], OpenTransaction], Awaitable[None]]) -> None:
    """exactly_once: ``handle`` each partition's records in its open transaction (their outputs, dead letters and
    offset): every join agent's loop under exactly_once; a partition not fenced yet waits, a failed batch's transaction
    is dropped (its records are read again)."""
    async with transactions.lock:
        for tp, messages in batches.items():
            txn = transactions.get(tp.partition)
            messages = txn.unprocessed(tp.topic, messages) if txn is not None else ()
            if txn is None or not messages:  # not fenced yet (the seek after its fence reads them again), or done
                continue
            try:
                await handle(tp, messages, txn)
            except Exception as exc:  # noqa: BLE001 - not the records' (they are netted): the transaction's
                await transactions.failed(tp.partition, exc)
                continue
            txn.processed(tp.topic, messages[-1].offset + 1, len(messages))
    await transactions.commit_due()


def quiet_fenced_futures(loop: asyncio.AbstractEventLoop) -> None:
    """A fence's error that aiokafka leaves on futures nobody awaits is one debug line, not a logged traceback.

    When a fenced producer's sender fails, aiokafka sets the error on every queued
    batch's drain waiter, which only a sender waiting for buffer space awaits, and on
    the transaction's end future, which only a commit or an abort awaits (a fence can
    set it twice: the refused produce, then the sender's failure, on a new future);
    asyncio then logs "Future exception was never retrieved" with a traceback for
    each, from a worker that did what it should.  Any other unretrieved error still
    goes to the loop's previous handler.
    """
    previous = loop.get_exception_handler()
    if getattr(previous, "streamapp_fenced", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, (ProducerFenced, IllegalOperation)) and "never retrieved" in context.get("message", ""):
            logger.debug("A fenced producer's error left on a future nobody awaits: %r", error)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.streamapp_fenced = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


async def _stop(producer: Any) -> None:
    try:
        await asyncio.wait_for(producer.stop(), STOP_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - a producer we are done with: nothing to lose
        logger.debug("Stopping a transactional producer: %r", exc)


def committed_offset(kafka: Any, group_id: str, topic: str, partition: int) -> int | None:
    """The group's committed offset of one partition (OffsetFetch, stable offsets only); None when none is."""
    consumer = Consumer({**librdkafka_config(kafka), "group.id": group_id, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, partition)], timeout=30)[0].offset
        return found if found >= 0 else None
    finally:
        consumer.close()


def install(app: Any, topics: str | Sequence[str], on_refused: OnRefused) -> Transactions:
    """The :class:`Transactions` of one stream topic, or of co-partitioned ``topics`` whose partition p shares one
    transaction (``app.transactions[topic]`` for each): revokes release, a timer commits, shutdown commits.

    The consumer's ``seek_to_committed`` fences (:func:`streamapp.worker.faust_internals.seek_fenced`).
    """
    settings: Settings = app.settings
    group_id = app.conf.id
    names = (topics,) if isinstance(topics, str) else tuple(topics)

    async def seek(topic: str, partition: int, offset: int) -> None:
        await app.consumer.seek(TP(topic, partition), offset)

    def assigned() -> list[int]:
        return sorted({tp.partition for tp in app.consumer.assignment() if tp.topic in names})

    async def committed(topic: str, partition: int) -> int | None:
        return await asyncio.get_running_loop().run_in_executor(
            None, committed_offset, settings.kafka, group_id, topic, partition)

    transactions = Transactions(names, group_id, settings.app_id, producer_factory(settings), on_refused, seek,
                                assigned, lambda: bool(app.rebalancing), committed)

    async def on_revoked(sender: Any, revoked: Iterable[Any], **kwargs: Any) -> None:
        await transactions.release({tp.partition for tp in revoked if tp.topic in names})

    async def on_shutdown(sender: Any, **kwargs: Any) -> None:
        await transactions.close()

    app.on_partitions_revoked.connect(on_revoked, weak=False)
    app.on_before_shutdown.connect(on_shutdown, weak=False)
    @app.timer(interval=transactions.interval, name=f"streamapp.worker.transactions.commit_due.{'+'.join(names)}")
    async def commit_due() -> None:
        await transactions.commit_due()

    for topic in names:
        app.transactions[topic] = transactions
    return transactions
