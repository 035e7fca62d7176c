"""The one way streamapp reads a topic: from given offsets (the beginning by default) to each partition's end.

The end of a partition is where a Fetch says it is (librdkafka's end-of-partition
event: the high watermark, the last stable offset for committed records).  That
needs no ListOffsets round trip and no care for a log whose last offsets are
transaction markers, which a consumer never receives, so a reader waiting for
offset ``end - 1`` would wait for ever.

A :class:`TopicReader` keeps its consumer and its place: each :meth:`~TopicReader.read_to_end`
returns only the records that arrived since the last one, so waiting for records
never reads a topic again from its start.  The reports, the fingerprint's sample,
the reconciliation's Kafka ranges and the tests all read through it.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from types import TracebackType
from typing import Iterable, Iterator, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, TopicPartition

from ..errors import StreamappError
from . import CLIENT_LOGGER
from .security import Kafka, check_access_once, librdkafka_config

#: Seconds a read may go without a record or an end-of-partition before it gives up.
READ_TIMEOUT = 30.0
#: Records asked of the client per call.
BATCH = 10_000


class TopicReadError(StreamappError):
    """A topic is missing, or could not be read to its end; the message names it."""


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    #: In the record's order, a name as often as the producer repeated it (Kafka allows it).
    headers: tuple[tuple[str, bytes | None], ...] = field(default=(), compare=False)

    @classmethod
    def of(cls, msg: Message) -> "Record":
        return cls(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1],
                   tuple(msg.headers() or ()))


def reader_config(access: Kafka, group_prefix: str, **overrides: object) -> dict[str, object]:
    """librdkafka settings of a consumer that reads assigned offsets and leaves nothing behind.

    Every reader of topics (this module's, the reconciliation's offset ranges) uses them,
    so that all of them read the same records: committed ones only.
    """
    return {
        **librdkafka_config(access),
        "group.id": f"{group_prefix}-{uuid.uuid4().hex[:12]}",  # never commits: no group state is left
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        # Only committed records (librdkafka's default, said here): an aborted transaction's are never read,
        # and a partition's end is its last stable offset (docs/RELIABILITY.md, exactly_once).
        "isolation.level": "read_committed",
        "allow.auto.create.topics": False,
        "fetch.wait.max.ms": 100,
        "logger": CLIENT_LOGGER,
        **overrides,
    }


class TopicReader:
    """One topic's records, read incrementally from ``start`` (offset per partition; the beginning by default).

    ``partitions`` defaults to every partition the brokers list; a topic they do not
    list is an ``error`` naming it (the reader never creates one).  Use it as a
    context manager, or call :meth:`close`.
    """

    def __init__(
        self, bootstrap: Kafka, topic: str, partitions: Iterable[int] | None = None,
        start: Mapping[int, int] | None = None, error: type[StreamappError] = TopicReadError,
    ) -> None:
        self.bootstrap, self.topic, self.error = bootstrap, topic, error
        check_access_once(bootstrap)
        self.consumer = Consumer(reader_config(bootstrap, "streamapp-reader"))
        try:
            self.partitions = sorted(partitions) if partitions is not None else list(range(self._count()))
        except BaseException:
            self.consumer.close()
            raise
        start = start or {}
        #: Next offset to read per partition (None: not known yet, the first read starts at ``start``).
        self._next: dict[int, int | None] = {p: start.get(p) for p in self.partitions}
        #: Partitions whose end was reached and nothing has arrived since.
        self._at_end: set[int] = set()
        self._paused: set[int] = set()
        self._start = start
        self._assigned = False

    def _count(self) -> int:
        try:
            metadata = self.consumer.list_topics(timeout=READ_TIMEOUT).topics.get(self.topic)
        except KafkaException as exc:
            raise self.error(f"cannot reach the Kafka brokers at {self.bootstrap}: {exc.args[0].str()}") from None
        if metadata is None or metadata.error is not None:
            raise self.error(f"topic {self.topic} does not exist on {self.bootstrap} (it was not created)")
        return len(metadata.partitions)

    # -- reading --------------------------------------------------------------------------------

    def read_to_end(self, timeout: float = READ_TIMEOUT) -> list[Record]:
        """The records since the last read, up to each (unpaused) partition's end as of now."""
        return [record for batch in self.batches(timeout=timeout) for record in batch]

    def batches(self, until: Mapping[int, int] | None = None, timeout: float = READ_TIMEOUT) -> Iterator[list[Record]]:
        """Records in batches up to each unpaused partition's end, or (``until``) below its offset there.

        The caller may :meth:`pause` partitions between batches.  Each partition
        is fetched afresh first, so its end is the end as of this call.
        """
        self._refetch()
        wanted = set(self.partitions)

        def finished() -> bool:
            if until is None:
                return wanted <= self._at_end | self._paused
            return all((self._next[p] or 0) >= until.get(p, 0) for p in wanted - self._paused)

        idle_since = time.monotonic()
        while not finished():
            messages = self.consumer.consume(num_messages=BATCH, timeout=0.1)
            if messages:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > timeout:
                raise self.error(self._stalled(until, timeout))
            records = self._take(messages)
            if until is not None:
                records = [r for r in records if r.offset < until.get(r.partition, 0)]
            if records:
                yield records

    def _stalled(self, until: Mapping[int, int] | None, timeout: float) -> str:
        if until is None:
            waiting = sorted(set(self.partitions) - self._at_end - self._paused)
            return f"topic {self.topic}: partitions {waiting} did not reach their end: nothing arrived for {timeout:.0f}s"
        short = {p: (self._next[p], until.get(p, 0)) for p in self.partitions
                 if p not in self._paused and (self._next[p] or 0) < until.get(p, 0)}
        where = ", ".join(f"{self.topic}[{p}] at offset {at}, planned end {end}" for p, (at, end) in short.items())
        return f"{where}: nothing arrived for {timeout:.0f}s (records deleted by retention?)"

    def read(self, seconds: float) -> list[Record]:
        """Whatever arrives within ``seconds`` (at once when records are waiting): for following a topic."""
        self._assign()
        deadline = time.monotonic() + seconds
        records: list[Record] = []
        while not records and time.monotonic() < deadline:
            records = self._take(self.consumer.consume(num_messages=BATCH, timeout=min(0.1, seconds)))
        return records

    def _take(self, messages: list[Message]) -> list[Record]:
        records = []
        for msg in messages:
            partition, error = msg.partition(), msg.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise self.error(f"topic {self.topic}: {error.str()}")
                self._at_end.add(partition)
                self._next[partition] = max(self._next[partition] or 0, msg.offset())
                continue
            self._at_end.discard(partition)
            self._next[partition] = msg.offset() + 1
            records.append(Record.of(msg))
        return records

    def _assign(self) -> bool:
        """Start fetching, on the first read (offset lookups alone fetch no records); True if it just started."""
        if self._assigned:
            return False
        self._assigned = True
        self.consumer.assign([TopicPartition(self.topic, p, self._start.get(p, OFFSET_BEGINNING)) for p in self.partitions])
        if self._paused:
            self.consumer.pause([TopicPartition(self.topic, p) for p in sorted(self._paused)])
        return True

    def _refetch(self) -> None:
        """Ask for each partition's end again: a seek to where we are makes the next Fetch report it afresh."""
        if self._assign():  # just assigned: the first Fetch reports the end anyway
            return
        for partition in self.partitions:
            if partition not in self._paused and self._next[partition] is not None:
                self.consumer.seek(TopicPartition(self.topic, partition, self._next[partition]))
        self._at_end -= set(self.partitions) - self._paused

    # -- control --------------------------------------------------------------------------------

    def pause(self, partitions: Iterable[int]) -> None:
        new = set(partitions) - self._paused
        if new and self._assigned:
            self.consumer.pause([TopicPartition(self.topic, p) for p in sorted(new)])
        self._paused |= new

    def resume(self, partitions: Iterable[int]) -> None:
        old = set(partitions) & self._paused
        if old and self._assigned:
            self.consumer.resume([TopicPartition(self.topic, p) for p in sorted(old)])
        self._paused -= old

    def watermarks(self) -> dict[int, tuple[int, int]]:
        """(log start, end) offsets of each partition, asked of the brokers (ListOffsets)."""
        try:
            return {p: tuple(map(int, self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, p), timeout=READ_TIMEOUT))) for p in self.partitions}  # type: ignore[misc]
        except KafkaException as exc:
            raise self.error(f"{self.topic}: cannot list offsets on {self.bootstrap}: {exc}") from None

    def offsets_at(self, moment_ms: int) -> dict[int, int | None]:
        """Per partition, the first offset whose timestamp is at or after ``moment_ms`` (None: no record that new).

        One request per moment: librdkafka keeps one answer per partition in a request.
        """
        asked = [TopicPartition(self.topic, p, moment_ms) for p in self.partitions]
        try:
            found = self.consumer.offsets_for_times(asked, timeout=READ_TIMEOUT)
        except KafkaException as exc:
            raise self.error(f"{self.topic}: cannot list offsets on {self.bootstrap}: {exc}") from None
        return {tp.partition: (int(tp.offset) if tp.offset >= 0 else None) for tp in found}

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> "TopicReader":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_topic(bootstrap: Kafka, topic: str, timeout: float = READ_TIMEOUT) -> list[Record]:
    """Every record of ``topic``, from the beginning to each partition's end.

    Fails (naming the topic) when it does not exist rather than let a client
    auto-create it with the broker's default count.
    """
    with TopicReader(bootstrap, topic) as reader:
        return reader.read_to_end(timeout)


def key_partitions(records: Iterable[Record]) -> dict[str, int]:
    """UTF-8 key -> partition of its latest record (what a table sees); NULL keys left out."""
    result: dict[str, int] = {}
    for record in sorted(records, key=lambda r: (r.timestamp, r.offset)):
        if record.key is not None:
            result[record.key.decode("utf-8", "replace")] = record.partition
    return result
