"""`streamapp broker` and EmbeddedBroker: Apache Kafka in KRaft mode, started, ready, stopped, restarted.

Real JVMs: each test starts its own Apache Kafka node from jvm/lib/broker (the
session's shared broker is used only where a port must already be taken).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamapp.kafka.admin import TopicError, describe, ensure_topics
from streamapp.kafka.broker import BrokerError, EmbeddedBroker, metadata_ok

pytestmark = pytest.mark.long


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_start_answers_metadata_and_stop_frees_the_port_and_temp_dir() -> None:
    broker = EmbeddedBroker().start()
    pid, port, data_dir = broker.pid, broker.port, broker.data_dir
    assert metadata_ok(broker.bootstrap)
    assert data_dir is not None and (data_dir / "kraft-log" / "meta.properties").is_file()
    ensure_topics(broker.bootstrap, {"created": 2})
    assert describe(broker.bootstrap, ["created"])["created"].partitions == 2
    broker.stop()
    assert not metadata_ok(broker.bootstrap, timeout=1.0)
    assert pid is not None and _gone(pid)
    assert not data_dir.exists()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_data_dir_survives_kill9_and_restart_on_the_same_port(tmp_path: Path) -> None:
    data = tmp_path / "kafka"
    first = EmbeddedBroker(data_dir=data).start()
    ensure_topics(first.bootstrap, {"kept": 3})
    port, cluster_id = first.port, first.cluster_id
    first.kill()
    assert data.is_dir()
    second = EmbeddedBroker(data_dir=data).start()  # port 0: the data dir's own port is reused
    try:
        assert second.port == port and second.cluster_id == cluster_id
        assert describe(second.bootstrap, ["kept"])["kept"].partitions == 3
    finally:
        second.stop()
    assert data.is_dir(), "a data dir the user gave is never removed"


def test_data_dir_of_another_cluster_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "kafka"
    with EmbeddedBroker(data_dir=data) as broker:
        cluster_id = broker.cluster_id
    with pytest.raises(BrokerError, match=f"formatted for cluster id {cluster_id}, not AAAAAAAAAAAAAAAAAAAAAA"):
        EmbeddedBroker(data_dir=data, cluster_id="AAAAAAAAAAAAAAAAAAAAAA").start()


def test_data_dir_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(BrokerError, match="is a file, not a directory"):
        EmbeddedBroker(data_dir=tmp_path / "file").start()


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            EmbeddedBroker(port=port).start()


def test_missing_jars_name_the_make_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMAPP_JVM_LIB", str(tmp_path / "no-jars"))
    with pytest.raises(BrokerError, match=r"the broker jars are not installed in .*no-jars/broker: run `make install`"):
        EmbeddedBroker().start()


def test_old_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake JAVA_HOME whose java reports 11, as `java -version` prints it."""
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "java"
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(BrokerError, match="is Java 11; Java 17 or newer is required"):
        EmbeddedBroker().start()


def _start_cli(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamapp", "broker", "--port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("Apache Kafka ready on 127.0.0.1:"), line or proc.communicate(timeout=30)[1]
    bootstrap = line.split()[4]
    exports = [proc.stdout.readline() for _ in range(2)]
    assert exports[1].strip() == f"export STREAMAPP_BOOTSTRAP_SERVERS={bootstrap}"
    return proc, bootstrap


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_prints_exports_and_stops_cleanly(signum: int) -> None:
    proc, bootstrap = _start_cli()
    assert metadata_ok(bootstrap)
    proc.send_signal(signum)
    assert proc.wait(30) == 0
    assert "its data is removed" in proc.stdout.read()
    assert not metadata_ok(bootstrap, timeout=1.0)


def test_cli_exits_nonzero_when_its_broker_dies() -> None:
    proc, bootstrap = _start_cli()
    java_pid = int(subprocess.run(["pgrep", "-P", str(proc.pid), "java"], capture_output=True, text=True).stdout.split()[0])
    os.kill(java_pid, signal.SIGKILL)
    assert proc.wait(30) == 2
    assert proc.stderr.read().strip().startswith(f"streamapp broker: Apache Kafka on {bootstrap} exited by itself")


def test_kill9_of_the_cli_takes_its_broker_down() -> None:
    proc, bootstrap = _start_cli()
    java_pid = int(subprocess.run(["pgrep", "-P", str(proc.pid), "java"], capture_output=True, text=True).stdout.split()[0])
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 10
    while not _gone(java_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(java_pid), "the broker outlived its killed wrapper"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "--port 99999: a port is between 0 and 65535 (0 picks a free one)"),
        (["--port", "-1"], "--port -1: a port is between 0 and 65535 (0 picks a free one)"),
        (["--host", "999.1.1.1"], "--host '999.1.1.1': cannot listen there"),
    ],
)
def test_cli_bad_address_is_one_line(args: list[str], message: str) -> None:
    result = subprocess.run([sys.executable, "-m", "streamapp", "broker", *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(f"streamapp broker: {message}")


def test_cli_port_in_use_exits_2_with_one_line(bootstrap: str) -> None:
    port = bootstrap.rsplit(":", 1)[1]
    result = subprocess.run(
        [sys.executable, "-m", "streamapp", "broker", "--port", port], capture_output=True, text=True, timeout=60
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


def test_cluster_ids_never_start_with_a_dash() -> None:
    """One fresh start in 64 failed: StorageTool read an id starting with '-' as an option."""
    from streamapp.kafka.broker import _cluster_id

    ids = [_cluster_id() for _ in range(5_000)]
    assert not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids) and len(set(ids)) == len(ids)


def test_a_cluster_id_starting_with_a_dash_still_formats(tmp_path: Path) -> None:
    """A user's own id may start with '-': it is passed as --cluster-id=<id>, so StorageTool takes it."""
    with EmbeddedBroker(data_dir=tmp_path / "kafka", cluster_id="-AAAAAAAAAAAAAAAAAAAAA") as broker:
        assert broker.cluster_id == "-AAAAAAAAAAAAAAAAAAAAA"
        assert metadata_ok(broker.bootstrap)


def test_topics_keep_records_whatever_their_timestamps(bootstrap: str, new_topic) -> None:
    """The node keeps records stamped in 1970 (as tests and replayed demo data are): a topic's retention.ms is -1.

    Kafka's default (7 days) deleted such records at its next 5-minute check, mid-session: the reconciliation's
    reader then found its planned offsets gone.
    """
    from confluent_kafka.admin import AdminClient, ConfigResource

    name = new_topic("retention", partitions=1)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["retention.ms"].value == "-1"
