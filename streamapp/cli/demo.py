"""``streamapp demo``: the whole pipeline on Apache Kafka (one KRaft node), started and stopped by us.

Two engines run the declared joins side by side (the seed's statements, or
``--statements FILE``): the Faust worker, and ksqlDB's join semantics executed by
Kafka Streams (``streamapp ksql-equivalent``; not ksqlDB: no REST API), which
writes the topics ksqlDB would.  Two producer runs share one broker, both engines
and the same topics, as two runs of the original demo against one cluster would.
Each report is scoped to the keys its own run produced (fresh random keys), so the
first run's records cannot change the second run's numbers: the consistent_random
run shows both direct joins missing wherever crc32 and murmur2 disagree, the
murmur2_random run shows none (``--partitioner`` runs one run with the table
written by the partitioner named).  The Spark reconciliation then compares the two
engines' outputs of the declared joins, read from Kafka.  ``--bootstrap-servers``
runs it all on a cluster that is already running instead of starting one.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.table import Table

from ..kafka.ksql_equivalent import KsqlEquivalent
from ..demo.producer import ProduceError
from ..demo.report import FAUST, KAFKA_STREAMS, join_title
from ..demo.run import ProduceOptions, ProduceRun
from ..demo.shape import DemoShape, shape
from ..kafka.admin import ensure_topics
from ..kafka.broker import EmbeddedBroker, free_port
from ..settings import Settings, add_arguments
from ..sql.topology import topology
from ..worker.process import WorkerProcess, settings_env
from .produce import PARTITIONER_CHOICES, people_console, produce_with_progress, render_run

#: librdkafka's default first (the bug), then the Java-compatible one (the fix).
RUNS = ("consistent_random", "murmur2_random")
RECONCILE_TIMEOUT = 180.0
#: Spark's defaults (200 shuffle partitions, the UI) are sized for clusters; the demo's data is tiny.
#: Its JVM lives ~20 s, too short for C2 compilation to pay: C1 only cut the job 34 s -> 21 s
#: (benchmarks/README.md, Demo).  On a few hundred records AQE's re-planning, whole-stage code generation
#: (Janino compiles each stage) and the locality wait cost more than they save: without them the job took
#: 42.6 CPU s instead of 48.6-56.8.  The nightly job keeps Spark's defaults.
SPARK_SUBMIT_ARGS = ("--conf spark.sql.shuffle.partitions=2 --conf spark.default.parallelism=2 "
                     "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
                     "--conf spark.sql.adaptive.enabled=false --conf spark.sql.codegen.wholeStage=false "
                     "--conf spark.locality.wait=0 "
                     "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")
ENGINES = (FAUST, KAFKA_STREAMS)
#: Log lines of an engine shown when it did not load a run's users in time.
LOG_TAIL = 40


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "demo", help="run the demo end to end on Apache Kafka: the Faust worker and ksqlDB's joins on Kafka Streams "
        "(not ksqlDB), started and stopped by the demo, then a reconciliation of the two; --statements FILE runs "
        "a team's own join on generated records",
        description="Starts Apache Kafka (one node), the Faust worker and Kafka Streams (ksqlDB's joins, not ksqlDB), "
        "writes the declared table and stream twice (the table with librdkafka's consistent_random, then with "
        "murmur2_random; --partitioner: one run with the partitioner named) and shows each join of both engines side "
        "by side, ??? where one missed; then reconciles the two engines' joins with Spark. --statements FILE: your own "
        "statements, their records generated from the declared column types. --bootstrap-servers: run on that "
        "running cluster instead of starting one.")
    parser.add_argument("--messages", type=int, default=20,
                        help="table rows (one stream record each) per run (default 20)")
    parser.add_argument("--partitioner", choices=PARTITIONER_CHOICES, default=None,
                        help="one run, the table written with this librdkafka partitioner (default: two runs, "
                        f"{' then '.join(RUNS)})")
    parser.add_argument("--seed", type=int, default=None, help="seed of the first run (the second uses seed+1)")
    parser.add_argument("--no-reconcile", dest="reconcile", action="store_false",
                        help="skip the Spark reconciliation at the end")
    parser.add_argument("--json", action="store_true", help="print the runs' reports as JSON for programs")
    # the demo's worker runs with the guarantee; --statements declares the joins (the seed's by default);
    # --bootstrap-servers: a running cluster instead of the demo's own broker
    add_arguments(parser, only=("processing_guarantee", "statements", "bootstrap_servers"))
    parser.set_defaults(func=run)


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # the CLI's exit status 130, after each ``with`` stopped what it started


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.messages < 1:
        raise ProduceError(f"--messages={args.messages}: must be at least 1")
    demo = shape(settings)  # statements the demo cannot run are refused before anything starts
    signal.signal(signal.SIGTERM, _interrupted)  # a stop unwinds as Ctrl-C does: every child it started stops too
    runs = (args.partitioner,) if args.partitioner else RUNS
    started = time.monotonic()
    console = people_console(stderr=args.json)
    results: list[ProduceRun] = []
    reconciliation: dict[str, Any] = {"ran": False}
    window_start = datetime.now(timezone.utc) - timedelta(minutes=1)
    on_cluster = args.bootstrap_servers is not None
    # the broker's port is chosen now, so that Spark (which reads nothing before the runs are done) starts first
    broker = None if on_cluster else EmbeddedBroker.from_settings(settings, port=free_port())
    with tempfile.TemporaryDirectory(prefix="streamapp-demo-") as tmp:
        demo_settings = (settings if broker is None else broker.settings(settings)).replace(
            data_dir=str(Path(tmp) / "data"), web_port=free_port(), ksqldb_endpoint="", partitioner="murmur2"
        )
        # Spark's JVM starts now, beside the broker, the engines and the runs, and reads once they are done
        with ReconcileJob.start(demo_settings, Path(tmp), window_start, console) if args.reconcile else nullcontext() as job, \
                nullcontext() if broker is None else broker:
            if broker is None:
                console.print(f"Kafka at {settings.bootstrap_servers} (a running cluster, not started by the demo)")
            else:
                console.print(f"Apache Kafka (one KRaft node, temporary data) ready on {broker.bootstrap} "
                              f"(pid {broker.pid}) after {time.monotonic() - started:.1f}s")
            with engines(demo_settings, demo, Path(tmp), console, started) as logs:
                for number, partitioner in enumerate(runs, start=1):
                    seed = None if args.seed is None else args.seed + number - 1
                    console.rule(f"Run {number}: {demo.table.name} with {partitioner}, "
                                 f"{demo.stream.name} with murmur2 (Java, ksqlDB)")
                    options = ProduceOptions(partitioner=partitioner, messages=args.messages,
                                             client_id="streamapp-demo", seed=seed, wait=30.0)
                    run_started = time.monotonic()
                    result = produce_with_progress(demo_settings, options, console)
                    results.append(result)
                    render_run(console, result)
                    for table_wait in result.waits:
                        if not table_wait.complete:  # what the engine was doing meanwhile, for whoever reads the run
                            console.rule(f"{table_wait.engine}: its last log lines")
                            console.print(logs[table_wait.engine](LOG_TAIL), markup=False, highlight=False)
                    console.print(f"Run {number} took {time.monotonic() - run_started:.1f}s")
                if job is not None:  # every record is written: Spark reads while the engines stop
                    job.go()
            console.print("Faust worker and Kafka Streams stopped.")
            console.rule("Summary")
            console.print(summary_table(results))
            if job is not None:
                reconciliation = job.finish(console)
                console.print(f"Reconciliation took {time.monotonic() - job.told:.1f}s after the runs "
                              f"(its Spark started {job.started - started:.1f}s into the demo, beside the broker)")
    console.print(f"Broker stopped; demo finished in {time.monotonic() - started:.1f}s" if not on_cluster else
                  f"Demo finished in {time.monotonic() - started:.1f}s")
    if args.json:
        print(json.dumps({"runs": [r.to_dict() for r in results], "reconciliation": reconciliation}, indent=2))
    return 0


@contextmanager
def engines(settings: Settings, demo: DemoShape, tmp: Path, console: Console,
            started: float) -> Iterator[dict[str, Callable[[int], str]]]:
    """The Faust worker and the Kafka Streams program, started side by side (each is a process of its own);
    yields each one's last log lines by engine.

    Both read the table's and the stream's topics, so those are created first.  Kafka
    Streams starts in a thread while the worker starts here; a start under way ends
    (ready or failed) before the program is stopped, so nothing is left running.
    """
    ensure_topics(settings.kafka, {demo.table_topic: settings.partitions, demo.stream_topic: settings.partitions},
                  settings.replication_factor)
    streams = KsqlEquivalent(settings)
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(streams.start)
        try:
            with WorkerProcess(settings, tmp / "worker.log") as worker:
                console.print(f"Faust worker ready (pid {worker.proc.pid if worker.proc else '?'}) "
                              f"after {time.monotonic() - started:.1f}s")
                starting.result()
                console.print(f"Kafka Streams ready ({len(demo.plan.queries)} declared queries, one application "
                              f"each, as ksqlDB runs them; not ksqlDB; pid {streams.pid}) "
                              f"after {time.monotonic() - started:.1f}s")
                yield {FAUST: worker.tail, KAFKA_STREAMS: streams.tail}
        finally:
            wait([starting])
            streams.stop()


def summary_table(results: list[ProduceRun]) -> Table:
    names = " / ".join(ENGINES)
    labels = results[0].labels if results else ()
    table = Table("run", "table partitioner", "direct matched", "repartitioned matched",
                  *(f"{label} join misses ({names})" for label in labels))
    for number, result in enumerate(results, start=1):
        reports = dict(result.reports)
        joins = dict(result.joins)
        repartitioned = next((r for title, r in result.reports if title.startswith("Repartitioned")
                              and title.endswith("(Faust worker)")), None)
        table.add_row(
            str(number), result.partitioner, f"{reports['Direct'].matched_pct:.2f}%",
            "-" if repartitioned is None else f"{repartitioned.matched_pct:.2f}%",
            *(" / ".join(str(joins[t].misses) if t in joins else "-" for t in (join_title(e, label) for e in ENGINES))
              for label in labels),
        )
    return table


@dataclass
class ReconcileJob:
    """``python -m spark_batch.reconcile --start-then-wait`` over the demo's window, started before the data.

    Its JVM starts while the broker and the engines start and the runs produce (Spark's start is most of
    a small job's time); it reads nothing until ``go`` writes its go line, once every record is written.
    Both sides are read from Kafka by Spark's Kafka source: the Faust worker's outputs against the
    Kafka Streams program's, in the topics ksqlDB would write.  ``proc`` is None when the job is not
    installed (``reason`` says why); a job still running when the demo leaves is ended.
    """

    proc: subprocess.Popen[str] | None
    output: Path
    logs: tuple[Path, Path]
    started: float
    #: The two engines' output topics, as the reconciliation names them.
    sides: str
    reason: str = ""
    #: When :meth:`go` told the job to read (0: not yet).
    told: float = 0.0

    @classmethod
    def start(cls, settings: Settings, tmp: Path, window_start: datetime, console: Console) -> "ReconcileJob":
        output, logs, started = tmp / "reconcile", (tmp / "reconcile.out", tmp / "reconcile.err"), time.monotonic()
        joins = topology(settings).joins  # the job reads the same statements (STREAMAPP_STATEMENTS), as the worker
        sides = (f"ksqlDB's join semantics executed by Kafka Streams ({', '.join(j.ksqldb_output for j in joins)}), "
                 f"compared with the Faust worker's ({', '.join(j.output for j in joins)})")
        missing = [name for name in ("spark_batch", "pyspark") if importlib.util.find_spec(name) is None]
        if missing:  # the job is a program of its own: streamapp runs it, never imports it
            return cls(None, output, logs, started, sides, f"{', '.join(missing)} not installed")
        # the window ends well after the demo can: the job resolves its offsets only once told to read; the
        # window is then not over, so the report says partial (up to when) and no offsets are kept
        window_end = datetime.now(timezone.utc) + timedelta(seconds=RECONCILE_TIMEOUT + 600)
        cmd = [sys.executable, "-m", "spark_batch.reconcile", "--from", window_start.isoformat(),
               "--to", window_end.isoformat(), "--output", str(output), "--master", "local[2]",
               "--source", "kafka", "--kafka-reader", "spark", "--start-then-wait", "--allow-partial"]
        env = {**os.environ, **settings_env(settings), "PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS}
        with logs[0].open("w") as out, logs[1].open("w") as err:  # files, not pipes: nobody reads them until the end
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)
        console.print(f"Spark (the reconciliation's JVM) starting beside the broker and the engines (pid {proc.pid})")
        return cls(proc, output, logs, started, sides)

    def __enter__(self) -> "ReconcileJob":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # PySpark's JVM exits when its Python driver does
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def go(self) -> None:
        """Tell the job to read: every record of the runs is in the topics (the engines may still be stopping)."""
        self.told = time.monotonic()
        if self.proc is None or self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.close()
        except BrokenPipeError:  # it already stopped: its error is in its output
            pass

    def finish(self, console: Console) -> dict[str, Any]:
        """Wait for the job (told to read first if :meth:`go` was not called), print what it printed; its summary
        as the demo's JSON shows it."""
        console.rule("Reconciliation (Spark): the Faust worker against Kafka Streams")
        if self.proc is None:
            console.print(f"Reconciliation skipped: {self.reason}")
            return {"ran": False, "reason": self.reason}
        console.print(f"No ksqlDB here: its side is {self.sides}; both read from Kafka by Spark's Kafka source.")
        if not self.told:
            self.go()
        try:
            code = self.proc.wait(timeout=RECONCILE_TIMEOUT)
        except subprocess.TimeoutExpired:
            console.print(f"Reconciliation did not finish within {RECONCILE_TIMEOUT:.0f}s")
            return {"ran": True, "exit_code": None, "reason": "timeout"}
        stdout, stderr = (path.read_text(errors="replace") for path in self.logs)
        console.print(stdout.rstrip(), markup=False)
        if code == 2:
            console.print(stderr.strip().splitlines()[-1] if stderr.strip() else "reconcile failed", markup=False)
        meaning = {0: "within the threshold",
                   1: "mismatch rate above the threshold: the records both direct joins missed "
                      "(cause copartition_violation)",
                   2: "error"}.get(code, "unexpected")
        console.print(f"Reconciliation exit code {code}: {meaning}")
        summaries = sorted(self.output.glob("dt=*/summary.json"))
        summary = json.loads(summaries[-1].read_text()) if summaries else None
        return {"ran": True, "exit_code": code, "summary": summary}
