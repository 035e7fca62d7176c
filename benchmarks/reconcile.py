"""How the reconciliation's cost grows: the job vs a bare Spark join, and datacompy's Spark comparison as a peer.

For each size N (orders per side, ``--sizes``) it generates both engines' outputs as Parquet exports with
DuckDB, plus the inputs, then for each master (``--masters``: ``local`` is ``local[2]``; ``cluster`` a Spark
standalone master and two one-core workers on loopback, stopped by PID) runs, each in a fresh Spark
application: the baseline (a bare full outer join of the two sides on the order identity + count by status);
the job (``--source files``, its ``main`` in the same session, so the JVM's start is excluded); datacompy's
``SparkSQLCompare`` with its ``report()`` at ``--datacompy-sizes``; the same comparison in DuckDB (``local``).
Peak JVM heap is sampled with ``jstat -gc PID 250`` on each JVM doing the work.

datacompy stays out of ``.venv``: install it alone into a directory the benchmark appends to ``sys.path``::

    .venv/bin/pip install --no-deps --target /tmp/datacompy-lib \
        datacompy==1.1.0 ordered-set==4.1.0 polars==1.44.2 polars-runtime-32==1.44.2

    .venv/bin/python benchmarks/reconcile.py                      # 1 M, 10 M, 30 M; local[2] and the cluster
    .venv/bin/python benchmarks/reconcile.py --sizes 1000000 --masters local --data /tmp/reconcile-data
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import duckdb
import psutil
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamapp.kafka.broker import free_port  # noqa: E402
from streamapp.partitioners import partition_batch  # noqa: E402

DAY = "2026-11-20"
DAY_START_MS = int(datetime(2026, 11, 20, tzinfo=timezone.utc).timestamp() * 1000)
PARTITIONS = 6
TOPICS = {"users": "demo_user", "orders": "demo_user_orders", "faust_direct": "faust_direct",
          "ksqldb_direct": "ksqldb_direct", "faust_repartition": "faust_repartition",
          "ksqldb_repartition": "ksqldb_repartition"}
IDENTITY = "user_id, ts, product_id, qty, unit_price, channel"
WARM_UP_ROWS = 1_000_000
#: Entries of Spark's generated-code cache (``spark.sql.codegen.cache.maxEntries``, a static setting; Spark's
#: default is 100). The job generates about 110 classes a run, so with 100 each round compiled them again and
#: evicted the bare join's: a warm bare join against a half-cold job. With room for all, both are warm.
CODEGEN_CACHE_ENTRIES = 1000
DATACOMPY_INSTALL = (".venv/bin/pip install --no-deps --target /tmp/datacompy-lib datacompy==1.1.0 ordered-set==4.1.0 "
                     "polars==1.44.2 polars-runtime-32==1.44.2")


def _flag(role: str) -> str:
    return {"users": "users-topic", "orders": "orders-topic", "faust_direct": "faust-topic", "ksqldb_direct": "ksqldb-topic",
            "faust_repartition": "faust-repartition-topic", "ksqldb_repartition": "ksqldb-repartition-topic"}[role]


class HeapSampler:
    """``jstat -gc PID 250`` on each JVM: (monotonic time, used heap bytes) samples, read by a thread per JVM."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.samples: dict[str, list[tuple[float, float]]] = {name: [] for name in pids}
        self.processes = [subprocess.Popen(["jstat", "-gc", str(pid), "250"], stdout=subprocess.PIPE, text=True)
                          for pid in pids.values()]
        for name, process in zip(pids, self.processes):
            threading.Thread(target=self._read, args=(name, process), daemon=True).start()

    def _read(self, name: str, process: subprocess.Popen) -> None:
        header: list[str] = []
        for line in process.stdout:  # type: ignore[union-attr]
            fields = line.split()
            if "S0U" in fields:
                header = fields
            elif header and len(fields) == len(header):
                row = dict(zip(header, fields))
                used = sum(float(row[k]) for k in ("S0U", "S1U", "EU", "OU")) * 1024
                self.samples[name].append((time.monotonic(), used))

    def peak(self, name: str, started: float, ended: float) -> float:
        """The highest used heap sampled between two monotonic times (0 when none was)."""
        return max((used for at, used in self.samples[name] if started <= at <= ended + 0.3), default=0.0)

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(10)


