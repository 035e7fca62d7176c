"""``streamapp doctor``: audit a cluster for joins that cannot work, and print the fix for each.

Exit status 0 when every joined pair is sound, 1 when one is not (or names a
topic the cluster lacks), 2 on an error, so it can gate a deployment.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..copartition.doctor import (
    DEFAULT_SAMPLE, DoctorError, DoctorReport, JoinedPair, cluster_topics, diagnose_reports, examine_topics,
)
from ..copartition.doctor_pairs import pairs_from_file, pairs_from_ksqldb, pairs_from_worker
from ..copartition.doctor_report import render_html
from ..kafka.admin import describe
from ..settings import Settings, add_arguments
from .guard import PROBLEMS_EXIT_CODE
from .partition import wide_console

MARKS = {"sound": "[green]sound[/green]", "broken": "[red]BROKEN[/red]", "unknown": "[yellow]unknown[/yellow]"}
#: A pair that only shares keys is not broken today: it would be if someone joined it.
UNJOINED_MARKS = {"sound": "[green]co-partitioned[/green]", "broken": "[yellow]not co-partitioned[/yellow]",
                  "unknown": "[yellow]unknown[/yellow]"}


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "doctor",
        help="audit every topic and joined pair for co-partitioning (counts, partitioners, key encodings), with fixes",
        description=(
            "Sample every topic, name its partitioner and key encoding, find the topics that share keys, and "
            "diagnose each joined pair (from ksqlDB, streamapp's worker and --pairs) with its predicted miss rate "
            "and the fix. Exit status 0 when every joined pair is sound, 1 when one is not, 2 on errors."
        ),
    )
    parser.add_argument("--pairs", metavar="FILE", help="joined pairs, one 'left right' a line (# comments)")
    parser.add_argument("--topics", metavar="PATTERN", help="only topics whose name matches this regular expression")
    parser.add_argument("--include-internal", action="store_true", help="also topics whose name starts with '_'")
    parser.add_argument("--no-worker", action="store_true", help="leave out streamapp's own joins")
    parser.add_argument("--sample", type=int, default=DEFAULT_SAMPLE, metavar="N",
                        help=f"keyed records to read per topic (default {DEFAULT_SAMPLE})")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with a picture of the cluster")
    add_arguments(parser, only=("bootstrap_servers", "ksqldb_endpoint", "statements", "users_topic", "orders_topic",
                                "users_repartition_topic"))
    parser.set_defaults(func=run)


def joined_pairs(args: argparse.Namespace, settings: Settings, existing: set[str],
                 declared: list[JoinedPair]) -> tuple[list[JoinedPair], dict[str, str]]:
    """The pairs from every source asked for, and one line per source saying what it gave."""
    pairs: list[JoinedPair] = []
    sources: dict[str, str] = {}
    if args.pairs:
        found = pairs_from_file(args.pairs)
        pairs += found
        sources["pairs file"] = f"{len(found)} pairs from {args.pairs}"
    if not args.no_worker:
        worker = [p for p in declared if p.left in existing and p.right in existing]
        pairs += worker
        sources["worker"] = f"{len(worker)} joins" if worker else "its topics are not on this cluster"
    if settings.ksqldb_endpoint:
        found, queries = pairs_from_ksqldb(settings)
        pairs += found
        sources["ksqlDB"] = f"{queries} persistent queries, {len(found)} joined pairs at {settings.ksqldb_endpoint}"
    return pairs, sources


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.sample < 1:
        raise DoctorError(f"sample={args.sample}: must be at least 1")
    html = Path(args.html) if args.html else None
    if html is not None and not html.parent.is_dir():
        raise DoctorError(f"html={args.html}: directory {html.parent} does not exist")
    declared = [] if args.no_worker else pairs_from_worker(settings)  # a bad statements file: one line, before Kafka
    bootstrap = settings.kafka
    existing = set(describe(bootstrap))
    pairs, sources = joined_pairs(args, settings, existing, declared)
    selected = cluster_topics(bootstrap, args.topics, args.include_internal)
    wanted = sorted(set(selected) | {t for p in pairs for t in (p.left, p.right) if t in existing})
    report = diagnose_reports(examine_topics(bootstrap, wanted, args.sample), pairs, sources)
    if html is not None:
        try:
            html.write_text(render_html(report), encoding="utf-8")
        except OSError as exc:
            raise DoctorError(f"html={args.html}: cannot be written: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        show(report)
    return 0 if report.ok else PROBLEMS_EXIT_CODE


def show(report: DoctorReport) -> None:
    """The report for people: topics, pairs, then each joined pair's failing checks and its fixes by problem."""
    console = wide_console()
    console.print(topics_table(report))
    console.print(pairs_table(report))
    for pair in report.joined:
        if pair.status == "sound":
            continue
        console.print(f"\n[bold]{escape(pair.left)} × {escape(pair.right)}[/bold] {MARKS[pair.status]}")
        for check in pair.checks:
            if check.ok is not True:
                console.print(f"  - {escape(check.name)}: {escape(check.message)}", highlight=False)
        for problem in dict.fromkeys(fix.problem for fix in pair.fixes):
            console.print(f"  [bold]To fix the {escape(problem)}[/bold], one of:")
            for fix in (f for f in pair.fixes if f.problem == problem):
                console.print(f"    * {escape(fix.text)}", highlight=False)
    for missing in report.missing:
        console.print(f"[red]{escape(missing.left)} × {escape(missing.right)}[/red] (joined by "
                      f"{escape(missing.source)}): a topic is not on the cluster")
    joined = report.joined
    broken = sum(not p.sound for p in joined) + len(report.missing)
    unjoined = sum(not p.joined and not p.sound for p in report.pairs)
    if unjoined:
        console.print(f"\n{unjoined} pairs share keys but are not co-partitioned; they are not joined today "
                      f"(their checks and fixes: --json, --html).")
    console.print(f"\n{len(joined)} joined pairs, {broken} broken." if broken
                  else f"\nEvery joined pair is sound ({len(joined)}).")


def topics_table(report: DoctorReport) -> Table:
    table = Table(title="Topics")
    for column in ("topic", "partitions", "keyed sampled", "partitioner", "writers", "key encoding"):
        table.add_column(column, overflow="fold")
    for t in report.topics:
        encoding = t.encoding.label if t.encoding else ""
        if t.encoding and t.encoding.mixed:
            encoding += f" ({t.encoding.share:.0%}, mixed)"
        table.add_row(escape(t.name), str(t.partitions), f"{t.fingerprint.keyed:,}" if t.fingerprint else "0",
                      escape(t.error or t.partitioner_label), escape(_shortened(t.writers)), escape(encoding))
    return table


def pairs_table(report: DoctorReport) -> Table:
    table = Table(title="Pairs (joined, or sharing keys)")
    for column in ("left", "right", "joined by", "verdict", "shared keys", "predicted miss rate"):
        table.add_column(column, overflow="fold")
    for p in report.pairs:
        miss = "n/a" if p.miss_rate is None else f"{p.miss_rate:.1%}"
        verdict = MARKS[p.status] if p.joined else UNJOINED_MARKS[p.status]
        table.add_row(escape(p.left), escape(p.right), escape(", ".join(p.joined_by) or "(shares keys)"),
                      verdict, f"{p.shared:,}", miss)
    return table


def _shortened(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" +{len(names) - shown} more" if len(names) > shown else "")
