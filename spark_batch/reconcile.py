"""Nightly reconciliation of the Faust worker's joins against ksqlDB's, with a root cause per mismatch.

Run as ``python -m spark_batch.reconcile --date YYYY-MM-DD [--statements FILE] ...`` or
``spark-submit spark_batch/reconcile.py ...``.  Every join query of the declared statements (the seed's by
default) is one pair of outputs (``spark_batch.roles``): stream-table joins classified and explained by
``compare`` and ``causes``, windowed stream-stream and table-table joins by ``two_sided``.  Exit codes: 0 within the
threshold, 1 threshold breached, 2 error (one line naming the option/topic), a window not over included
(``--allow-partial`` reads it as partial and keeps no offsets).
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
from typing import Any, Callable, Iterator, Sequence

if __package__ in (None, ""):  # spark-submit runs this file as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "spark_batch"

import confluent_kafka
import pyarrow
from py4j.protocol import Py4JJavaError
from pyspark import inheritable_thread_target
from pyspark.errors import PySparkTypeError
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

import streamapp
from streamapp.errors import StreamappError

from spark_batch import causes, compare, decode, report, two_sided
from spark_batch.errors import ReconcileError, one_line
from spark_batch.files_source import check_exports, holds_no_rows, read_export
from spark_batch.kafka_source import RAW_SCHEMA, choose_reader, connector_jars, range_error, read_ranges
from spark_batch.offsets import partition_counts, resolve_plan
from spark_batch.options import Options, parse
from spark_batch.roles import SIDES, Roles, TwoSidedPair
from spark_batch.summary import InputRecords, OutputRecords, PairTotals, Sample, Summary, Threshold
from spark_batch.window import OffsetPlan, Partial, iso, wall_clock_ms, written_after_close

PLAN_FILE = "offsets.json"
READER_NAMES = {"spark": "Spark's kafka source", "python": "the Python DataSource (confluent-kafka)"}
SAMPLES = 20
#: Up to this many mismatching orders are broadcast when explained (about 100 bytes each).
BROADCAST_MISMATCHES = 1_000_000
#: The explain step scans the orders alone: splits of 32 MiB (not 128) keep every core busy to the end
#: (a 300 MB export made 3 tasks for 2 cores: 2 waves, the second one half idle).
EXPLAIN_SETTINGS = {"spark.sql.files.maxPartitionBytes": str(32 << 20)}
#: ... and, when every join of it is a broadcast (``few`` mismatches, no two-sided pair), planned once, not by AQE:
#: its re-planning after each of the step's six query stages cost a cold JVM about 4 s of the step (11.9/12.1 s
#: against 7.7/7.7 s at 20,000 payments, load 5-8), and the broadcast hints leave AQE no join to choose. With
#: nothing to explain AQE stays: it skips the step's scans (``_input_records`` counts the inputs then).
#: Without AQE nothing coalesces the step's shuffles either: its aggregations of the few mismatches' rows then
#: get one shuffle partition per core (``planned_once``), not the run's 16 tiny tasks each.
PLANNED_ONCE = {"spark.sql.adaptive.enabled": "false"}
#: Shuffle partitions a run gets for each core Spark has when its settings give none (``shuffle_settings``).
SHUFFLE_PARTITIONS_PER_CORE = 8
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
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


def shuffle_settings(given: str | None, cores: int) -> tuple[dict[str, str], str]:
    """The run's shuffle partitions (none when ``given``: the session's own), and a line saying so.

    ``SHUFFLE_PARTITIONS_PER_CORE`` per core, at most Spark's own 200: each map task writes a part per shuffle
    partition, which AQE coalesces only on the reading side; at 10 M orders on 2 cores Spark's 200 cost 82.6 task
    CPU seconds, 16 cost 69.2 (benchmarks/README.md, "Reconciliation"). A cluster's cores all still get work.
    """
    if given is not None:
        return {}, f"Shuffle partitions: {given} ({SHUFFLE_PARTITIONS})"
    chosen = min(200, SHUFFLE_PARTITIONS_PER_CORE * max(cores, 1))
    return {SHUFFLE_PARTITIONS: str(chosen)}, (
        f"Shuffle partitions: {chosen} ({SHUFFLE_PARTITIONS_PER_CORE} for each of Spark's {cores} cores, at most 200; "
        f"--conf {SHUFFLE_PARTITIONS}=N sets them)")


def _cores(spark: SparkSession) -> int:
    """The cores Spark has: its executors' so far, or those its settings ask for when more (a cluster's executors
    may still be registering when the job starts)."""
    conf = spark.sparkContext.getConf()
    asked = max(int(conf.get("spark.cores.max", "0")),
                int(conf.get("spark.executor.instances", "0")) * int(conf.get("spark.executor.cores", "1")))
    return max(spark.sparkContext.defaultParallelism, asked)


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

    #: Per group (``options.roles.groups``, in order), per side (``SIDES``): that engine's outputs of the
    #: group's pairs, decoded, valid and cut to the window, each read once.
    outputs: list[dict[str, DataFrame]]
    #: Stream role -> its records, cut to the window.
    streams: dict[str, DataFrame]
    #: Table role -> its records, whole (a row may predate the day).
    tables: dict[str, DataFrame]
    #: Counting each output's records and undecodable ones (``decode.valid_outputs``).
    observations: list[Observation]
    #: The offsets read (``None`` for files).
    plan: OffsetPlan | None
    #: Stream role -> its topic's partition count (a two-sided pair's tables too).
    partitions: dict[str, int]
    #: Per two-sided pair (``roles.two_sided``, in order), per side: that engine's decoded, valid outputs.
    two_sided: list[dict[str, DataFrame]]
    #: A two-sided pair's input role -> its records (``two_sided.decoded_side``; a stream's cut to the window).
    sides: dict[str, DataFrame]


def decoded_columns(roles: Roles, role: str) -> tuple[str, ...]:
    """The columns a decoded (not Kafka-shaped) export of ``role`` must have, lower-case (``offset`` defaults
    to row order): a stream's projected columns, a table's key and value columns, an output's fields."""
    if role in roles.outputs:
        pair = roles.pair(roles.outputs[role][0])
        fields = [f.name for f in (*pair.identity, *pair.joined) if f.source is not None]
        return (*fields, "partition")
    if role in roles.two_sided_outputs:
        two = roles.two_sided_pair(roles.two_sided_outputs[role][0])
        return (*[f.name for f in (*two.identity, *two.joined) if f.source is not None], "partition")
    if role in roles.two_sided_inputs and role not in roles.inputs:
        return (*[c.name.lower() for c in roles.two_sided_inputs[role].columns], "partition")
    if role in roles.streams:
        pair = next(pair for pair in roles.pairs if pair.stream_role == role)
        sources = [c.name.lower() for c in pair.stream.columns
                   if any(f.source == c.name for group in roles.groups if group.stream_role == role for f in group.identity)]
        return (*sources, "partition")
    source = roles.inputs[role]
    return (*[c.name.lower() for c in source.columns], "partition")


