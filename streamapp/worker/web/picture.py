"""The per-partition counters as a picture: stream partition × table partition, hits and misses.

A table with a column per output and counter ran off the page's right edge; an
SVG scales to any width.  Left, a grid: row = stream partition, column = table
partition, each cell the sampled keys (the doctor's last sample) whose stream
record sits in that row and whose table row in that column; on the diagonal the
direct join finds the row (a hit), off it the join misses.  Right of each row, what
the worker counted for that stream partition: records read, then joined and missed
per output as one bar.  :func:`layout` is pure; ``templates/counters.svg.j2`` draws
it with autoescape on, so topic names are escaped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...templates import environment

CELL = 34
ROW_HEAD = 70
TOP = 64
GAP = 28
NUMBER_W = 64
BAR_W = 200
BAR_GAP = 24
LABEL_CHARS = 32
#: Room for the two legend lines under a small grid.
MIN_WIDTH = 560
COLORS = {"hit": "#2e7d32", "miss": "#c62828", "hit_fill": "#e6f6e6", "miss_fill": "#fbe9e9", "none": "#ffffff"}


@dataclass(frozen=True)
class Cell:
    row: int
    column: int
    x: int
    y: int
    count: int
    kind: str  # "hit", "miss" or "none"


@dataclass(frozen=True)
class Bar:
    output: str
    partition: int
    x: int
    y: int
    joined: int
    missed: int
    joined_w: float
    missed_w: float


@dataclass(frozen=True)
class Picture:
    width: int
    height: int
    stream: str
    table: str
    partitions: int
    table_partitions: int
    matrix_w: int
    rows: list[int]
    records: list[int]
    dead: list[int]
    cells: list[Cell]
    bars: list[Bar]
    outputs: list[tuple[str, str, int]]  # (full name, label, x)
    sampled: int
    hits: int
    number_x: int
    dead_x: int

    def render(self) -> str:
        return environment(__package__).get_template("counters.svg.j2").render(
            p=self, colors=COLORS, cell=CELL, top=TOP, row_head=ROW_HEAD, bar_w=BAR_W, number_w=NUMBER_W)


def _label(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"


def _per_partition(counter: Mapping[str, int] | None, n: int) -> list[int]:
    return [int((counter or {}).get(str(p), 0)) for p in range(n)]


def layout(group: Mapping[str, Any], stream: str, table: str, outputs: Sequence[str], partitions: int,
           matrix: Sequence[Sequence[int]] | None) -> Picture:
    """Place every cell and bar; ``group`` is a counters snapshot (``/stats``' group), pure.

    ``stream`` and ``table`` are the joined topics, ``partitions`` the stream's count; the grid takes its
    size from ``matrix`` when there is one.
    """
    rows = len(matrix) if matrix else partitions
    columns = len(matrix[0]) if matrix and matrix[0] else partitions
    cells = []
    for p in range(rows):
        for q in range(columns):
            count = int(matrix[p][q]) if matrix else 0
            kind = "none" if count == 0 else "hit" if p == q else "miss"
            cells.append(Cell(p, q, ROW_HEAD + q * CELL, TOP + p * CELL, count, kind))
    matrix_w = ROW_HEAD + columns * CELL
    number_x = matrix_w + GAP
    records = _per_partition((group.get("records") or {}).get(stream), rows)
    most = max(records + [1])
    bars, heads = [], []
    x = number_x + NUMBER_W
    for output in outputs:
        heads.append((output, _label(output), x))
        joined = _per_partition((group.get("joined") or {}).get(output), rows)
        missed = _per_partition((group.get("missed") or {}).get(output), rows)
        for p in range(rows):
            bars.append(Bar(output, p, x, TOP + p * CELL + 3, joined[p], missed[p],
                            BAR_W * joined[p] / most, BAR_W * missed[p] / most))
        x += BAR_W + BAR_GAP
    dead = [sum(int(c.get(str(p), 0)) for c in (group.get("dead_lettered") or {}).values()) for p in range(rows)]
    sampled = sum(c.count for c in cells)
    hits = sum(c.count for c in cells if c.kind == "hit")
    return Picture(max(x + NUMBER_W, MIN_WIDTH), TOP + rows * CELL + 48, stream, table, rows, columns, matrix_w,
                   _per_partition((group.get("rows") or {}).get(table), columns), records, dead, cells, bars, heads,
                   sampled, hits, number_x, x)
