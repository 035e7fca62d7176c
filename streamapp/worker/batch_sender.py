"""Send many already-encoded records with one aiokafka batch per topic partition.

One ``send`` per record costs the join more than building the record, so a fetch's records
are appended to aiokafka's batch builders and queued with one ``send_batch`` each, through
Faust's producer (so the next commit covers them). A refused batch hands its records to
``on_failure``, and every topic is tracked by the producer's metadata first (:func:`track_topics`),
or a batch for it can wait without a word. A topic the producer cannot send to (deleted, not
authorized) is waited for here, and that, a batch the cluster refused and a batch delivered are
told to the sender's :class:`Deliveries` (whose listener is the worker's health), so a stalled output is never
silent.
See docs/explanation/worker-internals.md#sending-whole-batches.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
import weakref
from functools import partial
from typing import Any, Callable, Generic, Iterable, Protocol, TypeVar

from aiokafka import errors as kafka_errors

from ..partitioners import KeyPartitioner

logger = logging.getLogger(__name__)

#: Refusals caused by a batch's records themselves (their size, their timestamps, their bytes), or by an
#: exactly-once producer's transaction (a fenced producer fails every queued batch): the topic can still be written.
NOT_THE_TOPIC = (kafka_errors.MessageSizeTooLargeError, kafka_errors.RecordListTooLargeError,
                 kafka_errors.InvalidTimestampError, kafka_errors.CorruptRecordException,
                 kafka_errors.ProducerFenced, kafka_errors.IllegalOperation, kafka_errors.OutOfOrderSequenceNumber,
                 kafka_errors.InvalidProducerEpoch, kafka_errors.TransactionalIdAuthorizationFailed)
#: What a topic's refusal means to the person reading the worker's line.
MEANINGS: dict[type, str] = {
    kafka_errors.UnknownTopicOrPartitionError: "the cluster does not have it (deleted?)",
    kafka_errors.TopicAuthorizationFailedError: "not authorized",
}
#: Seconds between two looks at the producer's metadata while a topic cannot be written (:func:`wait_writable`).
WAIT_INTERVAL = 1.0


class OutputListener(Protocol):
    """Told what the batches find out about the topics they go to (the worker's :class:`~.health.KafkaMonitor`):
    a topic the producer cannot send to (nothing sent), a batch the cluster refused (its records not written,
    though acked), a batch delivered."""

    def unwritable(self, topic: str, reason: str) -> None: ...

    def refused(self, topic: str, reason: str) -> None: ...

    def written_to(self, topic: str) -> None: ...


class Deliveries:
    """What one worker's batch senders find out about its outputs: the batches waiting for the broker's answer
    (:meth:`waiting`), and, told to its listeners (:class:`OutputListener`, the worker's health), a topic found
    unwritable, a batch refused, a batch delivered.  The worker's :class:`~.health.KafkaMonitor` holds it."""

    def __init__(self) -> None:
        self.listeners: set[OutputListener] = set()
        #: Batches queued and not answered yet: topic -> batch number -> when it was queued, and its delivery future
        #: (weakly: the future of a producer dropped unstopped never resolves, and is gone with it).
        self.queued: dict[str, dict[int, tuple[float, weakref.ref[asyncio.Future[Any]]]]] = {}
        self._numbers = itertools.count()

    def listen(self, listener: OutputListener) -> None:
        """Tell ``listener`` of every topic found unwritable and every batch refused or delivered."""
        self.listeners.add(listener)

    def unlisten(self, listener: OutputListener) -> None:
        self.listeners.discard(listener)

    def sent(self, topic: str, future: asyncio.Future[Any]) -> int:
        """A batch queued for ``topic``: its number, until :meth:`answered`."""
        number = next(self._numbers)
        self.queued.setdefault(topic, {})[number] = (time.monotonic(), weakref.ref(future))
        return number

    def answered(self, topic: str, number: int) -> None:
        self.queued[topic].pop(number, None)

    def waiting(self, now: float, since: float = float("-inf")) -> dict[str, float]:
        """Seconds the oldest batch of each topic has waited for the broker's answer, counted from ``since`` at most.

        aiokafka retries a refusal it deems passing (``NOT_ENOUGH_REPLICAS``, a leader moving,
        a timeout) until the batch expires (Faust's producer: after 20 minutes): a batch that
        waits long is the one sign of such a stall.
        """
        waits = {}
        for topic, batches in self.queued.items():
            for number in [number for number, (_, future) in batches.items() if future() is None]:
                del batches[number]
            if batches:
                waits[topic] = now - max(min(queued for queued, _ in batches.values()), since)
        return waits

    def unwritable(self, topic: str, reason: str) -> None:
        for listener in list(self.listeners):
            listener.unwritable(topic, reason)

    def refused(self, topic: str, reason: str) -> None:
        for listener in list(self.listeners):
            listener.refused(topic, reason)

    def written_to(self, topic: str) -> None:
        for listener in list(self.listeners):
            listener.written_to(topic)


def refusal(error: type | BaseException) -> str:
    """``UnknownTopicOrPartitionError (the cluster does not have it (deleted?))``: the error as the worker says it."""
    kind = error if isinstance(error, type) else type(error)
    meaning = MEANINGS.get(kind)
    return f"{kind.__name__} ({meaning})" if meaning else kind.__name__


def unwritable(producer: Any, topics: Iterable[str]) -> dict[str, str]:
    """The ``topics`` the producer's metadata says it cannot send to, with why: not authorized, or not there."""
    cluster = producer.client.cluster
    found = {}
    for topic in topics:
        if topic in cluster.unauthorized_topics:
            found[topic] = refusal(kafka_errors.TopicAuthorizationFailedError)
        elif cluster.partitions_for_topic(topic) is None:
            found[topic] = refusal(kafka_errors.UnknownTopicOrPartitionError)
    return found


async def wait_writable(producer: Any, topics: Iterable[str], deliveries: Deliveries) -> None:
    """Until the producer's metadata has every one of ``topics``, each miss told to ``deliveries``.

    aiokafka's own wait (in ``send_batch``) lasts up to the producer's request timeout (Faust's:
    20 minutes), then raises: the worker would be stuck as long without a word, then crash or, under
    exactly_once, fence and retry for ever.  Here it waits as long as the topic is missing, and the
    worker's health decides when to give up (``output_failure_exit``).
    """
    wanted = list(topics)
    while missing := unwritable(producer, wanted):
        for topic, reason in missing.items():
            deliveries.unwritable(topic, reason)
        await asyncio.sleep(WAIT_INTERVAL)
        await asyncio.wait([producer.client.force_metadata_update()], timeout=WAIT_INTERVAL * 10)

#: Where a record came from (the worker passes the input message); handed back if its batch fails.
S = TypeVar("S")
#: (topic, partition, sources of the batch's records, the error) for a batch the broker refused.
OnFailure = Callable[[str, int, list[Any], BaseException], None]
#: (topic, partition, offset of the batch's last record) for a batch the broker stored.
OnSent = Callable[[str, int, int], None]


async def track_topics(producer: Any, topics: Iterable[str]) -> None:
    """Have ``producer``'s metadata track ``topics`` (see the module): none of them can drop out of it later.

    Free for topics already tracked (aiokafka answers with a finished future, and nothing
    yields to the event loop); an untracked one costs one metadata refresh, waited for here.
    """
    refreshes = [future for future in map(producer.client.add_topic, topics) if not future.done()]
    if refreshes:
        await asyncio.gather(*refreshes)


class BatchSender(Generic[S]):
    """Collects records per (topic, partition), then queues them as whole batches."""

    def __init__(self, producer: Any, partitioner: KeyPartitioner, partition_counts: dict[str, int],
                 on_failure: OnFailure | None = None, on_sent: OnSent | None = None,
                 deliveries: Deliveries | None = None) -> None:
        """``deliveries``: the worker's (its health listens), else the sender's own."""
        self.deliveries = deliveries if deliveries is not None else Deliveries()
        self._producer = producer
        self._partitioner = partitioner
        self._counts = partition_counts
        self._on_failure = on_failure
        self._on_sent = on_sent
        self._open: dict[tuple[str, int], tuple[Any, list[S | None]]] = {}
        self._full: list[tuple[str, int, Any, list[S | None]]] = []

    def add(self, topic: str, key: bytes, value: bytes | None, timestamp_ms: int, source: S | None = None) -> None:
        """Append a record to the batch of the partition the partitioner picks (over the counts read at start)."""
        self.add_to(topic, self._partitioner(key, self._counts[topic]), key, value, timestamp_ms, source)

    def add_to(self, topic: str, partition: int, key: bytes, value: bytes | None, timestamp_ms: int,
               source: S | None = None) -> None:
        """Append a record to the batch of ``partition`` (a table's changelog: the partition of the row's source)."""
        tp = (topic, partition)
        entry = self._open.get(tp) or self._new_batch(tp)
        if entry[0].append(timestamp=timestamp_ms, key=key, value=value) is None:
            self._full.append((*tp, *entry))
            entry = self._new_batch(tp)
            entry[0].append(timestamp=timestamp_ms, key=key, value=value)
        entry[1].append(source)

    def add_all(self, topic: str, partition: int, records: Iterable[tuple[bytes | None, bytes | None]],
                timestamp_ms: int) -> None:
        """Append records of no source in order to the batch of ``partition`` (a store's changelog records of a
        handler call: one lookup of the batch for them all, not one a record)."""
        tp = (topic, partition)
        builder, sources = self._open.get(tp) or self._new_batch(tp)
        for key, value in records:
            if builder.append(timestamp=timestamp_ms, key=key, value=value) is None:
                self._full.append((topic, partition, builder, sources))
                builder, sources = self._new_batch(tp)
                builder.append(timestamp=timestamp_ms, key=key, value=value)
            sources.append(None)

    def _new_batch(self, tp: tuple[str, int]) -> tuple[Any, list[S | None]]:
        """A new open batch of ``tp`` (the one before it, if any, already among the full ones)."""
        entry = self._open[tp] = (self._producer.create_batch(), [])
        return entry

    async def send(self) -> None:
        """Queue every collected batch with the producer (not waiting for the broker's acknowledgement)."""
        batches = self._full + [(topic, partition, *entry) for (topic, partition), entry in self._open.items()]
        self._full, self._open = [], {}
        topics = {batch[0] for batch in batches}
        await track_topics(self._producer, topics)
        await wait_writable(self._producer, topics, self.deliveries)
        for topic, partition, builder, sources in batches:
            builder.close()
            future = await self._producer.send_batch(builder, topic, partition=partition)
            number = self.deliveries.sent(topic, future)
            future.add_done_callback(partial(self._delivered, topic, partition, sources, number))

    def _delivered(self, topic: str, partition: int, sources: list[S | None], number: int,
                   future: asyncio.Future[Any]) -> None:
        self.deliveries.answered(topic, number)
        if future.cancelled():
            return
        if future.exception() is None:
            metadata = future.result()
            if self._on_sent is not None and metadata is not None:
                self._on_sent(topic, partition, metadata.offset + len(sources) - 1)
            self.deliveries.written_to(topic)
            return
        error = future.exception()
        assert error is not None
        logger.error("The broker refused a batch of %d records for %s[%d]: %r", len(sources), topic, partition, error)
        if not isinstance(error, NOT_THE_TOPIC):
            self.deliveries.refused(topic, refusal(error))
        if self._on_failure is not None:
            self._on_failure(topic, partition, [s for s in sources if s is not None], error)
