"""Where each client would put a key: the pure logic behind ``/partition`` and ``/tables/{table}/{key}``.

A join misses a row when it sits in one partition and the stream records for its key
arrive in another; putting every client's choice next to the row's real
partition shows which client wrote it and which one the join expected.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ...model.key_forms import json_quoted
from ...partitioners import PARTITIONERS, PROFILES, get_partitioner


@dataclass(frozen=True)
class Placement:
    """Each partitioner's and each client profile's partition for one key; ``None`` = random."""

    key: bytes
    num_partitions: int
    by_partitioner: dict[str, int | None]
    by_profile: dict[str, int | None]
    json_quoted: dict[str, int | None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key.decode("utf-8", "replace"),
            "key_hex": self.key.hex(),
            "partitions": self.num_partitions,
            "by_partitioner": self.by_partitioner,
            "by_profile": self.by_profile,
            "profiles": dict(PROFILES),
            "json_quoted": self.json_quoted,
        }


def _choices(key: bytes, num_partitions: int) -> dict[str, int | None]:
    return {
        name: (p(key, num_partitions) if p.is_deterministic(key) else None)
        for name, p in PARTITIONERS.items()
    }


def place(key: bytes, num_partitions: int) -> Placement:
    """Every partitioner's choice for ``key``, for the raw bytes and for the JSON-quoted key.

    The quoted variant is there because Faust and Quix Streams serialize keys
    as JSON by default, so ``b'"u1"'`` is what they hash when ``b'u1'`` was meant;
    it is quoted as they quote it (:func:`~streamapp.model.key_forms.json_quoted`).
    A key that is not UTF-8 has no JSON form: no quoted choices.
    """
    by_partitioner = _choices(key, num_partitions)
    by_profile = {client: by_partitioner[name] for client, name in PROFILES.items()}
    quoted = json_quoted(key)
    return Placement(key, num_partitions, by_partitioner, by_profile,
                     {} if quoted is None else _choices(quoted, num_partitions))


def expected_partition(partitioner: str, key: bytes, num_partitions: int) -> int | None:
    """The partition ``partitioner`` (a name, profile or ``pkg.mod:callable``) gives ``key``."""
    chooser = get_partitioner(partitioner)
    return chooser(key, num_partitions) if chooser.is_deterministic(key) else None


def writers(placement: Placement, partition: int) -> list[str]:
    """Client profiles that would have put the key where it actually is: who probably wrote it."""
    return sorted(client for client, p in placement.by_profile.items() if p == partition)


def diagnose(
    key: str,
    join_partitioner: str,
    join_partition: int | None,
    found: Sequence[tuple[str, int | None]],
    placement: Placement,
) -> str:
    """One sentence for the engineer on call: will each join find this key's row?

    ``found`` is (table, partition of its row or None) for every table keyed alike.
    """
    names = ", ".join(name for name, _ in found)
    if all(partition is None for _, partition in found):
        return (f"Key {key!r} is in no table ({names}): every stream record with it joins to NULL "
                f"until its row arrives.")
    parts: list[str] = []
    if join_partition is None:
        parts.append(f"The join's partitioner {join_partitioner} picks a random partition for this key")
    else:
        parts.append(f"Stream records with key {key!r} go to partition {join_partition} ({join_partitioner})")
    for name, partition in found:
        if partition is None:
            parts.append(f"table {name} does not have the row (yet)")
        elif partition == join_partition:
            parts.append(f"table {name} has the row in the same partition, so its join finds it")
        else:
            who = ", ".join(writers(placement, partition)) or "no known client"
            parts.append(f"table {name} has it in partition {partition} (as written by {who}), so its join misses it")
    return "; ".join(parts) + "."
