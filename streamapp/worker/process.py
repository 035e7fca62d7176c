"""Run ``faust -A streamapp worker`` as a child process: for the demo and for tests.

The worker is configured the way a user would configure it, through
``STREAMAPP_*`` environment variables, so the child is exactly the product's
main process and not a test double.
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

from ..errors import StreamappError
from ..settings import Settings, env_name

READY_MARK = "Worker ready"


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
        self._offset = self.log_path.stat().st_size
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_for(READY_MARK, timeout)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log()[self._offset:]:
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise WorkerError(f"the worker exited with code {self.proc.returncode}: {self.tail()}")
            time.sleep(0.2)
        raise WorkerError(f"the worker did not log {text!r} within {timeout:.0f}s: {self.tail()}")

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
