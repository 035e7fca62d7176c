"""The reconciled time window, whether it is over, and the offsets it resolves to (the plan a rerun reads again).

A window is resolved to per-partition offset ranges once; the plan is written
next to the output, and a rerun for the same date reads exactly those ranges,
so late records that arrived in between do not change the answer.  That holds
only for a window that is over (its end plus the grace is past): an open one is
refused, or read as a partial report whose offsets are never kept.  Whether it
is over is a pure function of "now", so tests give the clock.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Mapping

from .errors import ReconcileError

PLAN_VERSION = 1
#: Kafka timestamps are milliseconds since 1970 (a negative one asks ListOffsets for "latest" or "earliest").
MIN_MS = 0
#: The last millisecond a ``datetime`` can say (9999-12-31T23:59:59.999Z).
MAX_MS = 253_402_300_799_999


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
        return {"start_ms": self.start_ms, "end_ms": self.end_ms, "start": iso(self.start_ms), "end": iso(self.end_ms)}


def iso(ms: int) -> str:
    """``ms`` since 1970 as an ISO UTC time, as the report and the messages show it."""
    moment = datetime.fromtimestamp(ms // 1000, tz=timezone.utc).replace(microsecond=ms % 1000 * 1000)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds").replace("+00:00", "Z")


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def wall_clock_ms() -> int:
    """Now, in milliseconds since 1970: the job's clock (tests give theirs)."""
    return int(time.time() * 1000)


def _in_range(option: str, text: str, ms: int) -> int:
    """``ms`` if Kafka and ``datetime`` can both say it, else one line naming the option."""
    if not MIN_MS <= ms <= MAX_MS:
        raise ReconcileError(f"{option}={text!r}: out of range: a window lies between 1970-01-01 "
                             "(where Kafka's timestamps begin) and 9999-12-31T23:59:59.999Z")
    return ms


def parse_instant(option: str, text: str) -> int:
    """An ISO date or date-time, in ms since 1970; naive values are UTC (a nightly job must not depend on the host zone)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReconcileError(f"{option}={text!r}: expected YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z]") from None
    return _in_range(option, text, _ms(moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)))


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
        if first == date.max:  # its end, the next midnight, is past what a datetime can say
            raise ReconcileError(f"--date={day!r}: out of range: the last day a window can cover is 9999-12-30")
        return TimeWindow(_in_range("--date", day, _ms(begin)), _ms(begin + timedelta(days=1)))
    if not (start and end):
        raise ReconcileError("give --date YYYY-MM-DD, or both --from and --to")
    window = TimeWindow(parse_instant("--from", start), parse_instant("--to", end))
    if window.end_ms <= window.start_ms:
        raise ReconcileError(f"--to={end!r} is not after --from={start!r}")
    return window


def grace_for(minutes: float, window: TimeWindow) -> int:
    """``--grace-minutes`` in ms: a finite number, 0 or more, that keeps the window's close a time ``datetime`` can say."""
    if not math.isfinite(minutes) or minutes < 0:
        raise ReconcileError(f"--grace-minutes={minutes:g}: expected a finite number of minutes, 0 or more")
    grace = int(minutes * 60_000)
    if window.end_ms + grace > MAX_MS:
        raise ReconcileError(f"--grace-minutes={minutes:g}: the window's end ({iso(window.end_ms)}) plus the grace "
                             "is after 9999-12-31T23:59:59.999Z, the last time a window can close")
    return grace


@dataclass(frozen=True)
class Partial:
    """A window read before it is over: what the topics held at ``as_of_ms``; it is over at ``closes_ms``."""

    as_of_ms: int
    closes_ms: int

    def to_dict(self) -> dict[str, object]:
        return {"as_of_ms": self.as_of_ms, "as_of": iso(self.as_of_ms),
                "closes_ms": self.closes_ms, "closes": iso(self.closes_ms)}


def over_or_partial(window: TimeWindow, grace: int, now_ms: int, allow_partial: bool, given: str) -> Partial | None:
    """``None`` when the window is over at ``now_ms`` (its end plus the grace is past: no record of it is still
    to come), a :class:`Partial` for an open window with ``allow_partial``; otherwise one line naming ``given``
    (the options that named the window).  A window that has not started is refused, partial or not.
    """
    closes = window.end_ms + grace
    if now_ms >= closes:
        return None
    if now_ms < window.start_ms:
        raise ReconcileError(f"{given}: the window has not started (it starts at {iso(window.start_ms)}, "
                             f"now is {iso(now_ms)}): nothing to reconcile yet")
    if allow_partial:
        return Partial(now_ms, closes)
    raise ReconcileError(f"{given}: the window is not over: it closes at {iso(closes)} (its end plus "
                         f"--grace-minutes={grace / 60_000:g}), "
                         f"now is {iso(now_ms)}; run it then, or give --allow-partial for a partial report "
                         "(whose offsets are not kept)")


def written_after_close(written_ms: int, window: TimeWindow, grace: int) -> bool:
    """Whether an offset plan written at ``written_ms`` can be read again: only one resolved once the window
    was over holds all its records (a job before this check pinned open windows)."""
    return written_ms >= window.end_ms + grace


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
