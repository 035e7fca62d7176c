"""Command-line options of the reconciliation job, validated into one frozen value.

The joins come from the declared plan: ``--statements FILE``, else the ``statements`` setting, else
the packaged seed, exactly as the worker reads them; the topics are the plan's, named as the worker
and ksqlDB name them (``streamapp.sql.topology``), so the job and the worker agree.  The seed's
topics can be renamed by the seed topic flags (``--users-topic`` ...: the settings that rename them
for the worker too); a statements file names its own topics.  A bad option is a one-line message
naming it, exit code 2.  A window that is not over is refused, or read as partial with ``--allow-partial``
(``window.over_or_partial``, against ``Options.clock``).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from streamapp.partitioners import PartitionerError, get_partitioner
from streamapp.settings import KafkaAccess, Settings, env_name
from streamapp.sql.topology import topology

from .errors import ReconcileError
from .kafka_source import READERS
from .offsets import LOOKUPS
from .roles import PlanShapeError, Roles
from .window import Partial, TimeWindow, grace_for, over_or_partial, wall_clock_ms, window_for

SOURCES = ("kafka", "files")
#: Spark's master URLs (SparkSubmit accepts yarn and what starts with spark, k8s or local; SparkContext then
#: parses local[...] and local-cluster[...] with exactly these expressions, from org.apache.spark.SparkMasterRegex).
MASTERS = "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT, yarn or k8s://URL"
_LOCAL_N = re.compile(r"local\[([0-9]+|\*)\]")
_LOCAL_N_FAILURES = re.compile(r"local\[([0-9]+|\*)\s*,\s*([0-9]+)\]", re.ASCII)
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*([0-9]+)\s*,\s*([0-9]+)\s*,\s*([0-9]+)\s*]", re.ASCII)
DETAILS = ("mismatches", "all")
PROG = "reconcile"
#: The seed's topic flags (demo only: a statements file names its own topics) -> the setting each one sets,
#: which renames one of the seed's topics for the worker and here alike (``streamapp.sql.topology``).
SEED_FLAGS = {
    "--users-topic": "users_topic",
    "--orders-topic": "orders_topic",
    "--faust-topic": "merged_topic",
    "--ksqldb-topic": "ksqldb_merged_topic",
    "--faust-repartition-topic": "merged_repartition_topic",
    "--ksqldb-repartition-topic": "ksqldb_merged_repartition_topic",
}


@dataclass(frozen=True)
class Options:
    window: TimeWindow
    #: The plan's pairs and roles.
    roles: Roles
    #: Role -> topic (see ``roles.Roles.topics``).
    topics: dict[str, str]
    #: Role -> the option that named its topic (the seed's flags), for messages.
    flags: dict[str, str]
    bootstrap: KafkaAccess  # the servers given, with the security of the settings
    source: str
    input_dir: Path | None
    output: Path
    master: str | None
    max_mismatch_rate: float
    detail: str
    kafka_reader: str
    offset_lookup: str
    grace_ms: int
    partitions: int
    partitioner: str
    re_resolve: bool
    #: Start Spark first, read nothing until a line arrives on standard input (``main``).
    start_then_wait: bool = False
    #: Read a window that is not over yet, reported as partial, its offsets not kept.
    allow_partial: bool = False
    #: The options that named the window, as given (for messages).
    given_window: str = "the window"
    #: Now, in ms since 1970: whether the window is over is a function of it.
    clock: Callable[[], int] = field(default=wall_clock_ms, compare=False, repr=False)

    def partial(self) -> Partial | None:
        """``None`` when the window is over now; a :class:`Partial` (``--allow-partial``) when it is open; else
        the one-line error."""
        return over_or_partial(self.window, self.grace_ms, self.clock(), self.allow_partial, self.given_window)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, exit 2: schedulers log the first line only."""
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser(settings: Settings) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Reconcile the Faust worker's joins against ksqlDB's (each join query of the declared "
        "statements) for a UTC day, with a root cause per mismatch. "
        "Exit codes: 0 within --max-mismatch-rate, 1 breached, 2 error.",
    )
    when = parser.add_argument_group("window (record timestamps, UTC)")
    when.add_argument("--date", help="a UTC day, YYYY-MM-DD")
    when.add_argument("--from", dest="start", metavar="FROM", help="window start, ISO date-time (UTC unless zoned)")
    when.add_argument("--to", dest="end", metavar="TO", help="window end (exclusive)")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap", default=settings.bootstrap_servers,
                        help=f"Kafka bootstrap servers (default: %(default)s, from {env_name('bootstrap_servers')})")
    parser.add_argument("--statements", default=settings.statements or None, metavar="FILE",
                        help="the ksqlDB statements (.sql) whose joins are reconciled, as the worker runs them "
                        f"(default: the statements setting, {env_name('statements')}, else the packaged seed's)")
    for flag, setting in SEED_FLAGS.items():
        parser.add_argument(flag, dest=setting, default=None, metavar="TOPIC",
                            help=f"the seed's statements only: the topic of the setting {setting} "
                            f"(default: {getattr(settings, setting)})")
    parser.add_argument("--source", default="kafka", choices=SOURCES, help="read Kafka, or files exported from it")
    parser.add_argument("--input", dest="input_dir", help="--source files: directory with <topic>.parquet/.jsonl or <topic>/")
    parser.add_argument("--output", default="reconcile-output", help="output root; results go to OUTPUT/dt=YYYY-MM-DD/")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--max-mismatch-rate", type=float, default=0.01, metavar="RATE",
                        help="exit 1 when a pair's share of non-matching rows exceeds this (default: %(default)s)")
    parser.add_argument("--detail", default="mismatches", choices=DETAILS, help="which rows get a detail row")
    parser.add_argument("--kafka-reader", default="auto", choices=READERS,
                        help="Spark's kafka source (spark-sql-kafka, from `make install`) or the Python DataSource; "
                        "auto: Spark's when installed")
    parser.add_argument("--offset-lookup", default="index", choices=LOOKUPS,
                        help="timestamp->offset: the broker's time index (ListOffsets by timestamp)")
    parser.add_argument("--grace-minutes", type=float, default=60.0,
                        help="read this far past the window's end, for its records written late, after newer ones "
                        "(default: %(default)s)")
    parser.add_argument("--partitioner", default=settings.partitioner,
                        help="the worker's partitioner, which placed the repartitioned tables' rows (default: %(default)s, "
                        f"from {env_name('partitioner')})")
    parser.add_argument("--partitions", type=int, default=settings.partitions,
                        help="--source files: partition count of the streams' topics (default: %(default)s)")
    parser.add_argument("--allow-partial", action="store_true",
                        help="reconcile a window that is not over yet (its end plus the grace still to come): the "
                        "report says partial and up to when; its offsets are not kept, so a later run reads the whole "
                        "window (without it, such a window is refused, exit 2)")
    parser.add_argument("--re-resolve", action="store_true",
                        help="resolve offsets again instead of reusing the date's offsets.json")
    parser.add_argument("--start-then-wait", action="store_true",
                        help="start Spark, then wait for a line on standard input before checking or reading the "
                        "topics: a caller still writing the window's records starts the JVM alongside (the demo)")
    return parser


