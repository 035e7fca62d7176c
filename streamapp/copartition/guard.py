"""The co-partitioning guard: will the worker's joins find the rows they should?

A join looks a key up only in its record's partition, so each joined pair of topics (a stream-table join's
stream and table, a table-table or stream-stream join's two sides) is correct only when (1) both have the same
partition count, (2) their keys are the same bytes, and (3) both were written with the same partitioner.
ksqlDB and Kafka Streams check (1) only; this guard checks all three for the worker's own joins, at worker start
and on demand (:func:`check_copartitioning`).  Its key check sees JSON-quoted keys only; the doctor reads every
key encoding for a whole cluster (docs/explanation/doctor.md, "The guard beside it").

The checks are pure functions of facts (partition counts, key serializers, fingerprints), so they are tested
without a broker; :func:`gather` is the thin part that reads the facts from Kafka.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ..errors import StreamappError
from ..kafka.admin import describe
from ..partitioners import get_partitioner
from ..settings import Settings
from ..sql.topology import Output, Topology, topology
from .drift import LivePlacement, live_message
from .fingerprint import Fingerprint, fingerprint_topic

logger = logging.getLogger(__name__)

SAMPLE = 1000


class GuardError(StreamappError):
    """The guard found co-partitioning problems and ``guard_policy=fail``."""


@dataclass(frozen=True)
class Check:
    """One check; ``ok`` is None when it could not run (the message says why)."""

    name: str
    ok: bool | None
    message: str


@dataclass(frozen=True)
class CopartitionReport:
    policy: str
    partitioner: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.ok is not False for check in self.checks)

    @property
    def problems(self) -> list[str]:
        return [check.message for check in self.checks if check.ok is False]

    @property
    def skipped(self) -> list[str]:
        return [check.message for check in self.checks if check.ok is None]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "problems": self.problems}

    def lines(self) -> list[str]:
        marks = {True: "ok", False: "PROBLEM", None: "skipped"}
        return [f"Guard [{marks[c.ok]}] {c.name}: {c.message}" for c in self.checks]


@dataclass(frozen=True)
class TopicFacts:
    """What the guard knows about a topic: its partition count and, if read, its fingerprint."""

    partitions: int | None
    fingerprint: Fingerprint | None = None
    fingerprint_error: str | None = None


def joined_pairs(joins: Topology) -> list[tuple[str, str]]:
    """The topic pairs of the worker's joins, each once: (stream, table) of its stream-table joins, then (left,
    right) of its table-table and stream-stream joins (each record meets the other side in its own partition)."""
    pairs = [(join.stream, join.table_topic) for join in joins.joins]
    pairs += [topics for _, _, topics in two_sided(joins)]
    return list(dict.fromkeys(pairs))


def two_sided(joins: Topology) -> list[tuple[str, Output, tuple[str, str]]]:
    """(kind, the join, its two topics) of each table-table and stream-stream join."""
    return ([("table-table", j, (j.left.topic, j.right.topic)) for j in joins.table_joins]
            + [("stream-stream", j, (j.source_topic, j.right_topic)) for j in joins.stream_joins])


def written_topics(joins: Topology) -> list[str]:
    """The joined topics producers write (not the worker's own copies): those whose partitioner is checked."""
    outputs = set(joins.outputs)
    return [t for t in dict.fromkeys(t for pair in joined_pairs(joins) for t in pair) if t not in outputs]


def miss_cost(topic: str, joins: Topology, n: int) -> str:
    """What a topic written with another partitioner costs the joins that read it (or copies of it)."""
    share = f"{1 - 1 / n:.0%} (1 − 1/{n})"
    sides = []
    for kind, what, fix in (("table-table", "rows", ", or declare a copy of it (CREATE TABLE ... AS SELECT) and join "
                             "that"), ("stream-stream", "records", "")):
        outputs = [j.output for k, j, pair in two_sided(joins) if k == kind and topic in pair]
        if outputs:
            sides.append(f"Its {kind} joins ({', '.join(outputs)}) will miss about {share} of the other side's "
                         f"{what}: re-write it with the join's partitioner{fix}.")
    tables = " ".join(sides)
    if topic in joins.stream_topics:
        outputs = ", ".join(j.output for j in joins.joins if j.stream == topic)
        return (f"Its records are looked up in partitions the join's partitioner did not choose: every join of it "
                f"({outputs}) will miss about {share} of lookups." + (f" {tables}" if tables else ""))
    direct = ", ".join(j.output for j in joins.joins if j.table_topic == topic)
    if not direct:
        return tables
    copied = {c.output for c in joins.copies if c.source_topic == topic}
    repartitioned = ", ".join(j.output for j in joins.joins if j.table_topic in copied)
    cost = f"The direct join ({direct}) will miss about {share} of lookups"
    return cost + (f"; the repartitioned join ({repartitioned}) is the correct one." if repartitioned else
                   "; declare a copy of it (CREATE TABLE ... AS SELECT) and join that instead.") + (
                   f" {tables}" if tables else "")


def partition_count_check(stream: str, table: str, counts: Mapping[str, int | None],
                          created: Mapping[str, int] | None = None) -> Check:
    """Both topics' counts must match; ``created``: the worker's own topics, with the count it creates them with."""
    name = f"partitions {stream} × {table}"
    left, right = counts.get(stream), counts.get(table)
    missing = [topic for topic, count in ((stream, left), (table, right)) if count is None]
    if missing and all(topic in (created or {}) for topic in missing):
        return _to_be_created(name, {stream: left, table: right}, created or {})
    if missing:
        return Check(name, False, f"{' and '.join(missing)} does not exist: create it with the configured count")
    if left != right:
        return Check(name, False, (
            f"Can't join {stream} with {table} since the number of partitions don't match: "
            f"{stream} has {left} partitions, {table} has {right}. Repartition one of them so the counts match."
        ))
    return Check(name, True, f"{stream} and {table} both have {left} partitions")


def _to_be_created(name: str, counts: Mapping[str, int | None], created: Mapping[str, int]) -> Check:
    """A pair whose missing topics the worker creates at start (its copies): judged by the count it creates them with."""
    planned = {topic: created[topic] if count is None else count for topic, count in counts.items()}
    missing = " and ".join(topic for topic, count in counts.items() if count is None)
    existing = [topic for topic, count in counts.items() if count is not None]
    (_, count), (other, other_count) = sorted(planned.items(), key=lambda item: item[0] in existing)
    if count == other_count:
        return Check(name, True, f"{missing} does not exist yet: the worker creates it with {count} partitions"
                                 + (f", as {existing[0]} has" if existing else ""))
    return Check(name, False, f"{missing} does not exist yet and the worker would create it with {count} "
                              f"partitions (partitions={count}), but {other} has {other_count}: set "
                              f"partitions={other_count}")


def key_serialization_check(topic: str, serializers: Mapping[str, str] | None, facts: TopicFacts) -> Check:
    """Table keys must be the raw key bytes, and the topic's keys must not be JSON strings."""
    name = f"key serialization {topic}"
    if serializers is not None:
        quoting = {t: s for t, s in serializers.items() if s != "raw"}
        if quoting:
            detail = ", ".join(f"{t} uses {s!r}" for t, s in sorted(quoting.items()))
            return Check(name, False, (
                f"table keys must be stored as the raw key bytes (key_serializer='raw'), but {detail}: "
                f"a JSON-quoted key (b'\"u1\"') never equals ksqlDB's KAFKA STRING key (b'u1')"
            ))
    fp = facts.fingerprint
    if fp is not None and fp.keyed and fp.json_keys:
        return Check(name, False, (
            f"the keys of {topic} are JSON-quoted strings (b'\"u1\"'), not ksqlDB's KAFKA STRING format "
            f"(b'u1'): they will not equal the keys of the other topic"
        ))
    return Check(name, True, "table keys are the raw key bytes" + (
        f"; {topic} keys are not JSON-quoted" if fp is not None and fp.keyed else ""))


def partitioner_check(topic: str, partitioner: str, facts: TopicFacts, joins: Topology,
                      live: LivePlacement | None = None) -> Check:
    """Was ``topic`` written with the join's partitioner?  Says what a mismatch costs.

    ``live``: what the worker has read of it since it started (:mod:`.drift`); a key it found misplaced
    fails the check whatever the sample says, as the sample may predate the producer's change.
    """
    name = f"partitioner of {topic}"
    fp = facts.fingerprint
    if live is not None and live.misplaced:
        n = fp.num_partitions if fp is not None else (facts.partitions or live.partitions)
        return Check(name, False, f"{topic} is not written with {partitioner} only: {live_message(live, partitioner)}. "
                                  f"{miss_cost(topic, joins, n)}")
    if fp is None:
        return Check(name, None, f"fingerprint not available ({facts.fingerprint_error or 'not read'})")
    if fp.keyed == 0:
        return Check(name, None, f"{topic} has no keyed records yet, so its partitioner cannot be checked")
    if partitioner not in fp.stored.scored:
        return Check(name, None, f"{partitioner} is not a known partitioner, so the fingerprint cannot judge it")
    if fp.ambiguous and fp.num_partitions > 1:  # "Sample too small" or "Ambiguous": no partitioner is proven
        return Check(name, None, f"{topic}: {fp.verdict}")
    if partitioner in fp.stored.explaining:
        return Check(name, True, f"{topic} was written with {partitioner}, the join's partitioner: {fp.verdict}")
    n = fp.num_partitions
    share = fp.stored.shares.get(partitioner, 0.0)
    placed = f"only {share:.2%} of its {fp.keyed:,} sampled keys are where {partitioner} puts them"
    cost = miss_cost(topic, joins, n)
    return Check(name, False, f"{topic} was not written with {partitioner}: {placed}. {fp.verdict} {cost}")


def evaluate(
    settings: Settings,
    facts: Mapping[str, TopicFacts],
    key_serializers: Mapping[str, str] | None = None,
    joins: Topology | None = None,
    live: Mapping[str, LivePlacement] | None = None,
) -> CopartitionReport:
    """The report for the gathered facts (``live``: what a running worker read, :mod:`.drift`); pure."""
    joins = joins or topology(settings)
    partitioner = get_partitioner(settings.partitioner).name
    counts = {topic: f.partitions for topic, f in facts.items()}
    created = dict.fromkeys(joins.outputs, settings.partitions)
    checks = [partition_count_check(stream, table, counts, created) for stream, table in joined_pairs(joins)]
    streams = {*joins.stream_topics, *joins.stream_join_topics}
    for topic in written_topics(joins):
        topic_facts = facts.get(topic, TopicFacts(None))
        if topic not in streams:  # a table's keys: how the worker stores them
            checks.append(key_serialization_check(topic, key_serializers, topic_facts))
        checks.append(partitioner_check(topic, partitioner, topic_facts, joins, (live or {}).get(topic)))
    return CopartitionReport(settings.guard_policy, partitioner, checks)


def gather(settings: Settings, sample: int = SAMPLE, joins: Topology | None = None) -> dict[str, TopicFacts]:
    """Partition counts of the joined topics and fingerprints of those producers write, read from Kafka."""
    joins = joins or topology(settings)
    topics = {t for pair in joined_pairs(joins) for t in pair}
    fingerprinted = set(written_topics(joins))
    info = describe(settings.kafka, topics)
    facts = {}
    for topic in topics:
        count = info[topic].partitions if topic in info else None
        fingerprint, error = None, None
        if count is not None and topic in fingerprinted:
            try:
                fingerprint = fingerprint_topic(settings.kafka, topic, sample)
            except StreamappError as exc:
                error = str(exc)
        facts[topic] = TopicFacts(count, fingerprint, error)
    return facts


def check_copartitioning(
    settings: Settings, key_serializers: Mapping[str, str] | None = None, sample: int = SAMPLE,
    live: Mapping[str, LivePlacement] | None = None,
) -> CopartitionReport:
    """Run every check now against the broker in ``settings`` (``live``: what a running worker read)."""
    joins = topology(settings)
    return evaluate(settings, gather(settings, sample, joins), key_serializers, joins, live)


def run_guard(settings: Settings, key_serializers: Mapping[str, str] | None = None) -> CopartitionReport:
    """The worker's start-up check: log every line; raise :class:`GuardError` on problems under ``fail``."""
    report = check_copartitioning(settings, key_serializers)
    for check, line in zip(report.checks, report.lines()):
        (logger.warning if check.ok is False else logger.info)(line)
    if not report.ok and settings.guard_policy == "fail":
        raise GuardError(
            f"guard_policy=fail: {len(report.problems)} co-partitioning problem(s): " + " | ".join(report.problems)
        )
    if not report.ok:
        logger.warning("Guard: %d problem(s); guard_policy=warn, so the worker goes on", len(report.problems))
    return report
