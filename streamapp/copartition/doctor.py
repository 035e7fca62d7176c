"""``streamapp doctor``: every topic's partitioner and key encoding, the topics that share keys, and each joined pair's diagnosis.

A stream-table join finds a key only when both topics put it in the same
partition *as the same bytes*.  Kafka Streams and ksqlDB check the partition
counts alone; the doctor also checks the partitioners (the fingerprint), the key
encodings (:mod:`.key_encoding`), and measures on the sampled keys the two topics
share how many a partition-local join would miss.  All of it is pure over
:class:`TopicSample`\\ s (:func:`diagnose`); the Kafka part reads the samples
(:func:`sample_topics`, or :func:`examine_topics`, which scores each topic as it arrives).
"""
from __future__ import annotations

import re
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import combinations
from typing import Any, Iterable, Mapping, Sequence

from ..errors import StreamappError
from ..kafka.admin import describe
from ..kafka.security import Kafka
from ..partitioners import clients_of
from .doctor_fixes import Fix, fixes_for
from .fingerprint import Fingerprint, score
from .guard import Check
from .key_encoding import KeyEncoding, classify_keys
from .keyed_sample import Sample, read_keyed_sample

#: Keyed records read per topic by default.
DEFAULT_SAMPLE = 1000
#: Two topics share a key space when they share at least this many sampled keys ...
MIN_SHARED_KEYS = 3
#: ... and at least this share of the smaller topic's sampled keys.
MIN_OVERLAP = 0.05
#: Topics read at once (reading is waiting on the broker, not the CPU).
READERS = 8


class DoctorError(StreamappError):
    """A bad option or an unreadable cluster; the message names it."""


@dataclass(frozen=True)
class TopicSample:
    """What was read of one topic: its partition count and its (key, partition) sample."""

    name: str
    partitions: int
    samples: Sequence[Sample]
    error: str | None = None


@dataclass(frozen=True)
class TopicReport:
    """One topic's verdict: the partitioner that wrote it, its key encoding, its logical keys and where they sit."""

    name: str
    partitions: int
    fingerprint: Fingerprint | None
    encoding: KeyEncoding | None
    #: Logical key -> the partitions it was read from.
    placements: Mapping[str, frozenset[int]]
    #: Logical key -> its bytes as stored (the first seen).
    stored: Mapping[str, bytes]
    error: str | None = None

    @cached_property
    def keys(self) -> frozenset[str]:
        """The logical keys sampled (computed once: every pair the topic is in compares them)."""
        return frozenset(self.placements)

    @property
    def family(self) -> list[str]:
        """The partitioners that explain the keys as stored (empty when none, or when the sample cannot tell)."""
        fp = self.fingerprint
        if fp is None or not fp.families or fp.families_key_form != "stored" or len(fp.families) > 1:
            return []
        if fp.min_sample is not None and min(fp.scored_by_family) < fp.min_sample:
            return []
        return list(fp.families[0])

    @property
    def writers(self) -> list[str]:
        """The client profiles whose default is in :attr:`family`."""
        return clients_of(self.family)

    @property
    def partitioner_label(self) -> str:
        if self.family:
            return "/".join(self.family)
        fp = self.fingerprint
        if fp is None or fp.keyed == 0:
            return "no keyed records"
        if fp.families_key_form in ("quoted", "unquoted") and fp.families:
            return f"{'/'.join(fp.families[0])} on {fp.families_key_form} keys"
        return "unknown"

    @property
    def verdict(self) -> str:
        if self.error:
            return self.error
        return self.fingerprint.verdict if self.fingerprint is not None else ""

    def to_dict(self) -> dict[str, Any]:
        fp = self.fingerprint
        return {
            "topic": self.name, "partitions": self.partitions, "error": self.error,
            "sampled": fp.sample_size if fp else 0, "keyed": fp.keyed if fp else 0,
            "partitioner": self.partitioner_label, "family": self.family, "writers": self.writers,
            "encoding": self.encoding.to_dict() if self.encoding else None,
            "verdict": self.verdict, "notes": fp.notes if fp else [], "distinct_keys": len(self.placements),
        }