def _event_time(roles: Roles, role: str) -> str | None:
    """The column a decoded export of ``role`` may give its time in, besides ``timestamp_ms``/``timestamp``."""
    if role in roles.outputs:
        time = roles.pair(roles.outputs[role][0]).time
        return time.name if time.source is not None else None
    if role in roles.streams:
        stream = roles.inputs[role]
        return stream.timestamp.lower() if stream.timestamp else None
    source = roles.two_sided_inputs.get(role)
    if source is not None and source.kind == "stream" and source.timestamp:
        return source.timestamp.lower()
    return None


def _reusable_plan(options: Options, path: Path) -> OffsetPlan | None:
    """The date's recorded plan when a rerun may read it again: same window and topics, and written once the
    window was over (a plan pinned earlier, by a job before that check, misses the records written since)."""
    if not path.is_file() or options.re_resolve:
        return None
    plan = OffsetPlan.read(path)
    if not plan.matches(options.window, options.topics):
        console.print(f"{path} was resolved for another window or topics: resolving again")
        return None
    written = int(path.stat().st_mtime * 1000)
    if not written_after_close(written, options.window, options.grace_ms):
        console.print(f"{path} was written at {iso(written)}, before the window closed at "
                      f"{iso(options.window.end_ms + options.grace_ms)}: it misses the records written since, resolving again")
        return None
    return plan


