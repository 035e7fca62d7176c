"""Nightly reconciliation of the Faust join against ksqlDB's join, with a root cause per mismatch.

Run as ``python -m spark_batch.reconcile --date YYYY-MM-DD ...`` or
``spark-submit spark_batch/reconcile.py ...``.  Exit codes: 0 within the
threshold, 1 threshold breached, 2 error (one line naming the option/topic).
"""
from __future__ import annotations

import os
import platform
import shutil
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "spark_batch"

from py4j.protocol import Py4JJavaError
from pyspark import inheritable_thread_target
from pyspark.errors import PySparkTypeError
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

import streamapp
from streamapp.errors import StreamappError

from spark_batch import causes, compare, decode, report
from spark_batch.errors import ReconcileError, one_line
from spark_batch.files_source import check_exports, read_export
from spark_batch.kafka_source import RAW_SCHEMA, choose_reader, connector_jars, range_error, read_ranges
from spark_batch.offsets import partition_counts, resolve_plan
from spark_batch.options import Options, parse
from spark_batch.roles import FLAGS, OUTPUT_ROLES, SIDES
from spark_batch.summary import InputRecords, OutputRecords, PairTotals, Sample, Summary, Threshold
from spark_batch.window import OffsetPlan

PLAN_FILE = "offsets.json"
READER_NAMES = {"spark": "Spark's kafka source", "python": "the Python DataSource (confluent-kafka)"}
SAMPLES = 20
#: Up to this many mismatching orders are broadcast when explained (about 100 bytes each).
BROADCAST_MISMATCHES = 1_000_000
#: The inputs counted by kind in summary.json (`input_records`), in its order.
INPUT_ROLES = ("users", "orders")
#: The explain step scans the orders alone: splits of 32 MiB (not 128) keep every core busy to the end
#: (a 300 MB export made 3 tasks for 2 cores: 2 waves, the second one half idle).
EXPLAIN_SETTINGS = {"spark.sql.files.maxPartitionBytes": str(32 << 20)}
#: Settings of a session this job starts (the benchmark's sessions take them too). PySpark's DataFrame
#: debugging records the caller's stack on every column expression, three Py4J calls each (~0.4 s of a
#: run); the job's errors are one line, without that context.
SESSION_SETTINGS = {"spark.sql.session.timeZone": "UTC", "spark.python.sql.dataFrameDebugging.enabled": "false"}
console = Console(highlight=False)


def session_jars(options: Options) -> list[Path]:
    """Spark's Kafka source for a session this job starts (``make install`` put it in jvm/lib/spark-kafka).

    Required by ``--kafka-reader spark``, used by ``auto`` when installed; under spark-submit the
    JVM is already running, with what its ``--packages``/``--jars`` gave.
    """
    if options.source != "kafka" or options.kafka_reader == "python" or "PYSPARK_GATEWAY_PORT" in os.environ:
        return []
    return connector_jars(required=options.kafka_reader == "spark")