def topic_report(sample: TopicSample) -> TopicReport:
    """Fingerprint and classify one topic's sample; pure."""
    if sample.error is not None:
        return TopicReport(sample.name, sample.partitions, None, None, {}, {}, sample.error)
    fp = score(sample.samples, sample.partitions)
    keyed = [(key, part) for key, part in sample.samples if key is not None]
    keys = [key for key, _ in keyed]
    encoding, values = classify_keys(keys)
    alone = [frozenset((part,)) for part in range(sample.partitions)]
    placements: dict[str, frozenset[int]] = {}
    stored: dict[str, bytes] = {}
    for value, (key, part) in zip(values, keyed):
        seen = placements.get(value)
        if seen is None:
            placements[value], stored[value] = alone[part], key
        elif part not in seen:
            placements[value] = seen | alone[part]
    return TopicReport(sample.name, sample.partitions, fp, encoding, placements, stored)


@dataclass(frozen=True)
class Overlap:
    """Two topics' shared sampled logical keys."""

    left: str
    right: str
    shared: int
    #: ``shared`` over the smaller topic's distinct sampled keys.
    share: float

    def to_dict(self) -> dict[str, Any]:
        return {"left": self.left, "right": self.right, "shared": self.shared, "share": round(self.share, 4)}


def overlaps(reports: Sequence[TopicReport]) -> list[Overlap]:
    """Every pair of topics whose sampled logical keys overlap enough to be one key space, most shared first."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for index, report in enumerate(reports):
        for key in report.placements:
            by_key[key].append(index)
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for holders in by_key.values():
        for pair in combinations(holders, 2):
            counts[pair] += 1
    found = []
    for (a, b), shared in counts.items():
        smaller = min(len(reports[a].placements), len(reports[b].placements))
        if shared >= MIN_SHARED_KEYS and shared >= MIN_OVERLAP * smaller:
            found.append(Overlap(reports[a].name, reports[b].name, shared, shared / smaller))
    return sorted(found, key=lambda o: (-o.shared, o.left, o.right))


def key_spaces(reports: Sequence[TopicReport], shared: Sequence[Overlap]) -> list[list[str]]:
    """Topics grouped by key space (connected by overlaps); a topic sharing keys with none is a group of one."""
    parent = {r.name: r.name for r in reports}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for overlap in shared:
        parent[root(overlap.left)] = root(overlap.right)
    groups: dict[str, list[str]] = defaultdict(list)
    for report in reports:
        groups[root(report.name)].append(report.name)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g))


@dataclass(frozen=True)
class JoinedPair:
    """A pair of topics some application joins, and who said so (``ksqldb:<query id>``, ``worker:<join>``, ``file:<line>``)."""

    left: str
    right: str
    source: str


@dataclass(frozen=True)
class PairDiagnosis:
    """One pair's checks, its predicted miss rate and the fixes."""

    left: str
    right: str
    joined_by: tuple[str, ...]
    checks: tuple[Check, ...]
    #: Sampled logical keys both topics hold.
    shared: int
    #: Among them, the share a partition-local join comparing key bytes misses (None: no shared key sampled).
    miss_rate: float | None
    #: Among them, the share the two topics keep in different partitions (whatever their bytes).
    partition_miss_rate: float | None
    fixes: tuple[Fix, ...] = ()

    @property
    def joined(self) -> bool:
        return bool(self.joined_by)

    @property
    def sound(self) -> bool:
        return all(check.ok is not False for check in self.checks)

    @property
    def status(self) -> str:
        """``sound``, ``broken``, or ``unknown`` when a check could not run and none failed."""
        if not self.sound:
            return "broken"
        return "sound" if all(check.ok for check in self.checks) else "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "left": self.left, "right": self.right, "joined_by": list(self.joined_by), "status": self.status,
            "shared_keys": self.shared, "miss_rate": _rounded(self.miss_rate),
            "partition_miss_rate": _rounded(self.partition_miss_rate),
            "checks": [{"name": c.name, "ok": c.ok, "message": c.message} for c in self.checks],
            "fixes": [fix.to_dict() for fix in self.fixes],
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _count_check(a: TopicReport, b: TopicReport) -> Check:
    if a.partitions == b.partitions:
        return Check("partition counts", True, f"both have {a.partitions} partitions")
    return Check("partition counts", False, (
        f"{a.name} has {a.partitions} partitions, {b.name} has {b.partitions}: a key's partition number "
        f"differs between them for most keys"))


