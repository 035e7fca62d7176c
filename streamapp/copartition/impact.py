"""What adding partitions would do to a topic's keys, measured before anything is changed.

Adding partitions moves keys: a keyed record's partition is ``hash(key) % n``,
so after ``n -> m`` most existing keys would be written elsewhere and a join or
a compacted table no longer finds their history.  ``partition_impact`` measures
that share, and names the keys.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..kafka.admin import check_new_count
from ..kafka.reader import read_topic
from ..partitioners import get_partitioner


@dataclass(frozen=True)
class MovedKey:
    """A key whose new records will land in another partition than its history."""

    key: bytes | None
    old_partition: int
    new_partition: int

    @property
    def text(self) -> str | None:
        """The key for people and JSON: UTF-8, with undecodable bytes as ``\\xNN`` (None for a NULL key)."""
        return None if self.key is None else self.key.decode("utf-8", "backslashreplace")

    def to_dict(self) -> dict[str, object]:
        return {"key": self.text, "from": self.old_partition, "to": self.new_partition}


@dataclass(frozen=True)
class PartitionImpact:
    """Which of a topic's distinct keys would change partition at the new count."""

    topic: str
    partitioner: str
    old_count: int
    new_count: int
    keys: int
    unscored: int
    moved_keys: tuple[MovedKey, ...]

    @property
    def moved(self) -> int:
        return len(self.moved_keys)

    @property
    def moved_pct(self) -> float:
        return 100.0 * self.moved / self.keys if self.keys else 0.0

    def to_dict(self) -> dict[str, object]:
        fields = {k: v for k, v in self.__dict__.items() if k != "moved_keys"}
        return {**fields, "moved": self.moved, "moved_pct": round(self.moved_pct, 2),
                "moved_keys": [m.to_dict() for m in self.moved_keys]}


def partition_impact(
    topic: str, keys: Iterable[bytes | None], partitioner: str, old_count: int, new_count: int
) -> PartitionImpact:
    """Pure: the distinct keys whose partition differs between ``old_count`` and ``new_count``.

    Keys the partitioner places at random (a NULL key, mostly) have no fixed
    partition to lose and are counted as ``unscored``.  The moved keys are
    named (sorted by bytes) so that an operator can tell their owners.
    """
    chooser = get_partitioner(partitioner)
    distinct = set(keys)
    scored = sorted((k for k in distinct if chooser.is_deterministic(k)), key=lambda k: (k is not None, k or b""))
    unscored = len(distinct) - len(scored)
    moved = tuple(
        MovedKey(k, old, new)
        for k in scored
        if (old := chooser(k, old_count)) != (new := chooser(k, new_count))
    )
    return PartitionImpact(topic, chooser.name, old_count, new_count, len(scored), unscored, moved)


def add_partitions_impact(bootstrap: str, topic: str, new_count: int, partitioner: str) -> PartitionImpact:
    """Measure what the new count would move, reading every key of the topic."""
    current = check_new_count(bootstrap, topic, new_count)
    keys = [record.key for record in read_topic(bootstrap, topic)]
    return partition_impact(topic, keys, partitioner, current, new_count)
