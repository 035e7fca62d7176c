"""The fingerprint's verdict in words: which partitioner wrote the sample, or why no sample could tell.

Pure sentences over a :class:`~streamapp.copartition.scoring.Scoring`; the numbers are the scoring's.
"""
from __future__ import annotations

import math
from typing import Sequence

from ..partitioners import clients_of
from .scoring import Scoring, same_hash


def _label(family: Sequence[str]) -> str:
    return "/".join(family)


def verdict(s: Scoring) -> tuple[bool, str]:
    """Whether the sample is ambiguous, and the one paragraph that says which partitioner wrote it."""
    n, keyed, families, needed, form, json_keys = (
        s.num_partitions, s.keyed, s.families, s.min_sample, s.families_key_form, s.json_keys)
    if s.sample_size == 0:
        return True, "The topic holds no records: nothing to fingerprint."
    if n == 1:
        return True, "With 1 partition every partitioner picks partition 0: no sample can tell them apart."
    if keyed == 0:
        return True, ("No keyed records: every record read has a NULL key, which clients place at random or "
                      "round-robin, never by a hash, so there is nothing to fingerprint.")
    if not families:
        return False, _unexplained(s)
    labels = [_label(f) for f in families]
    scored = min(s.scored_by_family)
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


def _unexplained(s: Scoring) -> str:
    n, stored = s.num_partitions, s.stored.by_name
    if s.resized is not None:
        name, earlier = s.resized
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


def notes(s: Scoring) -> list[str]:
    """What a reader should know beyond the verdict: families no sample can split, NULL keys, the quotes' cost."""
    num_partitions, unquoted, explaining = s.num_partitions, s.unquoted.by_name, s.stored.explaining
    notes = []
    for family in s.families:
        if len(family) < 2:
            continue
        if same_hash(family):
            notes.append(
                f"{', '.join(family)} compute the same hash; they differ only in how NULL or empty keys are "
                f"placed, which this sample does not show."
            )
        else:
            notes.append(
                f"{', '.join(family)} compute different hashes that put every key on the same partition when "
                f"there are {num_partitions} partitions: no sample of this topic can tell them apart."
            )
    if s.null_keys:
        notes.append(f"{s.null_keys:,} records with NULL keys were left out (clients place them at random).")
    if s.json_keys and explaining:
        moved = 1 - max(unquoted[name].share for name in explaining if name in unquoted)
        notes.append(
            f"With the JSON quotes removed, {moved:.2%} of these keys would land on a different partition "
            f"under the same partitioner."
        )
    return notes
