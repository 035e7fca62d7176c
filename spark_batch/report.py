"""summary.json (for schedulers and tests) and report.html (for people), from a :class:`~spark_batch.summary.Summary`.

The HTML comes from ``templates/report.html.j2`` with autoescape on, so every value
from the data (user ids, topic names, cause details) is escaped; this module only
lays the charts out.  The page is self-contained: inline CSS and SVG charts, no
scripts, no internet.  The charts are mismatches by cause, and by (order partition,
user partition) pair.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from markupsafe import Markup

from streamapp.templates import environment

from .summary import PartitionCell, Sample, Summary

BAR_WIDTH = 420
CELL = 28
TEMPLATE = "report.html.j2"
#: The charts' macros, on their own so that Python can render one without a whole report.
CHARTS = "charts.svg.j2"


def write_summary(path: Path, summary: Summary) -> None:
    path.write_text(json.dumps(summary.to_dict(), indent=2, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    y: int
    width: int


@dataclass(frozen=True)
class CauseChart:
    """Horizontal bars, one per (pair, cause) with a count above zero."""

    bars: tuple[Bar, ...]
    width: int = BAR_WIDTH + 330

    @property
    def height(self) -> int:
        return 24 * len(self.bars) + 10

    @classmethod
    def of(cls, causes: Mapping[str, Mapping[str, int]]) -> "CauseChart":
        counted = [(f"{pair}: {cause}", n) for pair, by_cause in causes.items() for cause, n in by_cause.items() if n]
        top = max((n for _, n in counted), default=1)
        return cls(tuple(Bar(label, n, 5 + 24 * i, max(1, round(BAR_WIDTH * n / top)))
                         for i, (label, n) in enumerate(counted)))


@dataclass(frozen=True)
class Square:
    order_partition: int
    user_partition: int
    count: int
    x: int
    y: int
    shade: float


@dataclass(frozen=True)
class PartitionGrid:
    """A heat map: rows = the order's partition, columns = the user's partition, shade = mismatches."""

    pair: str
    size: int
    cells: tuple[Square, ...]
    step: int = CELL

    @property
    def side(self) -> int:
        return 40 + self.step * self.size

    @classmethod
    def of(cls, cells: Sequence[PartitionCell], pair: str) -> "PartitionGrid":
        mine = [c for c in cells if c.pair == pair]
        size = 1 + max((max(c.order_partition, c.user_partition) for c in mine), default=-1)
        top = max((c.count for c in mine), default=1)
        return cls(pair, size, tuple(
            Square(c.order_partition, c.user_partition, c.count, 40 + CELL * c.user_partition,
                   40 + CELL * c.order_partition, 0.15 + 0.85 * c.count / top)
            for c in mine))


def _macro(name: str) -> object:
    return getattr(environment(__package__).get_template(CHARTS).module, name)


def cause_chart(causes: Mapping[str, Mapping[str, int]]) -> Markup:
    return _macro("cause_chart")(CauseChart.of(causes))  # type: ignore[operator]


def partition_chart(cells: Sequence[PartitionCell], pair: str) -> Markup:
    return _macro("partition_chart")(PartitionGrid.of(cells, pair))  # type: ignore[operator]


def render_html(summary: Summary, samples: Sequence[Sample]) -> str:
    pairs = list(summary.statuses)
    statuses = [[status, *[summary.statuses[p][status] for p in pairs]] for status in next(iter(summary.statuses.values()))]
    cause_names = sorted({c for by in summary.causes.values() for c in by})
    return environment(__package__).get_template(TEMPLATE).render(
        summary=summary,
        window=summary.window.to_dict(),
        partial=None if summary.partial is None else summary.partial.to_dict(),
        pairs=pairs,
        totals=[[p, t.orders, t.mismatches, f"{t.mismatch_rate * 100:.2f}%"] for p, t in summary.totals.items()],
        statuses=statuses,
        causes=[[c, *[summary.causes.get(p, {}).get(c, 0) for p in pairs]] for c in cause_names],
        cause_bars=CauseChart.of(summary.causes),
        grids=[PartitionGrid.of(summary.by_partition_pair, p) for p in pairs],
        samples=[[s.pair, s.status, s.cause, s.key, s.time, s.cause_detail] for s in samples],
        topics=[[role, topic] for role, topic in summary.topics.items()],
        queries=[[pair, shape.get("query", ""), shape.get("stream", ""), shape.get("table", ""),
                  ", ".join(shape.get("identity", ()))] for pair, shape in summary.pairs.items()],
        records=records_table(summary),
    )


def records_table(summary: Summary) -> list[list[object]]:
    """Per role: records read, undecodable, and (inputs) null keys, non-UTF-8 keys and tombstones; ``-``: not counted."""
    rows: list[list[object]] = [[role, r.rows, r.undecodable, r.null_key, r.non_utf8_key, r.tombstones]
                                for role, r in summary.input_records.items()]
    rows += [[role, r.rows, r.undecodable, "-", "-", "-"] for role, r in summary.output_records.items()]
    return rows
