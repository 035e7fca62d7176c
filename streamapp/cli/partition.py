"""``streamapp partition``: where each partitioner and each client puts the given keys.

A key a partitioner places at random (a NULL key under most of them, every key
under ``random``, an empty key under ``consistent_random``) has no partition to
show: the table says ``random`` and ``--json`` gives ``null``, never a made-up number.
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from ..errors import StreamappError
from ..partitioners import LIBRDKAFKA_NAMES, PARTITIONERS, PROFILES, clients_of, get_partitioner, partition_batch
from ..settings import Settings, env_name


class PartitionCliError(StreamappError):
    """A key or option of ``streamapp partition`` that cannot be used; the message names it."""


@dataclass(frozen=True)
class KeyArg:
    """A key as the user typed it (``text``) and the bytes it stands for (None: a NULL key)."""

    text: str | None
    data: bytes | None


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "partition",
        help="show the partition of keys under every partitioner and client",
        description="Show the partition each partitioner and client profile picks for each key.",
    )
    parser.add_argument("keys", nargs="*", metavar="KEY", help="keys (UTF-8 text, or hex with --hex)")
    parser.add_argument(
        "--partitions", type=int, default=None, metavar="N",
        help=f"partition count (default: the partitions setting, {env_name('partitions')}, "
        f"{Settings.partitions})",
    )
    parser.add_argument(
        "--partitioner", dest="partitioner_specs", action="append", default=None, metavar="NAME",
        help="partitioner name, client profile or package.module:callable; repeat for several (default: all)",
    )
    parser.add_argument("--hex", action="store_true", help="keys are hex-encoded bytes")
    parser.add_argument("--null-key", action="store_true", help="add a NULL key (no key at all)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--list", action="store_true", help="list the partitioners and client profiles")
    parser.set_defaults(func=run)


def wide_console() -> Console:
    """A terminal's own width; when piped, wide enough that tables are not squeezed to 80 columns."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def parse_keys(texts: Sequence[str], hex_keys: bool) -> list[KeyArg]:
    result = []
    for text in texts:
        if not hex_keys:
            try:
                result.append(KeyArg(text, text.encode("utf-8")))
            except UnicodeEncodeError:  # argv bytes that are not UTF-8 arrive as surrogate escapes
                raw = os.fsencode(text)
                raise PartitionCliError(
                    f"key {raw!r} is not valid UTF-8: give its bytes as hex instead (--hex {raw.hex()})"
                ) from None
            continue
        try:
            result.append(KeyArg(text, bytes.fromhex(text)))
        except ValueError:
            raise PartitionCliError(f"key {text!r} is not valid hex (--hex expects e.g. 75736572 for 'user')") from None
    return result


def default_specs() -> list[str]:
    """Every partitioner, then every client profile."""
    return list(dict.fromkeys([*LIBRDKAFKA_NAMES, *PARTITIONERS, *PROFILES]))


def partitions_for(specs: Sequence[str], keys: Sequence[KeyArg], num_partitions: int) -> list[dict[str, int | None]]:
    """Per key, spec -> partition; None where that partitioner places the key at random."""
    rows: list[dict[str, int | None]] = [{} for _ in keys]
    for spec in specs:
        chooser = get_partitioner(spec)
        fixed = [i for i, key in enumerate(keys) if chooser.is_deterministic(key.data)]
        chosen = partition_batch(spec, [keys[i].data for i in fixed], num_partitions) if fixed else []
        placed = dict(zip(fixed, chosen))
        for i, row in enumerate(rows):
            row[spec] = placed.get(i)
    return rows


def run(args: argparse.Namespace, settings: Settings) -> int:
    console = wide_console()
    if args.list:
        if args.json:
            print(json.dumps({"partitioners": list_rows(), "profiles": dict(PROFILES)}))
        else:
            console.print(list_table())
        return 0
    keys = parse_keys(args.keys, args.hex) + ([KeyArg(None, None)] if args.null_key else [])
    if not keys:
        raise PartitionCliError("no KEY given: pass one or more keys (or --null-key, or --list)")
    if args.partitions is not None:  # its own option, defaulting to the setting (checked as the setting is)
        settings = settings.replace(partitions=args.partitions)
    specs = list(dict.fromkeys(args.partitioner_specs or default_specs()))
    for spec in specs:
        get_partitioner(spec)
    rows = partitions_for(specs, keys, settings.partitions)
    if args.json:
        results = [{"key": key.text, "partitions": row} for key, row in zip(keys, rows)]
        print(json.dumps({"num_partitions": settings.partitions, "results": results}))
        return 0
    console.print(partition_table(specs, keys, rows, settings.partitions))
    return 0


def partition_table(specs: Sequence[str], keys: Sequence[KeyArg], rows: Sequence[dict[str, int | None]], n: int) -> Table:
    """Rows = keys; columns = partitioners; client profiles whose partitioner is a column go in the caption."""
    folded = [s for s in specs if s in PROFILES and s not in PARTITIONERS and PROFILES[s] in specs]
    columns = [s for s in specs if s not in folded]
    legend = "; ".join(
        f"{', '.join(c for c in clients_of([spec]) if c in folded)} -> {spec}"
        for spec in columns
        if any(c in folded for c in clients_of([spec]))
    )
    table = Table(
        title=f"Partition of each key over {n} partitions ('random': the client picks at random)",
        caption=f"clients: {legend}" if legend else None,
    )
    table.add_column("key", style="bold")
    for spec in columns:
        table.add_column(spec, justify="right", no_wrap=True)
    for key, row in zip(keys, rows):
        cells = ["random" if row[spec] is None else str(row[spec]) for spec in columns]
        table.add_row("NULL" if key.text is None else key.text, *cells)
    return table


def list_rows() -> list[dict[str, Any]]:
    """One entry per partitioner: the facts ``--list`` shows, for the table and for ``--json``."""
    return [
        {"name": name, "librdkafka_name": chooser.librdkafka_name, "clients": clients_of([name]),
         "description": chooser.description}
        for name, chooser in PARTITIONERS.items()
    ]


def list_table() -> Table:
    table = Table(title="Partitioners (use a name, a client profile, or package.module:callable)")
    for header in ("name", "librdkafka partitioner", "client defaults", "what"):
        table.add_column(header)
    for row in list_rows():
        table.add_row(row["name"], row["librdkafka_name"] or "-", ", ".join(row["clients"]), row["description"])
    return table
