"""The reconciled time window, and the offsets it resolves to (the plan a rerun reads again).

A window is resolved to per-partition offset ranges once; the plan is written
next to the output, and a rerun for the same date reads exactly those ranges,
so late records that arrived in between do not change the answer.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Mapping

from .errors import ReconcileError

PLAN_VERSION = 1


@dataclass(frozen=True)
class TimeWindow:
    """Half-open UTC interval [start_ms, end_ms) of record timestamps."""

    start_ms: int
    end_ms: int

    @property
    def label(self) -> str:
        """The ``dt=`` partition value: the UTC date the window starts on."""
        return datetime.fromtimestamp(self.start_ms / 1000, tz=timezone.utc).date().isoformat()

    def to_dict(self) -> dict[str, object]:
        return {"start_ms": self.start_ms, "end_ms": self.end_ms, "start": _iso(self.start_ms), "end": _iso(self.end_ms)}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def parse_instant(option: str, text: str) -> datetime:
    """An ISO date or date-time; naive values are UTC (a nightly job must not depend on the host zone)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReconcileError(f"{option}={text!r}: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z]") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def window_for(day: str | None, start: str | None, end: str | None) -> TimeWindow:
    """The window from ``--date`` or ``--from``/``--to`` (exactly one of the two forms)."""
    if day and (start or end):
        raise ReconcileError("--date cannot be combined with --from/--to: give one or the other")
    if day:
        try:
            first = date.fromisoformat(day)
        except ValueError:
            raise ReconcileError(f"--date={day!r}: expected YYYY-MM-DD") from None
        begin = datetime(first.year, first.month, first.day, tzinfo=timezone.utc)
        return TimeWindow(_ms(begin), _ms(begin + timedelta(days=1)))
    if not (start and end):
        raise ReconcileError("give --date YYYY-MM-DD, or both --from and --to")
    window = TimeWindow(_ms(parse_instant("--from", start)), _ms(parse_instant("--to", end)))
    if window.end_ms <= window.start_ms:
        raise ReconcileError(f"--to={end!r} is not after --from={start!r}")
    return window


@dataclass(frozen=True)
class TopicRange:
    """Offsets [start, end) of every partition of one topic, and the role it plays in the join."""

    role: str
    topic: str
    ranges: dict[int, tuple[int, int]]
    filter_by_time: bool

    @property
    def offsets(self) -> int:
        """Offsets the ranges span: records, plus a transactional topic's commit markers and aborted records."""
        return sum(end - start for start, end in self.ranges.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "role": self.role,
            "topic": self.topic,
            "filter_by_time": self.filter_by_time,
            "offsets_in_ranges": self.offsets,  # not a record count: markers and aborted records take offsets
            "partitions": {str(p): {"start": s, "end": e} for p, (s, e) in sorted(self.ranges.items())},
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> "TopicRange":
        parts = raw["partitions"]
        assert isinstance(parts, Mapping)
        return cls(
            str(raw["role"]),
            str(raw["topic"]),
            {int(p): (int(r["start"]), int(r["end"])) for p, r in parts.items()},
            bool(raw["filter_by_time"]),
        )


@dataclass(frozen=True)
class OffsetPlan:
    """Everything a run reads: the window and, per role, the topic and its offset ranges."""

    window: TimeWindow
    topics: dict[str, TopicRange] = field(default_factory=dict)
    lookup: str = "index"

    def to_dict(self) -> dict[str, object]:
        return {
            "version": PLAN_VERSION,
            "window": self.window.to_dict(),
            "lookup": self.lookup,
            "topics": {role: rng.to_dict() for role, rng in self.topics.items()},
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, path: Path) -> "OffsetPlan":
        try:
            raw = json.loads(path.read_text())
            window = TimeWindow(int(raw["window"]["start_ms"]), int(raw["window"]["end_ms"]))
            topics = {role: TopicRange.from_dict(r) for role, r in raw["topics"].items()}
            return cls(window, topics, str(raw.get("lookup", "index")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ReconcileError(f"offsets file {path} cannot be used: {exc}") from None

    def matches(self, window: TimeWindow, topics: Mapping[str, str]) -> bool:
        """True when this plan was resolved for the same window and the same topic per role."""
        return self.window == window and {r: t.topic for r, t in self.topics.items()} == dict(topics)