class StandaloneCluster:
    """A Spark standalone master and ``workers`` one-core workers on loopback, from PySpark's own ``spark-class``.

    Ready when the master's ``/json`` says ALIVE with every worker; stopped by the PIDs it started (workers
    first: each stops its executors). The daemons' environment has no ``PYSPARK_*``/``VIRTUAL_ENV``.
    """

    def __init__(self, work_dir: Path, workers: int, memory: str) -> None:
        import pyspark

        self.spark_class = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"
        self.work_dir, self.workers, self.memory = work_dir, workers, memory
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_") and k != "VIRTUAL_ENV"}
        env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m", SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
        with (self.work_dir / f"{name}.log").open("wb") as log:
            self.processes.append(subprocess.Popen([str(self.spark_class), *args], cwd=self.work_dir, env=env,
                                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def __enter__(self) -> "StandaloneCluster":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.ui_port))
            for n in range(1, self.workers + 1):
                self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                            "--webui-port", "0", "--cores", "1", "--memory", self.memory,
                            "--work-dir", str(self.work_dir / f"worker-{n}"), self.url)
            deadline = time.monotonic() + 180
            while True:
                if any(p.poll() is not None for p in self.processes):
                    raise RuntimeError(f"a Spark daemon exited: see {self.work_dir}/*.log")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as response:
                        state = json.load(response)
                    if state.get("status") == "ALIVE" and state.get("aliveworkers") == self.workers:
                        return self
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Spark cluster was not up after 180 s: see {self.work_dir}/*.log")
                time.sleep(0.5)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self.processes.clear()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Shape:
    """A join whose outputs the benchmark generates: the direct pair's two exports and the columns of their rows."""

    name: str
    #: The export names (topics) of the direct pair's Faust and ksqlDB outputs.
    faust: str
    ksqldb: str
    #: The output columns identifying a row (the first one the join key), and the table's columns.
    identity: tuple[str, ...]
    enrichment: tuple[str, ...]
    #: Arguments of ``spark_batch/reconcile.py`` naming the statements and every role's topic.
    argv: tuple[str, ...] = ()

    @property
    def join_on(self) -> str:
        return " AND ".join(f"f.{c} = k.{c}" for c in self.identity)

    @property
    def status(self) -> str:
        """A row's status as the job names it, in SQL over the two sides ``f`` and ``k``."""
        key, first = self.identity[0], self.enrichment[0]
        differs = " OR ".join(f"f.{c} <> k.{c}" for c in self.enrichment)
        return f"""
    CASE WHEN f.{key} IS NULL THEN 'missing_in_faust' WHEN k.{key} IS NULL THEN 'missing_in_ksqldb'
         WHEN f.{first} IS NULL AND k.{first} IS NULL THEN 'both_unenriched'
         WHEN f.{first} IS NULL THEN 'enriched_only_in_ksqldb' WHEN k.{first} IS NULL THEN 'enriched_only_in_faust'
         WHEN {differs} THEN 'value_mismatch' ELSE 'match' END
"""


SEED = Shape("seed", TOPICS["faust_direct"], TOPICS["ksqldb_direct"], tuple(IDENTITY.split(", ")), ("name", "age"),
             tuple(x for role, topic in TOPICS.items() for x in (f"--{_flag(role)}", topic)))


def second_shape(statements: Path) -> Shape:
    """customers x payments (``second_join.sql``, its ``{tag}`` given): the ``direct`` pair's exports."""
    from spark_batch.roles import Roles
    from streamapp.settings import Settings

    roles = Roles.of(Settings().replace(statements=str(statements)))
    topics = roles.topics()
    pair = roles.pair("direct")
    return Shape("second", topics["faust_direct"], topics["ksqldb_direct"], tuple(f.name for f in pair.identity),
                 tuple(f.name for f in pair.joined), ("--statements", str(statements)))


def _write_outputs(db: duckdb.DuckDBPyConnection, shape: Shape, out: Callable[[str], str], empty: Sequence[str]) -> None:
    """Both engines' direct outputs from the ``orders`` table (``i``: its row number) with ~1.2 % seeded
    disagreements, and the ``empty`` exports (the repartitioned pair's) without a row."""
    identity = ", ".join(shape.identity)
    nulled = lambda n: ", ".join(f"CASE WHEN i % 200 = {n} THEN NULL ELSE {c} END AS {c}" for c in shape.enrichment)  # noqa: E731
    # Faust: 0.5 % unenriched, 0.1 % missing, 0.1 % written twice; ksqlDB: 0.5 % unenriched (another set)
    db.execute(f"""COPY (
        SELECT {identity}, {nulled(7)}, partition, "offset"
        FROM orders, range(2) d(copy) WHERE i % 1000 <> 3 AND (copy = 0 OR i % 1000 = 5)
    ) TO '{out(shape.faust)}' (FORMAT parquet)""")
    db.execute(f"""COPY (SELECT {identity}, {nulled(11)}, partition, "offset" FROM orders) TO '{out(shape.ksqldb)}' (FORMAT parquet)""")
    for export in empty:
        db.execute(f"COPY (SELECT {identity}, {', '.join(shape.enrichment)}, partition, \"offset\" FROM orders LIMIT 0) "
                   f"TO '{out(export)}' (FORMAT parquet)")


def _duckdb() -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()
    db.execute("SET threads = 2")
    db.execute("SET memory_limit = '3GB'")  # the machine is shared: DuckDB's default is 80 % of its RAM
    return db


def _placed(keys: list[bytes]) -> dict[str, pa.Array]:
    """A table's rows' placement: ``partition`` (librdkafka's crc32, its producer's), ``murmur2`` (where the
    stream's records of the key are), and ``timestamp_ms`` a day before the reconciled one."""
    return {"partition": pa.array([zlib.crc32(k) % PARTITIONS for k in keys], pa.int32()),
            "murmur2": pa.array(partition_batch("murmur2", keys, PARTITIONS), pa.int32()),
            "timestamp_ms": pa.array([DAY_START_MS - 86_400_000] * len(keys), pa.int64())}


def generate(directory: Path, orders: int, users: int) -> None:
    """Users (librdkafka crc32 placement), orders (murmur2), and both outputs with ~1.2 % seeded disagreements."""
    ids = [f"{zlib.crc32(str(i).encode()):08x}{i:024x}" for i in range(users)]
    keys = [u.encode() for u in ids]
    user_table = pa.table({
        "user_id": ids,
        "name": [f"User {i}" for i in range(users)],
        "age": pa.array([18 + i % 60 for i in range(users)], pa.int64()),
        **_placed(keys),
    })
    db = _duckdb()
    db.register("user_table", user_table)
    db.execute(f"""
        CREATE TABLE orders AS
        SELECT u.user_id, {DAY_START_MS}::BIGINT + (i * 86399999 // {orders}) AS ts, i AS product_id, 1 + i % 5 AS qty,
               round(1 + (i % 9973) * 0.37, 2)::DOUBLE AS unit_price,
               ['store','web','partner','catalog'][1 + (i % 4)::INT] AS channel,
               u.murmur2 AS partition, i AS "offset", u.name, u.age, i
        FROM range({orders}) t(i) JOIN (SELECT *, row_number() OVER () - 1 AS n FROM user_table) u ON u.n = i % {users}
    """)
    out = lambda name: str(directory / f"{name}.parquet")  # noqa: E731
    db.execute(f"COPY (SELECT user_id, name, age, partition, timestamp_ms FROM user_table) TO '{out(TOPICS['users'])}' (FORMAT parquet)")
    db.execute(f"COPY (SELECT {IDENTITY}, partition, \"offset\" FROM orders) TO '{out(TOPICS['orders'])}' (FORMAT parquet)")
    _write_outputs(db, SEED, out, [TOPICS["faust_repartition"], TOPICS["ksqldb_repartition"]])
    db.close()


def generate_second(directory: Path, statements: Path, payments: int, customers: int) -> Shape:
    """customers x payments as the seed's join is generated: customers keyed by a BIGINT (8 bytes, crc32's
    placement), payments (murmur2's), a DECIMAL amount and their event time ``paid_at``; returns its shape."""
    from spark_batch.roles import Roles
    from streamapp.settings import Settings

    shape = second_shape(statements)
    topics = Roles.of(Settings().replace(statements=str(statements))).topics()
    keys = [struct.pack(">q", i) for i in range(1, customers + 1)]
    table = pa.table({
        "id": pa.array(range(1, customers + 1), pa.int64()),
        "email": [f"c{i}@example.com" for i in range(1, customers + 1)],
        "tier": [("gold", "blue", "green")[i % 3] for i in range(1, customers + 1)],
        **_placed(keys),
    })
    db = _duckdb()
    db.register("customer_table", table)
    db.execute(f"""
        CREATE TABLE orders AS
        SELECT c.id AS customer_id, (1 + (i % 99991) * 0.01)::DECIMAL(10, 2) AS amount,
               ['EUR','USD','GBP'][1 + (i % 3)::INT] AS currency,
               {DAY_START_MS}::BIGINT + (i * 86399999 // {payments}) AS paid_at,
               c.murmur2 AS partition, i AS "offset", c.email, c.tier, i
        FROM range({payments}) t(i) JOIN customer_table c ON c.id = 1 + i % {customers}
    """)
    out = lambda name: str(directory / f"{name}.parquet")  # noqa: E731
    db.execute(f"COPY (SELECT id, email, tier, partition, timestamp_ms FROM customer_table) TO '{out(topics['customers'])}' "
               "(FORMAT parquet)")
    db.execute(f"COPY (SELECT customer_id, amount, currency, paid_at, partition, \"offset\" FROM orders) "
               f"TO '{out(topics['payments'])}' (FORMAT parquet)")
    _write_outputs(db, shape, out, [topics["faust_repartition"], topics["ksqldb_repartition"]])
    db.close()
    return shape


def bare_spark(spark, directory: Path, limit: int | None = None, shape: Shape = SEED) -> dict[str, int]:
    """A bare full outer join of the two outputs and a count by status: what a hand-written comparison costs."""
    for view, export in (("f", shape.faust), ("k", shape.ksqldb)):
        side = spark.read.parquet(str(directory / f"{export}.parquet"))
        (side.limit(limit) if limit else side).createOrReplaceTempView(view)
    rows = spark.sql(f"SELECT {shape.status} AS status, count(*) AS n FROM f FULL OUTER JOIN k ON {shape.join_on} GROUP BY 1").collect()
    return {r["status"]: r["n"] for r in rows}


def bare_duckdb(directory: Path, shape: Shape = SEED) -> dict[str, int]:
    db = _duckdb()
    f, k = directory / f"{shape.faust}.parquet", directory / f"{shape.ksqldb}.parquet"
    rows = db.execute(
        f"SELECT {shape.status} AS status, count(*) FROM read_parquet('{f}') f FULL OUTER JOIN read_parquet('{k}') k "
        f"ON {shape.join_on} GROUP BY 1"
    ).fetchall()
    db.close()
    return dict(rows)


def datacompy_compare(spark, directory: Path, report_file: Path, shape: Shape = SEED) -> dict[str, float]:
    """datacompy as a new user runs it: ``SparkSQLCompare`` on the two sides, then ``report()``."""
    from datacompy.spark import SparkSQLCompare

    started = time.monotonic()
    compare = SparkSQLCompare(spark, spark.read.parquet(str(directory / f"{shape.faust}.parquet")),
                              spark.read.parquet(str(directory / f"{shape.ksqldb}.parquet")),
                              join_columns=list(shape.identity), df1_name="faust", df2_name="ksqldb")
    compared = time.monotonic()
    report_file.write_text(compare.report())
    reported = time.monotonic()
    spark.catalog.clearCache()  # its cached intermediates would otherwise stay in the next phases' heap
    return {"compare_s": compared - started, "report_s": reported - compared}


def jvms() -> list[psutil.Process]:
    return [c for c in psutil.Process().children(recursive=True) if "java" in c.name()]


def jvm_cpu_seconds() -> float:
    """User + system CPU time of every JVM under this process (driver, and the cluster's daemons and executors)."""
    total = 0.0
    for jvm in jvms():
        try:
            total += sum(jvm.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def work_jvms(app_id: str | None, executors: int) -> dict[str, int]:
    """The PIDs of the JVMs doing the work: the driver, and (on a cluster) this application's executors."""
    deadline = time.monotonic() + 120
    while True:
        found: dict[str, int] = {}
        for jvm in jvms():
            line = " ".join(jvm.cmdline())
            if "org.apache.spark.deploy.SparkSubmit" in line:
                found["driver"] = jvm.pid
            elif app_id and "CoarseGrainedExecutorBackend" in line and app_id in line:
                found[f"executor-{sum(k.startswith('executor') for k in found) + 1}"] = jvm.pid
        if len(found) == 1 + executors or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def run_one(args: argparse.Namespace, size: int, data: Path) -> dict:
    """One size on one master, in this process's own Spark application; returns the figures."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_batch.reconcile import SESSION_SETTINGS, main as reconcile_main

    work = Path(tempfile.mkdtemp(prefix="reconcile-growth-"))
    cluster = StandaloneCluster(work / "cluster", 2, args.executor_memory) if args.master == "cluster" else None
    load = [os.getloadavg()[0]]
    try:
        builder = (SparkSession.builder.appName(f"reconcile-growth-{size}").config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false").config(map=SESSION_SETTINGS)
                   .config("spark.sql.shuffle.partitions", "16")
                   .config("spark.sql.codegen.cache.maxEntries", str(CODEGEN_CACHE_ENTRIES)))
        if cluster is not None:
            cluster.__enter__()
            builder = (builder.master(cluster.url).config("spark.driver.memory", args.cluster_driver_memory)
                       .config("spark.executor.memory", args.executor_memory).config("spark.executor.cores", "1")
                       .config("spark.cores.max", "2").config("spark.scheduler.minRegisteredResourcesRatio", "1")
                       .config("spark.pyspark.python", sys.executable)
                       .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1"))
        else:
            builder = builder.master("local[2]").config("spark.driver.memory", args.driver_memory)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        pids = work_jvms(spark.sparkContext.applicationId if cluster else None, 2 if cluster else 0)
        print(f"JVMs sampled by jstat: {pids}", flush=True)
        sampler = HeapSampler(pids)
        phases: dict[str, list[dict]] = {}

        compilations = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

        def phase(kind: str, label: str, fn: Callable[[], object]) -> object:
            cpu, started, compiled = jvm_cpu_seconds(), time.monotonic(), compilations.getCount()
            result = fn()
            ended = time.monotonic()
            time.sleep(0.3)  # one more jstat sample after the phase's end
            record = {"seconds": ended - started, "cpu": jvm_cpu_seconds() - cpu,
                      "compiled": compilations.getCount() - compiled,
                      "heap": {name: sampler.peak(name, started, ended) for name in pids}}
            if isinstance(result, dict) and kind == "datacompy":
                record.update(result)
            phases.setdefault(kind, []).append(record)
            heap = ", ".join(f"{name} {used / 2**20:.0f}" for name, used in record["heap"].items())
            print(f"{label:<44} {record['seconds']:8.1f} s   JVM CPU {record['cpu']:7.1f} s   "
                  f"classes compiled {record['compiled']:4d}   peak heap MiB: {heap}", flush=True)
            return result

        # the JIT's warm-up: the same join on 1 M rows a side is enough, and saves a full join at 30 M
        phase("warm-up", "warm-up (bare Spark join of 1 M a side, not counted)",
              lambda: bare_spark(spark, data, WARM_UP_ROWS))
        argv = ["--source", "files", "--input", str(data), "--output", str(work / "out"), "--date", DAY,
                "--max-mismatch-rate", "1", "--partitions", str(PARTITIONS), *SEED.argv]
        codes = []
        for round_ in range(1, args.rounds + 1):  # alternating; the best of each is reported: the machine is shared
            phase("bare", f"bare Spark full outer join + agg #{round_}", lambda: bare_spark(spark, data))
            codes.append(phase("job", f"reconcile job #{round_}", lambda: reconcile_main(argv)))
            shutil.rmtree(work / "out", ignore_errors=True)
            if args.datacompy:
                phase("datacompy", f"datacompy SparkSQLCompare + report() #{round_}",
                      lambda: datacompy_compare(spark, data, work / "datacompy-report.txt"))
            if cluster is None:
                phase("duckdb", f"DuckDB full outer join + agg #{round_}", lambda: bare_duckdb(data))
            load.append(os.getloadavg()[0])
        if args.datacompy:
            print("datacompy's report (first lines):\n" + "\n".join(
                (work / "datacompy-report.txt").read_text().splitlines()[:40]), flush=True)
        spark.stop()
        sampler.stop()
        if any(code not in (0, 1) for code in codes):
            raise RuntimeError(f"the reconciliation job exited {codes}")
        heap_limit = args.executor_memory if cluster else args.driver_memory
        return {"size": size, "master": args.master, "heap_limit": heap_limit, "load": load,
                "phases": {kind: min(runs, key=lambda r: r["seconds"]) for kind, runs in phases.items()},
                "rounds": phases}
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def busiest(record: dict) -> float:
    """The highest peak among the JVMs doing the work (local: the driver; cluster: an executor), MiB."""
    heaps = {k: v for k, v in record["heap"].items() if k != "driver"} or record["heap"]
    return max(heaps.values()) / 2**20


def print_table(results: list[dict]) -> None:
    print(f"\n{'master':<8}{'orders':>12}{'bare s':>9}{'job s':>9}{'job÷bare':>10}{'job s/M':>9}{'job heap':>10}"
          f"{'datacompy s':>13}{'dc÷bare':>9}{'job÷dc':>8}{'load':>12}")
    for r in results:
        if "error" in r:
            print(f"{r['master']:<8}{r['size']:>12,}  failed: {r['error']}")
            continue
        p = r["phases"]
        bare, job = p["bare"]["seconds"], p["job"]["seconds"]
        dc = p.get("datacompy", {}).get("seconds")
        dc_cols = f"{dc:13.1f}{dc / bare:8.1f}×{job / dc:8.3f}" if dc else f"{'':>13}{'':>9}{'':>8}"
        print(f"{r['master']:<8}{r['size']:>12,}{bare:9.1f}{job:9.1f}{job / bare:9.2f}×{job / r['size'] * 1e6:9.2f}"
              f"{busiest(p['job']):7.0f} Mi{dc_cols}  {min(r['load']):.1f}-{max(r['load']):.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000,30000000", help="orders per side, comma-separated")
    parser.add_argument("--masters", default="local,cluster", help="local (local[2]) and/or cluster (2 workers)")
    parser.add_argument("--datacompy-sizes", default="1000000,10000000",
                        help="sizes at which datacompy runs too ('' for none): 605 s at 10 M before")
    parser.add_argument("--datacompy-path", default="/tmp/datacompy-lib", help="where datacompy was installed")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--driver-memory", default="4g", help="local[2]'s JVM heap (driver and executor)")
    parser.add_argument("--executor-memory", default="2g", help="each cluster executor's heap (one per worker)")
    parser.add_argument("--cluster-driver-memory", default="2g")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds after a warm-up; best of each")
    parser.add_argument("--data", help="keep the generated data under this directory and reuse it on the next run")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--datacompy", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.datacompy:
            sys.path.append(args.datacompy_path)  # last: .venv's pandas and numpy stay the ones imported
        print("RESULT " + json.dumps(run_one(args, int(args.child[0]), Path(args.child[1]))), flush=True)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    datacompy_sizes = {int(s) for s in args.datacompy_sizes.split(",") if s}
    if datacompy_sizes & set(sizes) and not (Path(args.datacompy_path) / "datacompy").is_dir():
        print(f"reconcile benchmark: error: no datacompy in --datacompy-path {args.datacompy_path}: {DATACOMPY_INSTALL}",
              file=sys.stderr)
        return 2
    base = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="reconcile-growth-data-"))
    results: list[dict] = []
    try:
        for size in sizes:
            data = base / f"{size}-{args.users}"
            if not (data / ".generated").exists():
                shutil.rmtree(data, ignore_errors=True)
                data.mkdir(parents=True)
                started = time.perf_counter()
                generate(data, size, args.users)
                (data / ".generated").touch()
                print(f"Generated {size:,} orders per side, {args.users:,} users in {time.perf_counter() - started:.1f} s")
            for master in args.masters.split(","):
                print(f"\n=== {size:,} orders per side on {master} (load {os.getloadavg()[0]:.1f}) ===", flush=True)
                command = [sys.executable, __file__, "--child", str(size), str(data), "--master", master,
                           "--rounds", str(args.rounds), "--driver-memory", args.driver_memory,
                           "--executor-memory", args.executor_memory, "--cluster-driver-memory",
                           args.cluster_driver_memory, "--datacompy-path", args.datacompy_path,
                           *(["--datacompy"] if size in datacompy_sizes else [])]
                child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
                result = None
                for line in child.stdout:  # type: ignore[union-attr]
                    if line.startswith("RESULT "):
                        result = json.loads(line[len("RESULT "):])
                    else:
                        print(line, end="", flush=True)
                child.wait()
                results.append(result or {"size": size, "master": master, "error": f"exit {child.returncode}"})
                if args.json:
                    Path(args.json).write_text(json.dumps(results, indent=1))
        print_table(results)
        return 0 if all("error" not in r for r in results) else 1
    finally:
        if not args.data:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
