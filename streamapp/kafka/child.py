"""Child processes streamapp starts and owns: the broker's JVM, the Kafka Streams JVM.

One place for what each needs: its own session (Ctrl-C in a terminal reaches
us, not it), death with its parent even by kill -9, its output drained into a
bounded buffer, SIGTERM then SIGKILL after a timeout, and "run until a signal
or until the child dies" for the CLI commands that wrap one.
"""
from __future__ import annotations

import ctypes
import signal
import subprocess
import threading
from collections import deque
from types import TracebackType
from typing import Callable, Sequence

from ..errors import StreamappError

STOP_TIMEOUT = 20.0
LOG_LINES = 400


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the process that started us dies (even by kill -9)."""
    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the child then outlives a killed parent


class ChildProcess:
    """Base of a class that runs one child: subclasses call :meth:`_spawn` and may override the hooks."""

    _proc: subprocess.Popen[bytes] | None = None
    _drainer: threading.Thread | None = None
    _lines: deque[str] | None = None

    @property
    def log_lines(self) -> deque[str]:
        """The child's last lines of output, for error messages."""
        if self._lines is None:
            self._lines = deque(maxlen=LOG_LINES)
        return self._lines

    def tail(self, lines: int = 15) -> str:
        """The child's last ``lines`` lines of output, as one text (the worker's :meth:`WorkerProcess.tail` too)."""
        return "\n".join(list(self.log_lines)[-lines:])

    def _spawn(self, cmd: Sequence[str]) -> None:
        self._proc = subprocess.Popen(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=die_with_parent,
        )
        self._drainer = threading.Thread(target=self._drain, args=(self._proc,), daemon=True)
        self._drainer.start()

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip()
            self.log_lines.append(line)
            self._on_line(line)

    def _on_line(self, line: str) -> None:
        """Called for each line the child prints (after it is kept in ``log_lines``)."""

    def _after_stop(self) -> None:
        """Called once the child is gone, by :meth:`stop`: remove what only it needed."""

    def _exited(self) -> bool:
        """True when the child has exited; its output is then read to the end."""
        if self._proc is not None and self._proc.poll() is None:
            return False
        if self._drainer is not None:
            self._drainer.join(STOP_TIMEOUT)
        return True

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the child exits (or ``timeout``); its exit status, or None if still running."""
        proc = self._proc
        if proc is None:
            return None
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(STOP_TIMEOUT)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (the child's own clean shutdown), SIGKILL only after ``timeout``."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        self._after_stop()

    def start(self) -> "ChildProcess":
        raise NotImplementedError

    def __enter__(self) -> "ChildProcess":
        return self.start() if self._proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stop_on_signals() -> threading.Event:
    """For a CLI command, before it starts its child: an event set by SIGINT or SIGTERM."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def run_until(child: ChildProcess, stop: threading.Event, died: Callable[[int], StreamappError]) -> None:
    """Return once ``stop`` is set; raise ``died(status)`` (a one-line error) if the child exits first."""
    while not stop.is_set():
        status = child.wait(0.5)
        if status is not None:
            raise died(status)
