"""The ``streamapp`` command: one module per sub-command, each a thin adapter over the library."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any, NoReturn, Sequence

from ..errors import StreamappError
from ..kafka import CLIENT_LOGGER
from ..settings import FLAGS_DEFAULT, Settings

#: Sub-command modules; each defines ``add_parser(subparsers)`` that sets ``func(args, settings) -> int``.
COMMANDS = (
    "broker",
    "partition",
    "fingerprint",
    "guard",
    "doctor",
    "topics",
    "produce",
    "demo",
    "ksql_equivalent",
    "test_runner",
)


class Parser(argparse.ArgumentParser):
    """A parser whose errors are one line naming the argument, exit 2, as every other bad input
    (argparse's own prints the whole usage first); the usage is ``--help``'s. Sub-commands inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {' '.join(message.split())} (see {self.prog} --help)\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """As argparse's, but an unknown argument is reported by the sub-command it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._chosen(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost sub-command parser ``parsed`` went through."""
        parser: argparse.ArgumentParser = self
        while True:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            name = getattr(parsed, subs[0].dest, None) if subs else None
            if name is None:
                return parser
            parser = subs[0].choices[name]


def build_parser() -> argparse.ArgumentParser:
    return build_commands()[0]


def build_commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``streamapp`` parser and each sub-command's own parser, by name."""
    parser = Parser(
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
    return parser, dict(sub.choices)


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its full name, sub-commands' too (``topics create``)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}"] = sub
                    walk(f"{prefix}{name} ", sub)

    walk("", build_commands()[0])
    return found


def settings_commands() -> dict[str, list[str]]:
    """Setting -> the commands that take its ``--flag``, sub-commands by their full name (for the docs' settings
    page, docs/gen_reference.py)."""
    taken: dict[str, list[str]] = {}
    for command, sub in command_parsers().items():
        for name in sub.get_default(FLAGS_DEFAULT) or ():
            taken.setdefault(name, []).append(command)
    return taken


def main(argv: Sequence[str] | None = None) -> int:
    # librdkafka's connection retries (hundreds of FAIL lines against a broker that is down) stay out of a
    # command's output: its error is the one line below; with no handler, Python would print each to stderr
    if not CLIENT_LOGGER.handlers:
        CLIENT_LOGGER.addHandler(logging.NullHandler())
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
