"""What the worker has done, per partition: users loaded, orders joined or missed per output, dead letters.

One :class:`Counters` lives in each app (``app.counters``), so its agents, the
periodic log line and the web views read the same numbers.
Counts are per process since it started; with two workers, add both up.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Counters:
    users: Counter[int] = field(default_factory=Counter)
    users_deleted: Counter[int] = field(default_factory=Counter)
    users_repartitioned: Counter[int] = field(default_factory=Counter)
    users_repartition_deleted: Counter[int] = field(default_factory=Counter)
    orders: Counter[int] = field(default_factory=Counter)
    joined: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    missed: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    dead_lettered: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))

    def record_join(self, output: str, partition: int, matched: bool) -> None:
        (self.joined if matched else self.missed)[output][partition] += 1

    def record_dead_letter(self, source_topic: str, partition: int) -> None:
        self.dead_lettered[source_topic][partition] += 1

    def snapshot(self) -> dict[str, Any]:
        """Plain dicts (JSON-ready, partitions as strings) plus ``totals``, for logs and web views."""
        singles = {"users": self.users, "users_deleted": self.users_deleted,
                   "users_repartitioned": self.users_repartitioned,
                   "users_repartition_deleted": self.users_repartition_deleted, "orders": self.orders}
        per_output = {"joined": self.joined, "missed": self.missed, "dead_lettered": self.dead_lettered}
        snap: dict[str, Any] = {name: _plain(c) for name, c in singles.items()}
        snap.update({name: {k: _plain(c) for k, c in group.items()} for name, group in per_output.items()})
        totals: dict[str, Any] = {name: sum(c.values()) for name, c in singles.items()}
        totals["joined"] = {k: sum(c.values()) for k, c in self.joined.items()}
        totals["missed"] = {k: sum(c.values()) for k, c in self.missed.items()}
        totals["dead_lettered"] = sum(sum(c.values()) for c in self.dead_lettered.values())
        snap["totals"] = totals
        return snap


def _plain(counter: Counter[int]) -> dict[str, int]:
    return {str(p): n for p, n in sorted(counter.items())}


def summary_line(snap: dict[str, Any]) -> str:
    """One log line for people, e.g. ``orders 1,000 · streamapp_orders_merged missed 834 (83.40%)``."""
    t = snap["totals"]
    parts = [
        f"users {t['users']:,}",
        f"repartitioned users {t['users_repartitioned']:,}",
        f"orders {t['orders']:,}",
    ]
    for name in sorted(set(t["joined"]) | set(t["missed"])):
        joined, missed = t["joined"].get(name, 0), t["missed"].get(name, 0)
        share = 100.0 * missed / (joined + missed) if joined + missed else 0.0
        parts.append(f"{name} joined {joined:,} missed {missed:,} ({share:.2f}%)")
    parts.append(f"dead letters {t['dead_lettered']:,}")
    if t["users_deleted"] or t["users_repartition_deleted"]:
        parts.append(f"deleted users {t['users_deleted']:,} (repartitioned {t['users_repartition_deleted']:,})")
    return "Counters: " + " · ".join(parts)
