"""Broker side of the offset plan: partition counts, fetch high watermarks, timestamp -> offset.

The embedded broker answers ListOffsets(latest) and ListOffsets(timestamp)
wrongly (see README), so end offsets come from what a fetch reports (the
partition-EOF position) and, on that broker, timestamps are found by scanning.
"""
from __future__ import annotations

import time
import uuid
from typing import Iterator, Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from streamapp.topics import describe

from .errors import ReconcileError
from .window import OffsetPlan, TimeWindow, TopicRange, covering_range

POLL_TIMEOUT = 0.05
STALL_TIMEOUT = 30.0
LOOKUPS = ("auto", "index", "scan")
#: Roles whose records are filtered by timestamp; users are read whole (a user may predate the day).
TIMED_ROLES = ("orders", "faust_direct", "ksqldb_direct", "faust_repartition", "ksqldb_repartition")


def partition_counts(bootstrap: str, topics: Mapping[str, str]) -> dict[str, int]:
    """Partition count per topic; fails naming every missing topic and its option."""
    try:
        found = describe(bootstrap, set(topics.values()))
    except Exception as exc:  # confluent-kafka raises KafkaException with a cimpl error
        raise ReconcileError(f"--bootstrap-server={bootstrap!r}: cannot read metadata: {exc}") from None
    missing = [f"{topic} (--{role.replace('_', '-')}-topic)" for role, topic in topics.items() if topic not in found]
    if missing:
        raise ReconcileError(f"unknown topic: {', '.join(missing)} on {bootstrap}")
    return {topic: found[topic].partitions for topic in topics.values()}


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"streamapp-reconcile-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )


def _records(consumer: Consumer, topic: str, partition: int) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) from the log start to the fetch high watermark, which ends the iteration."""
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    idle_since = time.monotonic()
    try:
        while True:
            batch = consumer.consume(num_messages=5000, timeout=POLL_TIMEOUT)
            if not batch and time.monotonic() - idle_since > STALL_TIMEOUT:
                raise ReconcileError(f"{topic}[{partition}]: no fetch answer within {STALL_TIMEOUT:.0f}s")
            for message in batch:
                idle_since = time.monotonic()
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        yield -1, int(message.offset())
                        return
                    raise ReconcileError(f"{topic}[{partition}]: {error.str()}")
                yield int(message.offset()), int(message.timestamp()[1])
    finally:
        consumer.unassign()


def scan_partition(consumer: Consumer, topic: str, partition: int, window: TimeWindow | None) -> tuple[int, int]:
    """Offsets to read, by reading the partition to its fetch high watermark.

    With a window: the smallest range covering its records (``covering_range``);
    without: the whole partition, log start to high watermark.
    """
    start: int | None = None
    end = 0

    def timed() -> Iterator[tuple[int, int]]:
        nonlocal start, end
        for offset, value in _records(consumer, topic, partition):
            if offset < 0:
                end = value
                return
            start = offset if start is None else start
            yield offset, value

    if window is None:
        for _ in timed():
            pass
        return (end if start is None else start), end
    first, last = covering_range(timed(), window.start_ms, window.end_ms, -1)
    return (end, end) if first < 0 else (first, last)


def index_offsets(consumer: Consumer, topic: str, partition: int, moments_ms: list[int], end: int) -> list[int]:
    """ListOffsets by timestamp (Apache Kafka); -1 (no record that new) becomes the high watermark."""
    found = consumer.offsets_for_times([TopicPartition(topic, partition, m) for m in moments_ms], timeout=15)
    return [end if tp.offset < 0 else int(tp.offset) for tp in found]


def resolve_plan(
    bootstrap: str,
    topics: Mapping[str, str],
    window: TimeWindow,
    lookup: str,
    grace_ms: int,
) -> OffsetPlan:
    """Resolve the window to offsets per role (users read whole, the rest by timestamp +/- grace).

    ``lookup="index"`` trusts the broker's ListOffsets (Apache Kafka), widened by
    ``grace_ms`` for out-of-order timestamps; ``"scan"`` reads each partition to
    the fetch high watermark (the embedded broker) and needs no grace.
    """
    counts = partition_counts(bootstrap, topics)
    moments = [window.start_ms - grace_ms, window.end_ms + grace_ms]
    consumer = _consumer(bootstrap)
    try:
        resolved: dict[str, TopicRange] = {}
        for role, topic in topics.items():
            timed = role in TIMED_ROLES
            ranges: dict[int, tuple[int, int]] = {}
            for partition in range(counts[topic]):
                if lookup == "index":
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
                    found = index_offsets(consumer, topic, partition, moments, int(high)) if timed else [int(low), int(high)]
                    ranges[partition] = (found[0], found[1])
                else:
                    ranges[partition] = scan_partition(consumer, topic, partition, window if timed else None)
            resolved[role] = TopicRange(role, topic, ranges, timed)
    finally:
        consumer.close()
    return OffsetPlan(window, resolved, lookup)
