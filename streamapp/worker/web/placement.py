"""Where each client would put a key: the pure logic behind ``/partition`` and ``/users``.

A join misses a user when the row sits in one partition and the orders for it
arrive in another; putting every client's choice next to the row's real
partition shows which client wrote it and which one the join expected.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    user_id: str,
    join_partitioner: str,
    join_partition: int | None,
    direct_partition: int | None,
    repartition_partition: int | None,
    placement: Placement,
) -> str:
    """One sentence for the engineer on call: will the direct and the repartitioned join find this user?"""
    if direct_partition is None and repartition_partition is None:
        return (
            f"User {user_id!r} is in neither users table: every order for it joins to NULL "
            f"until the user record arrives."
        )
    parts: list[str] = []
    if join_partition is None:
        parts.append(f"The join's partitioner {join_partitioner} picks a random partition for this key")
    else:
        parts.append(f"Orders for {user_id!r} go to partition {join_partition} ({join_partitioner})")
    if direct_partition is None:
        parts.append("the users table does not have the row")
    elif direct_partition == join_partition:
        parts.append(f"the users table has the row in the same partition, so the direct join finds it")
    else:
        who = ", ".join(writers(placement, direct_partition)) or "no known client"
        parts.append(
            f"the users table has it in partition {direct_partition} (as written by {who}), "
            f"so the direct join misses it"
        )
    if repartition_partition is None:
        parts.append("the repartitioned table does not have the row (yet)")
    elif repartition_partition == join_partition:
        parts.append("the repartitioned table has it in the same partition, so the repartitioned join finds it")
    else:
        parts.append(
            f"the repartitioned table has it in partition {repartition_partition}, "
            f"so the repartitioned join misses it too"
        )
    return "; ".join(parts) + "."
