"""The verdict follows the data (issue 32, cases 3 and 4), on Apache Kafka with the real worker.

Users and orders are written by librdkafka with ksqlDB's partitioner (``murmur2``), a worker
(``faust -A streamapp worker``) starts and its ``/copartition`` says "Co-partitioned" with every
check decided.  Then the data changes under it: a users producer switches to librdkafka's default
partitioner (``consistent_random``, crc32) mid-stream, or partitions are added to the orders topic.
The worker's own verdict must change, say so in its log, and apply ``guard_policy``.
The pure decisions are tested in tests/test_verdict_logic.py.
"""
from __future__ import annotations

import random
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from streamapp.kafka.admin import add_partitions, ensure_topics
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import (
    background_scenario, isolated, make_order, make_users, produce, to_json, wait_until, worker_settings,
)

pytestmark = pytest.mark.long

USERS = 200


def start(broker_settings: Settings, tmp_path: Path, **changes: Any) -> tuple[Settings, WorkerProcess]:
    """A worker over users and orders written with murmur2, once its verdict is "Co-partitioned", every check run."""
    s = isolated(broker_settings, "verdict", **changes)
    ensure_topics(s.kafka, {s.users_topic: s.partitions, s.orders_topic: s.partitions})
    users = make_users(USERS, seed=32)
    write(s, users, "murmur2")
    worker = WorkerProcess(worker_settings(s, tmp_path, "w"), tmp_path / "worker.log").start()

    def decided() -> dict[str, Any] | None:  # the start-up check, then the worker's first run with the doctor
        body = worker.get("/copartition").json()
        return body if body["runs"]["count"] and all(c["ok"] is not None for c in body["checks"]) else None

    body = wait_until(decided, 90, "every co-partitioning check decided by the worker's first run", [worker])
    assert body["ok"] is True and body["verdict"].startswith("Co-partitioned: "), body["verdict"]
    return worker.settings, worker


def write(s: Settings, users: dict[str, dict[str, object]], partitioner: str) -> None:
    """The users with ``partitioner``, then one order each with murmur2 (the orders' producer does not change)."""
    rng = random.Random(len(users))
    produce(s.bootstrap_servers, s.users_topic, [(uid.encode(), to_json(row)) for uid, row in users.items()],
            partitioner)
    produce(s.bootstrap_servers, s.orders_topic, [(uid.encode(), to_json(make_order(uid, rng))) for uid in users],
            "murmur2")


def warnings(worker: WorkerProcess, *words: str) -> list[str]:
    return [line for line in worker.log().splitlines() if "WARNING" in line and all(w in line for w in words)]


def test_a_users_producer_that_switches_partitioner_changes_the_verdict(broker_settings: Settings, tmp_path: Path,
                                                                       partitions_added: Future[None]) -> None:
    """Case 3: the page and /copartition no longer say "5 of 5 checks passed"; a WARNING names who writes now.

    (``partitions_added``: case 4 starts here, so that its wait for the consumer's metadata refresh runs beside.)"""
    s, worker = start(broker_settings, tmp_path)
    try:
        assert warnings(worker, "Co-partitioning problem") == []
        write(s, make_users(USERS, seed=33), "consistent_random")  # librdkafka's default: crc32

        def broken() -> dict[str, Any] | None:
            body = worker.get("/copartition").json()
            return body if body["ok"] is False else None

        body = wait_until(broken, 60, "the verdict to change", [worker])
        assert body["verdict"].startswith(f"Not co-partitioned: {s.users_topic} is not written with murmur2 only: ")
        assert "placed by consistent/consistent_random (librdkafka, confluent-kafka)" in body["verdict"]
        assert f"partitioner of {s.users_topic}" in {c["name"] for c in body["checks"] if c["ok"] is False}
        assert body["runs"]["reason"].startswith(f"keyed records of {s.users_topic} arrived in a partition")
        # the doctor's line on the same page agrees: the direct pair is broken
        assert "sound" not in body["doctor"]["verdict"] and "broken" in body["doctor"]["verdict"], body["doctor"]
        [line] = warnings(worker, "Co-partitioning problem found while the worker runs", s.users_topic)
        assert "consistent/consistent_random (librdkafka, confluent-kafka)" in line
        assert warnings(worker, "guard_policy=warn, so the worker goes on")
        assert worker.get("/health").status_code == 200  # warn: the worker goes on
    finally:
        assert worker.stop() == 0, worker.tail()


def test_partitions_added_to_a_joined_topic_stop_a_worker_under_guard_policy_fail(
        partitions_added: Future[None]) -> None:
    """Case 4: noticed within the consumer's metadata refresh, logged, checked again, and ``fail`` exits 2.

    (Its scenario runs in the background from the first test that asks for it: the worker's first run, then up to
    the consumer's metadata refresh, mostly waiting.)"""
    partitions_added.result()


def partitions_added_scenario(broker_settings: Settings, tmp_path: Path) -> None:
    s, worker = start(broker_settings, tmp_path, guard_policy="fail")
    try:
        add_partitions(s.kafka, s.orders_topic, 2 * s.partitions)
        proc = worker.proc
        assert proc is not None
        wait_until(lambda: proc.poll() is not None, 90, lambda: f"the worker to exit: {worker.tail()}")
        assert proc.returncode == 2, worker.tail()
        assert warnings(worker, f"Partitions of {s.orders_topic} changed from {s.partitions} to {2 * s.partitions}")
        assert warnings(worker, "Co-partitioning problem found while the worker runs", "number of partitions",
                        f"{s.orders_topic} has {2 * s.partitions} partitions, {s.users_topic} has {s.partitions}")
        assert [line for line in worker.log().splitlines()
                if "[ERROR] Worker stopped: guard_policy=fail: " in line and "exiting with status 2" in line]
    finally:
        worker.stop()


partitions_added = background_scenario("partitions_added", partitions_added_scenario)
