"""The doctor's HTML page: one self-contained file with a picture of the cluster.

Topics are drawn grouped by key space (one band per group), each with its
partition count, partitioner and key encoding; pairs are curves colored by their
verdict (solid: joined, dashed: only sharing keys).  Python lays the picture out
(:func:`layout`, pure); ``templates/doctor.html.j2`` draws it with autoescape on,
so topic names and keys from the cluster are escaped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..templates import environment
from .doctor import DoctorReport, PairDiagnosis

NODE_W, NODE_H = 230, 62
GAP_X, GAP_Y = 40, 34
COLUMNS = 4
BAND_PAD = 16
TITLE_H = 22
#: Room above a band's first row for the arcs between topics of that row (a quadratic curve peaks at half its bend).
ARC_ROOM = 56
MAX_BEND = 2 * (NODE_H // 2 + ARC_ROOM) - 8
COLORS = {"sound": "#2e7d32", "broken": "#c62828", "unknown": "#9e9e9e"}


@dataclass(frozen=True)
class Node:
    topic: str
    x: int
    y: int
    partitions: int
    partitioner: str
    encoding: str


@dataclass(frozen=True)
class Band:
    label: str
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class Edge:
    path: str
    color: str
    dashed: bool
    title: str


@dataclass(frozen=True)
class Picture:
    width: int
    height: int
    bands: tuple[Band, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def layout(report: DoctorReport) -> Picture:
    """Bands of up to :data:`COLUMNS` topics a row, one band per key space; curves between the pairs' topics."""
    topics = {t.name: t for t in report.topics}
    nodes: dict[str, Node] = {}
    bands = []
    y = 0
    for index, group in enumerate(report.key_spaces):
        rows = -(-len(group) // COLUMNS)
        columns = min(COLUMNS, len(group))
        height = TITLE_H + ARC_ROOM + rows * (NODE_H + GAP_Y) - GAP_Y + BAND_PAD
        width = BAND_PAD * 2 + columns * (NODE_W + GAP_X) - GAP_X
        label = f"key space {index + 1}" if len(group) > 1 else "shares keys with no other topic"
        bands.append(Band(label, 0, y, width, height))
        for i, name in enumerate(group):
            t = topics[name]
            nodes[name] = Node(name, BAND_PAD + (i % COLUMNS) * (NODE_W + GAP_X),
                               y + TITLE_H + ARC_ROOM + (i // COLUMNS) * (NODE_H + GAP_Y), t.partitions,
                               t.partitioner_label, t.encoding.label if t.encoding else "no keyed records")
        y += height + GAP_Y
    edges = tuple(_edge(p, nodes) for p in report.pairs if p.left in nodes and p.right in nodes)
    width = max((b.width for b in bands), default=NODE_W)
    return Picture(width + 2, max(y - GAP_Y, NODE_H) + 2, tuple(bands), tuple(nodes.values()), edges)


def _edge(pair: PairDiagnosis, nodes: dict[str, Node]) -> Edge:
    a, b = nodes[pair.left], nodes[pair.right]
    x1, y1, x2, y2 = a.x + NODE_W // 2, a.y + NODE_H // 2, b.x + NODE_W // 2, b.y + NODE_H // 2
    bend = min(MAX_BEND, 40 + abs(x2 - x1) // 6)  # curves, so an edge does not run through the topics between its ends
    cx, cy = (x1 + x2) // 2, min(y1, y2) - bend if y1 == y2 else (y1 + y2) // 2
    miss = "" if pair.miss_rate is None else f", predicted miss rate {pair.miss_rate:.1%}"
    title = f"{pair.left} × {pair.right}: {pair.status}{miss}"
    return Edge(f"M{x1},{y1} Q{cx},{cy} {x2},{y2}", COLORS[pair.status], not pair.joined, title)


def render_html(report: DoctorReport) -> str:
    """The whole page: the picture, then the topics, the pairs with their checks and fixes."""
    return environment(__package__).get_template("doctor.html.j2").render(
        report=report, picture=layout(report), colors=COLORS, node_w=NODE_W, node_h=NODE_H,
        pairs=_ordered(report.pairs))


def _ordered(pairs: Sequence[PairDiagnosis]) -> list[PairDiagnosis]:
    rank = {"broken": 0, "unknown": 1, "sound": 2}
    return sorted(pairs, key=lambda p: (not p.joined, rank[p.status], p.left, p.right))
