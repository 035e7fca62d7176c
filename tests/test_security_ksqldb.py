"""ksqlDB's REST API with basic auth and its own CA (issue 20): the demo's client and its endpoint check.

ksqlDB cannot run here, so the server is the recorded-response replay of
tests/test_ksqldb.py (recorded from ksqlDB 0.29), once over plain HTTP to see the
credentials sent on both HTTP/1.1 and HTTP/2, once over https with a certificate
signed by a throw-away CA made with openssl (the secured broker's own code).
"""
from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from streamapp.demo.endpoints import check_http
from streamapp.demo.ksqldb import KsqlDBClient, KsqlDBError
from streamapp.kafka.broker import CA_FILE, KEYSTORE_FILE, make_secrets
from streamapp.kafka.security import ksqldb_http_options
from streamapp.settings import Settings
from test_ksqldb import Replay

BASIC = "Basic " + base64.b64encode(b"alice:s3cret-pw").decode()


def serve(server: Replay) -> Iterator[Replay]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def replay() -> Iterator[Replay]:
    yield from serve(Replay())


class HttpsReplay(Replay):
    """The replay behind TLS (HTTP/1.1 only: the h2c sniffing of the plain one needs the raw socket)."""

    def __init__(self, keystore: Path) -> None:
        super().__init__()
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(keystore)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        return self.context.wrap_socket(sock, server_side=True), address

    def finish_request(self, request: socket.socket, client_address: Any) -> None:
        self.RequestHandlerClass(request, client_address, self)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that refuses our certificate drops the connection: expected in one test


@pytest.fixture
def https(tmp_path: Path) -> Iterator[tuple[HttpsReplay, Path]]:
    make_secrets(tmp_path, "127.0.0.1")
    for server in serve(HttpsReplay(tmp_path / KEYSTORE_FILE)):
        yield server, tmp_path / CA_FILE


def test_basic_auth_is_sent_on_http1_and_http2(replay: Replay) -> None:
    settings = Settings(ksqldb_endpoint=replay.url, ksqldb_username="alice", ksqldb_password="s3cret-pw")
    with KsqlDBClient(replay.url, **ksqldb_http_options(settings)) as client:
        assert client.info()["serverStatus"] == "RUNNING"
        assert client.insert_rows("DEMO_USER_ORDERS", [{"user_id": "u1", "ts": 1}]) == 1
    assert [r["headers"].get("Authorization", r["headers"].get("authorization")) for r in replay.requests] == [BASIC, BASIC]
    assert check_http("ksqlDB", replay.url, "/info", **ksqldb_http_options(settings)).reachable
    assert replay.requests[-1]["headers"]["Authorization"] == BASIC


def test_no_credentials_no_header(replay: Replay) -> None:
    assert ksqldb_http_options(Settings()) == {}
    KsqlDBClient(replay.url).info()
    assert "Authorization" not in replay.requests[0]["headers"]


def test_https_with_its_own_ca(https: tuple[HttpsReplay, Path]) -> None:
    server, ca = https
    settings = Settings(ksqldb_endpoint=server.url, ksqldb_cafile=str(ca))
    assert KsqlDBClient(server.url, **ksqldb_http_options(settings)).info()["serverStatus"] == "RUNNING"
    with pytest.raises(KsqlDBError, match=r"^ksqlDB at https://127\.0\.0\.1:\d+ is unreachable \(.*\): "
                                          r".*CERTIFICATE_VERIFY_FAILED.*; check ksqldb_cafile$"):
        KsqlDBClient(server.url).info()  # the system's trust store does not know the throw-away CA


class Refusing(BaseHTTPRequestHandler):
    """ksqlDB with basic auth on, given no or wrong credentials: 401 and its JSON error."""

    def do_GET(self) -> None:
        body = json.dumps({"@type": "generic_error", "error_code": 40100, "message": "Unauthorized"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_refused_credentials_name_the_settings() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    for running in serve(server):  # type: ignore[arg-type]
        url = f"http://127.0.0.1:{running.server_address[1]}"
        settings = Settings(ksqldb_endpoint=url, ksqldb_username="alice", ksqldb_password="wrong-pw")
        with pytest.raises(KsqlDBError) as refused:
            KsqlDBClient(url, **ksqldb_http_options(settings)).info()
        assert str(refused.value) == ("ksqlDB rejected GET /info (HTTP 401, error 40100): Unauthorized; "
                                      "check ksqldb_username and ksqldb_password")
