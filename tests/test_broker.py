"""The embedded broker: start, ready, stop, and the two errors users hit (port taken, binary missing)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamapp.broker import BrokerError, EmbeddedBroker, metadata_ok
from streamapp.topics import TopicError, describe, ensure_topics


def test_start_answers_metadata_and_stop_frees_the_port() -> None:
    broker = EmbeddedBroker().start()
    pid, port = broker.pid, broker.port
    assert metadata_ok(broker.bootstrap)
    broker.stop()
    assert not metadata_ok(broker.bootstrap, timeout=1.0)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_context_manager_stops_on_exit() -> None:
    with EmbeddedBroker() as broker:
        pid = broker.pid
        assert metadata_ok(broker.bootstrap)
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            EmbeddedBroker(port=port).start()


def test_missing_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMAPP_TANSU_BIN", str(tmp_path / "no-such-tansu"))
    with pytest.raises(BrokerError, match="no-such-tansu.*is not an executable file"):
        EmbeddedBroker().start()


def test_cli_prints_bootstrap_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamapp", "broker", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert "ready on 127.0.0.1:" in line
    bootstrap = line.rsplit(" ", 1)[-1].strip()
    assert metadata_ok(bootstrap)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert "its data is gone" in proc.stdout.read()
    assert not metadata_ok(bootstrap, timeout=1.0)


def test_cli_port_in_use_exits_2_with_one_line(bootstrap: str) -> None:
    port = bootstrap.rsplit(":", 1)[1]
    result = subprocess.run(
        [sys.executable, "-m", "streamapp", "broker", "--port", port], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"streamapp broker: port {port} on 127.0.0.1 is already in use: stop what is listening there "
        "or choose another port (--port 0 picks a free one)"
    )


def test_topics_are_created_explicitly_with_the_requested_count(bootstrap: str, new_topic) -> None:
    name = new_topic("explicit", partitions=3)
    assert describe(bootstrap, [name])[name].partitions == 3
    with pytest.raises(TopicError, match=f"{name} has 3 partitions, expected 6"):
        ensure_topics(bootstrap, {name: 6})
