"""``streamapp produce``: the original demo's producer, with its options and defaults."""
from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
from typing import Any

from rich.console import Console
from rich.progress import Progress

from ..demo.producer import ProduceError
from ..demo.report import render_join_pairs, render_match
from ..demo.run import ProduceOptions, ProduceRun, run
from ..partitioners import LIBRDKAFKA_NAMES
from ..settings import KAFKA_SECURITY_FLAGS, Settings, add_arguments, env_name

#: From this many messages on, a progress bar shows (small runs print instantly).
PROGRESS_FROM = 1000
DEFAULTS = Settings()
#: librdkafka's partitioners, by its names (the demo's producer is confluent-kafka's).
PARTITIONER_CHOICES = LIBRDKAFKA_NAMES


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("produce", help="produce demo users and orders, then report matched partitions and joins")
    parser.add_argument("--topic", dest="users_topic", default=None, metavar="TOPIC",
                        help=f"users topic; orders go to <topic>_orders (default '{DEFAULTS.users_topic}')")
    parser.add_argument("--partitions", type=int, default=None,
                        help=f"partitions when creating the topics (default {DEFAULTS.partitions})")
    parser.add_argument("--messages", type=int, default=10, help="number of users, one order each (default 10)")
    parser.add_argument("--client_id", default=socket.gethostname(), help="producer client id (default your hostname)")
    parser.add_argument("--bootstrap_server", default=None,
                        help=f"bootstrap servers (default '{DEFAULTS.bootstrap_servers}', or {env_name('bootstrap_servers')})")
    parser.add_argument("--partitioner", dest="users_partitioner", choices=PARTITIONER_CHOICES, default="murmur2_random",
                        help="librdkafka partitioner for the users (default murmur2_random)")
    parser.add_argument("--c3_endpoint", default="", help="Control Center URL to check, e.g. http://localhost:9021")
    parser.add_argument("--ksqldb_endpoint", default=None,
                        help=f"ksqlDB REST URL, e.g. http://localhost:8088 (default {env_name('ksqldb_endpoint')}; none)")
    parser.add_argument("--wait", type=float, default=30.0,
                        help="seconds to wait for the worker's and ksqlDB's output (default 30)")
    parser.add_argument("--seed", type=int, default=None, help="random seed for reproducible users and orders")
    parser.add_argument("--json", action="store_true", help="print the report as JSON for programs")
    parser.add_argument("--debug", action="store_true", help="set logging level to debug")
    add_arguments(parser, only=KAFKA_SECURITY_FLAGS)  # its own --bootstrap_server above names the brokers
    parser.set_defaults(func=main)


def settings_for(args: argparse.Namespace, settings: Settings) -> Settings:
    """Apply the demo's underscored flags (its own, not the settings flags); ``--topic foo`` means orders in
    ``foo_orders`` too."""
    changes: dict[str, Any] = {}
    if args.bootstrap_server is not None:  # given: an empty value is a mistake, never the default in disguise
        if not args.bootstrap_server.strip(" ,"):
            raise ProduceError(f"--bootstrap_server={args.bootstrap_server!r} is empty: give host:port[,host:port]")
        changes["bootstrap_servers"] = args.bootstrap_server
    if args.users_topic is not None:
        if not args.users_topic.strip():
            raise ProduceError(f"--topic={args.users_topic!r} is empty: give a topic name")
        changes.update(users_topic=args.users_topic, orders_topic=f"{args.users_topic}_orders")
    changes.update({name: getattr(args, name) for name in ("partitions", "ksqldb_endpoint")
                    if getattr(args, name) is not None})
    return settings.replace(**changes)


def options_for(args: argparse.Namespace) -> ProduceOptions:
    if args.messages < 1:
        raise ProduceError(f"--messages={args.messages}: must be at least 1")
    if not args.wait >= 0:  # also refuses nan
        raise ProduceError(f"--wait={args.wait}: seconds to wait must be 0 or more")
    return ProduceOptions(partitioner=args.users_partitioner, messages=args.messages, client_id=args.client_id,
                          c3_endpoint=args.c3_endpoint, seed=args.seed, wait=args.wait)


def main(args: argparse.Namespace, settings: Settings) -> int:
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING)
    settings = settings_for(args, settings)
    options = options_for(args)
    console = people_console(stderr=args.json)
    result = produce_with_progress(settings, options, console)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render_run(console, result)
    return 0


def people_console(stderr: bool = False) -> Console:
    """A console that does not squeeze the 32-hex ids when output goes to a file or pipe."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 140)


def produce_with_progress(settings: Settings, options: ProduceOptions, console: Console) -> ProduceRun:
    if options.messages < PROGRESS_FROM:
        return run(settings, options)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"Producing {options.messages} users and orders", total=2 * options.messages)
        return run(settings, options, lambda n: progress.advance(task, n))


def render_run(console: Console, result: ProduceRun) -> None:
    for endpoint in result.endpoints:
        state = "reachable" if endpoint.reachable else "[red]UNREACHABLE[/red]"
        console.print(f"{endpoint.name} at {endpoint.address}: {state} ({endpoint.detail})")
    demo = result.shape
    console.print(f"Produced {len(result.table)} {demo.table.name} rows with partitioner {result.partitioner}; "
                  f"{len(result.stream)} {demo.stream.name} records via {result.stream_via}")
    for note in result.notes:
        console.print(f"[yellow]{note}[/yellow]")
    for title, report in result.reports:
        render_match(console, title, report, demo.key_column)
    render_join_pairs(console, result.joins, result.labels)
    sys.stdout.flush()
