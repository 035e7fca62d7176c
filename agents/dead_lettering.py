"""One record never stops the worker: whatever decoding, joining, encoding or producing it raises, it becomes a dead letter.

The batch handlers run each input record's work inside :func:`is_record_fault`'s net:
a failure caused by the record (a :class:`~streamapp.model.records.RecordError`, an
output too large for its topic, any unexpected exception from our code on its
bytes) sends that record to the dead-letter topic with the reason, counts it and
moves on.  A failure of Kafka itself (unreachable, not the leader, timed out) is
not the record's fault: it propagates, so a good record is never dead-lettered
because the broker was away.

Output sizes are checked before anything is sent, against the limits read once at
start (:mod:`streamapp.kafka.limits`): the producer refuses an oversized record with an
exception, and the broker refuses an oversized batch only after the offsets may
have moved on, so neither is left to happen.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any, Callable, Mapping, Sequence, TypeVar

from aiokafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError
from faust.exceptions import FaustError, ProducerSendError
from faust.types import TP

from streamapp.kafka.limits import RecordLimits, read_limits, record_size
from streamapp.model.dead_letters import DeadLetter
from streamapp.model.records import RecordError
from streamapp.worker.app import StreamappApp
from streamapp.worker.batch_sender import NOT_THE_TOPIC, BatchSender, OnFailure, OnSent, track_topics
from streamapp.worker.faust_internals import ack_all, aiokafka_producer
from streamapp.worker.health import quiet_repeats
from streamapp.worker.tables import RowWrites
from streamapp.worker.transport import ConsumerRecord

logger = logging.getLogger(__name__)
#: Each dead letter written: a burst of bad records is one WARNING per reason a minute, noting how many more were
#: not logged (the counters line and ``streamapp_dead_letters_total`` count every one), as aiokafka's repeated
#: errors are (its filter set by the first :class:`DeadLettering`). A letter that could not be written is never
#: summarised (``logger``: its line is its last trace).
written_logger = logging.getLogger(f"{__name__}.written")

#: Kafka errors that a record causes by itself (its size); every other Kafka error is the cluster's.
RECORD_KAFKA_ERRORS = (MessageSizeTooLargeError, RecordListTooLargeError)
#: A record's own bytes add at most this much on top of its key and value in a batch of its own
#: (batch header 61, record overhead 21, two length varints of at most 5, the header count 1).
RECORD_OVERHEAD = 93
#: What a record's checked work hands on to be written (see :meth:`DeadLettering.handle`).
P = TypeVar("P")
#: Why a record became a dead letter, as the metrics count it (``streamapp_dead_letters_by_reason_total``'s
#: ``reason``, a bounded label; the letter itself carries the sentence): its bytes could not be read as declared,
#: its event time is one an output topic refuses, an output would be too large, the broker refused its output's
#: batch, or the worker's code failed on it.
REASONS = ("undecodable", "timestamp_refused", "too_large", "broker_refused", "processing_error")


class OutputRefused(RecordError):
    """A record an output would refuse (``kind``: one of :data:`REASONS`), found before anything was sent."""

    def __init__(self, reason: str, field: str | None, kind: str) -> None:
        super().__init__(reason, field)
        self.kind = kind


def reason_kind(exc: BaseException) -> str:
    """The dead letter's reason among :data:`REASONS`: a RecordError is the record's bytes unless a check said more."""
    if isinstance(exc, OutputRefused):
        return exc.kind
    return "undecodable" if isinstance(exc, RecordError) else "processing_error"


class OutputChecks:
    """The limits of the topics one input's records are written to, for one fetch: refuse what they would refuse."""

    def __init__(self, limits: RecordLimits, topics: Sequence[str], now_ms: int) -> None:
        self.limits, self.topics, self.now_ms = limits, topics, now_ms
        windows = [limits.timestamp_bounds(topic, now_ms) for topic in topics]
        self.low, self.high = max(w[0] for w in windows), min(w[1] for w in windows)
        #: Key and value lengths within a budget fit for sure; above it, the exact size decides.
        self.budgets = {topic: limits.limit(topic)[0] - RECORD_OVERHEAD for topic in topics}

    def check_timestamp(self, timestamp_ms: int, field: str) -> None:
        """Refuse (RecordError on ``field``) a record timestamp one of the topics would refuse."""
        if not self.low <= timestamp_ms <= self.high:
            refused = [self.limits.bad_timestamp(topic, timestamp_ms, self.now_ms, field) for topic in self.topics]
            raise OutputRefused(next(r for r in refused if r is not None), field, "timestamp_refused")

    def check_size(self, topic: str, key: bytes | None, value: bytes | None, what: str) -> None:
        """Refuse (RecordError) an output that ``topic`` or the producer would refuse (``key`` None: a null key)."""
        if (len(key) if key else 0) + (len(value) if value else 0) > self.budgets[topic]:
            reason = self.limits.too_large(topic, key, value, what=what)
            if reason is not None:
                raise OutputRefused(reason, "value", "too_large")


