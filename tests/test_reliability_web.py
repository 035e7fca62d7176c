"""The worker's web views under hostile input: fuzzed paths, query strings and methods against a running worker.

Real ``faust -A streamapp worker`` on Apache Kafka, real HTTP over
loopback (``http.client``, so paths reach the server byte for byte, without a
client normalising them).  The views have no OpenAPI description, so hypothesis
generates the requests: every route template with hostile segments (percent
escapes of any Unicode, invalid UTF-8, ``..``, overlong keys) and every query
parameter with hostile values.  Properties: never a 5xx, errors are JSON; the
token is enforced on every non-public path; the server binds loopback only by
default; Faust's raw table blueprint is absent unless opted in.
"""
from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamapp.kafka.broker import EmbeddedBroker
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from streamapp.worker.web.security import is_public

from workerkit import isolated, make_dataset, produce, wait_for_users, worker_settings

TOKEN = "reliability-token-9f2c"
#: aiohttp's default ``max_line_size``: a longer request line is refused by its HTTP parser (a plain-text 400),
#: before any middleware runs, so only shorter ones can get streamapp's JSON errors.
MAX_REQUEST_LINE = 8190
FUZZ = settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Worker:
    def __init__(self, process: WorkerProcess, user_ids: list[str]) -> None:
        self.process = process
        self.port = process.settings.web_port
        self.user_ids = user_ids

    def request(self, method: str, path: str, token: str | None = TOKEN) -> tuple[int, str, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            if token is not None:
                conn.putheader("Authorization", f"Bearer {token}")
            conn.endheaders()
            response = conn.getresponse()
            return response.status, response.getheader("Content-Type") or "", response.read()
        finally:
            conn.close()


def start(settings: Settings, tmp: Path, name: str, users: int) -> Worker:
    dataset = make_dataset(users=users, orders=0, seed=users)
    process = WorkerProcess(worker_settings(settings, tmp, name), tmp / f"{name}.log").start(timeout=120)
    produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
    wait_for_users([process], users, timeout=120)
    worker = Worker(process, list(dataset.users))
    for user_id in worker.user_ids:  # until the assignment is known to the web views (no more 503s)
        for _ in range(100):
            if worker.request("GET", f"/tables/demo_user/{user_id}")[0] == 200:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"/tables/demo_user/{user_id} never answered 200: {process.tail()}")
    return worker