def _inputs(spark: SparkSession, options: Options, out_dir: Path) -> Inputs:
    """The run's inputs from exported files or from Kafka (the offset plan resolved, or reused for a rerun)."""
    roles, plan_of = options.roles, options.roles.topology.declared
    if options.source == "files":
        assert options.input_dir is not None
        frames = {role: read_export(spark, options.input_dir, topic, decoded_columns(roles, role), _event_time(roles, role))
                  for role, topic in options.topics.items()}
        observations, outputs = [], []
        for group in roles.groups:
            decoded = []
            empty = {role for role in (f"{side}_{name}" for name in group.names for side in SIDES)
                     if holds_no_rows(options.input_dir, options.topics[role])}
            for pair in group.pairs:
                for side in SIDES:
                    role = f"{side}_{pair.name}"
                    if role in empty and any(f"{side}_{other.name}" not in empty for other in group.pairs):
                        continue  # nothing to classify: its counts are 0 (``_output_records``), its scan and code not run
                    observations.append(Observation(role))
                    tagged = decode.in_window(frames[role], options.window, group.time.name).select(
                        F.lit(pair.name).alias("pair"), F.lit(side).alias("side"), "*")
                    decoded.append((side, decode.valid_outputs(decode.output_columns(tagged, group, plan_of, pair),
                                                               [(pair.name, side)], observations[-1], alone=True)))
            outputs.append(_by_side(decoded))
        streams = {role: decode.in_window(frames[role], options.window, _event_time(roles, role)) for role in roles.streams}
        tables = {role: frames[role] for role in roles.inputs if role not in roles.streams}
        two = []
        for pair in roles.two_sided:
            by_side = {}
            for side in SIDES:
                role = f"{side}_{pair.name}"
                observations.append(Observation(role))
                tagged = decode.in_window(frames[role], options.window, pair.time.name).select(
                    F.lit(pair.name).alias("pair"), F.lit(side).alias("side"), "*")
                by_side[side] = _two_sided_outputs(tagged, options, pair, side, observations[-1])
            two.append(by_side)
        sides = {role: _side(frames[role], options, role) for role in roles.two_sided_inputs}
        return Inputs(outputs, streams, tables, observations, None,
                      dict.fromkeys((*roles.streams, *roles.two_sided_inputs), options.partitions), two, sides)
    counts = partition_counts(options.bootstrap, options.topics, options.flags)
    previous = out_dir / PLAN_FILE
    plan = _reusable_plan(options, previous)
    if plan is None:
        started = time.monotonic()
        plan = resolve_plan(options.bootstrap, options.topics, options.window, options.grace_ms, roles.timed)
        console.print(f"Resolved offsets ({plan.lookup}) in {time.monotonic() - started:.1f} s")
    else:
        console.print(f"Reusing offsets from {previous}: a rerun reads exactly the same records")
    reader = choose_reader(spark, options.kafka_reader)
    console.print(f"Reading the planned offsets with {READER_NAMES[reader]}")
    observations, outputs = [], []
    for group in roles.groups:
        by_side = {}
        for side in SIDES:  # one read per side, so that each engine's records are read once (compare.classify)
            mine = [f"{side}_{name}" for name in group.names]
            raw = read_ranges(spark, options.bootstrap, [plan.topics[role] for role in mine], reader)
            pair = F.create_map(*[F.lit(x) for role in mine for x in (options.topics[role], roles.outputs[role][0])])[F.col("topic")]
            observations.append(Observation(f"outputs:{side}:{group.stream_role}"))
            tagged = decode.in_window(raw, options.window).select(pair.alias("pair"), F.lit(side).alias("side"), *raw.columns)
            by_side[side] = decode.valid_outputs(decode.output_columns(tagged, group, plan_of),
                                                 [roles.outputs[role] for role in mine], observations[-1])
        outputs.append(by_side)
    streams = {role: decode.in_window(read_ranges(spark, options.bootstrap, [plan.topics[role]], reader), options.window)
               for role in roles.streams}
    tables = {role: read_ranges(spark, options.bootstrap, [plan.topics[role]], reader)
              for role in roles.inputs if role not in roles.streams}
    two = []
    for pair in roles.two_sided:
        by_side = {}
        for side in SIDES:
            raw = read_ranges(spark, options.bootstrap, [plan.topics[f"{side}_{pair.name}"]], reader)
            observations.append(Observation(f"outputs:{side}:{pair.name}"))
            tagged = decode.in_window(raw, options.window).select(F.lit(pair.name).alias("pair"), F.lit(side).alias("side"),
                                                                  *raw.columns)
            by_side[side] = _two_sided_outputs(tagged, options, pair, side, observations[-1])
        two.append(by_side)
    sides = {role: _side(read_ranges(spark, options.bootstrap, [plan.topics[role]], reader), options, role)
             for role in roles.two_sided_inputs}
    return Inputs(outputs, streams, tables, observations, plan,
                  {role: counts[options.topics[role]] for role in (*roles.streams, *roles.two_sided_inputs)}, two, sides)


