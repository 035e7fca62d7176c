"""Which partitioners put a sample's keys where they are: pure scoring over (key, partition) samples.

Rules: NULL keys are never scored (every client treats them specially, mostly at
random); a key a partitioner places at random (``is_deterministic`` False, e.g. an
empty key under ``consistent_random``) is left out for that partitioner only.
Every partitioner is scored on each form of the keys (:data:`FORMS`): as stored,
JSON-quoted (``user1`` -> ``"user1"``, as Faust and Quix Streams write keys) and,
when the stored keys are JSON strings, with the quotes removed.  That is how a
key-serialization mismatch shows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import compress
from operator import eq
from typing import Callable, Sequence

from ..errors import StreamappError
from ..partitioners import LIBRDKAFKA_NAMES, get_partitioner, partition_batch

#: A sample "proves" a partitioner when chance alone reproduces it with at most this probability.
CHANCE_LIMIT = 1e-6
#: Keys used to tell whether two partitioners agree in general, not only on the sample.
_PROBES: tuple[bytes, ...] = tuple(f"probe-{i}".encode() for i in range(80)) + tuple(
    bytes(range(i, i + 7 + i % 5)) for i in range(0, 240, 15)
)
_PROBE_MODULUS = 2_147_483_629
#: Partition counts above this are not searched for an earlier, smaller count (cost grows with the count).
MAX_RESIZE_SEARCH = 256

Samples = Sequence[tuple[bytes | None, int]]


class FingerprintError(StreamappError):
    """Samples or arguments that cannot be fingerprinted; the message names the value."""


@dataclass(frozen=True)
class Score:
    """How many of the keys a partitioner places deterministically land where the sample says."""

    matched: int
    scored: int

    @property
    def share(self) -> float:
        return self.matched / self.scored if self.scored else 0.0

    @property
    def explains(self) -> bool:
        return self.scored > 0 and self.matched == self.scored


@dataclass(frozen=True)
class FormScores:
    """Every partitioner's score on the sample's keys in one form (as stored, JSON-quoted, quotes removed)."""

    by_name: dict[str, Score]

    @property
    def shares(self) -> dict[str, float]:
        """Share matched, for the partitioners that placed at least one key of this form by hash."""
        return {name: s.share for name, s in self.by_name.items() if s.scored}

    @property
    def scored(self) -> dict[str, int]:
        return {name: s.scored for name, s in self.by_name.items()}

    @property
    def explaining(self) -> list[str]:
        """The partitioners that put every scored key where it is."""
        return [name for name, s in self.by_name.items() if s.explains]


#: The key forms scored, in the order a verdict prefers them.
FORMS = ("stored", "quoted", "unquoted")


@dataclass(frozen=True)
class Scoring:
    """What scoring a sample found: each form's scores and the families of partitioners that explain it."""

    sample_size: int
    num_partitions: int
    keyed: int
    stored: FormScores
    quoted: FormScores
    unquoted: FormScores
    #: Whether every stored key is a JSON string (only then is ``unquoted`` scored).
    json_keys: bool
    #: Groups of partitioners that explain ``families_key_form`` and no sample of this topic can tell apart.
    families: list[list[str]]
    #: The key form ``families`` explain: "stored", "quoted" or "unquoted" ("stored" when none explains).
    families_key_form: str
    min_sample: int | None
    #: When no partitioner explains the sample over ``num_partitions`` alone but one explains every record
    #: as placed over either an earlier, smaller count or the current one: (partitioner, earlier count).
    resized: tuple[str, int] | None

    @property
    def null_keys(self) -> int:
        return self.sample_size - self.keyed

    def form(self, name: str) -> FormScores:
        return {"stored": self.stored, "quoted": self.quoted, "unquoted": self.unquoted}[name]

    @property
    def scored_by_family(self) -> list[int]:
        """Per family, the fewest keys any of its partitioners was scored on."""
        winning = self.form(self.families_key_form).by_name
        return [min(winning[name].scored for name in family) for family in self.families]


def min_sample_size(num_partitions: int) -> int | None:
    """Keyed records needed before a full match cannot be chance (None: no sample can tell, one partition)."""
    if num_partitions < 2:
        return None
    return math.ceil(-math.log(CHANCE_LIMIT) / math.log(num_partitions))