def _partitioner_check(a: TopicReport, b: TopicReport) -> Check:
    if a.partitions == b.partitions == 1:
        return Check("partitioners", True, "one partition each: every partitioner puts every key in partition 0")
    unknown = [r for r in (a, b) if not r.family]
    if unknown:
        return Check("partitioners", None, "; ".join(
            f"{r.name}: partitioner not known ({r.partitioner_label})" for r in unknown))
    if set(a.family) & set(b.family):
        common = [name for name in a.family if name in b.family]
        return Check("partitioners", True, f"both written by {'/'.join(common)}")
    return Check("partitioners", False, (
        f"{a.name} was written by {'/'.join(a.family)} ({', '.join(a.writers) or 'no client default'}), "
        f"{b.name} by {'/'.join(b.family)} ({', '.join(b.writers) or 'no client default'})"))


def _encoding_check(a: TopicReport, b: TopicReport) -> Check:
    if a.encoding is None or b.encoding is None:
        return Check("key encodings", None, "; ".join(
            f"{r.name} has no keyed records" for r in (a, b) if r.encoding is None))
    shown = f"{a.name}: {a.encoding.label}; {b.name}: {b.encoding.label}"
    if a.encoding.encoding == b.encoding.encoding and a.encoding.schema_ids == b.encoding.schema_ids:
        return Check("key encodings", True, shown)
    shared = a.keys & b.keys
    if shared and all(a.stored[k] == b.stored[k] for k in shared):
        return Check("key encodings", True, f"{shown}: the shared keys are the same bytes")
    return Check("key encodings", False, (
        f"{shown}: the same key is different bytes in the two topics, so a join comparing key bytes never "
        f"matches them and their partitioners hash different bytes"))


def _miss_rates(a: TopicReport, b: TopicReport) -> tuple[int, float | None, float | None]:
    shared = a.keys & b.keys
    if not shared:
        return 0, None, None
    apart = [k for k in shared if not a.placements[k] & b.placements[k]]
    missed = [k for k in shared if a.stored[k] != b.stored[k] or not a.placements[k] & b.placements[k]]
    return len(shared), len(missed) / len(shared), len(apart) / len(shared)


def diagnose_pair(a: TopicReport, b: TopicReport, joined_by: Sequence[str] = ()) -> PairDiagnosis:
    """The checks, the predicted miss rate over the shared sampled keys and the fixes for one pair; pure."""
    shared, miss, apart = _miss_rates(a, b)
    checks = [_count_check(a, b), _partitioner_check(a, b), _encoding_check(a, b)]
    if miss is not None:
        checks.append(Check("shared keys", miss == 0, (
            f"{shared:,} sampled keys in both topics; a partition-local join misses {miss:.1%} of them "
            f"({apart:.1%} sit in different partitions)")))
    elif joined_by:
        checks.append(Check("shared keys", None, "no sampled key is in both topics: the miss rate cannot be measured"))
    diagnosis = PairDiagnosis(a.name, b.name, tuple(joined_by), tuple(checks), shared, miss, apart)
    return diagnosis if diagnosis.sound else replace(diagnosis, fixes=tuple(fixes_for(a, b, diagnosis)))


@dataclass(frozen=True)
class DoctorReport:
    topics: tuple[TopicReport, ...]
    overlaps: tuple[Overlap, ...]
    key_spaces: tuple[tuple[str, ...], ...]
    pairs: tuple[PairDiagnosis, ...]
    #: Joined pairs naming a topic the cluster does not have (or the doctor did not read).
    missing: tuple[JoinedPair, ...] = ()
    #: Where joined pairs were looked for, and what each said (``ksqldb``: its query count or its error).
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def joined(self) -> list[PairDiagnosis]:
        return [p for p in self.pairs if p.joined]

    @property
    def ok(self) -> bool:
        """Every joined pair is sound (what the exit status says)."""
        return all(p.sound for p in self.joined) and not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "topics": [t.to_dict() for t in self.topics],
            "overlaps": [o.to_dict() for o in self.overlaps],
            "key_spaces": [list(g) for g in self.key_spaces],
            "pairs": [p.to_dict() for p in self.pairs],
            "missing": [{"left": m.left, "right": m.right, "joined_by": m.source} for m in self.missing],
            "sources": dict(self.sources),
        }


