"""``streamapp fingerprint``: which partitioner (and which key format) wrote a topic."""
from __future__ import annotations

import argparse
import json
from typing import Any

from rich.table import Table

from ..copartition.fingerprint import Fingerprint, fingerprint_topic
from ..kafka.admin import describe
from ..partitioners import clients_of
from ..settings import Settings, add_arguments
from .partition import wide_console


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "fingerprint",
        help="tell which partitioner wrote a topic, from a sample of its keyed records",
        description=(
            "Read keyed records with their partitions and score every known partitioner against them, "
            "on the keys as stored and JSON-quoted."
        ),
    )
    parser.add_argument("--topic", required=True, help="topic to fingerprint (it is never created)")
    parser.add_argument("--sample", type=int, default=1000, metavar="N", help="keyed records to read (default 1000)")
    parser.add_argument("--json", action="store_true", help="print the fingerprint as one JSON object")
    parser.add_argument(
        "--partitioner", dest="extra_partitioners", action="append", default=[], metavar="SPEC",
        help="also score this partitioner (package.module:callable); every known one is always scored",
    )
    add_arguments(parser, only=("bootstrap_servers",))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    # brokers that do not answer: one line after the admin client's timeout, as every other command (the
    # sample's reader would wait its longer read timeout for the same answer)
    describe(settings.kafka, [args.topic])
    result = fingerprint_topic(settings.kafka, args.topic, args.sample, args.extra_partitioners)
    if args.json:
        print(json.dumps({"topic": args.topic, **result.to_dict()}))
        return 0
    console = wide_console()
    console.print(
        f"Topic [bold]{args.topic}[/bold]: {result.sample_size:,} records sampled, {result.keyed:,} keyed, "
        f"{result.num_partitions} partitions."
    )
    console.print(f"[bold]{'Ambiguous' if result.ambiguous else 'Verdict'}:[/bold] {result.verdict}", highlight=False)
    for note in result.notes:
        console.print(f"  - {note}", highlight=False)
    console.print(scores_table(result))
    return 0


def scores_table(result: Fingerprint) -> Table:
    """One row per partitioner, best first: share matched as stored, JSON-quoted and (JSON keys) unquoted."""
    table = Table(
        title="Share of keyed records each partitioner puts where they are",
        caption="n/a: no sampled key in that form that the partitioner places by hash (it picks at random)",
    )
    table.add_column("partitioner")
    table.add_column("as stored", justify="right")
    table.add_column("JSON-quoted", justify="right")
    if result.json_keys:
        table.add_column("quotes removed", justify="right")
    table.add_column("records scored", justify="right")
    table.add_column("client defaults")
    forms = [result.stored, result.quoted, *([result.unquoted] if result.json_keys else [])]
    shares = [form.shares for form in forms]
    explaining = {name for form in forms for name in form.explaining}
    scored = result.stored.scored
    ranked = sorted(scored, key=lambda n: -max((s[n] for s in shares if n in s), default=-1.0))
    for name in ranked:
        style = "bold green" if name in explaining else None
        table.add_row(name, *(_share(s, name) for s in shares), f"{scored[name]:,}", ", ".join(clients_of([name])),
                      style=style)
    return table


def _share(shares: dict[str, float], name: str) -> str:
    return f"{shares[name]:.2%}" if name in shares else "n/a"
