"""A join declared only in SQL (``second_join.sql``: customers × payments) in the worker, next to the raw pipe.

The same measurement as ``benchmarks/worker.py``, for a plan that is not the seed's: each
round starts a worker on its own topics, loads the table, then times the stream's records
from the first produced to the last out of every join output; the pipe (``worker.py pipe``)
reads the same stream and writes each record to as many outputs, in the same round.
Records come from the demo's generator (:mod:`streamapp.demo.data`: values from the declared
types, every payment's customer in the table, the table written with murmur2).  Untimed,
every output must hold exactly what the test runner predicts for the same records.

    .venv/bin/python benchmarks/declared_join.py [--payments 400000] [--customers 10000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

from rich.console import Console

from streamapp.demo import data
from streamapp.demo.shape import DemoShape, shape
from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.kafka.reader import TopicReader
from streamapp.settings import Settings
from streamapp.sql import engine
from streamapp.sql import plan as p
from streamapp.sql.formats import Codec
from streamapp.sql.runner import TestRecord, read_back, run
from streamapp.sql.topology import topology
from streamapp.worker.process import WorkerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from worker import Rate, produce_many, timed  # noqa: E402
from workerkit import stats, wait_until  # noqa: E402

console = Console(width=160)
STATEMENTS = Path(__file__).with_name("second_join.sql")


def settings_for(base: Settings, tmp: Path) -> Settings:
    """Settings running the statements on topics of their own (a fresh tag in every topic name)."""
    tag = uuid.uuid4().hex[:8]
    path = tmp / f"joins-{tag}.sql"
    path.write_text(STATEMENTS.read_text(encoding="utf-8").replace("{tag}", tag), encoding="utf-8")
    return base.replace(statements=str(path), app_id=f"bench-{tag}", web_port=free_port(),
                        data_dir=str(tmp / tag), dead_letter_topic=f"dead_{tag}")


def records(demo: DemoShape, customers: int, payments: int) -> tuple[list[data.Row], list[data.Row]]:
    """``customers`` table rows, then ``payments`` stream records spread over them, event time increasing."""
    rng = random.Random(33)
    table = data.make_table(demo, customers, rng)
    stream: list[data.Row] = []
    while len(stream) < payments:
        stream += data.make_stream(demo, table, rng, 1_700_000_000_000 + len(stream))
    return list(table), stream[:payments]


def predicted(settings: Settings, table: list[data.Row], stream: list[data.Row]) -> dict[str, Counter]:
    """Each join output's records as the test runner computes them (the table loaded first), by query."""
    demo = shape(settings)
    inputs = [TestRecord(demo.table_topic, row.key, row.value, None, i) for i, row in enumerate(table)]
    inputs += [TestRecord(demo.stream_topic, row.key, row.value, row.timestamp, len(table) + i)
               for i, row in enumerate(stream)]
    actual = run(demo.plan, inputs).actual
    return {join.query.name: Counter(logical(r) for r in actual[join.ksqldb_topic]) for join in demo.joins}


def logical(record: TestRecord) -> tuple:
    return record.key, json.dumps(record.value, sort_keys=True, default=str), record.timestamp


def bench_worker(settings: Settings, tmp: Path, table: list[data.Row], stream: list[data.Row],
                 expected: dict[str, Counter] | None) -> tuple[Rate, dict[str, Counter]]:
    """The worker's rate, and (untimed) what each output should hold if ``expected`` is not known yet."""
    demo = shape(settings)
    worker = WorkerProcess(settings, tmp / f"worker-{settings.app_id}.log").start(timeout=120)
    try:
        produce_many(settings.bootstrap_servers, demo.table_topic, data.encode(demo.table_codec, table))
        copies = [copy.worker_topic for copy in demo.copies]
        wait_until(lambda: all(stats(worker)["rows"].get(t) == len(table) for t in copies), 600,
                   "the table and its copies loaded", [worker])
        assert worker.proc is not None
        outputs = [join.worker_topic for join in demo.joins]
        rate = timed(settings, demo.stream_topic, data.encode(demo.stream_codec, stream), outputs, worker.proc.pid)
    finally:
        worker.stop()
    expected = expected or predicted(settings, table, stream)
    for join in demo.joins:
        problem = compare(settings, join.worker_topic, expected[join.query.name], join.sink)
        if problem:
            raise RuntimeError(f"{join.worker_topic}: {problem}")
    return rate, expected


def compare(settings: Settings, topic: str, expected: Counter, sink: p.Source) -> str | None:
    """What differs between ``topic`` and the test runner's records (None: nothing), as multisets."""
    codec = Codec(sink)
    with TopicReader(settings.bootstrap_servers, topic, range(settings.partitions)) as reader:
        found = Counter(logical(read_back(codec, engine.Record(topic, r.key, r.value, r.timestamp), 0))
                        for r in reader.read_to_end(timeout=300))
    if found == expected:
        return None
    missing, extra = expected - found, found - expected
    return f"{sum(missing.values()):,} records missing, {sum(extra.values()):,} extra (of {sum(expected.values()):,})"


def bench_pipe(settings: Settings, stream: list[data.Row]) -> Rate:
    """The baseline on the same stream, writing each record to as many outputs as the plan joins it into."""
    demo = shape(settings)
    ensure_topics(settings.bootstrap_servers, topology(settings).owned_topics())
    outputs = [join.worker_topic for join in demo.joins]
    child = subprocess.Popen([sys.executable, str(Path(__file__).with_name("worker.py")), "pipe",
                              "--bootstrap", settings.bootstrap_servers, "--source", demo.stream_topic,
                              "--outputs", ",".join(outputs)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        return timed(settings, demo.stream_topic, data.encode(demo.stream_codec, stream), outputs, child.pid)
    finally:
        child.terminate()
        child.wait(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payments", type=int, default=400_000)
    parser.add_argument("--customers", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    ratios: list[Rate] = []
    expected: dict[str, Counter] | None = None
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        base = broker.settings(Settings())
        settings = settings_for(base, tmp)
        table, stream = records(shape(settings), args.customers, args.payments)
        for round_ in range(1, args.rounds + 1):
            pipe = bench_pipe(settings_for(base, tmp), stream)
            worker, expected = bench_worker(settings_for(base, tmp), tmp, table, stream, expected)
            ratios.append(Rate(worker.wall / pipe.wall, worker.cpu / pipe.cpu))
            console.print(f"round {round_}: pipe {pipe.wall:,.0f}/s ({pipe.cpu:,.0f} per CPU-s), worker "
                          f"{worker.wall:,.0f}/s ({worker.cpu:,.0f} per CPU-s): {ratios[-1].wall:.2f}× the pipe, "
                          f"{ratios[-1].cpu:.2f}× per CPU-s; load {os.getloadavg()[0]:.1f}; every output as "
                          f"the test runner predicts")
    console.print(f"Payments joined ({args.payments:,} payments, {args.customers:,} customers, {args.rounds} rounds): "
                  f"worker ÷ pipe median {statistics.median(r.wall for r in ratios):.2f}× wall "
                  f"(lowest {min(r.wall for r in ratios):.2f}×), "
                  f"{statistics.median(r.cpu for r in ratios):.2f}× per CPU second")


if __name__ == "__main__":
    main()
