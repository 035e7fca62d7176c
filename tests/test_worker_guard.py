"""The guard at worker start: `warn` logs the problem and runs; `fail` stops with one line and exit status 2."""
from __future__ import annotations

from pathlib import Path

import pytest

from streamapp.kafka.admin import ensure_topics
from streamapp.settings import Settings
from streamapp.worker.app import REFUSED_EXIT_CODE
from streamapp.worker.process import WorkerError, WorkerProcess

from workerkit import isolated, make_users, produce, to_json


def test_warn_policy_reports_crc32_users_and_keeps_running(broker_settings: Settings, tmp_path: Path) -> None:
    settings = isolated(broker_settings)
    ensure_topics(settings.bootstrap_servers, {settings.users_topic: settings.partitions})
    users = make_users(300, seed=11)
    produce(settings.bootstrap_servers, settings.users_topic,
            ((uid.encode(), to_json(row)) for uid, row in users.items()), "consistent_random")
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        log = worker.log()
        miss = f"{1 - 1 / settings.partitions:.0%}"
        assert f"{settings.users_topic} was not written with murmur2" in log
        assert f"will miss about {miss} (1 − 1/{settings.partitions}) of lookups" in log
        assert "guard_policy=warn, so the worker goes on" in log
        assert worker.proc is not None and worker.proc.poll() is None
    finally:
        assert worker.stop() == 0, worker.tail()


def test_fail_policy_stops_the_worker_with_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    settings = isolated(broker_settings, guard_policy="fail")
    ensure_topics(settings.bootstrap_servers, {settings.users_topic: settings.partitions - 2})
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    with pytest.raises(WorkerError, match=f"exited with code {REFUSED_EXIT_CODE}"):
        worker.start(timeout=90)
    log = worker.log()
    assert (
        f"Worker not started: guard_policy=fail: 1 co-partitioning problem(s): Can't join {settings.orders_topic} "
        f"with {settings.users_topic} since the number of partitions don't match: {settings.orders_topic} has "
        f"{settings.partitions} partitions, {settings.users_topic} has {settings.partitions - 2}."
    ) in log
    assert "Traceback" not in log
    worker.stop()
