"""The pre-flight's other verdicts (streamapp.kafka.security.check_access); the three first met are in test_security_failures.

A TLS client on the plaintext broker's port, a certificate that does not name
the host (a stdlib TLS server with a certificate made by openssl for another
name), and a server that cannot be reached, which is left to the client to report.
"""
from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from streamapp.kafka.broker import free_port
from streamapp.kafka.security import KafkaSecurityError, check_access
from streamapp.settings import KafkaAccess


def test_a_tls_client_on_a_plaintext_port(bootstrap: str) -> None:
    with pytest.raises(KafkaSecurityError) as refused:
        check_access(KafkaAccess(bootstrap, "SSL"))
    assert str(refused.value) == (f"security_protocol=SSL: the broker at {bootstrap} does not speak TLS on that port; "
                                  f"check security_protocol (PLAINTEXT or SASL_PLAINTEXT?) and the port")


def test_plaintext_on_the_plaintext_broker_passes(bootstrap: str) -> None:
    check_access(KafkaAccess(bootstrap))


def test_nobody_listening_is_left_to_the_client() -> None:
    check_access(KafkaAccess(f"127.0.0.1:{free_port()}", "SSL"))


def openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def tls_server_for_another_name(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A TLS server on 127.0.0.1 whose certificate (signed by a throw-away CA) names only elsewhere.invalid."""
    openssl(tmp_path, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl(tmp_path, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=elsewhere.invalid",
            "-keyout", "server.key", "-out", "server.csr")
    (tmp_path / "ext.cnf").write_text("subjectAltName=DNS:elsewhere.invalid\n", encoding="utf-8")
    openssl(tmp_path, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "1", "-extfile", "ext.cnf", "-out", "server.crt")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            try:
                with context.wrap_socket(sock, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                sock.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}", tmp_path / "ca.pem"
    stop.set()
    listener.close()


def test_a_certificate_for_another_host(tls_server_for_another_name: tuple[str, Path]) -> None:
    server, ca = tls_server_for_another_name
    with pytest.raises(KafkaSecurityError) as refused:
        check_access(KafkaAccess(server, "SSL", cafile=str(ca)))
    assert str(refused.value).startswith(
        f"ssl_check_hostname: the certificate of the broker at {server} does not name 127.0.0.1 (")
    assert str(refused.value).endswith("connect by a name it lists, or set ssl_check_hostname=false")
    check_access(KafkaAccess(server, "SSL", cafile=str(ca), check_hostname=False))  # then it is trusted