def _two_sided_outputs(tagged: DataFrame, options: Options, pair: TwoSidedPair, side: str,
                       observation: Observation) -> DataFrame:
    """One engine's output of a two-sided pair, decoded (a table join's tombstones kept), its records counted."""
    decoded = decode.output_columns(tagged, pair, options.roles.topology.declared, pair, tombstones=not pair.windowed)
    return decode.valid_outputs(decoded, [(pair.name, side)], observation, alone=True)


def _side(frame: DataFrame, options: Options, role: str) -> DataFrame:
    """A two-sided pair's input, decoded; a stream's cut to the window, a table's whole."""
    source = options.roles.two_sided_inputs[role]
    stream = source.kind == "stream"
    if stream:
        frame = decode.in_window(frame, options.window, _event_time(options.roles, role))
    return two_sided.decoded_side(frame, source, stream)


def _by_side(decoded: list[tuple[str, DataFrame]]) -> dict[str, DataFrame]:
    """{side: the union of its outputs' frames}."""
    by_side: dict[str, DataFrame] = {}
    for side, frame in decoded:
        by_side[side] = by_side[side].unionByName(frame) if side in by_side else frame
    return by_side


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    """Frames of several groups as one (a column one group lacks is null in its rows)."""
    united = frames[0]
    for frame in frames[1:]:
        united = united.unionByName(frame, allowMissingColumns=True)
    return united


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
def _step(spark: SparkSession, what: str) -> Iterator[None]:
    """A step of the run: its seconds printed, its Spark jobs described by it (the UI and the event log name
    them, as benchmarks/reconcile_cold.py reads them)."""
    started = time.monotonic()
    spark.sparkContext.setJobDescription(what)
    try:
        yield
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    console.print(f"{what} in {time.monotonic() - started:.1f} s")


def _versions(spark: SparkSession) -> dict[str, str]:
    return {
        "streamapp": streamapp.__version__,
        "spark": spark.version,
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
        "confluent_kafka": confluent_kafka.version()[0],
        "librdkafka": confluent_kafka.libversion()[0],
    }


