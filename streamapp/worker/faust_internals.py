"""Every private name of Faust (and of its aiokafka driver and RocksDB store) the worker uses, and nowhere else.

Faust has no public seam for these.  Each is listed in :data:`PRIVATE_NAMES`, and
``tests/test_faust_internals.py`` fails, naming it, when an upgrade removes one.
Where Faust has a public seam the worker uses it instead: ``web_application_options``
for the middlewares, the web driver's ``production_blueprints`` for the page at
``/``, the ``app.transport`` setter for the batch transport.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Mapping

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message

#: (class, private attribute) the functions below reach; ``tests/test_faust_internals.py`` checks each one.
PRIVATE_NAMES = (
    ("faust.transport.consumer:Consumer", "_read_offset"),
    ("faust.transport.consumer:Consumer", "_add_gap"),
    ("faust.transport.consumer:Consumer", "_n_acked"),
    ("faust.stores.rocksdb:Store", "_db_for_partition"),
    ("faust.transport.drivers.aiokafka:Producer", "_ensure_producer"),
    # A rebalance's commit (streamapp.worker.transport.Consumer): the commit under way, and the hooks whose
    # order matters: Faust drops the acked offsets in on_partitions_revoked, and resumes stream partitions
    # before its perform_seek has moved them.
    ("faust.transport.consumer:Consumer", "_commit_fut"),
    ("faust.transport.consumer:Consumer", "on_partitions_revoked"),
    ("faust.transport.consumer:Consumer", "perform_seek"),
    ("faust.transport.consumer:Consumer", "wait_empty"),
    # exactly_once (streamapp.worker.transactions): the fence's hook, and the consumer's isolation level.
    ("faust.transport.consumer:ThreadDelegateConsumer", "seek_to_committed"),
    ("faust.transport.consumer:ThreadDelegateConsumer", "_new_consumer_thread"),
    ("faust.transport.drivers.aiokafka:AIOKafkaConsumerThread", "_create_worker_consumer"),
    ("aiokafka.consumer.consumer:AIOKafkaConsumer", "_isolation_level"),
    ("aiokafka.producer.producer:AIOKafkaProducer", "_txn_manager"),
)


async def accept(consumer: Any, tp: TP, message: Message) -> bool:
    """What Faust's fetch loop (``Consumer._drain_messages``) does with a message's offset before delivering it.

    False for a message at or below the offset already read (a re-fetch after a
    seek); otherwise the gap since that offset is recorded (so a commit never skips
    an offset that was not acked) and the message becomes the last one read.
    """
    last = consumer._read_offset[tp]
    if last is not None and message.offset < last:
        return False
    if last and message.offset - last > 1 and consumer.app.topics.acks_enabled_for(tp.topic):
        await consumer._add_gap(tp, last + 1, message.offset)
    consumer._read_offset[tp] = message.offset
    return True


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


async def seek_again(consumer: Any, partitions: Any) -> None:
    """Seek each of ``partitions`` still assigned to the read offset Faust's last ``perform_seek`` gave it.

    That is its committed offset (Faust keeps it as the read offset, so the next
    record read there makes no gap), or the start when it has none (0, as
    :func:`seek_fenced` does; Faust keeps it as None).
    """
    assigned = consumer.assignment()
    for tp in partitions:
        if tp in assigned:
            await consumer.seek(tp, consumer._read_offset[tp] or 0)


def partition_db(table: Any, partition: int) -> Any:
    """The RocksDB database of one partition of ``table``: a lookup there never finds a row of another partition.

    Faust's ``table[key]`` reads the partition of the event being processed, and a
    batch of orders is processed outside any event.
    """
    return table.data._db_for_partition(partition)


def aiokafka_producer(app: Any) -> Any:
    """The started aiokafka producer behind Faust's: whole batches go to it (``create_batch``/``send_batch``).

    Faust flushes it before every commit, so what is queued there is covered by
    the next commit like any ``send``.
    """
    return app.producer._ensure_producer()


def read_committed(consumer: Any) -> Any:
    """An aiokafka consumer not started yet, set to read only committed records (``isolation.level``).

    Faust chooses ``read_committed`` only for its own exactly_once, which streamapp
    never sets (docs/research/exactly-once.md); the fetcher reads the level at start.
    """
    consumer._isolation_level = "read_committed"
    return consumer


class ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's aiokafka consumer thread whose consumer reads ``read_committed`` (see :func:`read_committed`)."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        return read_committed(super()._create_worker_consumer(transport))


def new_consumer_thread(consumer: Any) -> Any:
    """The consumer thread Faust's aiokafka ``Consumer._new_consumer_thread`` builds, reading ``read_committed``."""
    return ReadCommittedConsumerThread(consumer, loop=consumer.loop, beacon=consumer.beacon)


async def seek_fenced(consumer: Any, seek: Callable[[], Awaitable[Mapping[TP, int]]]) -> Mapping[TP, int]:
    """Faust's ``seek_to_committed`` (``seek``), with the exactly-once fence first when the app has one.

    Faust seeks every assigned partition to its committed offset through this
    method, and hands no record of a new assignment to a stream before it; so the
    orders partitions are fenced (InitProducerId, :mod:`streamapp.worker.transactions`)
    right before their committed offsets are read.  A partition with no committed
    offset (or 0) is sought to its start explicitly: aiokafka leaves such a
    partition where an early fetch left it.
    """
    transactions = getattr(consumer.app, "transactions", None)
    if transactions is None:
        return await seek()
    topic = transactions.topic
    async with transactions.lock:
        ours = [tp.partition for tp in consumer.assignment() if tp.topic == topic]
        await transactions.before_seek(ours)
        committed = await seek()
        offsets = {tp.partition: offset for tp, offset in committed.items() if tp.topic == topic}
        for partition in ours:
            if not offsets.get(partition):
                await consumer.seek(TP(topic, partition), 0)
        transactions.based({p: offsets.get(p) for p in ours})
        return committed


def retrieve_transaction_error(producer: Any) -> None:
    """Take the error a fenced transactional producer's transaction ends with, so asyncio does not log it.

    aiokafka sets it on the transaction's end future, which only ``commit_transaction``
    or ``abort_transaction`` await; a producer dropped after ``ProducerFenced`` awaits
    neither, and asyncio would log "Future exception was never retrieved" with a
    traceback for a worker that did exactly what it should.  A fence can set it twice:
    the refused produce marks the transaction abortable (an error on the future), then
    the sender's failure replaces that future with a new one holding the same error.
    So a future not yet done gets a callback that takes its error when it comes
    (call this after each ``begin_transaction``), and one already done is taken now
    (call it again after ``stop``, for the replacement).
    """
    manager = getattr(producer, "_txn_manager", None)
    waiter = manager.wait_for_transaction_end() if manager is not None else None
    if waiter is None:
        return
    if waiter.done():
        _take_error(waiter)
    else:
        waiter.add_done_callback(_take_error)


def _take_error(future: Any) -> None:
    if not future.cancelled():
        future.exception()
