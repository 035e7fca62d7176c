"""``streamapp demo``: the whole pipeline on the embedded broker, started and stopped by us."""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from ..broker import EmbeddedBroker, free_port
from ..settings import Settings
from ..worker_process import WorkerProcess


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("demo", help="run the demo end to end on the embedded broker")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="streamapp-demo-") as tmp, EmbeddedBroker() as broker:
        print(f"Embedded broker ready on {broker.bootstrap} (pid {broker.pid})", flush=True)
        demo_settings = broker.settings(settings).replace(data_dir=str(Path(tmp) / "data"), web_port=free_port())
        with WorkerProcess(demo_settings, Path(tmp) / "worker.log") as worker:
            print(f"Worker ready (pid {worker.proc.pid}) after {time.monotonic() - started:.1f}s", flush=True)
        print("Worker stopped; broker stopping.", flush=True)
    print(f"Demo finished in {time.monotonic() - started:.1f}s", flush=True)
    return 0
