"""The failures a user meets first on a secured cluster, for each kind of client streamapp runs (issue 20).

On the SASL_SSL ``secured_broker``: a wrong password, a CA that did not sign the
broker's certificate, and a plaintext client on the TLS port.  Each is tried with
the CLI (librdkafka), the reconciliation job (before Spark starts), Kafka Streams
(before its JVM starts) and the Faust worker: exit 2 and one line naming the
setting to check, no traceback, never the password.  Left alone, librdkafka
retries for ever, aiokafka says only "Unable to bootstrap" and the JVM clients
wait out a timeout of a minute or more (docs/research/secured-clusters.md).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from streamapp.kafka.admin import describe
from streamapp.kafka.broker import CLIENT_PASSWORD_FILE, BrokerError, EmbeddedBroker, free_port

#: Bounds a run that should fail at once; reaching it fails the test (a hang), it is not a timing claim.
HANG = 240
WRONG = "not-the-password-0123456789"


def other_ca(directory: Path) -> Path:
    """A CA that signed nothing of the broker's, made with openssl like the broker's own."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other-ca",
                    "-keyout", str(directory / "other.key"), "-out", str(directory / "other-ca.pem")],
                   check=True, capture_output=True, timeout=60)
    return directory / "other-ca.pem"


CASES: dict[str, tuple[Callable[[Path], dict[str, str | None]], str]] = {
    "wrong password": (lambda tmp: {"STREAMAPP_SASL_PASSWORD_FILE": None, "STREAMAPP_SASL_PASSWORD": WRONG},
                       "sasl_password: the broker at {server} refused user 'streamapp' with SCRAM-SHA-512"),
    "unknown CA": (lambda tmp: {"STREAMAPP_SSL_CAFILE": str(other_ca(tmp))},
                   "ssl_cafile: the certificate of the broker at {server} is not signed by a CA in ssl_cafile="),
    "plaintext client on the TLS port": (
        lambda tmp: {"STREAMAPP_SECURITY_PROTOCOL": "PLAINTEXT", "STREAMAPP_SSL_CAFILE": None,
                     "STREAMAPP_SASL_USERNAME": None, "STREAMAPP_SASL_PASSWORD_FILE": None},
        "security_protocol=PLAINTEXT: the broker at {server} speaks TLS on that port"),
}

#: Each kind of client: its command and the prefix of its one error line.
CLIENTS = {
    "cli (librdkafka)": (["-m", "streamapp", "topics", "list"], "streamapp topics: "),
    "doctor (librdkafka)": (["-m", "streamapp", "doctor"], "streamapp doctor: "),
    "reconcile (Spark)": (["-m", "spark_batch.reconcile", "--date", "2026-01-01"], "reconcile: error: "),
    "kafka streams (JVM)": (["-m", "streamapp", "ksql-equivalent"], "streamapp ksql-equivalent: "),
}


def environment(broker: EmbeddedBroker, tmp: Path, changes: dict[str, str | None]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMAPP_")}
    env.update(broker.env())
    env.update({"STREAMAPP_DATA_DIR": str(tmp / "data"), "STREAMAPP_WEB_PORT": str(free_port()),
                "STREAMAPP_APP_ID": "secured-failure"})
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("case", CASES)
def test_one_line_naming_the_setting_exit_2(secured_broker: EmbeddedBroker, tmp_path: Path, case: str, client: str) -> None:
    make_changes, expected = CASES[case]
    argv, prefix = CLIENTS[client]
    env = environment(secured_broker, tmp_path, make_changes(tmp_path))
    done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=HANG,
                          cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, len(lines)) == (2, 1), done.stderr[-2000:]
    assert lines[0].startswith(prefix + expected.format(server=secured_broker.bootstrap)), lines[0]
    password = secured_broker.access.password
    assert password not in done.stdout + done.stderr and WRONG not in done.stdout + done.stderr