def is_record_fault(exc: BaseException) -> bool:
    """True when ``exc`` came from the record itself, so dead-lettering it is right (see the module).

    Kafka's errors are the cluster's, except a record too large; Faust's (a table whose
    changelog is not ready), the operating system's and runtime errors are the
    worker's.  Everything else raised while handling one record (a RecordError, a
    RecursionError, a MemoryError, a TypeError on its data) is that record's.
    """
    cause = exc.__cause__ if isinstance(exc, ProducerSendError) and exc.__cause__ is not None else exc
    if isinstance(cause, KafkaError):
        return isinstance(cause, RECORD_KAFKA_ERRORS)
    if isinstance(exc, RecursionError):
        return True
    return isinstance(exc, Exception) and not isinstance(exc, (FaustError, OSError, RuntimeError))


def letters_for_refusal(error: BaseException, guarantee: str) -> bool:
    """Whether the records of a batch refused with ``error`` become dead letters under ``guarantee``.

    Not under at_least_once when the cluster refused it (not authorized, a deleted topic: what the batch sender
    tells the health, :data:`~streamapp.worker.batch_sender.NOT_THE_TOPIC`): every later commit is held then, so
    the restart reads and writes them again and a letter would be a second copy.  Under exactly_once offsets go
    in transactions, which no hold stops (a transaction's outputs: :meth:`DeadLettering.refused_in`).
    """
    return guarantee != "at_least_once" or isinstance(error, NOT_THE_TOPIC)


def reason_of(exc: BaseException) -> tuple[str, str | None]:
    """The dead letter's reason and field for a failure."""
    if isinstance(exc, RecordError):
        return exc.reason, exc.field
    return f"the worker could not process this record ({type(exc).__name__}: {_short(str(exc))})", "value"


