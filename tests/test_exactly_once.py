"""``processing_guarantee=exactly_once`` on Apache Kafka: a crash, a takeover and a rebalance leave no duplicate.

Real ``faust -A streamapp worker`` children on the session's Apache Kafka broker,
real Spark for the reconciliation.  Every output is read ``read_committed``
(:class:`~streamapp.kafka.reader.TopicReader`), as a reader of an exactly-once
output must: it must hold every order exactly once, and the reconciliation
against ksqlDB's outputs (written by the test in ksqlDB's exact format: ksqlDB
cannot run here) must report only ``match``.  The at-least-once scenarios are
tests/test_reliability_kill.py and tests/test_reliability_takeover.py, unchanged.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from test_reliability_kill import kill_and_restart, reconcile, write_ksqldb_outputs
from workerkit import (
    BackgroundProducer, Dataset, TopicTail, check_output, isolated, make_dataset, produce, stats, wait_for_outputs,
    wait_for_users, wait_until, worker_settings,
)

EXACTLY_ONCE = {"processing_guarantee": "exactly_once"}


def assert_reconciled_as_matches(settings: Settings, dataset: Dataset, output: Path) -> dict:
    """The reconciliation of both joins reports every order as ``match`` and nothing else."""
    write_ksqldb_outputs(settings, dataset)
    summary = reconcile(settings, output)
    for pair in ("direct", "repartition"):
        got = {status: count for status, count in summary["statuses"][pair].items() if count}
        assert got == {"match": len(dataset.orders)}, (pair, got)
    return summary


def assert_exactly_once(dataset: Dataset, tails: list[TopicTail], partitions: int) -> dict[str, int]:
    """Each output, read committed, holds every order once: none missing, none twice, each record exact."""
    figures = {}
    for tail in tails:
        check = check_output(dataset, tail.records, partitions)
        assert check.missing == [] and check.wrong == [], (tail.topic, check.missing[:3], check.wrong)
        assert check.duplicates == 0 and check.records == len(dataset.orders), (tail.topic, check.records,
                                                                                  check.duplicates)
        figures[tail.topic] = check.records
    return figures


@pytest.mark.slow
def test_kill9_mid_stream_100k_orders_exactly_once(broker_settings: Settings, tmp_path: Path, spark) -> None:
    """kill -9 with transactions open at 40% of 100,000 orders, then a restart: each order once in each output."""
    settings = isolated(broker_settings, "eos_kill", **EXACTLY_ONCE)
    dataset = make_dataset(5_000, 100_000, seed=100_018)
    started = time.monotonic()
    figures = kill_and_restart(settings, tmp_path, dataset, kill_at=0.4, chunk=2_000, rate=5_000, timeout=1_800)
    for topic, output in figures["outputs"].items():
        assert output["duplicates"] == 0 and output["records"] == len(dataset.orders), (topic, output)
    assert_reconciled_as_matches(settings, dataset, tmp_path / "reconcile")
    figures["seconds_with_reconcile"] = round(time.monotonic() - started, 1)
    print(f"exactly_once kill -9 scenario: {json.dumps(figures)}")


def test_takeover_and_a_worker_joining_mid_stream_exactly_once(broker_settings: Settings, tmp_path: Path,
                                                              spark) -> None:
    """Two workers; a third joins mid-stream (a rebalance with transactions open), then one is killed with kill -9.

    The survivors take over the killed worker's partitions (its open transactions
    are aborted by their fence) and every order is in each output exactly once;
    no worker crashes or logs a traceback.
    """
    settings = isolated(broker_settings, "eos_group", **EXACTLY_ONCE)
    n = settings.partitions
    dataset = make_dataset(300, 6_000, seed=6_018)
    started = time.monotonic()
    first, victim, joiner = (WorkerProcess(worker_settings(settings, tmp_path, name), tmp_path / f"{name}.log")
                             for name in ("first", "victim", "joiner"))
    tails = [TopicTail(settings.bootstrap_servers, t, n) for t in (settings.merged_topic, settings.merged_repartition_topic)]
    try:
        first.start(timeout=120)
        victim.start(timeout=120)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([first, victim], len(dataset.users), timeout=120)
        total = len(dataset.orders)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=250, pause=0.5, hold_at=int(total * 0.7))
        stream.start()

        def joined_at_least(count: int) -> bool:
            tails[1].poll(0.2)
            return len(tails[1].records) >= count

        wait_until(lambda: joined_at_least(int(total * 0.2)), 300, "20% of the orders joined", [first, victim])
        joiner.start(timeout=180)  # the group rebalances while the others' transactions are open
        joined_at_join = len(tails[1].records)
        wait_until(lambda: joined_at_least(int(total * 0.5)), 300, "50% of the orders joined", [first, victim, joiner])
        victim_orders = stats(victim)["orders"]
        victim.kill()
        produced_at_kill = stream.produced
        stream.finish(600)
        assert produced_at_kill < total, "the stream ended before the kill"
        assert victim_orders > 0, "the victim processed no order before it was killed"
        wait_for_outputs(tails, dataset, [first, joiner], 600)
        assert stats(joiner)["orders"] > 0, "the worker that joined mid-stream processed no order"
        for worker in (first, joiner):
            assert "Traceback" not in worker.log(), worker.tail(40)
        for tail in tails:
            tail.drain()
        records = assert_exactly_once(dataset, tails, n)
    finally:
        for tail in tails:
            tail.close()
        victim.kill()
        codes = [first.stop(), joiner.stop()]
    assert codes == [0, 0], (codes, first.tail(), joiner.tail())
    assert_reconciled_as_matches(settings, dataset, tmp_path / "reconcile")
    figures = {"orders": total, "joined_at_join": joined_at_join, "victim_orders": victim_orders,
               "produced_at_kill": produced_at_kill, "records": records,
               "seconds": round(time.monotonic() - started, 1)}
    print(f"exactly_once takeover and join: {json.dumps(figures)}")
