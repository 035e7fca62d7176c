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
from concurrent.futures import Future
from pathlib import Path

import pytest

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import free_port
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from test_reliability_kill import reconcile
from workerkit import (
    orders_read, BackgroundProducer, Dataset, TopicTail, check_output, holds_at_least, background_scenario, isolated,
    make_dataset, output_tails, produce, stats, wait_for_outputs, wait_for_users, wait_until, worker_settings,
)

pytestmark = pytest.mark.long

EXACTLY_ONCE = {"processing_guarantee": "exactly_once"}


def write_ksqldb_outputs(settings: Settings, dataset: Dataset) -> None:
    """ksqlDB's two join outputs for these users and orders (ksqlDB cannot run here): exact format, murmur2."""
    topics = (settings.ksqldb_merged_topic, settings.ksqldb_merged_repartition_topic)
    ensure_topics(settings.bootstrap_servers, {t: settings.partitions for t in topics})
    records = [(o.user_id.encode(), dataset.expected_value(o), o.ts) for o in dataset.orders]
    for topic in topics:
        produce(settings.bootstrap_servers, topic, records)


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
def test_kill9_mid_stream_20k_orders_exactly_once(broker_settings: Settings, tmp_path: Path, spark) -> None:
    """kill -9 with transactions open at 40% of 20,000 orders streamed at 5,000/s, then a restart: each order once in
    each output.

    The producer holds at 60% of the orders until the kill, so the rest is produced after the crash.
    """
    settings = isolated(broker_settings, "eos_kill", **EXACTLY_ONCE)
    n, total = settings.partitions, 20_000
    dataset = make_dataset(5_000, total, seed=100_018)
    started = time.monotonic()
    first = WorkerProcess(worker_settings(settings, tmp_path, "w"), tmp_path / "worker.log")
    second = WorkerProcess(first.settings.replace(web_port=free_port()), tmp_path / "worker-restarted.log")
    tails = output_tails(settings)
    try:
        first.start(timeout=120)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([first], len(dataset.users), timeout=120)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=2_000, pause=0.4, hold_at=int(total * 0.6))
        stream.start()
        wait_until(lambda: tails[1].poll(0.2) >= 0 and len(tails[1].records) >= total * 0.4, 1_800,
                   "40% of the orders joined", [first])
        produced_at_kill, joined_at_kill = stream.produced, len(tails[1].records)
        first.kill()
        stream.resume()
        second.start(timeout=120)
        stream.finish(1_800)
        assert produced_at_kill < total, "the stream ended before the kill: not a mid-stream crash"
        wait_for_outputs(tails, dataset, [second], 1_800)
        assert second.stop() == 0, second.tail()
        for tail in tails:
            tail.drain()
        records = assert_exactly_once(dataset, tails, n)
    finally:
        for tail in tails:
            tail.close()
        first.kill()
        second.stop()
    worker_seconds = round(time.monotonic() - started, 1)
    assert_reconciled_as_matches(settings, dataset, tmp_path / "reconcile")
    figures = {"orders": total, "produced_at_kill": produced_at_kill, "joined_at_kill": joined_at_kill,
               "records": records, "seconds": worker_seconds, "seconds_with_reconcile": round(time.monotonic() - started, 1)}
    print(f"exactly_once kill -9 scenario: {json.dumps(figures)}")