class DeadLettering:
    """One app's dead letters and the record limits its outputs are checked against (read once, at start)."""

    def __init__(self, app: StreamappApp) -> None:
        self.app = app
        self._limits: RecordLimits | None = None
        self._lock = asyncio.Lock()
        #: Dead letters being sent for refused batches (kept referenced until done).
        self._pending: set[asyncio.Task[None]] = set()
        quiet_repeats(written_logger)

    async def size_limits(self) -> RecordLimits:
        """The limits every output is checked against, read from the cluster once, on first use at start."""
        if self._limits is None:
            async with self._lock:
                if self._limits is None:
                    settings, tables = self.app.settings, self.app.join_tables
                    topics = [*self.app.topology.owned_topics(), *tables.changelog_topics()]
                    limits = await asyncio.get_running_loop().run_in_executor(
                        None, read_limits, settings.kafka, topics, self.app.conf.producer_max_request_size)
                    logger.info(limits.summary())
                    # before any output is sent: no topic written through Faust's producer can drop out of its
                    # metadata (streamapp.worker.batch_sender.track_topics)
                    await track_topics(aiokafka_producer(self.app), topics)
                    self._limits = limits
        return self._limits

    async def handle(self, batches: Mapping[TP, Sequence[ConsumerRecord]], check: Callable[[int, ConsumerRecord], P],
                     write: Callable[[int, ConsumerRecord, P], None], sender: BatchSender[ConsumerRecord],
                     rows: Sequence[RowWrites] = (), producer: Any = None,
                     before_send: Callable[[], None] | None = None) -> None:
        """A fetch's batch: ``check(partition, msg)`` every message in the net (its failure is its dead letter),
        ``write(partition, msg, what check returned)`` each that passed (a record is written whole or not at
        all), then ``before_send()`` (what the call adds once for all its records: a store's changelog records),
        the table rows to RocksDB, the outputs to the producer, and every record acked.  With a ``producer``
        (exactly_once: the partition's transactional one) the dead letters go through it."""
        for tp, messages in batches.items():
            partition = tp.partition
            for msg in messages:
                try:
                    checked = check(partition, msg)
                except Exception as exc:  # noqa: BLE001 - is_record_fault decides
                    if not is_record_fault(exc):
                        raise
                    await self.send(msg, exc, producer)
                    continue
                write(partition, msg, checked)
        if before_send is not None:
            before_send()
        for table_rows in rows:
            table_rows.write()
        await sender.send()
        consumer = self.app.consumer
        for tp, messages in batches.items():
            ack_all(consumer, tp, messages)

    def sender(self, on_sent: OnSent | None = None, producer: Any = None,
               on_failure: OnFailure | None = None) -> BatchSender[ConsumerRecord]:
        """A fetch's batch sender on Faust's producer (or ``producer``), whose refused batches' records become
        dead letters (by default at once, through Faust's producer)."""
        app = self.app
        return BatchSender(producer if producer is not None else aiokafka_producer(app), app.join_tables.partitioner,
                           app.partition_counts, on_failure=on_failure or self.refused, on_sent=on_sent,
                           deliveries=app.kafka_monitor.deliveries)

    async def send(self, msg: ConsumerRecord, error: BaseException, producer: Any = None) -> None:
        """The record, byte for byte where it fits, to the dead-letter topic with the reason; counted and logged.

        Too large for the dead-letter topic, it is cut down (:meth:`DeadLetter.fitted`);
        should the producer refuse even that, the letter goes without payload, and if
        that fails too, the log line with coordinates and SHA-256 is the trace left.  ``producer``: an
        aiokafka producer to send it with instead of Faust's (exactly_once: the source partition's transaction).
        """
        reason, field = reason_of(error)
        letter = letter_of(msg, reason, field)
        topic = self.app.settings.dead_letter_topic
        limits = await self.size_limits()
        limit, _ = limits.limit(topic)
        stamp = letter.timestamp  # the record's own, as Kafka Connect's; the broker's now where the topic refuses it
        if stamp is not None and limits.bad_timestamp(topic, stamp) is not None:
            stamp = None
        for attempt in (letter.fitted(limit, record_size), letter.fitted(0, record_size)):
            key, value = attempt.payload()  # a record with neither key nor value: an empty value (and a header)
            headers = attempt.record_headers()
            try:  # Faust's producer, flushed before every commit (or the transaction's, checked before its commit)
                if producer is None:
                    future = await self.app.join_tables.send_raw(
                        topic, key, value, stamp, headers)
                else:
                    partition = self.app.join_tables.partitioner(key, self.app.partition_counts[topic])
                    await track_topics(producer, [topic])
                    future = await producer.send(topic, value, key=key, partition=partition, timestamp_ms=stamp,
                                                 headers=headers)
            except Exception as exc:  # noqa: BLE001 - decided just below
                if not is_record_fault(exc):
                    raise
                continue
            future.add_done_callback(lambda f, letter=attempt: _check_sent(letter, f))
            self.app.counters.record_dead_letter(msg.topic, msg.partition, reason_kind(error))
            cut = f" (dead letter cut to fit: {', '.join(attempt.truncated)} kept as prefix + SHA-256)" \
                if attempt.truncated else ""
            # one message form per reason kind: the repeat filter summarises each kind apart
            written_logger.warning(f"Dead letter from %s[%d]@%d ({reason_kind(error)}): %s%s", msg.topic,
                                   msg.partition, msg.offset, reason, cut)
            return
        _log_lost(letter, "the producer refused it even without payload")

    def refused(self, topic: str, partition: int, sources: list[ConsumerRecord], error: BaseException) -> None:
        """BatchSender's ``on_failure``: the orders of a batch the broker refused become dead letters, unless its
        commits are held for it (:func:`letters_for_refusal`)."""
        if not letters_for_refusal(error, self.app.settings.processing_guarantee):
            logger.warning("%d records of the batch refused for %s[%d] are not dead-lettered: no offset is committed "
                           "any more, so the worker's restart reads and writes them again", len(sources), topic,
                           partition)
            return
        task = asyncio.ensure_future(self._send_all(sources, _refused_error(topic, partition, error)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def refused_in(self, producer: Any, topic: str, partition: int, sources: list[ConsumerRecord],
                         error: BaseException) -> None:
        """exactly_once: the orders of a refused batch become dead letters in the transaction of ``producer``;
        a batch refused for the cluster's reason (not its records') raises it: the transaction is redone."""
        if not is_record_fault(error):
            raise error
        await self._send_all(sources, _refused_error(topic, partition, error), producer)

    async def _send_all(self, sources: list[ConsumerRecord], error: RecordError, producer: Any = None) -> None:
        for msg in sources:
            try:
                await self.send(msg, error, producer)
            except Exception as exc:  # noqa: BLE001 - a callback's task: log, never lose silently
                _log_lost(letter_of(msg, error.reason, "value"), f"sending failed ({exc!r})")


def letter_of(msg: ConsumerRecord, reason: str, field: str | None) -> DeadLetter:
    """The whole record as a dead letter: key, value, headers and timestamp (-1 when it had none)."""
    return DeadLetter(msg.topic, msg.partition, msg.offset, msg.key, msg.value, reason, field,
                      original_headers=tuple(msg.headers or ()),
                      timestamp=msg.timestamp if msg.timestamp >= 0 else None)


def _refused_error(topic: str, partition: int, error: BaseException) -> RecordError:
    return OutputRefused(f"the broker refused the batch holding its record for {topic}[{partition}] "
                         f"({type(error).__name__}: {_short(str(error))})", "value", "broker_refused")


def _check_sent(letter: DeadLetter, future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        _log_lost(letter, f"the broker refused it ({future.exception()!r})")


def _log_lost(letter: DeadLetter, why: str) -> None:
    """The last trace of a record whose dead letter could not be written: one log line with all we know."""
    sizes = {part: len(data) for part, data in (("key", letter.key), ("value", letter.value)) if data is not None}
    digests = {part: letter.sha256.get(part) or hashlib.sha256(data).hexdigest()
               for part, data in (("key", letter.key), ("value", letter.value)) if data is not None}
    logger.error("Dead letter from %s[%d]@%d not written, %s: %s (sizes %s, SHA-256 %s)", letter.source_topic,
                 letter.source_partition, letter.source_offset, why, letter.reason,
                 {**sizes, **letter.original_sizes}, digests)


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
