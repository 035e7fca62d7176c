"""summary.json (for schedulers and tests) and report.html (for people): pure functions of the summary.

The HTML is self-contained (inline CSS and SVG charts, no scripts, no internet):
mismatches by cause, and by (order partition, user partition) pair.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any, Mapping, Sequence

BAR_WIDTH = 420
CELL = 28


def mismatch_rate(statuses: Mapping[str, int]) -> float:
    total = sum(statuses.values())
    return 0.0 if total == 0 else (total - statuses.get("match", 0)) / total


def write_summary(path: Path, summary: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def _pct(value: float) -> str:
    return f"{value * 100:.2f}%"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def cause_chart(causes: Mapping[str, Mapping[str, int]]) -> str:
    """Horizontal bars, one per (pair, cause) with a count above zero."""
    bars = [(f"{pair}: {cause}", n) for pair, by_cause in causes.items() for cause, n in by_cause.items() if n]
    if not bars:
        return "<p>No mismatches.</p>"
    top = max(n for _, n in bars)
    height = 24 * len(bars) + 10
    parts = [f'<svg role="img" aria-label="mismatches by cause" width="{BAR_WIDTH + 330}" height="{height}">']
    for i, (label, n) in enumerate(bars):
        y = 5 + 24 * i
        width = max(1, round(BAR_WIDTH * n / top))
        parts.append(f'<text x="0" y="{y + 15}" font-size="13">{escape(label)}</text>')
        parts.append(f'<rect x="230" y="{y}" width="{width}" height="18" fill="#c0392b"><title>{n}</title></rect>')
        parts.append(f'<text x="{236 + width}" y="{y + 15}" font-size="13">{n}</text>')
    parts.append("</svg>")
    return "".join(parts)


def partition_chart(cells: Sequence[Mapping[str, Any]], pair: str) -> str:
    """A heat map: rows = the order's partition, columns = the user's partition, shade = mismatches."""
    mine = [c for c in cells if c["pair"] == pair]
    if not mine:
        return f"<p>{escape(pair)}: no mismatches with both partitions known.</p>"
    size = 1 + max(max(c["order_partition"], c["user_partition"]) for c in mine)
    top = max(c["count"] for c in mine)
    side = 40 + CELL * size
    parts = [f'<svg role="img" aria-label="{escape(pair)} mismatches by partition pair" width="{side + 10}" height="{side + 10}">',
             '<text x="40" y="12" font-size="11">user partition &#8594;</text>',
             '<text x="0" y="30" font-size="11">order &#8595;</text>']
    for i in range(size):
        parts.append(f'<text x="{44 + CELL * i}" y="34" font-size="11" dy="-8">{i}</text>')
        parts.append(f'<text x="22" y="{58 + CELL * i}" font-size="11">{i}</text>')
    for c in mine:
        x, y = 40 + CELL * c["user_partition"], 40 + CELL * c["order_partition"]
        shade = 0.15 + 0.85 * c["count"] / top
        parts.append(
            f'<rect x="{x}" y="{y}" width="{CELL - 2}" height="{CELL - 2}" fill="#c0392b" fill-opacity="{shade:.2f}">'
            f'<title>order partition {c["order_partition"]}, user partition {c["user_partition"]}: {c["count"]}</title></rect>'
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(summary: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> str:
    statuses: Mapping[str, Mapping[str, int]] = summary["statuses"]
    totals: Mapping[str, Mapping[str, Any]] = summary["totals"]
    threshold = summary["threshold"]
    verdict = "BREACHED" if threshold["breached"] else "within threshold"
    pairs = list(statuses)
    status_rows = [[s, *[statuses[p][s] for p in pairs]] for s in next(iter(statuses.values()))]
    total_rows = [[p, totals[p]["orders"], totals[p]["mismatches"], _pct(totals[p]["mismatch_rate"])] for p in pairs]
    cause_names = sorted({c for by in summary["causes"].values() for c in by})
    cause_rows = [[c, *[summary["causes"].get(p, {}).get(c, 0) for p in pairs]] for c in cause_names]
    sample_rows = [[r["pair"], r["status"], r["cause"], r["user_id"], r["ts"], r["cause_detail"]] for r in samples]
    topics = [[role, topic] for role, topic in summary["topics"].items()]
    window = summary["window"]
    body = [
        f"<h1>Reconciliation {escape(summary['date'])}: Faust join vs ksqlDB join</h1>",
        f"<p>Window {escape(window['start'])} to {escape(window['end'])}. "
        f"Threshold {_pct(threshold['max_mismatch_rate'])}: <strong>{verdict}</strong>.</p>",
        "<h2>Totals</h2>", _table(["pair", "orders", "mismatches", "mismatch rate"], total_rows),
        "<h2>Orders by status</h2>", _table(["status", *pairs], status_rows),
        "<h2>Mismatches by cause</h2>", _table(["cause", *pairs], cause_rows), cause_chart(summary["causes"]),
        "<h2>Mismatches by partition pair</h2>",
        *[f"<h3>{escape(p)}</h3>" + partition_chart(summary["by_partition_pair"], p) for p in pairs],
        f"<h2>Examples (first {len(samples)})</h2>",
        _table(["pair", "status", "cause", "user_id", "ts", "detail"], sample_rows),
        "<h2>Inputs</h2>", _table(["role", "topic or file"], topics),
    ]
    style = (
        "body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}th{background:#eee}"
    )
    return (
        f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Reconciliation {escape(summary['date'])}</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n"
    )