def check_master(master: str | None) -> None:
    """Refuse a master Spark would refuse, before its JVM prints a page of stack trace about it."""
    if master is None or master in ("local", "yarn"):
        return
    threads = _LOCAL_N.fullmatch(master) or _LOCAL_N_FAILURES.fullmatch(master)
    if threads is not None:
        if threads.group(1) != "*" and int(threads.group(1)) < 1:
            raise ReconcileError(f"--master={master!r}: Spark needs at least 1 local thread")
        return
    if _LOCAL_CLUSTER.fullmatch(master) or re.fullmatch(r"(spark|k8s)://\S+", master):
        return
    raise ReconcileError(f"--master={master!r}: not a Spark master URL; expected {MASTERS}")


def check_output(output: Path) -> None:
    """``--output`` must be, or be creatable as, a writable directory: checked before Spark starts,
    without creating anything (a run refused later leaves no directory behind)."""
    existing = output
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing == output and not output.is_dir():
        raise ReconcileError(f"--output={str(output)!r}: is a file, not a directory")
    if not existing.is_dir():
        raise ReconcileError(f"--output={str(output)!r}: cannot create it, {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ReconcileError(f"--output={str(output)!r}: {str(existing)!r} is not writable")


def parse(argv: Sequence[str] | None, settings: Settings | None = None,
          clock: Callable[[], int] = wall_clock_ms) -> Options:
    """The options of ``argv``; ``clock`` says what time it is (whether the window is over)."""
    settings = settings or Settings.from_env()
    args = build_parser(settings).parse_args(argv)
    window = window_for(args.date, args.start, args.end)
    if not 0.0 <= args.max_mismatch_rate <= 1.0:
        raise ReconcileError(f"--max-mismatch-rate={args.max_mismatch_rate}: expected a share between 0 and 1")
    grace = grace_for(args.grace_minutes, window)
    if args.partitions < 1:
        raise ReconcileError(f"--partitions={args.partitions}: must be at least 1")
    check_master(args.master)
    check_output(Path(args.output))
    try:  # before Spark starts: an unknown name failed only where a mismatch was explained
        get_partitioner(args.partitioner)
    except PartitionerError as exc:
        raise ReconcileError(f"--partitioner={args.partitioner!r}: {exc}") from None
    input_dir = Path(args.input_dir) if args.input_dir else None
    if args.source == "files" and (input_dir is None or not input_dir.is_dir()):
        raise ReconcileError(f"--input={args.input_dir!r}: --source files needs an existing directory")
    roles, flags = plan_roles(settings, args)
    topics = roles.topics()
    if len(set(topics.values())) < len(topics):
        shared = sorted({t for t in topics.values() if list(topics.values()).count(t) > 1})
        raise ReconcileError(f"each role needs its own topic; used twice: {', '.join(shared)}")
    return Options(
        window=window, roles=roles, topics=topics, flags=flags, bootstrap=settings.kafka.with_servers(args.bootstrap),
        source=args.source, input_dir=input_dir, output=Path(args.output), master=args.master,
        max_mismatch_rate=args.max_mismatch_rate, detail=args.detail, kafka_reader=args.kafka_reader,
        offset_lookup=args.offset_lookup, grace_ms=grace, partitions=args.partitions,
        partitioner=args.partitioner,
        re_resolve=args.re_resolve, start_then_wait=args.start_then_wait, allow_partial=args.allow_partial,
        given_window=f"--date={args.date!r}" if args.date else f"--from={args.start!r} --to={args.end!r}", clock=clock,
    )


def plan_roles(settings: Settings, args: argparse.Namespace) -> tuple[Roles, dict[str, str]]:
    """The plan's roles under ``--statements`` and the seed's topic flags, and which flag named which role's topic.

    A bad statements file is the planner's one line (a ``StreamappError``); a seed flag with a statements
    file, or an empty topic, is refused naming the flag.
    """
    given = {flag: getattr(args, setting) for flag, setting in SEED_FLAGS.items() if getattr(args, setting) is not None}
    if args.statements and given:
        raise ReconcileError(f"{', '.join(given)}: rename the seed's topics only; --statements={args.statements!r} "
                             "names its own topics")
    empty = [flag for flag, topic in given.items() if not topic.strip()]
    if empty:
        raise ReconcileError(f"{', '.join(empty)}: topic name is empty")
    settings = settings.replace(statements=args.statements or "", **{SEED_FLAGS[f]: t for f, t in given.items()})
    try:
        roles = Roles(topology(settings))
    except PlanShapeError as exc:
        raise ReconcileError(str(exc)) from None
    if not roles.pairs and not roles.two_sided:
        raise ReconcileError(f"--statements={args.statements or settings.statements!r}: declares no join to reconcile")
    topics = roles.topics()
    named = {getattr(settings, setting): flag for flag, setting in SEED_FLAGS.items()} if not args.statements else {}
    return roles, {role: named[topic] for role, topic in topics.items() if topic in named}