def diagnose(
    samples: Iterable[TopicSample], joined: Sequence[JoinedPair] = (), sources: Mapping[str, str] | None = None
) -> DoctorReport:
    """The whole report from the topics' samples and the joined pairs; pure."""
    return diagnose_reports([topic_report(s) for s in samples], joined, sources)


def diagnose_reports(
    topics: Iterable[TopicReport], joined: Sequence[JoinedPair] = (), sources: Mapping[str, str] | None = None
) -> DoctorReport:
    """The whole report from the topics' verdicts (:func:`topic_report`) and the joined pairs; pure."""
    reports = sorted(topics, key=lambda r: r.name)
    by_name = {r.name: r for r in reports}
    shared = overlaps(reports)
    joined_by: dict[tuple[str, str], list[str]] = defaultdict(list)
    missing = []
    for pair in joined:
        if pair.left in by_name and pair.right in by_name:
            joined_by[(pair.left, pair.right)].append(pair.source)
        else:
            missing.append(pair)
    keys = list(joined_by)
    unordered = {frozenset(k) for k in keys}
    keys += [(o.left, o.right) for o in shared if frozenset((o.left, o.right)) not in unordered]
    pairs = [diagnose_pair(by_name[a], by_name[b], joined_by.get((a, b), ())) for a, b in keys]
    pairs.sort(key=lambda p: (not p.joined, p.sound, p.left, p.right))
    return DoctorReport(tuple(reports), tuple(shared), tuple(tuple(g) for g in key_spaces(reports, shared)),
                        tuple(pairs), tuple(missing), dict(sources or {}))


def select_topics(names: Iterable[str], pattern: str | None, include_internal: bool) -> list[str]:
    """The topics to examine: ``pattern`` is a regular expression a name must match in full.

    Internal topics (a leading ``_``: ``__consumer_offsets``, ``_schemas``, ``_confluent-ksql-…``) are left out
    unless asked for.
    """
    try:
        wanted = re.compile(pattern) if pattern else None
    except re.error as exc:
        raise DoctorError(f"topics={pattern!r}: not a regular expression: {exc}") from None
    return sorted(n for n in names if (include_internal or not n.startswith("_"))
                  and (wanted is None or wanted.fullmatch(n)))


def sample_topics(bootstrap: Kafka, topics: Sequence[str], sample: int = DEFAULT_SAMPLE) -> list[TopicSample]:
    """Each topic's partition count and keyed sample, read a few topics at a time; an unreadable topic says why."""
    _check_sample(sample)
    with ThreadPoolExecutor(max_workers=min(READERS, max(1, len(topics)))) as pool:
        return list(pool.map(lambda topic: _read(bootstrap, topic, sample), topics))


def _check_sample(sample: int) -> None:
    if sample < 1:
        raise DoctorError(f"sample={sample}: must be at least 1")


def _read(bootstrap: Kafka, topic: str, sample: int) -> TopicSample:
    try:
        samples, count = read_keyed_sample(bootstrap, topic, sample)
    except StreamappError as exc:
        return TopicSample(topic, 0, (), str(exc))
    return TopicSample(topic, count, samples)


def examine_topics(bootstrap: Kafka, topics: Sequence[str], sample: int = DEFAULT_SAMPLE) -> list[TopicReport]:
    """Each topic's verdict, scored by the thread that read it while the others wait on the broker.

    Scoring is Python holding the GIL, reading is mostly librdkafka waiting on the
    network without it: done together, the scoring hides behind the reads instead
    of following them.
    """
    _check_sample(sample)
    with ThreadPoolExecutor(max_workers=min(READERS, max(1, len(topics)))) as pool:
        return list(pool.map(lambda topic: topic_report(_read(bootstrap, topic, sample)), topics))


def cluster_topics(bootstrap: Kafka, pattern: str | None = None, include_internal: bool = False) -> list[str]:
    return select_topics(describe(bootstrap), pattern, include_internal)