def spark_session(options: Options) -> tuple[SparkSession, bool]:
    """The active session if there is one (tests, notebooks), else a new one; True when we own it."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    jars = session_jars(options)  # before the JVM starts: a missing jar is one line, not a Spark error
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("streamapp-reconcile").config(map=SESSION_SETTINGS)
    if jars:
        builder = builder.config("spark.jars", ",".join(map(str, jars)))
    if options.master or "PYSPARK_GATEWAY_PORT" not in os.environ:  # under spark-submit its --master rules
        builder = builder.master(options.master or "local[*]")
    return builder.getOrCreate(), True


@dataclass(frozen=True)
class Inputs:
    """What one run reads, before anything is computed from it."""

    #: The join outputs' valid records, tagged ``pair`` and ``side``, cut to the window: per side
    #: (``SIDES``), that engine's outputs of both pairs, each read once.
    outputs: dict[str, DataFrame]
    #: The orders stream, cut to the window.
    orders: DataFrame
    #: The users topic, whole (a user may predate the day).
    users: DataFrame
    #: Counting each output's records and undecodable ones (``decode.valid_outputs``).
    observations: list[Observation]
    #: The offsets read (``None`` for files).
    plan: OffsetPlan | None
    #: The orders topic's partition count.
    orders_partitions: int


def _inputs(spark: SparkSession, options: Options, out_dir: Path) -> Inputs:
    """The run's inputs from exported files or from Kafka (the offset plan resolved, or reused for a rerun)."""
    if options.source == "files":
        assert options.input_dir is not None
        frames = {role: read_export(spark, options.input_dir, topic, role) for role, topic in options.topics.items()}
        observations = [Observation(role) for role in OUTPUT_ROLES]
        decoded = [
            (side, decode.valid_outputs(decode.output_columns(decode.in_window(frames[role], options.window).select(
                F.lit(pair).alias("pair"), F.lit(side).alias("side"), "*")), observation, (pair, side)))
            for observation, (role, (pair, side)) in zip(observations, OUTPUT_ROLES.items())
        ]
        return Inputs(_by_side(decoded), decode.in_window(frames["orders"], options.window), frames["users"], observations,
                      None, options.partitions)
    counts = partition_counts(options.bootstrap, options.topics, FLAGS)
    previous = out_dir / PLAN_FILE
    plan = OffsetPlan.read(previous) if previous.is_file() and not options.re_resolve else None
    if plan is not None and not plan.matches(options.window, options.topics):
        console.print(f"{previous} was resolved for another window or topics: resolving again")
        plan = None
    if plan is None:
        started = time.monotonic()
        plan = resolve_plan(options.bootstrap, options.topics, options.window, options.grace_ms)
        console.print(f"Resolved offsets ({plan.lookup}) in {time.monotonic() - started:.1f} s")
    else:
        console.print(f"Reusing offsets from {previous}: a rerun reads exactly the same records")
    reader = choose_reader(spark, options.kafka_reader)
    console.print(f"Reading the planned offsets with {READER_NAMES[reader]}")
    observations, outputs = [], {}
    for side in SIDES:  # one read per side, so that each engine's records are read once (compare.classify)
        roles = [role for role, (_, s) in OUTPUT_ROLES.items() if s == side]
        raw = read_ranges(spark, options.bootstrap, [plan.topics[role] for role in roles], reader)
        pair = F.create_map(*[F.lit(x) for role in roles for x in (options.topics[role], OUTPUT_ROLES[role][0])])[F.col("topic")]
        observations.append(Observation(f"outputs:{side}"))
        outputs[side] = decode.valid_outputs(decode.output_columns(decode.in_window(raw, options.window).select(
            pair.alias("pair"), F.lit(side).alias("side"), *raw.columns)), observations[-1])
    orders = read_ranges(spark, options.bootstrap, [plan.topics["orders"]], reader)
    users = read_ranges(spark, options.bootstrap, [plan.topics["users"]], reader)
    return Inputs(outputs, decode.in_window(orders, options.window), users, observations, plan,
                  counts[options.topics["orders"]])


def _by_side(decoded: list[tuple[str, DataFrame]]) -> dict[str, DataFrame]:
    """{side: the union of its outputs' frames}."""
    by_side: dict[str, DataFrame] = {}
    for side, frame in decoded:
        by_side[side] = by_side[side].unionByName(frame) if side in by_side else frame
    return by_side


def observed(observation: Observation) -> dict[str, Any]:
    """An observation's metrics; ``{}`` when the optimizer removed its node (the input was empty: a day
    with no records): Spark then completes it with an empty row, which PySpark 4.2 fails to read back
    (in the JVM's ``toPyRow``, or as a Row without fields).  Called after the query's action succeeded,
    so these errors mean that empty row and nothing else."""
    try:
        return observation.get
    except (Py4JJavaError, PySparkTypeError):
        return {}


