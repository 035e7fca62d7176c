"""Worker kill -9 in the middle of the orders stream, then restart: nothing lost, the duplicates counted and reconciled.

Real ``faust -A streamapp worker`` child, real Apache Kafka broker, real Spark.
The worker runs at-least-once (its default; no transactions), so after kill -9
it reprocesses what it had not committed: an order may appear twice, never zero
times.  ksqlDB cannot run here, so its two output topics are written by this test
in ksqlDB's exact format from the users and orders it produced; the
reconciliation must then call every extra Faust record a ``duplicate`` and
report nothing else.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spark_batch.reconcile import main as reconcile_main
from streamapp.kafka.admin import ensure_topics
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import (
    BackgroundProducer, Dataset, DAY, TopicTail, check_output, isolated, make_dataset, produce, wait_for_outputs,
    wait_for_users, worker_settings,
)


def kill_and_restart(settings: Settings, tmp_path: Path, dataset: Dataset, kill_at: float,
                     chunk: int, rate: float, timeout: float) -> dict[str, object]:
    """Run the scenario; returns the figures (per output: records, duplicates) for the report."""
    n = settings.partitions
    started = time.monotonic()
    first = WorkerProcess(worker_settings(settings, tmp_path, "w"), tmp_path / "worker.log").start(timeout=120)
    second: WorkerProcess | None = None
    outputs = (settings.merged_topic, settings.merged_repartition_topic)
    tails = [TopicTail(settings.bootstrap_servers, topic, n) for topic in outputs]
    try:
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([first], len(dataset.users), timeout=120)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=chunk, pause=chunk / rate, hold_at=int(len(dataset.orders) * (kill_at + 0.2)))
        stream.start()
        target = int(len(dataset.orders) * kill_at)
        deadline = time.monotonic() + timeout
        while len(tails[1].records) < target:
            assert time.monotonic() < deadline, f"only {len(tails[1].records)} joined before the kill: {first.tail()}"
            assert first.proc is not None and first.proc.poll() is None, first.tail()
            tails[1].poll(0.2)
        produced_at_kill = stream.produced
        first.kill()
        joined_at_kill = len(tails[1].records)
        stream.resume()
        second = WorkerProcess(first.settings.replace(web_port=worker_settings(settings, tmp_path, "w").web_port),
                               tmp_path / "worker-restarted.log").start(timeout=120)
        stream.finish(timeout)
        assert produced_at_kill < len(dataset.orders), "the stream ended before the kill: not a mid-stream crash"
        wait_for_outputs(tails, dataset, [second], timeout)
        assert second.stop() == 0, second.tail()
        second = None
        for tail in tails:
            tail.drain()
        checks = {tail.topic: check_output(dataset, tail.records, n) for tail in tails}
        for topic, check in checks.items():
            assert check.missing == [] and check.wrong == [], (topic, check.missing[:3], check.wrong)
            assert check.distinct == len(dataset.orders), topic
        return {
            "orders": len(dataset.orders), "produced_at_kill": produced_at_kill, "joined_at_kill": joined_at_kill,
            "outputs": {t: {"records": c.records, "duplicates": c.duplicates, "duplicated_orders": c.duplicated_orders}
                        for t, c in checks.items()},
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        for tail in tails:
            tail.close()
        if second is not None:
            second.stop()
        if first.proc is not None:
            first.stop()


def write_ksqldb_outputs(settings: Settings, dataset: Dataset) -> None:
    """ksqlDB's two join outputs for these users and orders (ksqlDB cannot run here): exact format, murmur2."""
    topics = (settings.ksqldb_merged_topic, settings.ksqldb_merged_repartition_topic)
    ensure_topics(settings.bootstrap_servers, {t: settings.partitions for t in topics})
    records = [(o.user_id.encode(), dataset.expected_value(o), o.ts) for o in dataset.orders]
    for topic in topics:
        produce(settings.bootstrap_servers, topic, records)


def reconcile(settings: Settings, output: Path) -> dict:
    args = [
        "--date", DAY, "--bootstrap-server", settings.bootstrap_servers,
        "--users-topic", settings.users_topic, "--orders-topic", settings.orders_topic,
        "--faust-topic", settings.merged_topic, "--ksqldb-topic", settings.ksqldb_merged_topic,
        "--faust-repartition-topic", settings.merged_repartition_topic,
        "--ksqldb-repartition-topic", settings.ksqldb_merged_repartition_topic,
        "--output", str(output), "--max-mismatch-rate", "1",
    ]
    assert reconcile_main(args) == 0
    return json.loads((output / f"dt={DAY}" / "summary.json").read_text())


def assert_reconciled_as_duplicates(settings: Settings, dataset: Dataset, figures: dict, output: Path) -> dict:
    write_ksqldb_outputs(settings, dataset)
    summary = reconcile(settings, output)
    pairs = {"direct": settings.merged_topic, "repartition": settings.merged_repartition_topic}
    for pair, topic in pairs.items():
        duplicated = figures["outputs"][topic]["duplicated_orders"]
        expected = {"match": len(dataset.orders) - duplicated, "duplicate": duplicated}
        got = {status: count for status, count in summary["statuses"][pair].items() if count}
        assert got == {s: c for s, c in expected.items() if c}, (pair, got, expected)
    return summary


def run(settings: Settings, tmp_path: Path, users: int, orders: int, chunk: int, rate: float, timeout: float) -> None:
    """Orders arrive in chunks at ``rate`` orders/s; the kill lands mid-stream whatever the worker's pace.

    The producer holds at 60% of the orders until the kill (at 40% joined), so the
    rest of the stream is produced after the crash on a fast or a loaded machine.
    """
    dataset = make_dataset(users, orders, seed=orders)
    figures = kill_and_restart(settings, tmp_path, dataset, kill_at=0.4, chunk=chunk, rate=rate, timeout=timeout)
    started = time.monotonic()
    assert_reconciled_as_duplicates(settings, dataset, figures, tmp_path / "reconcile")
    figures["reconcile_seconds"] = round(time.monotonic() - started, 1)
    print(f"kill -9 scenario: {json.dumps(figures)}")


def test_kill9_mid_stream_5k_orders(broker_settings: Settings, tmp_path: Path, spark) -> None:
    run(isolated(broker_settings, "kill"), tmp_path, users=500, orders=5_000, chunk=250, rate=500, timeout=300)


@pytest.mark.slow
def test_kill9_mid_stream_100k_orders(broker_settings: Settings, tmp_path: Path, spark) -> None:
    run(isolated(broker_settings, "kill"), tmp_path, users=5_000, orders=100_000, chunk=2_000, rate=5_000, timeout=1_800)
