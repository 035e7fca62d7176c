"""Run ``faust -A streamapp worker`` as a child process: for the demo and for tests.

The worker is configured the way a user would configure it, through
``STREAMAPP_*`` environment variables, so the child is exactly the product's
main process and not a test double.  It is ready when it says so itself: its
``/health`` answers ``"ready": true`` once it holds its partitions with its
tables recovered (the moment Faust logs "Worker ready"), not a line of its log.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import TracebackType

import httpx

from ..errors import StreamappError
from ..settings import Settings, env_name

#: Seconds between two asks of a starting worker.
ASK_EVERY = 0.2


class WorkerError(StreamappError):
    """The worker did not start or stopped unexpectedly; the message carries its last log lines."""


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child process see exactly ``settings``."""
    return {env_name(f.name): str(getattr(settings, f.name)) for f in fields(settings)}


@dataclass
class WorkerProcess:
    settings: Settings
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    def start(self, timeout: float = 120.0) -> "WorkerProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **settings_env(self.settings), **self.extra_env}
        cmd = [sys.executable, "-m", "faust", "-A", "streamapp", "worker", "-l", "info",
               "--web-host", self.settings.web_host, "--web-port", str(self.settings.web_port)]
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_ready(timeout)
        return self

    @property
    def url(self) -> str:
        return f"http://{self.settings.web_host}:{self.settings.web_port}"

    def get(self, path: str, timeout: float = 10.0) -> httpx.Response:
        """``GET path`` on the worker's web server, with the bearer token when one is set."""
        token = self.settings.web_token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(self.url + path, headers=headers, timeout=timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float) -> None:
        """Until the worker's ``/health`` says ``ready`` (whatever its status: 503 only says Kafka is away)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise WorkerError(f"the worker exited with code {self.proc.returncode}: {self.tail()}")
            try:
                if self.get("/health", timeout=2.0).json().get("ready"):
                    return
            except (httpx.TransportError, ValueError):  # not listening yet, or not JSON yet
                pass
            time.sleep(ASK_EVERY)
        raise WorkerError(f"the worker did not say it was ready within {timeout:.0f}s: {self.tail()}")

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def stop(self, timeout: float = 30.0) -> int | None:
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        self._log.close()
        return proc.returncode

    def wait_exit(self, timeout: float) -> int:
        """Until the worker exits by itself (a limit it keeps, such as ``output_failure_exit``): its exit status.

        WorkerError, with its last log lines, when it is still running after ``timeout`` seconds (it is left running).
        """
        proc = self.proc
        if proc is None:
            raise WorkerError("the worker was not started")
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise WorkerError(f"the worker was still running after {timeout:.0f}s: {self.tail()}") from None
        self.proc = None
        self._log.close()
        return code

    def kill(self) -> None:
        """kill -9: no clean shutdown, as in a crash."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(30)
            self.proc = None
            self._log.close()

    def __enter__(self) -> "WorkerProcess":
        return self.start() if self.proc is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