@contextmanager
def _settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Session settings for one query, restored afterwards (the session may be a caller's)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextmanager
def _step(what: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    console.print(f"{what} in {time.monotonic() - started:.1f} s")


def _versions(spark: SparkSession) -> dict[str, str]:
    import confluent_kafka
    import pyarrow

    return {
        "streamapp": streamapp.__version__,
        "spark": spark.version,
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
    }


def reconcile(spark: SparkSession, options: Options) -> Summary:
    """Run the job; returns the summary (also written to OUTPUT/dt=.../summary.json)."""
    label = options.window.label
    out_dir = options.output / f"dt={label}"
    staging = options.output / f".dt={label}.staging-{uuid.uuid4().hex[:8]}"
    options.output.mkdir(parents=True, exist_ok=True)
    inputs = _inputs(spark, options, out_dir)
    statuses = Observation("statuses")
    classified = compare.classify(*[inputs.outputs[side] for side in SIDES], matches=options.detail == "all")
    try:
        with _step("Read and classified the join outputs"):
            classified.observe(statuses, *compare.status_metrics()).write.parquet(str(staging / "_classified"))
        stage = spark.read.schema(classified.schema).parquet(str(staging / "_classified"))  # schema: may be empty
        output_records = _output_records(inputs)
        faust_records = {pair: output_records[role].rows - output_records[role].undecodable
                         for role, (pair, side) in OUTPUT_ROLES.items() if side == "faust"}
        counts = compare.status_counts(faust_records, observed(statuses))
        mismatching = {pair: sum(n for status, n in by.items() if status != "match") for pair, by in counts.items()}
        kinds = {role: Observation(f"kinds:{role}") for role in INPUT_ROLES}  # counted by the explain step's scans
        explained = causes.explain(stage.where(F.col("status") != "match"), decode.all_orders(inputs.orders),
                                   decode.users(inputs.users, kinds["users"]), inputs.orders_partitions, options.partitioner,
                                   few=sum(mismatching.values()) <= BROADCAST_MISMATCHES,
                                   repartitioned=mismatching["repartition"] > 0, order_kinds=kinds["orders"])
        if options.detail == "all":
            explained = explained.unionByName(stage.where(F.col("status") == "match"), allowMissingColumns=True)
        with _step("Explained the mismatches from the input topics"), _settings(spark, EXPLAIN_SETTINGS):
            explained.write.partitionBy("status").parquet(str(staging / "detail"))
        shutil.rmtree(staging / "_classified")
        input_records = _input_records(inputs, {role: observed(kinds[role]) for role in INPUT_ROLES})
        with _step("Summarised"):
            detail = spark.read.schema(explained.schema).parquet(str(staging / "detail")).where(F.col("status") != "match")
            with ThreadPoolExecutor(1) as thread:  # two small queries, each mostly waiting on its stages: together
                sampled = thread.submit(inheritable_thread_target(spark)(_samples), detail)
                summary = _summary(options, inputs, detail, counts, output_records, input_records, _versions(spark))
            samples = sampled.result()
        report.write_summary(staging / "summary.json", summary)
        (staging / "report.html").write_text(report.render_html(summary, samples))
        if inputs.plan is not None:
            inputs.plan.write(staging / PLAN_FILE)
        _replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary


def _input_records(inputs: Inputs, counted: dict[str, dict[str, Any]]) -> dict[str, InputRecords]:
    """Every users and orders record (orders: of the window) counted by kind, so that none is left out
    without a word: the undecodable ones, the ones only Kafka Streams reads, tombstones.

    ``counted``: what the explain step counted while reading them (``causes.order_info``,
    ``decode.users``).  Spark skips those scans when nothing mismatches (a join with an empty side),
    and only then are the inputs read again to count them.
    """
    found = counted
    if not all(counted.values()):
        with _step("Counted the input records by kind (nothing to explain)"):
            kinds = decode.all_orders(inputs.orders).select(F.lit("orders").alias("role"), "kind").unionByName(
                decode.all_users(inputs.users).select(F.lit("users").alias("role"), "kind"))
            found = {row["role"]: row.asDict() for row in kinds.groupBy("role").agg(*decode.kind_counts()).collect()}
    return {role: InputRecords(**{field: int(found[role][kind]) if role in found else 0 for field, kind in (
        ("rows", "rows"), ("undecodable", decode.UNDECODABLE), ("null_key", decode.NULL_KEY),
        ("non_utf8_key", decode.NON_UTF8_KEY), ("tombstones", decode.TOMBSTONE))}) for role in INPUT_ROLES}


def _output_records(inputs: Inputs) -> dict[str, OutputRecords]:
    """Each output's records and undecodable ones, observed while classifying."""
    metrics: dict[str, int] = {}  # summed: from Kafka, each side's observation also counts the other side's roles (as 0)
    for observation in inputs.observations:
        for name, value in observed(observation).items():
            metrics[name] = metrics.get(name, 0) + int(value)
    return {role: OutputRecords(int(metrics.get(f"rows:{pair}:{side}", 0)), int(metrics.get(f"undecodable:{pair}:{side}", 0)))
            for role, (pair, side) in OUTPUT_ROLES.items()}


def _summary(options: Options, inputs: Inputs, detail: DataFrame, counts: dict[str, dict[str, int]],
             records: dict[str, OutputRecords], input_records: dict[str, InputRecords], versions: dict[str, str]) -> Summary:
    """Counts by status (``compare.status_counts``) and by cause and partition pair (from the detail rows).

    What was read, not how: the Kafka reader is left out (it is printed), so both readers give the same bytes.
    """
    by_cause, cells = causes.tally(detail.groupBy("pair", "cause", "order_partition", "user_partition").count().collect())
    totals = {pair: PairTotals.of(statuses) for pair, statuses in counts.items()}
    breached = tuple(sorted(p for p, t in totals.items() if t.mismatch_rate > options.max_mismatch_rate))
    return Summary(
        window=options.window, source=options.source, topics=dict(options.topics),
        orders_partitions=inputs.orders_partitions, offsets=inputs.plan, output_records=records, input_records=input_records, statuses=counts, totals=totals, causes=by_cause, by_partition_pair=cells,
        threshold=Threshold(options.max_mismatch_rate, breached), detail=options.detail, versions=versions,
    )


def _samples(detail: DataFrame) -> list[Sample]:
    ordered = detail.orderBy("pair", "status", "user_id", "ts", "product_id", "qty", "unit_price", "channel")
    columns = ("pair", "status", "cause", "user_id", "ts", "cause_detail")
    return [Sample(*row) for row in ordered.select(*columns).limit(SAMPLES).collect()]


def _replace(staging: Path, out_dir: Path) -> None:
    """Swap the finished output in, so readers never see half of a run's output."""
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
    if out_dir.exists():
        out_dir.rename(old)
    staging.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)


def print_summary(summary: Summary) -> None:
    table = Table(title=f"Reconciliation {summary.date}: Faust vs ksqlDB")
    table.add_column("status")
    for pair in summary.statuses:
        table.add_column(pair, justify="right")
    for status in compare.STATUSES:
        table.add_row(status, *[str(summary.statuses[p][status]) for p in summary.statuses])
    for cause in causes.CAUSES:
        table.add_row(f"cause: {cause}", *[str(summary.causes[p][cause]) for p in summary.causes])
    console.print(table)
    for role, read in {**summary.input_records, **summary.output_records}.items():
        if read.undecodable:
            console.print(f"{role}: {read.undecodable} of {read.rows} records undecodable (left out)")
    limit = summary.threshold.max_mismatch_rate
    for pair, total in summary.totals.items():
        console.print(f"Mismatch rate {pair}: {total.mismatch_rate * 100:.2f}% of {total.orders} orders "
                      f"(threshold {limit * 100:.2f}%)")


def preflight(options: Options) -> None:
    """Check topics or exports before Spark starts: a scheduler then logs exactly the one error line
    (``parse`` has checked ``--master`` and ``--output``)."""
    if options.source == "files":
        assert options.input_dir is not None
        check_exports(options.input_dir, options.topics)
    else:
        partition_counts(options.bootstrap, options.topics, FLAGS)


def warm_up(spark: SparkSession, scratch: Path) -> None:
    """One tiny query through what the job runs (the inputs' decoding and its Python worker, a shuffle,
    Parquet out and back), so that the JVM loads and compiles it while the caller is still writing the
    records (``--start-then-wait``)."""
    raw = spark.createDataFrame([(b"u", b'{"ts": 1, "qty": "x"}', "t", 0, 0, 1), (b"u", b'{"name": "a"}', "t", 0, 1, 1)],
                                RAW_SCHEMA)
    kinds = decode.all_orders(raw).select("kind").unionByName(decode.all_users(raw).select("kind"))
    kinds.groupBy("kind").agg(*decode.kind_counts()).write.mode("overwrite").parquet(str(scratch))
    spark.read.parquet(str(scratch)).where(F.col("rows") > 0).count()
    shutil.rmtree(scratch, ignore_errors=True)


def wait_for_go() -> None:
    """Block until the caller writes a line: its records are then all in the topics."""
    if not sys.stdin.readline():
        raise ReconcileError("--start-then-wait: standard input closed before the line that starts the reading")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        options = parse(argv)
        if not options.start_then_wait:
            preflight(options)
        spark, owned = spark_session(options)
        try:
            if options.start_then_wait:  # the topics may not exist yet: checked once the caller says go
                warm_up(spark, options.output / f".warm-up-{uuid.uuid4().hex[:8]}")
                wait_for_go()
                preflight(options)
            started = time.monotonic()
            summary = reconcile(spark, options)
        finally:
            if owned:
                spark.stop()
    except (StreamappError, ReconcileError) as exc:
        print(f"reconcile: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # Spark/Py4J failures: still one line and exit 2 (1 would mean "threshold breached")
        print(f"reconcile: error: {range_error(exc) or f'{type(exc).__name__}: {one_line(exc)}'}", file=sys.stderr)
        return 2
    print_summary(summary)
    out = options.output / f"dt={summary.date}"
    console.print(f"Wrote {out}/summary.json, report.html and detail/ in {time.monotonic() - started:.1f} s")
    return 1 if summary.threshold.breached else 0


if __name__ == "__main__":
    sys.exit(main())
