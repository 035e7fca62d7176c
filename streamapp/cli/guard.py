"""``streamapp guard``: run the worker's co-partitioning checks now, without starting a worker."""
from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..copartition.guard import CopartitionReport, GuardError, check_copartitioning
from ..settings import Settings, add_arguments
from ..sql.topology import topology

#: The worker stores table keys raw (``streamapp.worker.tables``); the CLI checks against that without loading Faust.
WORKER_KEY_SERIALIZER = "raw"
#: ``streamapp guard`` and ``streamapp doctor``'s exit code when they found a problem (2: an error).
PROBLEMS_EXIT_CODE = 1


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "guard",
        help="check that the worker's joins are co-partitioned (counts, key format, partitioners)",
        description=(
            "Partition counts of each joined pair, the key format of the users topic, and the partitioner "
            "that wrote the users and orders topics (from a sample), against the join's partitioner. "
            "Exit status 0 when co-partitioned, 1 when there are problems, 2 on errors."
        ),
    )
    parser.add_argument("--sample", type=int, default=1000, metavar="N", help="keyed records to read (default 1000)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    add_arguments(parser, only=(
        "bootstrap_servers", "statements", "users_topic", "orders_topic", "users_repartition_topic", "merged_topic",
        "merged_repartition_topic", "partitioner",
    ))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.sample < 1:  # as the doctor refuses it: a check of no records would pass
        raise GuardError(f"sample={args.sample}: must be at least 1")
    serializers = dict.fromkeys((t.topic for t in topology(settings).tables), WORKER_KEY_SERIALIZER)
    report = check_copartitioning(settings, serializers, sample=args.sample)
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        Console(width=max(Console().width, 140)).print(report_table(report))
        problems = len(report.problems)
        print(f"Co-partitioned for partitioner {report.partitioner}." if report.ok
              else f"{problems} co-partitioning problem{'s' if problems != 1 else ''} for partitioner "
                   f"{report.partitioner}.")
    return 0 if report.ok else PROBLEMS_EXIT_CODE


def report_table(report: CopartitionReport) -> Table:
    table = Table(title="Co-partitioning checks", show_lines=True)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    marks = {True: "[green]ok[/green]", False: "[red]PROBLEM[/red]", None: "[yellow]skipped[/yellow]"}
    for check in report.checks:
        table.add_row(escape(check.name), marks[check.ok], escape(check.message))
    return table
