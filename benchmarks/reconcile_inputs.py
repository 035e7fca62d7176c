"""Reading the orders input as the worker's model does (``spark_batch.ksql_json``) against a bare ``from_json``.

Kafka-shaped orders (key, value bytes) in memory, N of them, counted by kind in ONE local[2]
SparkSession run; each figure is a ratio against the baseline measured in the same run:

- baseline: ``from_json`` with the typed schema and a count (no ksqlDB coercion, no check);
- plain: the job's reading of orders as the producers write them (all take the Spark SQL path);
- 5 % odd: the same with one order in twenty in upper case (those go through the model's decoder, an Arrow UDF);
- all odd: every order in upper case: what the job would cost if the UDF read every record.

    .venv/bin/python benchmarks/reconcile_inputs.py --orders 1000000
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def values(n: int, odd_share: float, seed: int = 5) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    made = []
    for i in range(n):
        row = {"ts": 1_700_000_000_000 + i, "product_id": rng.randint(1, 5000), "qty": rng.randint(1, 9),
               "unit_price": round(rng.uniform(1, 100), 2), "channel": "web"}
        if rng.random() < odd_share:
            row = {k.upper(): v for k, v in row.items()}
        made.append((f"user-{rng.randint(0, 9999)}".encode(), json.dumps(row).encode()))
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_batch import decode, ksql_json
    from spark_batch.roles import Roles
    from streamapp.settings import Settings

    group = Roles.of(Settings()).groups[0]  # the seed's orders stream

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    frames = {}
    for name, share in (("plain", 0.0), ("5 % odd", 0.05), ("all odd", 1.0)):
        rows = [(k, v, 0, i, 0) for i, (k, v) in enumerate(values(args.orders, share))]
        frame = spark.createDataFrame(rows, "key binary, value binary, partition int, offset bigint, timestamp_ms bigint")
        frames[name] = frame.repartition(4).cache()
        frames[name].count()

    def baseline() -> None:
        parsed = F.from_json(F.col("value").cast("string"), ksql_json.ddl(ksql_json.value_columns(group.stream)))
        frames["plain"].select(parsed.alias("o")).where(F.col(f"o.{group.time.name}").isNotNull()).count()

    def job(name: str):
        return lambda: decode.all_orders(frames[name], group).agg(*decode.kind_counts()).collect()

    runs = {"baseline from_json": baseline, **{f"ksql_json, {n}": job(n) for n in frames}}
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - started)
    base = best["baseline from_json"]
    print(f"{args.orders:,} orders, local[2], best of {args.rounds}")
    for name, seconds in best.items():
        print(f"  {name:<24} {seconds:7.2f} s  {seconds / base:5.2f}x")
    spark.stop()


if __name__ == "__main__":
    main()
