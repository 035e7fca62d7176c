"""Broker side of the offset plan: partition counts, fetch high watermarks, timestamp -> offset.

The embedded broker answers ListOffsets(latest) and ListOffsets(timestamp)
wrongly (see README), so end offsets come from what a fetch reports (the
partition-EOF position) and, on that broker, timestamps are found by scanning.
"""
from __future__ import annotations

import time
import uuid
from typing import Mapping

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from streamapp.topics import describe

from .errors import ReconcileError
from .window import CoveringRange, OffsetPlan, TimeWindow, TopicRange

POLL_TIMEOUT = 0.05
STALL_TIMEOUT = 30.0
LOOKUPS = ("auto", "index", "scan")
#: Roles whose records are filtered by timestamp; users are read whole (a user may predate the day).
TIMED_ROLES = ("orders", "faust_direct", "ksqldb_direct", "faust_repartition", "ksqldb_repartition")


def partition_counts(bootstrap: str, topics: Mapping[str, str], flags: Mapping[str, str] | None = None) -> dict[str, int]:
    """Partition count per topic; fails naming every missing topic and (given ``flags``, role -> option) its option."""
    try:
        found = describe(bootstrap, set(topics.values()))
    except Exception as exc:  # confluent-kafka raises KafkaException with a cimpl error
        raise ReconcileError(f"--bootstrap-server={bootstrap!r}: cannot read metadata: {exc}") from None
    flags = flags or {}
    missing = [f"{topic} ({flags[role]})" if role in flags else topic for role, topic in topics.items() if topic not in found]
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


def scan(bootstrap: str, targets: Mapping[tuple[str, int], TimeWindow | None]) -> dict[tuple[str, int], tuple[int, int]]:
    """Offsets to read per (topic, partition), by reading every partition at once to its fetch high watermark.

    A partition with a window gets the smallest range covering the window's
    records (``CoveringRange``); one without, log start to high watermark.
    """
    trackers = {tp: CoveringRange(w.start_ms, w.end_ms) for tp, w in targets.items() if w is not None}
    first: dict[tuple[str, int], int] = {}
    ends: dict[tuple[str, int], int] = {}
    consumer = _consumer(bootstrap)
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for topic, partition in targets])
    idle_since = time.monotonic()
    try:
        while len(ends) < len(targets):
            batch = consumer.consume(num_messages=10_000, timeout=POLL_TIMEOUT)
            if batch:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > STALL_TIMEOUT:
                waiting = sorted(f"{t}[{p}]" for t, p in targets if (t, p) not in ends)
                raise ReconcileError(f"no fetch answer within {STALL_TIMEOUT:.0f}s for {', '.join(waiting[:5])}")
            for message in batch:
                where = (message.topic(), message.partition())
                if where in ends:
                    continue
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise ReconcileError(f"{where[0]}[{where[1]}]: {error.str()}")
                    ends[where] = int(message.offset())
                    continue
                first.setdefault(where, int(message.offset()))
                if where in trackers:
                    trackers[where].observe(int(message.offset()), int(message.timestamp()[1]))
    finally:
        consumer.close()
    return {
        tp: trackers[tp].offsets(ends[tp]) if tp in trackers else (first.get(tp, ends[tp]), ends[tp])
        for tp in targets
    }


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
    counts = partition_counts(bootstrap, topics)  # callers check first, naming the options
    moments = [window.start_ms - grace_ms, window.end_ms + grace_ms]
    timed = {role: role in TIMED_ROLES for role in topics}
    if lookup == "index":
        consumer = _consumer(bootstrap)
        try:
            found = {}
            for role, topic in topics.items():
                for partition in range(counts[topic]):
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
                    edges = index_offsets(consumer, topic, partition, moments, int(high)) if timed[role] else [low, high]
                    found[(topic, partition)] = (int(edges[0]), int(edges[1]))
        finally:
            consumer.close()
    else:
        found = scan(bootstrap, {
            (topic, partition): (window if timed[role] else None)
            for role, topic in topics.items() for partition in range(counts[topic])
        })
    resolved = {
        role: TopicRange(role, topic, {p: found[(topic, p)] for p in range(counts[topic])}, timed[role])
        for role, topic in topics.items()
    }
    return OffsetPlan(window, resolved, lookup)
