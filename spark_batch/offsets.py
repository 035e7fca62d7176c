"""Broker side of the offset plan: partition counts, watermarks, timestamp -> offset.

A window's bounds become offsets with ListOffsets by timestamp (the broker's
time index), so the plan costs a few requests per partition, whatever the
topics hold; nothing is read until Spark reads the planned ranges.
"""
from __future__ import annotations

from typing import Collection, Mapping

from streamapp.kafka.admin import describe
from streamapp.kafka.reader import TopicReader
from streamapp.kafka.security import Kafka, KafkaSecurityError

from .errors import ReconcileError
from .window import OffsetPlan, TimeWindow, TopicRange

LOOKUPS = ("index",)


def partition_counts(bootstrap: Kafka, topics: Mapping[str, str], flags: Mapping[str, str] | None = None) -> dict[str, int]:
    """Partition count per topic; fails naming every missing topic and (given ``flags``, role -> option) its option."""
    try:
        found = describe(bootstrap, set(topics.values()))
    except KafkaSecurityError as exc:  # already names the setting to check
        raise ReconcileError(str(exc)) from None
    except Exception as exc:  # confluent-kafka raises KafkaException with a cimpl error
        raise ReconcileError(f"--bootstrap-server={str(bootstrap)!r}: cannot read metadata: {exc}") from None
    flags = flags or {}
    missing = [f"{topic} ({flags[role]})" if role in flags else f"{topic} (role {role})" for role, topic in topics.items() if topic not in found]
    if missing:
        raise ReconcileError(f"unknown topic: {', '.join(missing)} on {bootstrap}")
    return {topic: found[topic].partitions for topic in topics.values()}


def resolve_plan(bootstrap: Kafka, topics: Mapping[str, str], window: TimeWindow, grace_ms: int,
                 timed: Collection[str]) -> OffsetPlan:
    """Resolve the window to offsets per role: the ``timed`` roles (streams, outputs) from the first record
    stamped at or after ``start`` to the first
    stamped at or after ``end + grace``, the others (tables) whole (log start to high watermark; a row may
    predate the day); the job then keeps exactly the window's records.

    No record of the window precedes the first one stamped at or after ``start``, so the start is
    exact. A record of the window written late sits after newer ones: the end covers those
    written before the first record stamped ``grace`` past the window, not later ones. The
    reader's consumer reads committed records only, so the high watermark is the last stable offset.
    """
    counts = partition_counts(bootstrap, topics)  # callers check first, naming the options
    resolved = {}
    for role, topic in topics.items():
        with TopicReader(bootstrap, topic, range(counts[topic]), error=ReconcileError) as reader:
            marks = reader.watermarks()
            ends = {p: high for p, (_, high) in marks.items()}
            if role in timed:
                starts = _or_end(reader.offsets_at(window.start_ms), ends)
                ends = _data_ends(bootstrap, topic, _or_end(reader.offsets_at(window.end_ms + grace_ms), ends), ends)
            else:
                starts = {p: low for p, (low, _) in marks.items()}
        resolved[role] = TopicRange(role, topic, {p: (starts[p], ends[p]) for p in sorted(ends)}, role in timed)
    return OffsetPlan(window, resolved, "index")


def _data_ends(bootstrap: Kafka, topic: str, found: Mapping[int, int], highs: Mapping[int, int]) -> dict[int, int]:
    """Ends found by timestamp that hold a record; one that is a transaction's marker (or an aborted record)
    becomes the partition's end (the last stable offset).

    A commit marker is stamped when the transaction commits, so in a transactional
    output (exactly_once) of records stamped earlier (a replay, a late load) the
    first offset stamped past the window can be a marker well before the window's
    last records.  Reading to the end instead is exact: the job keeps the window's records.
    """
    probe = {p: end for p, end in found.items() if end < highs[p]}
    if not probe:
        return dict(found)
    with TopicReader(bootstrap, topic, sorted(probe), start=probe, error=ReconcileError) as reader:
        held = {r.partition for batch in reader.batches(until={p: end + 1 for p, end in probe.items()})
                for r in batch if r.offset == probe[r.partition]}
    return {p: end if p not in probe or p in held else highs[p] for p, end in found.items()}


def _or_end(found: Mapping[int, int | None], ends: Mapping[int, int]) -> dict[int, int]:
    """A partition with no record that new starts (or ends) at its end."""
    return {p: ends[p] if offset is None else offset for p, offset in found.items()}
