"""Whether the joined topics' keys still sit where the join's partitioner puts them, as the worker reads them.

The guard and the doctor judge a sample read when they run; records keep arriving after that,
and a producer that changes its partitioner (or partitions added to a topic) breaks the join
without a word.  So the worker checks every keyed record of a joined topic as it handles it:
:class:`Placement` holds that one fact, the *misplaced key* (one C batch call per batch; the
same counts are the ``streamapp_misplaced_keys`` metric).  The rest is pure: when the facts
contradict the latest verdict (:func:`drift_reason`), what the checks then say
(:func:`live_message`), and who now writes the topic (:func:`writer_profile`, the fingerprint
of the misplaced keys).  See docs/explanation/worker-internals.md#the-verdict-follows-the-data.
"""
from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..partitioners import clients_of
from .fingerprint import score

#: Misplaced keys kept per topic (the latest), for the fingerprint of whoever wrote them.
RECENT = 1000


def misplaced_keys(keys: Sequence[bytes], placed: Sequence[int], partition: int) -> list[tuple[bytes, int]]:
    """The keys of a batch that arrived on ``partition`` but are ``placed`` elsewhere, with ``partition``."""
    return [(key, partition) for key, place in zip(keys, placed) if place != partition]


@dataclass(frozen=True)
class LivePlacement:
    """What the worker has read of one topic since it started: keyed records checked, misplaced, the latest misplaced."""

    topic: str
    #: The partition count the records were checked against (the topic's count when the worker started).
    partitions: int
    checked: int
    misplaced: int
    recent: tuple[tuple[bytes, int], ...] = ()


@dataclass
class Placement:
    """Keyed records checked and misplaced, per topic and arrival partition, and the latest misplaced keys."""

    checked: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    misplaced: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    recent: defaultdict[str, deque[tuple[bytes, int]]] = field(
        default_factory=lambda: defaultdict(lambda: deque(maxlen=RECENT)))

    def count(self, topic: str, partition: int, keys: Sequence[bytes], placed: list[int]) -> None:
        """``placed``: where the declared partitioner puts each of ``keys``, keyed records that arrived on ``partition``."""
        wrong = len(placed) - placed.count(partition)
        self.checked[topic][partition] += len(placed)
        self.misplaced[topic][partition] += wrong
        if wrong:  # rare: only then a loop in Python
            self.recent[topic].extend(misplaced_keys(keys, placed, partition))

    def live(self, counts: Mapping[str, int]) -> dict[str, LivePlacement]:
        """Each checked topic's :class:`LivePlacement` (``counts``: the partition counts the check used)."""
        return {topic: LivePlacement(topic, counts.get(topic, 0), sum(by_partition.values()),
                                     sum(self.misplaced[topic].values()), tuple(self.recent[topic]))
                for topic, by_partition in list(self.checked.items())}


def writer_profile(live: LivePlacement) -> str:
    """Who placed the latest misplaced keys: a partitioner family and its clients, else the fingerprint's sentence."""
    if not live.recent:
        return "no misplaced key kept"
    count = max(live.partitions, 1 + max(part for _, part in live.recent))  # a partition added since the start
    fp = score(live.recent, count)
    if fp.families and not fp.ambiguous and fp.families_key_form == "stored":
        family = fp.families[0]
        return f"{'/'.join(family)} ({', '.join(clients_of(family)) or 'no known client default'})"
    return f"a partitioner not named yet ({fp.verdict.rstrip('.')})"


def live_message(live: LivePlacement, partitioner: str) -> str:
    """The sentence a check says of a topic whose keys the worker found misplaced."""
    share = live.misplaced / live.checked if live.checked else 0.0
    return (f"{live.misplaced:,} of the {live.checked:,} keyed records of {live.topic} the worker has read since it "
            f"started ({share:.1%}) arrived in a partition {partitioner} does not pick for their key: the latest "
            f"{len(live.recent):,} were placed by {writer_profile(live)}")


def count_changes(then: Mapping[str, int], now: Mapping[str, int | None]) -> dict[str, tuple[int, int]]:
    """Topics whose partition count changed: ``topic -> (before, now)``; an unknown count is no change."""
    return {topic: (then[topic], count) for topic, count in now.items()
            if count and then.get(topic) and count != then[topic]}


def judged_misplaced(guard: Mapping[str, Any] | None) -> set[str]:
    """The topics whose partitioner check already fails in ``guard`` (a report's ``to_dict``)."""
    prefix = "partitioner of "
    return {check["name"][len(prefix):] for check in (guard or {}).get("checks", [])
            if check["name"].startswith(prefix) and check["ok"] is False}


def drift_reason(guard: Mapping[str, Any] | None, live: Mapping[str, LivePlacement], seen: Mapping[str, int],
                 changed: Mapping[str, tuple[int, int]]) -> str | None:
    """Why the verdict must be judged again now, or None; pure.

    ``seen``: misplaced records per topic at the last run; ``changed``: :func:`count_changes`.
    Misplaced records call for a run only when the latest report does not already fail that topic's
    partitioner, so a known problem does not re-sample the cluster at every batch.
    """
    if guard is None:
        return None  # the start-up check has not reported yet
    reasons = [f"partitions of {topic} changed from {before} to {after}" for topic, (before, after) in
               sorted(changed.items())]
    judged = judged_misplaced(guard)
    reasons += [f"keyed records of {topic} arrived in a partition the join's partitioner does not pick "
                f"({fact.misplaced - seen.get(topic, 0):,} since the last run)" for topic, fact in sorted(live.items())
                if fact.misplaced > seen.get(topic, 0) and topic not in judged]
    return "; ".join(reasons) or None