@pytest.fixture(scope="module")
def worker(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    tmp = tmp_path_factory.mktemp("rel-web")
    settings = isolated(broker.settings(Settings()), "web", web_token=TOKEN, data_dir=str(tmp / "data"))
    running = start(settings, tmp, "w", users=30)
    try:
        yield running
    finally:
        assert running.process.stop() == 0, running.process.tail()


hostile_text = st.one_of(
    st.text(max_size=40).map(lambda t: quote(t, safe="")),
    st.text(max_size=5000, alphabet="ab%"),
    st.sampled_from(["", "%", "%zz", "%ff%fe", "%00", "..", "%2e%2e", "%2F", "a/../../etc/passwd", "{}", "|\\^`\"<>",
                     "%C0%AF", "%ED%A0%80", "x" * 5000, "00ff", "-1", "9" * 40, "1e3", "%207", "+7", "0x10", "NaN"]),
)
PARAMS = ("partition", "partitions", "limit", "after", "table", "encoding", "scope", "key", "x")
TEMPLATES = ("/users/{}", "/users", "/tables", "/tables/{}", "/tables/demo_user/{}", "/tables/demo_user_repartition",
             "/tables/{}/{}", "/partition/{}", "/copartition", "/stats", "/", "/{}", "/table/{}", "/router/{}",
             "/static/{}", "/{}/{}", "/users/{}/{}", "//users//{}", "/favicon.ico", "/table/demo_user/{}/")


@st.composite
def requests(draw: st.DrawFn) -> str:
    template = draw(st.sampled_from(TEMPLATES))
    path = template.format(*(draw(hostile_text) for _ in range(template.count("{}"))))
    params = draw(st.dictionaries(st.sampled_from(PARAMS), hostile_text, max_size=4))
    if draw(st.booleans()):
        params.setdefault("encoding", draw(st.sampled_from(["hex", "utf-8", "HEX", "base64"])))
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return path + ("?" + query if query else "")


def too_long(method: str, target: str) -> bool:
    return len(f"{method} {target} HTTP/1.1") > MAX_REQUEST_LINE


def path_of(target: str) -> str:
    return target.split("?", 1)[0]


@FUZZ
@given(target=requests())
def test_no_5xx_and_errors_are_json(worker: Worker, target: str) -> None:
    status, content_type, body = worker.request("GET", target)
    assert status < 500, (target, status, body[:300])
    if too_long("GET", target):
        assert status in (400, 414), (status, body[:300])
    elif status >= 400:
        assert content_type.startswith("application/json"), (target, status, content_type)
        error = json.loads(body)
        assert error["status"] == status and isinstance(error["error"], str), (target, error)
        assert "Traceback (most recent call last)" not in error["error"], (target, error["error"][:300])


@FUZZ
@given(target=requests(), token=st.sampled_from([None, "", "wrong", TOKEN + "x", TOKEN[:-1], TOKEN.upper()]),
       method=st.sampled_from(["GET", "HEAD", "OPTIONS"]))
def test_token_enforced_on_every_non_public_path(worker: Worker, target: str, token: str | None, method: str) -> None:
    status, content_type, body = worker.request(method, target, token)
    assert status < 500, (target, status, body[:300])
    if too_long(method, target):
        assert status in (400, 414) and TOKEN.encode() not in body, (status, body[:300])
    elif not is_public(path_of(target)):
        assert status == 401, (method, target, token, status, body[:300])
    else:
        assert not content_type.startswith("application/json") or status >= 400, (target, body[:300])


@FUZZ
@given(target=requests(), method=st.sampled_from(["POST", "PUT", "DELETE", "PATCH", "TRACE", "PROPFIND"]))
def test_every_writing_method_is_refused(worker: Worker, target: str, method: str) -> None:
    status, _, body = worker.request(method, target)
    if too_long(method, target):
        assert status in (400, 414), (status, body[:200])
    else:
        assert status == 405 and b"read-only" in body, (method, target, status, body[:200])


def test_token_gives_the_data_and_nothing_else_does(worker: Worker) -> None:
    user_id = worker.user_ids[0]
    status, _, body = worker.request("GET", f"/tables/demo_user/{user_id}")
    assert status == 200 and json.loads(body)["tables"]["demo_user"]["found"], body[:300]
    for token in (None, "", TOKEN.upper(), "Bearer " + TOKEN):
        status, _, body = worker.request("GET", f"/tables/demo_user/{user_id}", token)
        assert status == 401 and user_id.encode() not in body


def listening_addresses(process: WorkerProcess, port: int) -> set[str]:
    assert process.proc is not None
    conns = psutil.Process(process.proc.pid).net_connections(kind="inet")
    return {c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


def other_local_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent, the route picks the interface
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_default_bind_is_loopback_only(worker: Worker) -> None:
    assert Settings().web_host == "127.0.0.1" and Settings.from_env({}).web_host == "127.0.0.1"
    assert listening_addresses(worker.process, worker.port) == {"127.0.0.1"}
    address = other_local_address()
    for host in filter(None, ("127.0.0.2", address)):
        with socket.socket() as sock, pytest.raises(OSError):
            sock.settimeout(3)
            sock.connect((host, worker.port))


def test_raw_table_blueprint_only_with_opt_in(worker: Worker, broker: EmbeddedBroker, tmp_path: Path) -> None:
    for path in ("/table/", "/table/demo_user/", f"/table/demo_user/{worker.user_ids[0]}/"):
        status, _, body = worker.request("GET", path)
        assert status == 404 and b'"NAME"' not in body and b"User " not in body, (path, status, body[:300])
    settings = isolated(broker.settings(Settings()), "webopt", web_token=TOKEN, web_table_blueprint=True)
    opted = start(settings, tmp_path, "opt", users=3)
    try:
        status, _, body = opted.request("GET", "/table/")
        assert status == 200 and b"demo_user" in body, (status, body[:300])
        assert opted.request("GET", "/table/", None)[0] == 401
    finally:
        assert opted.process.stop() == 0, opted.process.tail()
