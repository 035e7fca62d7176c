"""`faust -A streamapp worker` reaches "Worker ready" on Apache Kafka, and a bad setting is one line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from streamapp.kafka.admin import broker_configs
from streamapp.kafka.broker import free_port
from streamapp.settings import Settings
from streamapp.worker.app import GEN0_THRESHOLD
from streamapp.worker.preflight import SESSION_BOUNDS
from streamapp.worker.process import WorkerProcess, settings_env


def test_worker_reaches_ready(broker_settings: Settings, tmp_path: Path) -> None:
    """Ready is when the worker says so (``/health``): its partitions held and its tables recovered; then it
    froze the start's objects (``app.freeze_heap``: full collections no longer walk them)."""
    settings = broker_settings.replace(web_port=free_port())
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=90)
    try:
        health = worker.get("/health").json()
        assert (health["healthy"], health["ready"]) == (True, True)
        assert worker.proc is not None and worker.proc.poll() is None
    finally:
        assert worker.stop() == 0, worker.tail()
    frozen = re.search(r"Garbage collector: ([\d,]+) objects alive once ready frozen .* every ([\d,]+) allocations",
                       worker.log())
    assert frozen is not None, worker.tail()
    assert (int(frozen[1].replace(",", "")) > 10_000, int(frozen[2].replace(",", ""))) == (True, GEN0_THRESHOLD)


def test_bad_setting_stops_the_worker_with_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    env = {**os.environ, **settings_env(broker_settings), "STREAMAPP_PARTITIONER": "no_such_partitioner"}
    result = subprocess.run([sys.executable, "-m", "faust", "-A", "streamapp", "worker"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "streamapp worker: unknown partitioner 'no_such_partitioner'" in result.stderr
    assert "Traceback" not in result.stderr


def _run_worker(settings: Settings, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings_env(settings), **extra}
    return subprocess.run([sys.executable, "-m", "faust", "-A", "streamapp", "worker", "-l", "info"], env=env,
                          capture_output=True, text=True, timeout=timeout)


def _refused(result: subprocess.CompletedProcess[str], line: str) -> None:
    """Exit 2, the one line, and no traceback, whichever stream Faust logged to."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-2000:]
    assert f"Worker not started: {line}" in output
    assert "Traceback" not in output


def test_web_host_that_is_not_an_address_is_one_line(broker_settings: Settings) -> None:
    result = _run_worker(broker_settings.replace(web_host="0.0.0.0.0", web_port=free_port()))
    _refused(result, "STREAMAPP_WEB_HOST='0.0.0.0.0': not an address this machine has")


def test_web_port_in_use_is_one_line(broker_settings: Settings) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_worker(broker_settings.replace(web_port=port))
    _refused(result, f"STREAMAPP_WEB_PORT={port}: already in use on 127.0.0.1")


def test_data_dir_that_is_a_file_is_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    result = _run_worker(broker_settings.replace(data_dir=str(tmp_path / "a-file"), web_port=free_port()))
    _refused(result, f"STREAMAPP_DATA_DIR='{tmp_path / 'a-file'}': is a file, not a directory")


def test_a_user_partitioner_that_answers_no_partition_is_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    """Tried on a key before the worker reads a record: it would fail at the first output otherwise."""
    (tmp_path / "team_partitioner.py").write_text("def place(key, n):\n    return n\n")
    settings = broker_settings.replace(partitioner="team_partitioner:place", data_dir=str(tmp_path / "data"),
                                       web_port=free_port())
    result = _run_worker(settings, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    _refused(result, "STREAMAPP_PARTITIONER='team_partitioner:place': partitioner 'team_partitioner:place' returned "
                     f"{settings.partitions} for key b'streamapp-preflight': a partition of {settings.partitions} "
                     f"partitions is an int from 0 to {settings.partitions - 1}")


def test_a_session_timeout_the_brokers_refuse_is_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    """Below the brokers' group.min.session.timeout.ms (6 s, Kafka's default) every join is refused, and the worker
    asked again for ever; the brokers' own bounds are read."""
    settings = broker_settings.replace(broker_session_timeout=0.5, data_dir=str(tmp_path / "data"),
                                       web_port=free_port())
    assert broker_configs(settings.kafka, SESSION_BOUNDS) == {"group.min.session.timeout.ms": "6000",
                                                             "group.max.session.timeout.ms": "1800000"}
    _refused(_run_worker(settings), f"STREAMAPP_BROKER_SESSION_TIMEOUT=0.5: the brokers at {settings.bootstrap_servers} "
                                    "take 6 to 1800 s (group.min.session.timeout.ms and group.max.session.timeout.ms)")


def test_kafka_out_of_reach_is_one_line(broker_settings: Settings, tmp_path: Path) -> None:
    """Nothing listens at the bootstrap servers: the topics cannot be looked up, and the worker says so."""
    nobody = f"127.0.0.1:{free_port()}"
    result = _run_worker(broker_settings.replace(bootstrap_servers=nobody, data_dir=str(tmp_path / "data"),
                                                 web_port=free_port()))
    output = result.stdout + result.stderr
    assert result.returncode == 3, output[-2000:]  # as when Kafka goes while it runs: a supervisor restarts it
    assert f"Worker not started: cannot reach the Kafka brokers at {nobody}" in output and "Traceback" not in output


def test_settings_kafka_would_refuse_are_one_line(broker_settings: Settings) -> None:
    for name, value, line in [
        ("STREAMAPP_BROKER_SESSION_TIMEOUT", "-1", "broker_session_timeout=-1.0: must be above 0 seconds"),
        ("STREAMAPP_REPLICATION_FACTOR", "0", "replication_factor=0: must be at least 1"),
        ("STREAMAPP_BOOTSTRAP_SERVERS", ":::", "bootstrap_servers=':::': ':::' is not host:port"),
    ]:
        env = {**os.environ, **settings_env(broker_settings), name: value}
        result = subprocess.run([sys.executable, "-m", "faust", "-A", "streamapp", "worker"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr[-2000:]
        assert f"streamapp worker: {line}" in result.stderr
        assert "Traceback" not in result.stderr
