"""``streamapp ksql-equivalent``: the declared joins (the seed's by default) executed by Kafka Streams, in the
foreground."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..kafka.ksql_equivalent import FAILED_MARK, KsqlEquivalent, KsqlEquivalentError, cluster_plan
from ..kafka.child import run_until, stop_on_signals
from ..settings import Settings, add_arguments, ensure_directory, env_name

DESCRIPTION = (
    "Runs ksqlDB's join semantics, executed by Kafka Streams (the engine ksqlDB compiles its queries to), "
    f"in a child JVM: the queries of --statements ({env_name('statements')}), else the seed's five statements (the "
    "demo's users and orders, whose topics the seed topic flags rename), parsed here into a plan and run one "
    "Kafka Streams application per query, on ksqlDB's own topics. The topics it writes are created with the "
    "configured partition count when missing. It is not ksqlDB: no REST API. Runs until Ctrl-C or SIGTERM."
)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "ksql-equivalent",
        help="the declared joins (the seed's by default) executed by Kafka Streams (not ksqlDB: no REST API)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "--state-dir", type=Path, default=None,
        help="where Kafka Streams keeps its tables (default: <data dir>/ksql-equivalent)",
    )
    add_arguments(parser, only=(
        "bootstrap_servers", "statements", "users_topic", "orders_topic", "ksqldb_users_repartition_topic",
        "ksqldb_merged_topic", "ksqldb_merged_repartition_topic", "partitions", "replication_factor", "data_dir",
        "app_id",
    ))
    parser.set_defaults(func=run)


def echo(line: str) -> None:
    """The program's log on stdout, except its FAILED line: that one becomes the command's one-line error."""
    if FAILED_MARK not in line:
        print(line, flush=True)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.state_dir is not None:  # before the JVM starts: its stack trace would come first
        ensure_directory(args.state_dir, f"--state-dir={str(args.state_dir)!r}", KsqlEquivalentError)
    stop = stop_on_signals()
    plan = cluster_plan(settings)
    program = KsqlEquivalent(settings, state_dir=args.state_dir, on_line=echo, plan=plan)
    with program:
        queries = "; ".join(f"{q.name}: {plan.source(q.left).topic}"
                            + (f" {q.join_type} JOIN {plan.source(q.right).topic}" if q.right else "")
                            + f" -> {plan.sink_of(q).topic}" for q in plan.queries)
        print(f"Kafka Streams running {len(plan.queries)} declared queries of "
              f"{settings.statements or 'the seed (streamapp/sql/seed.sql)'} (not ksqlDB) on {settings.bootstrap_servers} "
              f"(pid {program.pid}, application ids {program.application_id}-<QUERY>): {queries}", flush=True)
        if program.created_topics:
            print(f"Created topics with {settings.partitions} partitions: {', '.join(program.created_topics)}", flush=True)
        run_until(program, stop, lambda status: KsqlEquivalentError(
            f"Kafka Streams exited by itself (status {status}): {program.failure_message()}"))
        print("Stopping Kafka Streams.", flush=True)
    return 0