def validate(samples: Samples, num_partitions: int) -> None:
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise FingerprintError(f"num_partitions={num_partitions!r}: must be a positive integer")
    for index, (key, part) in enumerate(samples):
        if key is not None and not isinstance(key, (bytes, bytearray)):
            raise FingerprintError(f"sample {index}: key={key!r} must be bytes or None")
        if not isinstance(part, int) or not 0 <= part < num_partitions:
            raise FingerprintError(
                f"sample {index}: partition={part!r} is outside 0..{num_partitions - 1} (num_partitions={num_partitions})"
            )


def score_form(names: Sequence[str], keys: Sequence[bytes | None], parts: Sequence[int], n: int) -> dict[str, Score]:
    """Score each partitioner on ``keys`` (None: the key has no such form, left out) against ``parts``."""
    if None in keys:
        kept = [i for i, key in enumerate(keys) if key is not None]
        keys, parts = [keys[i] for i in kept], [parts[i] for i in kept]
    empty = [len(key) == 0 for key in keys]
    any_empty = any(empty)
    result = {}
    for name in names:
        chosen_keys, actual = _scorable(name, keys, parts, empty, any_empty)
        predicted = partition_batch(name, chosen_keys, n) if chosen_keys else []
        matched = len(actual) if predicted == actual else sum(map(eq, predicted, actual))
        result[name] = Score(matched, len(chosen_keys))
    return result


def _scorable(
    name: str, keys: Sequence[bytes], parts: Sequence[int], empty: Sequence[bool], any_empty: bool
) -> tuple[Sequence[bytes], Sequence[int]]:
    """The keys ``name`` places by hash, with their partitions."""
    eligible = _eligible(get_partitioner(name).is_deterministic, keys, empty, any_empty)
    if eligible is None:
        return keys, parts
    return list(compress(keys, eligible)), list(compress(parts, eligible))


def _eligible(
    deterministic: Callable[[bytes], bool], keys: Sequence[bytes], empty: Sequence[bool], any_empty: bool
) -> list[bool] | None:
    """Which keys the partitioner places by hash (None: all of them).

    Clients go random by key class (NULL, empty, non-empty), not by content, so
    the answer for a few probe keys stands for every non-empty key; a partitioner
    whose answer differs between probes is asked key by key.
    """
    answers = {deterministic(probe) for probe in _PROBES[:8]}
    if len(answers) > 1:
        mask = list(map(deterministic, keys))
        return None if all(mask) else mask
    nonempty = answers.pop()
    for_empty = deterministic(b"") if any_empty else nonempty
    if nonempty and for_empty:
        return None
    return [for_empty if is_empty else nonempty for is_empty in empty]


def families(names: Sequence[str], num_partitions: int) -> list[list[str]]:
    """Group partitioners that put every non-empty key on the same partition for this partition count.

    No sample can tell such partitioners apart: either they are the same hash (and
    differ only on NULL or empty keys), or different hashes that coincide modulo
    this count (uint32 vs sign-masked FNV-1a over a power of two).  96 probe keys
    make a chance coincidence of two unrelated hashes negligible (at most 2**-96).
    """
    groups: dict[tuple[int, ...], list[str]] = {}
    for name in names:
        signature = tuple(partition_batch(name, list(_PROBES), num_partitions))
        groups.setdefault(signature, []).append(name)
    return sorted(groups.values(), key=lambda g: _rank(g[0]))


def _rank(name: str) -> tuple[int, str]:
    return (LIBRDKAFKA_NAMES.index(name), name) if name in LIBRDKAFKA_NAMES else (len(LIBRDKAFKA_NAMES), name)


def resized(names: Sequence[str], keys: list[bytes], parts: list[int], n: int) -> tuple[str, int] | None:
    """A partitioner and smaller count ``m`` such that every record sits where it maps over ``m`` or ``n`` partitions.

    Only claimed when chance cannot do it: a random partition matches one of the
    two with probability about 2/n per key, so at least log(CHANCE_LIMIT)/log(2/n) keys are needed.
    """
    if not 2 < n <= MAX_RESIZE_SEARCH:
        return None
    needed = math.log(CHANCE_LIMIT) / math.log(2 / n)
    empty = [len(key) == 0 for key in keys]
    any_empty = any(empty)
    for name in names:
        chosen, actual = _scorable(name, keys, parts, empty, any_empty)
        if len(chosen) < needed:
            continue
        now = partition_batch(name, chosen, n)
        for earlier in range(1, n):
            before = partition_batch(name, chosen, earlier)
            if all(a == b or a == c for a, b, c in zip(actual, before, now)):
                return name, earlier
    return None


def same_hash(family: Sequence[str]) -> bool:
    return len({tuple(partition_batch(name, list(_PROBES), _PROBE_MODULUS)) for name in family}) == 1
