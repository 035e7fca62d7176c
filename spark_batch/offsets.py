"""Broker side of the offset plan: partition counts, watermarks, timestamp -> offset.

A window's bounds become offsets with ListOffsets by timestamp (the broker's
time index), so the plan costs a few requests per partition, whatever the
topics hold; nothing is read until Spark reads the planned ranges.
"""
from __future__ import annotations

import uuid
from typing import Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamapp.kafka.admin import describe

from .errors import ReconcileError
from .window import OffsetPlan, TimeWindow, TopicRange

LOOKUPS = ("index",)
TIMEOUT = 15.0
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
        {"bootstrap.servers": bootstrap, "group.id": f"streamapp-reconcile-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )


def index_offsets(consumer: Consumer, topic: str, ends: list[int], moment_ms: int) -> list[int]:
    """ListOffsets by timestamp for every partition of ``topic``: the first offset whose timestamp is at or
    after ``moment_ms``; -1 (no record that new) becomes the partition's end.

    One request per moment: librdkafka keeps one answer per partition in a request, so asking
    for two moments of the same partition at once returns one of them twice.
    """
    asked = [TopicPartition(topic, partition, moment_ms) for partition in range(len(ends))]
    found = {tp.partition: tp.offset for tp in consumer.offsets_for_times(asked, timeout=TIMEOUT)}
    return [end if found[partition] < 0 else int(found[partition]) for partition, end in enumerate(ends)]


def resolve_plan(bootstrap: str, topics: Mapping[str, str], window: TimeWindow, grace_ms: int) -> OffsetPlan:
    """Resolve the window to offsets per role: users whole (log start to high watermark; a user may
    predate the day), the rest from the first record stamped at or after ``start`` to the first
    stamped at or after ``end + grace``; the job then keeps exactly the window's records.

    No record of the window precedes the first one stamped at or after ``start``, so the start is
    exact. A record of the window written late sits after newer ones: the end covers those
    written before the first record stamped ``grace`` past the window, not later ones. The
    consumer reads committed records only, so the high watermark is the last stable offset.
    """
    counts = partition_counts(bootstrap, topics)  # callers check first, naming the options
    consumer = _consumer(bootstrap)
    try:
        resolved = {}
        for role, topic in topics.items():
            try:
                watermarks = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT) for p in range(counts[topic])]
                starts, ends = [int(low) for low, _ in watermarks], [int(high) for _, high in watermarks]
                if role in TIMED_ROLES:
                    starts = index_offsets(consumer, topic, ends, window.start_ms)
                    ends = index_offsets(consumer, topic, ends, window.end_ms + grace_ms)
            except KafkaException as exc:
                raise ReconcileError(f"{topic}: cannot list offsets on {bootstrap}: {exc}") from None
            resolved[role] = TopicRange(role, topic, dict(enumerate(zip(starts, ends))), role in TIMED_ROLES)
    finally:
        consumer.close()
    return OffsetPlan(window, resolved, "index")
