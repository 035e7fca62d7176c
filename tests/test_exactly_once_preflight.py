"""No silent downgrade: ``processing_guarantee=exactly_once`` on a broker that cannot do transactions stops the
worker at start with one line and exit status 2; on one that can, the probe passes.

The broker that cannot is a real Apache Kafka node whose transaction state log
asks for 3 replicas on its 1 node (so its transaction coordinator never becomes
available): the only test here with a broker of its own, because the broker's
capability is what it is about.  The worker is the real ``faust -A streamapp worker``.
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings, env_name
from streamapp.worker.preflight import check_transactions
from streamapp.worker.process import settings_env

from workerkit import isolated


def test_a_broker_that_can_do_transactions_passes(broker_settings: Settings) -> None:
    asyncio.run(check_transactions(isolated(broker_settings, processing_guarantee="exactly_once")))


def test_a_broker_without_transactions_stops_the_worker_in_one_line(tmp_path: Path) -> None:
    config = {"transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2"}
    with EmbeddedBroker(heap="256m", config=config) as broker:
        settings = broker.settings(Settings()).replace(
            data_dir=str(tmp_path / "data"), processing_guarantee="exactly_once", app_id="no-transactions",
            web_port=free_port())
        run = subprocess.run([sys.executable, "-m", "faust", "-A", "streamapp", "worker", "-l", "info"],
                             env={**os.environ, **settings_env(settings)}, capture_output=True, text=True, timeout=180)
    output = run.stdout + run.stderr
    assert run.returncode == 2, output[-3000:]
    lines = [line for line in output.splitlines() if "Worker not started" in line]
    assert len(lines) == 1 and f"{env_name('processing_guarantee')}=exactly_once" in lines[0], output[-3000:]
    assert "did not start a transaction" in lines[0] and "Traceback" not in output, output[-3000:]
