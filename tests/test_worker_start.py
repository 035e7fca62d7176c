"""`faust -A streamapp worker` reaches "Worker ready" on Apache Kafka, and a bad setting is one line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streamapp.broker import free_port
from streamapp.settings import Settings
from streamapp.worker_process import WorkerProcess, settings_env


def test_worker_reaches_ready(broker_settings: Settings, tmp_path: Path) -> None:
    settings = broker_settings.replace(web_port=free_port())
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=90)
    try:
        assert "Worker ready" in worker.log()
        assert worker.proc is not None and worker.proc.poll() is None
    finally:
        assert worker.stop() == 0, worker.tail()


def test_bad_setting_stops_the_worker_with_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    env = {**os.environ, **settings_env(broker_settings), "STREAMAPP_PARTITIONER": "no_such_partitioner"}
    result = subprocess.run([sys.executable, "-m", "faust", "-A", "streamapp", "worker"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "streamapp worker: unknown partitioner 'no_such_partitioner'" in result.stderr
    assert "Traceback" not in result.stderr
