"""What the worker has done, per topic and partition: table rows loaded and deleted, stream records read, records
joined or missed per output, dead letters.

One :class:`Counters` lives in each app (``app.counters``), so its agents, the
periodic log line and the web views read the same numbers.
Counts are per process since it started; with two workers, add both up.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any


def _by_name() -> defaultdict[str, Counter[int]]:
    return defaultdict(Counter)


@dataclass
class Counters:
    #: Table topic -> rows loaded (upserts) per partition.
    rows: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    #: Table topic -> rows deleted (tombstones) per partition.
    deleted: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    #: Stream topic -> records read (joined into every output) per partition.
    records: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    joined: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    missed: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    dead_lettered: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    #: Stream topic -> its records later than a windowed join's window and grace: kept for no later join (dropped).
    late: defaultdict[str, Counter[int]] = field(default_factory=_by_name)
    #: Output -> its misses by cause (:data:`~streamapp.worker.tables.MISS_CAUSES`), when the metrics are on.
    miss_causes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: Source topic -> its dead letters by reason (:data:`agents.dead_lettering.REASONS`).
    dead_letter_reasons: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: Output -> records queued to it per source partition by the joins that write none, one or more per record
    #: read (table-table and stream-stream joins; a stream-table join's are its joined and missed counts), and
    #: repartition topic -> the records a stream agent re-keyed into it.
    written: defaultdict[str, Counter[int]] = field(default_factory=_by_name)

    def record_row(self, topic: str, partition: int, present: bool) -> None:
        (self.rows if present else self.deleted)[topic][partition] += 1

    def record_read(self, topic: str, partition: int, count: int = 1) -> None:
        self.records[topic][partition] += count

    def record_join(self, output: str, partition: int, matched: bool) -> None:
        (self.joined if matched else self.missed)[output][partition] += 1

    def record_miss(self, output: str, partition: int, cause: str) -> None:
        """A miss whose cause is known (the metrics are on): counted as :meth:`record_join` counts it, and by cause."""
        self.missed[output][partition] += 1
        self.miss_causes[output][cause] += 1

    def record_written(self, output: str, partition: int, count: int = 1) -> None:
        self.written[output][partition] += count

    def record_late(self, topic: str, partition: int, count: int = 1) -> None:
        self.late[topic][partition] += count

    def record_dead_letter(self, source_topic: str, partition: int, reason: str = "other") -> None:
        self.dead_lettered[source_topic][partition] += 1
        self.dead_letter_reasons[source_topic][reason] += 1

    def snapshot(self) -> dict[str, Any]:
        """Plain dicts (JSON-ready, partitions as strings) plus ``totals``, for logs and web views."""
        groups = {"rows": self.rows, "deleted": self.deleted, "records": self.records, "joined": self.joined,
                  "missed": self.missed, "dead_lettered": self.dead_lettered, "late": self.late}
        snap: dict[str, Any] = {name: {k: _plain(c) for k, c in group.items()} for name, group in groups.items()}
        totals: dict[str, Any] = {name: {k: sum(c.values()) for k, c in group.items()} for name, group in groups.items()}
        totals["dead_lettered"] = sum(sum(c.values()) for c in self.dead_lettered.values())
        snap["miss_causes"] = {output: dict(c) for output, c in self.miss_causes.items()}
        snap["dead_letter_reasons"] = {topic: dict(c) for topic, c in self.dead_letter_reasons.items()}
        snap["written"] = {output: _plain(c) for output, c in self.written.items()}
        snap["totals"] = totals
        return snap


def _plain(counter: Counter[int]) -> dict[str, int]:
    return {str(p): n for p, n in sorted(counter.items())}


def summary_line(snap: dict[str, Any]) -> str:
    """One log line for people, e.g. ``demo_user_orders 1,000 read · streamapp_X missed 834 (83.40%)``."""
    t = snap["totals"]
    parts = [f"{topic} {n:,} rows" for topic, n in t["rows"].items()]
    parts += [f"{topic} {n:,} read" for topic, n in t["records"].items()]
    for name in sorted(set(t["joined"]) | set(t["missed"])):
        joined, missed = t["joined"].get(name, 0), t["missed"].get(name, 0)
        share = 100.0 * missed / (joined + missed) if joined + missed else 0.0
        parts.append(f"{name} joined {joined:,} missed {missed:,} ({share:.2f}%)")
    parts.append(f"dead letters {t['dead_lettered']:,}")
    parts += [f"{topic} {n:,} rows deleted" for topic, n in t["deleted"].items() if n]
    parts += [f"{topic} {n:,} too late for the join window (dropped)" for topic, n in t["late"].items() if n]
    return "Counters: " + " · ".join(parts)