@pytest.mark.parametrize("case", CASES)
def test_the_worker_stops_with_one_line_naming_the_setting(secured_broker: EmbeddedBroker, tmp_path: Path, case: str) -> None:
    make_changes, expected = CASES[case]
    env = environment(secured_broker, tmp_path, make_changes(tmp_path))
    done = subprocess.run([sys.executable, "-m", "faust", "-A", "streamapp", "worker", "-l", "info",
                           "--web-port", env["STREAMAPP_WEB_PORT"]],
                          env=env, capture_output=True, text=True, timeout=HANG, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-3000:]
    line = "Worker not started: " + expected.format(server=secured_broker.bootstrap)
    assert line in output and "Traceback" not in output, output[-3000:]
    assert secured_broker.access.password not in output and WRONG not in output


def test_a_data_dir_is_started_the_way_it_was_first_started(tmp_path: Path) -> None:
    """A directory formatted without SCRAM users cannot start secured (no JVM starts: refused before)."""
    (tmp_path / "kraft-log").mkdir()
    (tmp_path / "kraft-log" / "meta.properties").write_text("cluster.id=AAAAAAAAAAAAAAAAAAAAAA\n", encoding="utf-8")
    (tmp_path / "streamapp-broker.json").write_text(json.dumps({"port": free_port(), "secured": False}), encoding="utf-8")
    with pytest.raises(BrokerError) as refused:
        EmbeddedBroker(data_dir=tmp_path, secured=True).start()
    assert str(refused.value) == (f"--data-dir {tmp_path}: first started without --secured; "
                                  f"start it the same way or use another directory")


def test_streamapp_broker_secured_prints_the_client_exports_and_restarts_with_its_users(tmp_path: Path) -> None:
    """Broker lifecycle: ``streamapp broker --secured`` prints the export lines (CA and password file included);
    a client configured by exactly those lines works; a restart on the data dir reuses the users, CA and secrets."""
    proc = subprocess.Popen([sys.executable, "-m", "streamapp", "broker", "--port", "0", "--secured", "--data-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert ready.startswith("Apache Kafka ready on 127.0.0.1:"), ready or proc.communicate(timeout=60)[1]
        assert proc.stdout.readline().strip() == "Point streamapp at it with:"
        exports = dict(proc.stdout.readline().strip().removeprefix("export ").split("=", 1) for _ in range(6))
        assert exports == {
            "STREAMAPP_BOOTSTRAP_SERVERS": ready.split()[4], "STREAMAPP_SECURITY_PROTOCOL": "SASL_SSL",
            "STREAMAPP_SASL_MECHANISM": "SCRAM-SHA-512", "STREAMAPP_SASL_USERNAME": "streamapp",
            "STREAMAPP_SASL_PASSWORD_FILE": str(tmp_path.resolve() / CLIENT_PASSWORD_FILE),
            "STREAMAPP_SSL_CAFILE": str(tmp_path.resolve() / "ca.pem"),
        }
        others = [proc.stdout.readline().rstrip("\n") for _ in range(5)]
        assert others[0] == "Also SASL_SSL with SCRAM-SHA-256, PLAIN, and other listeners:"
        assert [line.split()[1] for line in others[1:]] == ["SASL_PLAINTEXT", "SSL", "SSL", "SSL,"]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("STREAMAPP_")}, **exports}
        created = subprocess.run([sys.executable, "-m", "streamapp", "topics", "create", "kept", "--partitions", "2"],
                                 env=env, capture_output=True, text=True, timeout=HANG)
        assert created.returncode == 0, created.stderr
    finally:
        proc.terminate()
        proc.wait(HANG)
    assert proc.returncode == 0
    for name in ("broker-keystore.pem", "ca.key", CLIENT_PASSWORD_FILE, "broker.password", "server.properties",
                 "client.key", "wrong-host-keystore.pem"):
        assert oct((tmp_path / name).stat().st_mode & 0o777) == "0o600", name
    with EmbeddedBroker(heap="256m", data_dir=tmp_path, secured=True) as again:
        assert str(again.access) == exports["STREAMAPP_BOOTSTRAP_SERVERS"]
        assert again.other_listeners() == others  # the same ports, certificates and files
        assert describe(again.listener_access("MTLS"), ["kept"])["kept"].partitions == 2
        assert describe(again.access, ["kept"])["kept"].partitions == 2
