"""``streamapp demo``: the whole pipeline on Apache Kafka (one KRaft node), started and stopped by us.

Two producer runs share one broker, one worker and the same topics, as two runs
of the original demo against one cluster would.  Each report is scoped to the
users its own run produced (fresh 128-bit ids), so the first run's records
cannot change the second run's numbers: the consistent_random run shows the
direct join missing wherever crc32 and murmur2 disagree, the murmur2_random run
shows none.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from rich.table import Table

from ..demo.producer import ProduceError
from ..demo.run import ProduceOptions, ProduceRun
from ..kafka.broker import EmbeddedBroker, free_port
from ..kafka.reader import read_topic
from ..settings import Settings
from ..worker.process import WorkerProcess, settings_env
from .produce import people_console, produce_with_progress, render_run

#: librdkafka's default first (the bug), then the Java-compatible one (the fix).
RUNS = ("consistent_random", "murmur2_random")
RECONCILE_TIMEOUT = 180.0
#: Spark's defaults (200 shuffle partitions, the UI) are sized for clusters; the demo's data is tiny.
#: Its JVM lives ~20 s, too short for C2 compilation to pay: C1 only cut the job 34 s -> 21 s
#: (benchmarks/README.md, Demo).  The nightly job keeps the JVM's defaults.
SPARK_SUBMIT_ARGS = ("--conf spark.sql.shuffle.partitions=2 --conf spark.default.parallelism=2 "
                     "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
                     "--conf spark.sql.adaptive.coalescePartitions.initialPartitionNum=2 "
                     "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("demo", help="run the demo end to end on Apache Kafka, started and stopped by the demo")
    parser.add_argument("--messages", type=int, default=20, help="users (one order each) per run (default 20)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first run (the second uses seed+1)")
    parser.add_argument("--no-reconcile", dest="reconcile", action="store_false",
                        help="skip the Spark reconciliation at the end")
    parser.add_argument("--json", action="store_true", help="print the runs' reports as JSON for programs")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.messages < 1:
        raise ProduceError(f"--messages={args.messages}: must be at least 1")
    started = time.monotonic()
    console = people_console(stderr=args.json)
    results: list[ProduceRun] = []
    reconciliation: dict[str, Any] = {"ran": False}
    window_start = datetime.now(timezone.utc) - timedelta(minutes=1)
    with tempfile.TemporaryDirectory(prefix="streamapp-demo-") as tmp, EmbeddedBroker.from_settings(settings) as broker:
        console.print(f"Apache Kafka (one KRaft node, temporary data) ready on {broker.bootstrap} "
                      f"(pid {broker.pid}) after {time.monotonic() - started:.1f}s")
        demo_settings = broker.settings(settings).replace(
            data_dir=str(Path(tmp) / "data"), web_port=free_port(), ksqldb_endpoint="", partitioner="murmur2"
        )
        with WorkerProcess(demo_settings, Path(tmp) / "worker.log") as worker:
            console.print(f"Faust worker ready (pid {worker.proc.pid}) after {time.monotonic() - started:.1f}s")
            for number, partitioner in enumerate(RUNS, start=1):
                seed = None if args.seed is None else args.seed + number - 1
                console.rule(f"Run {number}: users with {partitioner}, orders with murmur2 (Java, ksqlDB)")
                options = ProduceOptions(partitioner=partitioner, messages=args.messages, client_id="streamapp-demo",
                                         seed=seed, wait=30.0)
                run_started = time.monotonic()
                result = produce_with_progress(demo_settings, options, console)
                results.append(result)
                render_run(console, result)
                console.print(f"Run {number} took {time.monotonic() - run_started:.1f}s")
        console.print("Worker stopped.")
        console.rule("Summary")
        console.print(summary_table(results))
        if args.reconcile:
            reconcile_started = time.monotonic()
            reconciliation = reconcile(demo_settings, Path(tmp), window_start, console)
            console.print(f"Reconciliation took {time.monotonic() - reconcile_started:.1f}s")
    console.print(f"Broker stopped; demo finished in {time.monotonic() - started:.1f}s")
    if args.json:
        print(json.dumps({"runs": [r.to_dict() for r in results], "reconciliation": reconciliation}, indent=2))
    return 0


def summary_table(results: list[ProduceRun]) -> Table:
    table = Table("run", "users partitioner", "direct matched", "repartitioned matched",
                  "Faust direct join misses", "Faust repartitioned join misses")
    for number, result in enumerate(results, start=1):
        reports = dict(result.reports)
        joins = dict(result.joins)
        repartitioned = reports.get("Repartitioned (Faust worker)")
        table.add_row(
            str(number), result.partitioner, f"{reports['Direct'].matched_pct:.2f}%",
            "-" if repartitioned is None else f"{repartitioned.matched_pct:.2f}%",
            *(str(joins[t].misses) if t in joins else "-" for t in ("Faust join, direct", "Faust join, repartitioned")),
        )
    return table


#: Export names of the stand-in for ksqlDB's two outputs (the job wants one export per role).
STAND_IN = {"ksqldb_direct": "standin_ksqldb_direct", "ksqldb_repartition": "standin_ksqldb_repartition"}


def export_topics(settings: Settings, directory: Path) -> None:
    """Each input and output topic as ``<name>.jsonl`` (Kafka-shaped rows), read to its end.

    The job reads these files instead of Kafka: the demo has just read the
    topics to their ends.  The Faust repartitioned join is
    exported once more under each ``STAND_IN`` name, as ksqlDB's output.
    """
    directory.mkdir(parents=True, exist_ok=True)
    exports = {topic: [topic] for topic in (settings.users_topic, settings.orders_topic, settings.merged_topic)}
    exports[settings.merged_repartition_topic] = [settings.merged_repartition_topic, *STAND_IN.values()]
    for topic, names in exports.items():
        lines = [
            json.dumps({"key": _text(r.key), "value": _text(r.value), "partition": r.partition, "offset": r.offset,
                        "timestamp_ms": r.timestamp})
            for r in read_topic(settings.bootstrap_servers, topic)
        ]
        for name in names:
            (directory / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def reconcile(settings: Settings, tmp: Path, window_start: datetime, console: Any) -> dict[str, Any]:
    """Run ``python -m spark_batch.reconcile`` over the demo's window, if that job is installed.

    No ksqlDB runs here, so the Faust repartitioned join (murmur2 on both sides,
    which is what ksqlDB computes) stands in for ksqlDB's output; this is said.
    """
    console.rule("Reconciliation (Spark)")
    missing = [name for name in ("spark_batch", "pyspark") if importlib.util.find_spec(name) is None]
    if missing:  # the job is a program of its own: streamapp runs it, never imports it
        reason = f"{', '.join(missing)} not installed"
        console.print(f"Reconciliation skipped: {reason}")
        return {"ran": False, "reason": reason}
    console.print(f"No ksqlDB here: the Faust repartitioned join ({settings.merged_repartition_topic}) stands in "
                  "for ksqlDB's output, since both partition users and orders with murmur2.")
    output, exports = tmp / "reconcile", tmp / "exports"
    export_topics(settings, exports)
    window_end = datetime.now(timezone.utc) + timedelta(minutes=1)
    cmd = [sys.executable, "-m", "spark_batch.reconcile", "--from", window_start.isoformat(),
           "--to", window_end.isoformat(), "--output", str(output), "--master", "local[2]",
           "--source", "files", "--input", str(exports),
           "--ksqldb-topic", STAND_IN["ksqldb_direct"], "--ksqldb-repartition-topic", STAND_IN["ksqldb_repartition"]]
    env = {**os.environ, **settings_env(settings), "PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS}
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RECONCILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        console.print(f"Reconciliation did not finish within {RECONCILE_TIMEOUT:.0f}s")
        return {"ran": True, "exit_code": None, "reason": "timeout"}
    console.print(done.stdout.rstrip(), markup=False)
    if done.returncode == 2:
        console.print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "reconcile failed", markup=False)
    meaning = {0: "within the threshold", 1: "mismatch rate above the threshold (the consistent_random run)",
               2: "error"}.get(done.returncode, "unexpected")
    console.print(f"Reconciliation exit code {done.returncode}: {meaning}")
    summaries = sorted(output.glob("dt=*/summary.json"))
    summary = json.loads(summaries[-1].read_text()) if summaries else None
    return {"ran": True, "exit_code": done.returncode, "summary": summary}
