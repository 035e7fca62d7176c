"""Two workers in one group, one killed with kill -9 mid-stream: the other takes over its partitions, outputs complete.

Real worker processes with their own RocksDB directories on Apache Kafka.
The survivor notices the death after the session timeout (10 s, from the
``broker_settings`` fixture), rebalances, restores the dead worker's table
partitions from their changelogs and reprocesses what was not committed:
at-least-once, so an order may appear twice, never zero times.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import (
    orders_read, BackgroundProducer, check_output, isolated, output_tails, make_dataset, produce, stats, wait_for_outputs,
    wait_for_users, worker_settings,
)


def local_orders_by_partition(worker: WorkerProcess) -> dict[str, int]:
    response = worker.get("/stats?scope=local")
    assert response.status_code == 200, response.text
    return response.json()["counters"]["records"].get(worker.settings.orders_topic, {})


def run(settings: Settings, tmp_path: Path, users: int, orders: int, rate: float, timeout: float) -> None:
    n = settings.partitions
    dataset = make_dataset(users, orders, seed=orders + 1)
    started = time.monotonic()
    survivor, victim = (WorkerProcess(worker_settings(settings, tmp_path, name), tmp_path / f"{name}.log")
                        for name in ("survivor", "victim"))
    tails = output_tails(settings)
    try:
        survivor.start(timeout=120)
        victim.start(timeout=120)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([survivor, victim], len(dataset.users), timeout=120)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=250, pause=250 / rate, hold_at=int(len(dataset.orders) * 0.6))
        stream.start()
        deadline = time.monotonic() + timeout
        while len(tails[1].records) < len(dataset.orders) * 0.4:
            assert time.monotonic() < deadline, survivor.tail()
            tails[1].poll(0.2)
        before = local_orders_by_partition(survivor)
        victim_orders = orders_read(stats(victim), victim.settings)
        victim.kill()
        produced_at_kill = stream.produced
        stream.finish(timeout)
        assert produced_at_kill < len(dataset.orders), "the stream ended before the kill"
        assert victim_orders > 0 and len(before) < n, f"the victim processed no partition: {before}"
        wait_for_outputs(tails, dataset, [survivor], timeout)
        after = local_orders_by_partition(survivor)
        assert sorted(after) == [str(p) for p in range(n)], f"survivor did not take over every partition: {after}"
        for tail in tails:
            tail.drain()
        checks = {tail.topic: check_output(dataset, tail.records, n) for tail in tails}
        for topic, check in checks.items():
            assert check.missing == [] and check.wrong == [] and check.distinct == len(dataset.orders), (topic, check)
        assert "Traceback" not in survivor.log(), survivor.tail(40)
        figures = {"orders": orders, "victim_partitions_before": n - len(before), "victim_orders": victim_orders,
                   "duplicates": {t: c.duplicates for t, c in checks.items()},
                   "seconds": round(time.monotonic() - started, 1)}
        print(f"takeover: {json.dumps(figures)}")
    finally:
        for tail in tails:
            tail.close()
        victim.kill()
        code = survivor.stop()
    assert code == 0, survivor.tail()


def test_survivor_takes_over_killed_workers_partitions(broker_settings: Settings, tmp_path: Path) -> None:
    run(isolated(broker_settings, "takeover"), tmp_path, users=300, orders=5_000, rate=500, timeout=300)


@pytest.mark.slow
def test_survivor_takes_over_at_volume(broker_settings: Settings, tmp_path: Path) -> None:
    run(isolated(broker_settings, "takeover"), tmp_path, users=5_000, orders=100_000, rate=5_000, timeout=1_800)
