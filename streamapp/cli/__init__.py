"""The ``streamapp`` command: one module per sub-command, each a thin adapter over the library."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from ..errors import StreamappError
from ..settings import Settings

#: Sub-command modules; each defines ``add_parser(subparsers)`` that sets ``func(args, settings) -> int``.
COMMANDS = (
    "broker",
    "partition",
    "fingerprint",
    "guard",
    "topics",
    "produce",
    "demo",
    "ksql_equivalent",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamapp",
        description="Where each Kafka client puts a key, and joins that stay co-partitioned.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{name}":
                continue
            raise
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env().with_args(args)
        return int(args.func(args, settings) or 0)
    except StreamappError as exc:
        print(f"streamapp {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `streamapp ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