def reconcile(spark: SparkSession, options: Options) -> Summary:
    """Run the job; returns the summary (also written to OUTPUT/dt=.../summary.json).

    A window that is not over is refused (``ReconcileError``), or with ``--allow-partial`` read as it is now:
    the summary says partial, and its offsets are not written, so no later run reads them again.
    """
    partial = options.partial()
    if partial is not None:
        shown = partial.to_dict()
        console.print(f"PARTIAL: the window is not over until {shown['closes']}; reading what the topics hold at "
                      f"{shown['as_of']}; its offsets are not kept")
    label = options.window.label
    out_dir = options.output / f"dt={label}"
    staging = options.output / f".dt={label}.staging-{uuid.uuid4().hex[:8]}"
    options.output.mkdir(parents=True, exist_ok=True)
    shuffle, said = shuffle_settings(spark.conf.get(SHUFFLE_PARTITIONS, None), _cores(spark))
    console.print(said)
    with _settings(spark, shuffle):
        return _reconcile(spark, options, partial, out_dir, staging)


def _reconcile(spark: SparkSession, options: Options, partial: Partial | None, out_dir: Path, staging: Path) -> Summary:
    """``reconcile`` in its shuffle settings: the staging directory swapped in at the end, removed if anything fails."""
    roles = options.roles
    inputs = _inputs(spark, options, out_dir)
    statuses = [Observation(f"statuses:{i}") for i in range(len(roles.groups))]
    by_group = [compare.classify(group, by_side["faust"], by_side["ksqldb"], matches=options.detail == "all")
                .observe(observation, *compare.status_metrics(group.names))
                for group, by_side, observation in zip(roles.groups, inputs.outputs, statuses)]
    by_pair = [two_sided.classify(pair, by_side["faust"], by_side["ksqldb"])
               for pair, by_side in zip(roles.two_sided, inputs.two_sided)]
    try:
        stage = paired = None
        with _step(spark, "Read and classified the join outputs"):
            if by_group:
                classified = _union(by_group)
                classified.write.parquet(str(staging / "_classified"))
                stage = spark.read.schema(classified.schema).parquet(str(staging / "_classified"))  # may be empty
            if by_pair:
                rows = _union(by_pair)
                rows.write.parquet(str(staging / "_two_sided"))
                paired = spark.read.schema(rows.schema).parquet(str(staging / "_two_sided"))
        output_records = _output_records(roles, inputs)
        faust_records = {pair: output_records[role].rows - output_records[role].undecodable
                         for role, (pair, side) in roles.outputs.items() if side == "faust"}
        metrics: dict[str, Any] = {}
        for observation in statuses:
            metrics.update(observed(observation))
        counts = compare.status_counts([pair.name for pair in roles.pairs], faust_records, metrics)
        counts.update(_two_sided_counts(roles, paired))
        mismatching = {pair: sum(n for status, n in by.items() if status != "match") for pair, by in counts.items()}
        kinds = {role: Observation(f"kinds:{role}") for role in roles.inputs}  # counted by the explain step's scans
        frames = _explained(options, inputs, stage, mismatching, kinds) if stage is not None else []
        if paired is not None:
            frames += _two_sided_explained(options, inputs, paired)
        explained = _union(frames)
        if options.detail == "all":
            matches = [frame.where(F.col("status") == "match") for frame in (stage, paired) if frame is not None]
            explained = _union([explained, *[m.drop(*[c for c in m.columns if c.startswith("_")]) for m in matches]])
        planned_once = {**PLANNED_ONCE, SHUFFLE_PARTITIONS: str(_cores(spark))} if (
            any(mismatching.values()) and _few(mismatching) and not roles.two_sided) else {}
        with _step(spark, "Explained the mismatches from the input topics"), _settings(spark, {**EXPLAIN_SETTINGS,
                                                                                          **planned_once}):
            explained.write.partitionBy("status").parquet(str(staging / "detail"))
        for scratch in ("_classified", "_two_sided"):
            shutil.rmtree(staging / scratch, ignore_errors=True)
        input_records = _input_records(spark, roles, inputs, {role: observed(kinds[role]) for role in roles.inputs})
        input_records.update({role: InputRecords(**_kind_fields(two_sided.kinds(frame)))
                              for role, frame in inputs.sides.items() if role not in input_records})
        with _step(spark, "Summarised"):
            detail = spark.read.schema(explained.schema).parquet(str(staging / "detail")).where(F.col("status") != "match")
            with ThreadPoolExecutor(1) as thread:  # two small queries, each mostly waiting on its stages: together
                sampled = thread.submit(inheritable_thread_target(spark)(_samples), roles, detail)
                summary = _summary(options, inputs, detail, counts, output_records, input_records, _versions(spark),
                                   partial)
            samples = sampled.result()
        report.write_summary(staging / "summary.json", summary)
        (staging / "report.html").write_text(report.render_html(summary, samples))
        if inputs.plan is not None and partial is None:  # a partial run's offsets are never read again
            inputs.plan.write(staging / PLAN_FILE)
        _replace(staging, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary


def _few(mismatching: dict[str, int]) -> bool:
    """The mismatches are few enough to be broadcast when explained (``BROADCAST_MISMATCHES``)."""
    return sum(mismatching.values()) <= BROADCAST_MISMATCHES


def _explained(options: Options, inputs: Inputs, stage: DataFrame, mismatching: dict[str, int],
               kinds: dict[str, Observation]) -> list[DataFrame]:
    """The mismatches with their causes: one explain per group and table it joins, each input's records
    counted by kind on the first scan that reads them."""
    roles, counted, frames = options.roles, set(), []
    few = _few(mismatching)
    for group in roles.groups:
        for table in group.table_roles:
            pairs = [pair for pair in group.pairs if pair.table_role == table]
            mine = stage.where((F.col("status") != "match") & F.col("pair").isin(*[pair.name for pair in pairs]))
            stream, observe = group.stream_role, [r for r in (group.stream_role, table) if r not in counted]
            counted.update(observe)
            frames.append(causes.explain(
                group, mine, decode.all_orders(inputs.streams[stream], group),
                decode.users(inputs.tables[table], roles.inputs[table], kinds[table] if table in observe else None),
                inputs.partitions[stream], options.partitioner, few=few,
                repartitioned=any(mismatching[pair.name] > 0 for pair in pairs if pair.repartitioned),
                order_kinds=kinds[stream] if stream in observe else None, table=table))
    return frames


def _two_sided_counts(roles: Roles, paired: DataFrame | None) -> dict[str, dict[str, int]]:
    """{pair: {status: rows}} of the two-sided pairs, every status present (their classified rows hold the matches)."""
    counts = {pair.name: dict.fromkeys(compare.STATUSES, 0) for pair in roles.two_sided}
    if paired is not None:
        for row in paired.groupBy("pair", "status").count().collect():
            counts[row["pair"]][row["status"]] = int(row["count"])
    return counts


def _two_sided_explained(options: Options, inputs: Inputs, paired: DataFrame) -> list[DataFrame]:
    """Each two-sided pair's mismatches with their causes (``two_sided.explain``); a side the join re-keys is placed
    where the worker's partitioner (``--partitioner``) puts its join key."""
    frames = []
    for pair in options.roles.two_sided:
        mine = paired.where((F.col("pair") == pair.name) & (F.col("status") != "match"))
        left, right = (two_sided.side_records(pair, side, inputs.sides[role], options.partitioner,
                                              inputs.partitions[role])
                       for side, role in (("left", pair.left_role), ("right", pair.right_role)))
        frames.append(two_sided.explain(pair, mine, left, right))
    return frames


def _kind_fields(found: dict[str, int]) -> dict[str, int]:
    """``InputRecords``' fields from counts by kind (``decode.kind_counts``)."""
    return {field: int(found.get(kind, 0)) for field, kind in (
        ("rows", "rows"), ("undecodable", decode.UNDECODABLE), ("null_key", decode.NULL_KEY),
        ("non_utf8_key", decode.NON_UTF8_KEY), ("tombstones", decode.TOMBSTONE))}


def _input_records(spark: SparkSession, roles: Roles, inputs: Inputs,
                   counted: dict[str, dict[str, Any]]) -> dict[str, InputRecords]:
    """Every stream and table record (streams: of the window) counted by kind, so that none is left out
    without a word: the undecodable ones, the ones only Kafka Streams reads, tombstones.

    ``counted``: what the explain step counted while reading them (``causes.order_info``,
    ``decode.users``).  Spark skips those scans when nothing mismatches (a join with an empty side),
    and only then are the inputs read again to count them.
    """
    found = counted
    if roles.inputs and not all(counted.values()):
        with _step(spark, "Counted the input records by kind (nothing to explain)"):
            groups = {group.stream_role: group for group in roles.groups}
            kinds = _union([
                *[decode.all_orders(inputs.streams[role], group).select(F.lit(role).alias("role"), "kind")
                  for role, group in groups.items()],
                *[decode.all_users(frame, roles.inputs[role]).select(F.lit(role).alias("role"), "kind")
                  for role, frame in inputs.tables.items()]])
            found = {row["role"]: row.asDict() for row in kinds.groupBy("role").agg(*decode.kind_counts()).collect()}
    return {role: InputRecords(**_kind_fields(found.get(role, {}))) for role in roles.inputs}


def _output_records(roles: Roles, inputs: Inputs) -> dict[str, OutputRecords]:
    """Each output's records and undecodable ones, observed while classifying."""
    metrics: dict[str, int] = {}
    for observation in inputs.observations:
        for name, value in observed(observation).items():
            metrics[name] = metrics.get(name, 0) + int(value)
    return {role: OutputRecords(int(metrics.get(f"rows:{pair}:{side}", 0)), int(metrics.get(f"undecodable:{pair}:{side}", 0)))
            for role, (pair, side) in roles.all_outputs.items()}


def describe(roles: Roles) -> dict[str, dict[str, Any]]:
    """Pair -> what it reconciles, for summary.json and the report."""
    origin = roles.topology.declared.origin
    described = {pair.name: {"statements": origin, "query": pair.query.name, "stream": pair.stream.name,
                             "table": pair.table.name, "table_input": pair.table_input.name,
                             "repartitioned": pair.repartitioned, "identity": [f.output for f in pair.identity],
                             "table_columns": [f.output for f in pair.joined]} for pair in roles.pairs}
    for two in roles.two_sided:  # "stream" and "table" name the left and right sources, as the report shows them
        query = two.query
        described[two.name] = {
            "statements": origin, "query": query.name, "kind": query.kind, "join_type": query.join_type,
            "stream": two.left.name, "table": two.right.name, "identity": [f.output for f in two.identity],
            "compared_columns": [f.output for f in two.compared],
            **({"window_ms": {"before": query.within_before, "after": query.within_after, "grace": query.grace}}
               if two.windowed else {})}
    return described


def _summary(options: Options, inputs: Inputs, detail: DataFrame, counts: dict[str, dict[str, int]],
             records: dict[str, OutputRecords], input_records: dict[str, InputRecords], versions: dict[str, str],
             partial: Partial | None = None) -> Summary:
    """Counts by status (``compare.status_counts``) and by cause and partition pair (from the detail rows).

    What was read, not how: the Kafka reader is left out (it is printed), so both readers give the same bytes.
    """
    rows = detail.groupBy("pair", "cause", "order_partition", "user_partition").count().collect()
    by_cause, cells = causes.tally(list(counts), rows)
    totals = {pair: PairTotals.of(statuses) for pair, statuses in counts.items()}
    breached = tuple(sorted(p for p, t in totals.items() if t.mismatch_rate > options.max_mismatch_rate))
    return Summary(
        window=options.window, source=options.source, topics=dict(options.topics), pairs=describe(options.roles),
        stream_partitions=dict(inputs.partitions), offsets=inputs.plan, output_records=records,
        input_records=input_records, statuses=counts, totals=totals, causes=by_cause, by_partition_pair=cells,
        threshold=Threshold(options.max_mismatch_rate, breached), detail=options.detail, versions=versions,
        partial=partial,
    )


def _samples(roles: Roles, detail: DataFrame) -> list[Sample]:
    """The first ``SAMPLES`` mismatches by pair, status and identity: a rerun shows the same ones."""
    identity = list(dict.fromkeys(f.name for group in (*roles.groups, *roles.two_sided) for f in group.identity))
    keys = [g.join_key.name for g in roles.groups] + [f.name for pair in roles.two_sided for f in pair.row_keys]
    key = F.coalesce(*[F.col(name).cast("string") for name in dict.fromkeys(keys)], F.lit(None).cast("string"))
    moment = F.coalesce(*[F.col(name).cast("bigint") for name in dict.fromkeys(
        g.time.name for g in (*roles.groups, *roles.two_sided))])
    ordered = detail.orderBy("pair", "status", *identity)
    return [Sample(*row) for row in ordered.select("pair", "status", "cause", key, moment, "cause_detail")
            .limit(SAMPLES).collect()]


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
        console.print(f"Mismatch rate {pair}: {total.mismatch_rate * 100:.2f}% of {total.orders} rows "
                      f"(threshold {limit * 100:.2f}%)")
    if summary.partial is not None:
        shown = summary.partial.to_dict()
        console.print(f"PARTIAL: records up to {shown['as_of']} only; the window closes at {shown['closes']}")


def preflight(options: Options) -> None:
    """Check topics or exports before Spark starts: a scheduler then logs exactly the one error line
    (``parse`` has checked ``--master`` and ``--output``)."""
    if options.source == "files":
        assert options.input_dir is not None
        check_exports(options.input_dir, options.topics)
    else:
        partition_counts(options.bootstrap, options.topics, options.flags)


def warm_up(spark: SparkSession, scratch: Path, roles: Roles) -> None:
    """One tiny query through what the job runs (the inputs' decoding and its Python worker, a shuffle,
    Parquet out and back), so that the JVM loads and compiles it while the caller is still writing the
    records (``--start-then-wait``)."""
    raw = spark.createDataFrame([(b"u", b'{"x": 1}', "t", 0, 0, 1), (b"u", b"[]", "t", 0, 1, 1)], RAW_SCHEMA)
    if roles.groups:
        group = roles.groups[0]
        kinds = decode.all_orders(raw, group).select("kind").unionByName(
            decode.all_users(raw, roles.inputs[group.table_roles[0]]).select("kind"))
    else:
        pair = roles.two_sided[0]
        kinds = two_sided.decoded_side(raw, pair.left, pair.windowed).select("kind")
    kinds.groupBy("kind").agg(*decode.kind_counts()).write.mode("overwrite").parquet(str(scratch))
    spark.read.parquet(str(scratch)).where(F.col("rows") > 0).count()
    shutil.rmtree(scratch, ignore_errors=True)


def wait_for_go() -> None:
    """Block until the caller writes a line: its records are then all in the topics."""
    if not sys.stdin.readline():
        raise ReconcileError("--start-then-wait: standard input closed before the line that starts the reading")


def main(argv: Sequence[str] | None = None, clock: Callable[[], int] = wall_clock_ms) -> int:
    """The command: exit 0 within the threshold, 1 breached, 2 error; ``clock`` is now in ms (tests give theirs)."""
    try:
        options = parse(argv, clock=clock)
        if not options.start_then_wait:
            options.partial()  # a window not over, without --allow-partial: one line before Spark starts
            preflight(options)
        spark, owned = spark_session(options)
        try:
            if options.start_then_wait:  # the topics may not exist yet: checked once the caller says go
                warm_up(spark, options.output / f".warm-up-{uuid.uuid4().hex[:8]}", options.roles)
                wait_for_go()
                options.partial()
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
