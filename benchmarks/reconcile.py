"""Reconciliation speed and memory: the job vs a bare Spark full outer join + aggregation vs DuckDB.

Generates N orders per side (Faust output, ksqlDB output) as decoded Parquet
exports with DuckDB, plus the orders and users inputs, then in ONE run and one
local[2] SparkSession measures:

- the reconciliation job (``--source files``: statuses, root causes, detail Parquet, summary, report);
- the baseline: a bare Spark full outer join of the two sides on the order identity + count by status;
- the same comparison in DuckDB (2 threads).

Prints wall times as ratios against the bare Spark join, and the driver's peak
memory (the local-mode JVM, which is also the executor, and the Python driver).

    .venv/bin/python benchmarks/reconcile.py              # 10 M orders per side
    .venv/bin/python benchmarks/reconcile.py --orders 1000000
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import psutil
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamapp.partitioners import partition_batch  # noqa: E402

DAY = "2026-11-20"
DAY_START_MS = int(datetime(2026, 11, 20, tzinfo=timezone.utc).timestamp() * 1000)
PARTITIONS = 6
TOPICS = {"users": "demo_user", "orders": "demo_user_orders", "faust_direct": "faust_direct",
          "ksqldb_direct": "ksqldb_direct", "faust_repartition": "faust_repartition",
          "ksqldb_repartition": "ksqldb_repartition"}
IDENTITY = "user_id, ts, product_id, qty, unit_price, channel"


class PeakMemory:
    """Samples the RSS of this process and of its JVM child, and the JVM's used heap, every 50 ms.

    RSS never shrinks once the JVM has grown its heap, so the used heap is the per-phase figure.
    """

    runtime = None  # the JVM's java.lang.Runtime, once Spark is up

    def __init__(self) -> None:
        self.python = self.jvm = self.heap = 0
        self.cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                self.python = max(self.python, me.memory_info().rss)
                jvms = [c for c in me.children(recursive=True) if "java" in c.name()]
                self.jvm = max(self.jvm, sum(c.memory_info().rss for c in jvms))
                if PeakMemory.runtime is not None:
                    self.heap = max(self.heap, PeakMemory.runtime.totalMemory() - PeakMemory.runtime.freeMemory())
            except (psutil.Error, Exception):
                pass
            time.sleep(0.05)

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def generate(directory: Path, orders: int, users: int) -> None:
    """Users (librdkafka crc32 placement), orders (murmur2), and both outputs with ~1.2 % seeded disagreements."""
    ids = [f"{zlib.crc32(str(i).encode()):08x}{i:024x}" for i in range(users)]
    keys = [u.encode() for u in ids]
    user_table = pa.table({
        "user_id": ids,
        "name": [f"User {i}" for i in range(users)],
        "age": pa.array([18 + i % 60 for i in range(users)], pa.int64()),
        "partition": pa.array([zlib.crc32(k) % PARTITIONS for k in keys], pa.int32()),
        "murmur2": pa.array(partition_batch("murmur2", keys, PARTITIONS), pa.int32()),
        "timestamp_ms": pa.array([DAY_START_MS - 86_400_000] * users, pa.int64()),
    })
    db = duckdb.connect()
    db.register("user_table", user_table)
    db.execute(f"""
        CREATE TABLE orders AS
        SELECT u.user_id, {DAY_START_MS}::BIGINT + (i * 86399999 // {orders}) AS ts, i AS product_id, 1 + i % 5 AS qty,
               round(1 + (i % 9973) * 0.37, 2)::DOUBLE AS unit_price,
               ['store','web','partner','catalog'][1 + (i % 4)::INT] AS channel,
               u.murmur2 AS partition, i AS "offset", u.name, u.age, i
        FROM range({orders}) t(i) JOIN (SELECT *, row_number() OVER () - 1 AS n FROM user_table) u ON u.n = i % {users}
    """)
    out = lambda name: str(directory / f"{TOPICS[name]}.parquet")  # noqa: E731
    db.execute(f"COPY (SELECT user_id, name, age, partition, timestamp_ms FROM user_table) TO '{out('users')}' (FORMAT parquet)")
    db.execute(f"COPY (SELECT {IDENTITY}, partition, \"offset\" FROM orders) TO '{out('orders')}' (FORMAT parquet)")
    # Faust: 0.5 % unenriched, 0.1 % missing, 0.1 % written twice; ksqlDB: 0.5 % unenriched (another set)
    db.execute(f"""COPY (
        SELECT {IDENTITY}, CASE WHEN i % 200 = 7 THEN NULL ELSE name END AS name,
               CASE WHEN i % 200 = 7 THEN NULL ELSE age END AS age, partition, "offset"
        FROM orders, range(2) d(copy) WHERE i % 1000 <> 3 AND (copy = 0 OR i % 1000 = 5)
    ) TO '{out('faust_direct')}' (FORMAT parquet)""")
    db.execute(f"""COPY (
        SELECT {IDENTITY}, CASE WHEN i % 200 = 11 THEN NULL ELSE name END AS name,
               CASE WHEN i % 200 = 11 THEN NULL ELSE age END AS age, partition, "offset"
        FROM orders
    ) TO '{out('ksqldb_direct')}' (FORMAT parquet)""")
    for role in ("faust_repartition", "ksqldb_repartition"):
        db.execute(f"COPY (SELECT {IDENTITY}, name, age, partition, \"offset\" FROM orders LIMIT 0) TO '{out(role)}' (FORMAT parquet)")
    db.close()


BARE_STATUS = """
    CASE WHEN f.user_id IS NULL THEN 'missing_in_faust' WHEN k.user_id IS NULL THEN 'missing_in_ksqldb'
         WHEN f.name IS NULL AND k.name IS NULL THEN 'both_unenriched'
         WHEN f.name IS NULL THEN 'enriched_only_in_ksqldb' WHEN k.name IS NULL THEN 'enriched_only_in_faust'
         WHEN f.name <> k.name OR f.age <> k.age THEN 'value_mismatch' ELSE 'match' END
"""
JOIN_ON = " AND ".join(f"f.{c} = k.{c}" for c in IDENTITY.split(", "))


def bare_spark(spark, directory: Path) -> dict[str, int]:
    spark.read.parquet(str(directory / "faust_direct.parquet")).createOrReplaceTempView("f")
    spark.read.parquet(str(directory / "ksqldb_direct.parquet")).createOrReplaceTempView("k")
    rows = spark.sql(f"SELECT {BARE_STATUS} AS status, count(*) AS n FROM f FULL OUTER JOIN k ON {JOIN_ON} GROUP BY 1").collect()
    return {r["status"]: r["n"] for r in rows}


def bare_duckdb(directory: Path) -> dict[str, int]:
    db = duckdb.connect()
    db.execute("SET threads = 2")
    f, k = directory / "faust_direct.parquet", directory / "ksqldb_direct.parquet"
    rows = db.execute(
        f"SELECT {BARE_STATUS} AS status, count(*) FROM read_parquet('{f}') f FULL OUTER JOIN read_parquet('{k}') k "
        f"ON {JOIN_ON} GROUP BY 1"
    ).fetchall()
    db.close()
    return dict(rows)


def jvm_cpu_seconds() -> float:
    """User + system CPU time of this process's JVM child(ren): less disturbed than wall time by other users' load."""
    return sum(sum(c.cpu_times()[:2]) for c in psutil.Process().children(recursive=True) if "java" in c.name())


def timed(label: str, fn):
    started, cpu = time.perf_counter(), jvm_cpu_seconds()
    with PeakMemory() as peak:
        result = fn()
    seconds, cpu = time.perf_counter() - started, jvm_cpu_seconds() - cpu
    peak.cpu = cpu
    print(f"{label:<40} {seconds:8.1f} s   JVM CPU {cpu:7.1f} s   JVM heap peak {peak.heap / 2**20:6.0f} MiB   "
          f"JVM RSS {peak.jvm / 2**20:6.0f} MiB   Python RSS {peak.python / 2**20:5.0f} MiB", flush=True)
    return seconds, peak, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=10_000_000, help="orders per side (default 10 M)")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds; the best of each is reported")
    parser.add_argument("--data", help="keep the generated data in this directory and reuse it on the next run")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_batch.reconcile import main as reconcile_main

    work = Path(tempfile.mkdtemp(prefix="reconcile-bench-"))
    try:
        data = Path(args.data) if args.data else work / "data"
        stamp = data / f".generated-{args.orders}-{args.users}"
        if not stamp.exists():
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            started = time.perf_counter()
            generate(data, args.orders, args.users)
            stamp.touch()
            print(f"Generated {args.orders:,} orders per side, {args.users:,} users in {time.perf_counter() - started:.1f} s")
        spark = (
            SparkSession.builder.master("local[2]").appName("reconcile-bench")
            .config("spark.driver.memory", args.driver_memory).config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false").config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "16").getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        PeakMemory.runtime = spark._jvm.java.lang.Runtime.getRuntime()
        timed("warm-up (bare Spark join)", lambda: bare_spark(spark, data))
        argv = ["--source", "files", "--input", str(data), "--output", str(work / "out"), "--date", DAY,
                "--max-mismatch-rate", "1", "--partitions", str(PARTITIONS),
                *[x for role, topic in TOPICS.items() for x in (f"--{_flag(role)}", topic)]]
        runs: dict[str, list[tuple[float, PeakMemory, object]]] = {"bare": [], "job": [], "duck": []}
        for round_ in range(args.rounds):  # alternating, best of each: the machine is shared
            runs["bare"].append(timed(f"bare Spark full outer join + agg #{round_ + 1}", lambda: bare_spark(spark, data)))
            runs["job"].append(timed(f"reconcile job #{round_ + 1}", lambda: reconcile_main(argv)))
            runs["duck"].append(timed(f"DuckDB full outer join + agg #{round_ + 1}", lambda: bare_duckdb(data)))
        (base_s, base_peak, base), (job_s, job_peak, code), (duck_s, duck_peak, duck) = (
            min(runs[k], key=lambda r: r[0]) for k in ("bare", "job", "duck"))
        spark.stop()
        print(f"\nBaseline statuses: {dict(sorted(base.items()))}")
        print(f"DuckDB statuses:   {dict(sorted(duck.items()))}")
        print(f"\n{'what':<36}{'seconds':>9}{'x bare Spark':>14}")
        for label, seconds in (("bare Spark join + agg (baseline)", base_s), ("reconcile job", job_s), ("DuckDB join + agg", duck_s)):
            print(f"{label:<36}{seconds:9.1f}{seconds / base_s:13.2f}x")
        cpu = {k: min(r[1].cpu for r in v) for k, v in runs.items() if k != "duck"}
        print(f"JVM CPU seconds (least of the rounds): reconcile {cpu['job']:.1f}, bare join {cpu['bare']:.1f} "
              f"({cpu['job'] / cpu['bare']:.2f}x)")
        jvm = {k: max(r[1].jvm for r in v) / 2**20 for k, v in runs.items()}
        heap = {k: max(r[1].heap for r in v) / 2**20 for k, v in runs.items()}
        print(f"JVM used-heap peak: reconcile {heap['job']:.0f} MiB, bare join {heap['bare']:.0f} MiB")
        print(f"\nDriver peak RSS (local mode: the JVM is driver and executor; -Xmx {args.driver_memory}): "
              f"reconcile {jvm['job']:.0f} MiB, bare join {jvm['bare']:.0f} MiB; "
              f"Python driver {max(r[1].python for r in runs['job']) / 2**20:.0f} MiB; "
              f"DuckDB (this process) {max(r[1].python for r in runs['duck']) / 2**20:.0f} MiB")
        return 0 if code in (0, 1) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _flag(role: str) -> str:
    return {"users": "users-topic", "orders": "orders-topic", "faust_direct": "faust-topic", "ksqldb_direct": "ksqldb-topic",
            "faust_repartition": "faust-repartition-topic", "ksqldb_repartition": "ksqldb-repartition-topic"}[role]


if __name__ == "__main__":
    sys.exit(main())
