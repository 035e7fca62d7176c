"""`faust -A streamapp worker` reaches "Worker ready" on the embedded broker."""
from __future__ import annotations

from pathlib import Path

from streamapp.broker import free_port
from streamapp.settings import Settings
from streamapp.worker_process import WorkerProcess


def test_worker_reaches_ready(embedded_settings: Settings, tmp_path: Path) -> None:
    settings = embedded_settings.replace(web_port=free_port())
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=90)
    try:
        assert "Worker ready" in worker.log()
        assert worker.proc is not None and worker.proc.poll() is None
    finally:
        assert worker.stop() == 0, worker.tail()
