"""Which partitioner wrote a topic: score every known partitioner against (key, partition) samples.

A stream-table join is partition-local, so two topics written by clients with
different partitioners (or the same partitioner over differently serialized
keys) silently miss most joins.  ``score`` is a pure function over samples, so
its verdicts are tested without a broker; ``fingerprint_topic`` is the thin
adapter that reads a sample from Kafka first.

Scoring rules: NULL keys are never scored (every client treats them specially,
mostly at random); a key a partitioner places at random (``is_deterministic``
False, e.g. an empty key under ``consistent_random``) is left out for that
partitioner only.  Besides the keys as stored, every partitioner is scored on
the keys JSON-quoted (``user1`` -> ``"user1"``, Python ``json.dumps`` as Faust
and Quix Streams write them) and, when the stored keys are JSON strings, on the
keys with the quotes removed: that is how a key-serialization mismatch shows.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from itertools import compress
from operator import eq
from typing import Callable, Iterable, Sequence

from ..errors import StreamappError
from ..model.key_forms import json_quoted, json_unquoted
from ..partitioners import LIBRDKAFKA_NAMES, PARTITIONERS, PROFILES, get_partitioner, partition_batch
from .keyed_sample import read_keyed_sample

__all__ = [
    "Fingerprint", "FingerprintError", "Score", "clients_of", "fingerprint_topic", "json_quoted", "json_unquoted",
    "read_keyed_sample", "score",
]

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
class Fingerprint:
    """The verdict on one sample; ``scores`` are shares of the samples each partitioner was scored on."""

    sample_size: int
    num_partitions: int
    keyed: int
    scores: dict[str, float]
    scored: dict[str, int]
    explaining: list[str]
    quoted_scores: dict[str, float]
    quoted_explaining: list[str]
    unquoted_scores: dict[str, float]
    unquoted_explaining: list[str]
    json_keys: bool
    families: list[list[str]]
    min_sample: int | None
    ambiguous: bool
    verdict: str
    notes: list[str] = field(default_factory=list)
    #: The key form ``families`` explain: "stored", "quoted" or "unquoted" ("stored" when none explains).
    families_key_form: str = "stored"
    #: When no partitioner explains the sample over ``num_partitions`` alone but one explains every record
    #: as placed over either an earlier, smaller count or the current one: (partitioner, earlier count).
    resized: tuple[str, int] | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def min_sample_size(num_partitions: int) -> int | None:
    """Keyed records needed before a full match cannot be chance (None: no sample can tell, one partition)."""
    if num_partitions < 2:
        return None
    return math.ceil(-math.log(CHANCE_LIMIT) / math.log(num_partitions))


def score(
    samples: Iterable[tuple[bytes | None, int]],
    num_partitions: int,
    candidates: Sequence[str] | None = None,
) -> Fingerprint:
    """Score every known partitioner (or ``candidates``: names, profiles, ``package.module:callable``)."""
    samples = list(samples)
    _validate(samples, num_partitions)
    names = list(dict.fromkeys(candidates)) if candidates is not None else list(PARTITIONERS)
    keyed = [(key, part) for key, part in samples if key is not None]
    parts = [part for _, part in keyed]
    stored = _score_form(names, [key for key, _ in keyed], parts, num_partitions)
    quoted = _score_form(names, [json_quoted(key) for key, _ in keyed], parts, num_partitions)
    inner = [json_unquoted(key) for key, _ in keyed]
    json_keys = bool(keyed) and None not in inner
    unquoted = _score_form(names, inner, parts, num_partitions) if json_keys else {}
    explaining = _explaining(stored)
    quoted_explaining = _explaining(quoted)
    unquoted_explaining = _explaining(unquoted)
    form, winning = next(
        ((form, scores) for form, scores in (("stored", stored), ("quoted", quoted), ("unquoted", unquoted))
         if _explaining(scores)),
        ("stored", stored),
    )
    families = _families(_explaining(winning), num_partitions)
    scored_by_family = [min(winning[name].scored for name in family) for family in families]
    needed = min_sample_size(num_partitions)
    resized = None if families or not keyed else _resized(names, [k for k, _ in keyed], parts, num_partitions)
    ambiguous, verdict = _verdict(
        num_partitions, len(keyed), families, scored_by_family, needed, stored, form, json_keys, resized
    )
    notes = _notes(num_partitions, families, unquoted, explaining, json_keys, len(samples) - len(keyed))
    if not samples:
        ambiguous, verdict = True, "The topic holds no records: nothing to fingerprint."
    return Fingerprint(
        sample_size=len(samples),
        num_partitions=num_partitions,
        keyed=len(keyed),
        scores={n: s.share for n, s in stored.items() if s.scored},
        scored={n: s.scored for n, s in stored.items()},
        explaining=explaining,
        quoted_scores={n: s.share for n, s in quoted.items() if s.scored},
        quoted_explaining=quoted_explaining,
        unquoted_scores={n: s.share for n, s in unquoted.items() if s.scored},
        unquoted_explaining=unquoted_explaining,
        json_keys=json_keys,
        families=families,
        min_sample=needed,
        ambiguous=ambiguous,
        verdict=verdict,
        notes=notes,
        families_key_form=form,
        resized=resized,
    )


def _validate(samples: Samples, num_partitions: int) -> None:
    if not isinstance(num_partitions, int) or num_partitions < 1:
        raise FingerprintError(f"num_partitions={num_partitions!r}: must be a positive integer")
    for index, (key, part) in enumerate(samples):
        if key is not None and not isinstance(key, (bytes, bytearray)):
            raise FingerprintError(f"sample {index}: key={key!r} must be bytes or None")
        if not isinstance(part, int) or not 0 <= part < num_partitions:
            raise FingerprintError(
                f"sample {index}: partition={part!r} is outside 0..{num_partitions - 1} (num_partitions={num_partitions})"
            )


def _score_form(names: Sequence[str], keys: Sequence[bytes | None], parts: Sequence[int], n: int) -> dict[str, Score]:
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


def _explaining(scores: dict[str, Score]) -> list[str]:
    return [name for name, s in scores.items() if s.explains]


def _families(names: Sequence[str], num_partitions: int) -> list[list[str]]:
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


def _label(family: Sequence[str]) -> str:
    return "/".join(family)


def clients_of(names: Iterable[str]) -> list[str]:
    """Client profiles whose default partitioner is one of ``names``."""
    wanted = set(names)
    return [client for client, target in PROFILES.items() if target in wanted]


def _verdict(
    n: int,
    keyed: int,
    families: list[list[str]],
    scored_by_family: list[int],
    needed: int | None,
    stored: dict[str, Score],
    form: str,
    json_keys: bool,
    resized: tuple[str, int] | None,
) -> tuple[bool, str]:
    if n == 1:
        return True, "With 1 partition every partitioner picks partition 0: no sample can tell them apart."
    if keyed == 0:
        return True, ("No keyed records: every record read has a NULL key, which clients place at random or "
                      "round-robin, never by a hash, so there is nothing to fingerprint.")
    if not families:
        return False, _unexplained(n, stored, resized)
    labels = [_label(f) for f in families]
    scored = min(scored_by_family)
    if len(families) > 1:
        return True, (
            f"Ambiguous: {' and '.join(labels)} all explain 100% of the {scored:,} keyed records scored, "
            f"so this sample cannot tell them apart (with {n} partitions about {needed} keyed records usually can)."
        )
    if needed is not None and scored < needed:
        chance = n ** -scored
        return True, (
            f"Sample too small: {labels[0]} explains all {scored:,} keyed records scored, but a random "
            f"partitioner would do so with probability {chance:.2%} over {n} partitions; read at least {needed:,}."
        )
    clients = ", ".join(clients_of(families[0])) or "no known client default"
    if form == "quoted":
        return False, (
            f"Key-format mismatch: no partitioner explains the keys as stored, but {labels[0]} explains 100% of "
            f"{scored:,} keyed records once they are JSON-quoted (user1 -> \"user1\"): the producer hashed a "
            f"JSON-serialized key but wrote the raw one (clients: {clients})."
        )
    if form == "unquoted":
        return False, (
            f"Key-format mismatch: the keys are stored JSON-quoted, but {labels[0]} explains 100% of {scored:,} "
            f"keyed records only with the quotes removed: the producer hashed the raw key and wrote a JSON one "
            f"(clients: {clients})."
        )
    sentence = f"{labels[0]} explains 100% of {scored:,} keyed records (clients: {clients})."
    if json_keys:
        sentence += (
            " Key format: the keys are JSON-quoted strings (\"user1\", not user1), so a topic keyed by the raw "
            "strings puts most keys on other partitions and its keys do not join with these."
        )
    return False, sentence


def _unexplained(n: int, stored: dict[str, Score], resized: tuple[str, int] | None) -> str:
    if resized is not None:
        name, earlier = resized
        clients = ", ".join(clients_of([name])) or "no known client default"
        return (
            f"Partitions were added: {name} explains every keyed record as placed over either {earlier} "
            f"partitions (written before the change) or {n} (after); keys written before it sit on partitions "
            f"their key no longer maps to (clients: {clients})."
        )
    ranked = sorted((s.share, name) for name, s in stored.items() if s.scored)
    if not ranked:
        return "No partitioner places these keys deterministically: nothing to score."
    best_share, best = ranked[-1]
    scored = stored[best].scored
    expected = 1 / n
    spread = 4 * math.sqrt(expected * (1 - expected) / scored)
    if best_share <= expected + spread:
        return (
            f"No known partitioner explains the keys: the best, {best}, matches {best_share:.2%} of {scored:,}, "
            f"about what random placement gives over {n} partitions ({expected:.2%}): records were placed at "
            f"random (librdkafka `random`), by explicit partition, or by an unknown partitioner."
        )
    return (
        f"No known partitioner explains the keys: the best, {best}, matches {best_share:.2%} of {scored:,} "
        f"(random placement would give {expected:.2%}): some records were placed otherwise (another client, "
        f"explicit partitions, a custom partitioner) or the partition count changed more than once."
    )


def _resized(names: Sequence[str], keys: list[bytes], parts: list[int], n: int) -> tuple[str, int] | None:
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


def _same_hash(family: Sequence[str]) -> bool:
    return len({tuple(partition_batch(name, list(_PROBES), _PROBE_MODULUS)) for name in family}) == 1


def _notes(
    num_partitions: int,
    families: list[list[str]],
    unquoted: dict[str, Score],
    explaining: list[str],
    json_keys: bool,
    null_keys: int,
) -> list[str]:
    notes = []
    for family in families:
        if len(family) < 2:
            continue
        if _same_hash(family):
            notes.append(
                f"{', '.join(family)} compute the same hash; they differ only in how NULL or empty keys are "
                f"placed, which this sample does not show."
            )
        else:
            notes.append(
                f"{', '.join(family)} compute different hashes that put every key on the same partition when "
                f"there are {num_partitions} partitions: no sample of this topic can tell them apart."
            )
    if null_keys:
        notes.append(f"{null_keys:,} records with NULL keys were left out (clients place them at random).")
    if json_keys and explaining:
        moved = 1 - max(unquoted[name].share for name in explaining if name in unquoted)
        notes.append(
            f"With the JSON quotes removed, {moved:.2%} of these keys would land on a different partition "
            f"under the same partitioner."
        )
    return notes


def fingerprint_topic(
    bootstrap: str, topic: str, sample: int = 1000, extra: Sequence[str] = ()
) -> Fingerprint:
    """Read up to ``sample`` keyed records of ``topic`` and score every known partitioner plus ``extra``."""
    for spec in extra:
        get_partitioner(spec)
    samples, num_partitions = read_keyed_sample(bootstrap, topic, sample)
    return score(samples, num_partitions, [*PARTITIONERS, *extra])