def test_takeover_and_a_worker_joining_mid_stream_exactly_once(broker_settings: Settings, tmp_path: Path,
                                                              spark, paused_worker: Future[None]) -> None:
    """Two workers; a third joins mid-stream (a rebalance with transactions open), then one is killed with kill -9.

    The survivors take over the killed worker's partitions (its open transactions
    are aborted by their fence) and every order is in each output exactly once;
    no worker crashes or logs a traceback.  (``paused_worker``: that scenario starts here and runs beside.)
    """
    settings = isolated(broker_settings, "eos_group", **EXACTLY_ONCE)
    n = settings.partitions
    dataset = make_dataset(300, 6_000, seed=6_018)
    started = time.monotonic()
    first, victim, joiner = (WorkerProcess(worker_settings(settings, tmp_path, name), tmp_path / f"{name}.log")
                             for name in ("first", "victim", "joiner"))
    tails = output_tails(settings)
    try:
        first.start(timeout=120)
        victim.start(timeout=120)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([first, victim], len(dataset.users), timeout=120)
        total = len(dataset.orders)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=250, pause=0.5, hold_at=int(total * 0.7))
        stream.start()

        wait_until(lambda: holds_at_least(tails[1], int(total * 0.2)), 300, "20% of the orders joined", [first, victim])
        joiner.start(timeout=180)  # the group rebalances while the others' transactions are open
        joined_at_join = len(tails[1].records)
        wait_until(lambda: holds_at_least(tails[1], int(total * 0.5)), 300, "50% of the orders joined", [first, victim, joiner])
        victim_orders = orders_read(stats(victim), victim.settings)
        victim.kill()
        produced_at_kill = stream.produced
        stream.finish(600)
        assert produced_at_kill < total, "the stream ended before the kill"
        assert victim_orders > 0, "the victim processed no order before it was killed"
        wait_for_outputs(tails, dataset, [first, joiner], 600)
        assert orders_read(stats(joiner), joiner.settings) > 0, "the worker that joined mid-stream processed no order"
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


def test_a_paused_worker_is_fenced_and_resumes_without_duplicates_or_crash(paused_worker: Future[None]) -> None:
    """A zombie: one of two workers is paused (SIGSTOP) with transactions open, past its session and transaction
    timeouts; the other takes its partitions over (its fence aborts them), then the paused one resumes (SIGCONT).
    Its late commits are refused (``ProducerFenced``): it drops that work, does not crash, and every order is in
    each output exactly once.

    (Its scenario runs in the background from the first test that asks for it: two workers' starts, then the
    paused one's session and transaction timeouts, 10 and 15 s, mostly waiting.)"""
    paused_worker.result()


def paused_worker_scenario(broker_settings: Settings, tmp_path: Path) -> None:
    import os
    import signal

    settings = isolated(broker_settings, "eos_zombie", **EXACTLY_ONCE)
    n = settings.partitions
    dataset = make_dataset(200, 3_000, seed=3_018)
    survivor, zombie = (WorkerProcess(worker_settings(settings, tmp_path, name), tmp_path / f"{name}.log")
                        for name in ("survivor", "zombie"))
    tails = output_tails(settings)
    paused = False
    try:
        survivor.start(timeout=120)
        zombie.start(timeout=120)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([survivor, zombie], len(dataset.users), timeout=120)
        total = len(dataset.orders)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=100, pause=0.2, hold_at=int(total * 0.4))
        stream.start()

        wait_until(lambda: holds_at_least(tails[1], int(total * 0.2)), 300, "20% of the orders joined", [survivor, zombie])
        assert orders_read(stats(zombie), zombie.settings) > 0, "the zombie-to-be processed no order"
        assert zombie.proc is not None
        os.kill(zombie.proc.pid, signal.SIGSTOP)
        paused = True
        stream.resume()  # the rest arrives while the zombie is paused: the survivor takes its partitions over

        def survivor_holds_all() -> bool:
            read = survivor.get("/stats?scope=local").json()["counters"]["records"]
            return len(read.get(survivor.settings.orders_topic, {})) == n

        wait_until(survivor_holds_all, 300, "the survivor processing orders of every partition", [survivor])
        os.kill(zombie.proc.pid, signal.SIGCONT)
        paused = False
        stream.finish(600)
        wait_for_outputs(tails, dataset, [survivor, zombie], 600)
        for tail in tails:
            tail.drain()
        records = assert_exactly_once(dataset, tails, n)
        for worker in (survivor, zombie):
            assert "Traceback" not in worker.log(), worker.tail(40)
    finally:
        for tail in tails:
            tail.close()
        if paused and zombie.proc is not None:
            os.kill(zombie.proc.pid, signal.SIGCONT)
        codes = [survivor.stop(), zombie.stop()]
    assert codes == [0, 0], (codes, survivor.tail(), zombie.tail())
    print(f"exactly_once zombie: {json.dumps({'orders': total, 'records': records})}")


paused_worker = background_scenario("paused_worker", paused_worker_scenario)
