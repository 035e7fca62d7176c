"""Which partitioner wrote a topic: every known partitioner scored against (key, partition) samples, and a verdict.

A stream-table join is partition-local, so two topics written by clients with
different partitioners (or the same partitioner over differently serialized
keys) silently miss most joins.  :func:`score` is pure (the numbers in
:mod:`.scoring`, the sentences in :mod:`.verdict`), so its verdicts are tested
without a broker; :func:`fingerprint_topic` reads a sample from Kafka first.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Sequence

from ..model.key_forms import json_quoted, json_unquoted
from ..partitioners import PARTITIONERS, get_partitioner
from .keyed_sample import read_keyed_sample
from .scoring import FORMS, FormScores, Scoring, families, min_sample_size, resized, score_form, validate
from .verdict import notes, verdict


@dataclass(frozen=True)
class Fingerprint(Scoring):
    """The scoring of one sample, with its verdict: ``ambiguous`` when no partitioner can be named."""

    ambiguous: bool = False
    verdict: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """For ``--json``: every form's shares and explaining partitioners, then the families and the verdict."""
        forms = {"": self.stored, "quoted_": self.quoted, "unquoted_": self.unquoted}
        return {
            "sample_size": self.sample_size, "num_partitions": self.num_partitions, "keyed": self.keyed,
            **{f"{prefix}scores": form.shares for prefix, form in forms.items()},
            "scored": self.stored.scored,
            **{f"{prefix}explaining": form.explaining for prefix, form in forms.items()},
            "json_keys": self.json_keys, "families": self.families, "min_sample": self.min_sample,
            "ambiguous": self.ambiguous, "verdict": self.verdict, "notes": self.notes,
            "families_key_form": self.families_key_form, "resized": self.resized,
        }


def score(
    samples: Iterable[tuple[bytes | None, int]],
    num_partitions: int,
    candidates: Sequence[str] | None = None,
) -> Fingerprint:
    """Score every known partitioner (or ``candidates``: names, profiles, ``package.module:callable``)."""
    samples = list(samples)
    validate(samples, num_partitions)
    names = list(dict.fromkeys(candidates)) if candidates is not None else list(PARTITIONERS)
    keyed = [(key, part) for key, part in samples if key is not None]
    keys, parts = [key for key, _ in keyed], [part for _, part in keyed]
    inner = [json_unquoted(key) for key in keys]
    json_keys = bool(keyed) and None not in inner
    forms = {
        "stored": FormScores(score_form(names, keys, parts, num_partitions)),
        "quoted": FormScores(score_form(names, [json_quoted(key) for key in keys], parts, num_partitions)),
        "unquoted": FormScores(score_form(names, inner, parts, num_partitions) if json_keys else {}),
    }
    form = next((name for name in FORMS if forms[name].explaining), "stored")
    found = families(forms[form].explaining, num_partitions)
    scoring = Scoring(
        sample_size=len(samples), num_partitions=num_partitions, keyed=len(keyed), **forms, json_keys=json_keys,
        families=found, families_key_form=form, min_sample=min_sample_size(num_partitions),
        resized=None if found or not keyed else resized(names, keys, parts, num_partitions),
    )
    ambiguous, sentence = verdict(scoring)
    return Fingerprint(**{f.name: getattr(scoring, f.name) for f in fields(Scoring)},
                       ambiguous=ambiguous, verdict=sentence, notes=notes(scoring))


def fingerprint_topic(
    bootstrap: str, topic: str, sample: int = 1000, extra: Sequence[str] = ()
) -> Fingerprint:
    """Read up to ``sample`` keyed records of ``topic`` and score every known partitioner plus ``extra``."""
    for spec in extra:
        get_partitioner(spec)
    samples, num_partitions = read_keyed_sample(bootstrap, topic, sample)
    return score(samples, num_partitions, [*PARTITIONERS, *extra])
