"""The ksqlDB REST client, against RECORDED responses: ksqlDB cannot run on this machine.

No ksqlDB (a JVM server needing Kafka and Docker images) can be installed here,
so its answers are recorded in tests/recorded/ksqldb/*.json in the shapes the
ksqlDB REST API documents (/info, /ksql currentStatus entities, /query chunked
arrays, /inserts-stream acks, statement_error / generic_error bodies) and replayed
by a real local server that speaks HTTP/1.1 and, for /inserts-stream, HTTP/2
(h2c with prior knowledge, as ksqlDB's server does): the client's HTTP, chunked
and HTTP/2 streaming and error handling run for real.
"""
from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ConnectionTerminated, DataReceived, RequestReceived, StreamEnded

from streamapp.demo.data import generate, make_table
from streamapp.demo.ksqldb import (DELIMITED, KsqlDBClient, KsqlDBError, ksqldb_names, ksqldb_statements,
                                   schema_columns)
from streamapp.demo.producer import insert_rows
from streamapp.demo.report import Columns, join_rows_from_columns
from streamapp.demo.shape import shape
from streamapp.kafka.broker import free_port
from streamapp.settings import Settings
from streamapp.sql.syntax import parse
from streamapp.sql.topology import seed_text

RECORDED = Path(__file__).parent / "recorded" / "ksqldb"


def load_recordings() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(RECORDED.glob("*.json"))]


#: What an HTTP/2 client with prior knowledge sends first.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Replay(ThreadingHTTPServer):
    """Replays the recordings: HTTP/1.1 through :class:`ReplayHandler`, HTTP/2 (``/inserts-stream``) with h2."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ReplayHandler)
        self.recordings = load_recordings()
        self.requests: list[dict[str, Any]] = []
        #: Set when a recording's held-open response may end (its ``hold_open``): at the fixture's teardown.
        self.released = threading.Event()
        #: Whether a held-open response ended because no client stopped reading it within 60 s.
        self.held_out = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def match(self, method: str, path: str, statement: str) -> dict[str, Any] | None:
        """The one recording whose request matches; two matching would make the replay ambiguous."""
        candidates = [
            r for r in self.recordings
            if r["request"]["method"] == method and r["request"]["path"] == path
            and re.match(r["request"].get("ksql_match", ""), statement)
        ]
        assert len(candidates) <= 1, f"recordings overlap for {statement!r}: {[r['description'] for r in candidates]}"
        return candidates[0] if candidates else None

    def finish_request(self, request: socket.socket, client_address: Any) -> None:
        if request.recv(len(H2_PREFACE), socket.MSG_PEEK | socket.MSG_WAITALL) == H2_PREFACE:
            self.serve_h2(request)
        else:
            super().finish_request(request, client_address)

    def serve_h2(self, sock: socket.socket) -> None:
        """One HTTP/2 connection: each request's stream is answered once its body has ended."""
        conn = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        while data := sock.recv(65535):
            for event in conn.receive_data(data):
                if isinstance(event, RequestReceived):
                    streams[event.stream_id] = (dict(event.headers), bytearray())
                elif isinstance(event, DataReceived):
                    streams[event.stream_id][1].extend(event.data)
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, StreamEnded):
                    self.answer_h2(conn, event.stream_id, *streams.pop(event.stream_id))
                elif isinstance(event, ConnectionTerminated):
                    return
            sock.sendall(conn.data_to_send())

    def answer_h2(self, conn: H2Connection, stream_id: int, headers: dict[str, str], body: bytes) -> None:
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        target, rows = lines[0]["target"], lines[1:]
        self.requests.append({"method": headers[":method"], "path": headers[":path"], "headers": headers,
                              "http2": True, "target": target, "rows": rows})
        candidates = [r for r in self.recordings if r["request"]["path"] == headers[":path"]
                      and re.match(r["request"].get("target_match", "^$"), target)]
        assert len(candidates) == 1, f"no single recording for {headers[':path']} {target}"
        response = candidates[0]["response"]
        acks = [line for line in response["body_lines"] if json.loads(line)["seq"] < len(rows)]
        conn.send_headers(stream_id, [(":status", str(response["status"])), ("content-type", DELIMITED)])
        conn.send_data(stream_id, "".join(f"{line}\n" for line in acks).encode(), end_stream=True)


class ReplayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Replay

    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        self.server.requests.append({"method": method, "path": self.path, "headers": dict(self.headers), "body": body})
        recording = self.server.match(method, self.path, body.get("ksql", ""))
        if recording is None:
            self._send(404, {"@type": "generic_error", "error_code": 40400, "message": f"no recording for {self.path}"})
            return
        response = recording["response"]
        if "body_lines" in response:
            self._stream(response)
        else:
            self._send(response["status"], response["body"])

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.ksql.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, response: dict[str, Any]) -> None:
        self.send_response(response["status"])
        self.send_header("Content-Type", "application/vnd.ksql.v1+json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for line in response["body_lines"]:
                chunk = (line + "\n").encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            if response.get("hold_open"):
                if not self.server.released.wait(60):  # open until the test is done
                    self.server.held_out = True  # the client never stopped reading
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")


@pytest.fixture
def replay() -> Iterator[Replay]:
    server = Replay()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.released.set()
    server.shutdown()
    server.server_close()


def test_info_reads_the_server_status(replay: Replay) -> None:
    info = KsqlDBClient(replay.url).info()
    assert info["serverStatus"] == "RUNNING" and info["version"] == "0.29.0"
    assert replay.requests[0]["headers"]["Accept"] == "application/vnd.ksql.v1+json"


def test_the_statements_sent_are_the_seed_files_own() -> None:
    """No second copy of the seed: each statement sent is the packaged seed.sql's, on one line."""
    assert ksqldb_statements(Settings()) == [" ".join(s.text.split()) + ";" for s in parse(seed_text())]


def test_demo_objects_are_created_in_order_each_after_the_previous_command(replay: Replay) -> None:
    statements = ksqldb_statements(Settings())
    results = KsqlDBClient(replay.url).execute_all(statements)
    assert [r.status for r in results] == ["SUCCESS"] * 5
    sent = [r["body"] for r in replay.requests]
    assert [b["ksql"] for b in sent] == statements
    recorded = [replay.match("POST", "/ksql", s)["response"]["body"][0]["commandSequenceNumber"] for s in statements]
    assert [b.get("commandSequenceNumber") for b in sent] == [None, *recorded[:-1]]
    assert all(b["streamsProperties"]["ksql.streams.auto.offset.reset"] == "earliest" for b in sent)
    assert results[3].warnings == ["DEMO_USER_ORDERS_MERGED already exists with the same schema"]


def test_demo_statements_name_the_settings_topics() -> None:
    settings = Settings().replace(users_topic="u-1", orders_topic="o1", ksqldb_merged_topic="M1",
                                  ksqldb_merged_repartition_topic="M2", ksqldb_users_repartition_topic="u-1_repartition")
    table, repartition, stream, merged, merged_rep = ksqldb_statements(settings)
    assert table.startswith("CREATE TABLE IF NOT EXISTS U_1 (user_id VARCHAR PRIMARY KEY") and "kafka_topic='u-1'" in table
    assert "kafka_topic='u-1_repartition'" in repartition and "FROM U_1 " in repartition
    assert "kafka_topic='o1'" in stream and "timestamp='ts'" in stream
    assert "kafka_topic='M1'" in merged and "FROM O1 LEFT JOIN U_1 ON O1.user_id = U_1.user_id" in merged
    assert "kafka_topic='M2'" in merged_rep and "LEFT JOIN U_1_REPARTITION" in merged_rep


def test_orders_go_in_one_inserts_stream_request_over_http2(replay: Replay) -> None:
    import random

    orders = generate(shape(Settings()), 3, random.Random(1), 1_700_000_000_000).stream
    with KsqlDBClient(replay.url) as client:
        insert_rows(client, ksqldb_names(Settings())["DEMO_USER_ORDERS"], "USER_ID", orders)
    [request] = replay.requests
    assert (request["http2"], request["path"], request["target"]) == (True, "/inserts-stream", "DEMO_USER_ORDERS")
    assert request["rows"] == [
        {"USER_ID": o.key, "TS": o.value["TS"], "PRODUCT_ID": o.value["PRODUCT_ID"], "QTY": o.value["QTY"],
         "UNIT_PRICE": o.value["UNIT_PRICE"], "CHANNEL": o.value["CHANNEL"]} for o in orders
    ]


def test_a_row_ksqldb_refuses_is_named_by_its_sequence_number(replay: Replay) -> None:
    with pytest.raises(KsqlDBError, match=r"refused row 1 of the inserts into BAD_ORDERS \(error 40000\): Can't coerce") as caught:
        KsqlDBClient(replay.url).insert_rows("BAD_ORDERS", [{"user_id": "a", "ts": 1}, {"user_id": "b", "ts": "x"}])
    assert caught.value.error_code == 40000


@pytest.mark.parametrize(
    "statement, status, code, text",
    [
        ("CREATE STREAM IF NOT EXISTS BAD_JOIN AS SELECT 1;", 400, 40001, "number of partitions don't match"),
        ("CREATE TABEL x (id INT);", 400, 40001, "Syntax Error"),
        ("SHOW STREAMS;", 401, 40100, "Unauthorized"),
    ],
)
def test_error_responses_become_one_clear_error(replay: Replay, statement: str, status: int, code: int, text: str) -> None:
    with pytest.raises(KsqlDBError) as caught:
        KsqlDBClient(replay.url).execute(statement)
    assert (caught.value.status, caught.value.error_code) == (status, code)
    assert text in str(caught.value) and f"HTTP {status}, error {code}" in str(caught.value)


def test_push_query_with_limit_reads_header_rows_and_final_message(replay: Replay) -> None:
    result = KsqlDBClient(replay.url).query("SELECT * FROM DEMO_USER_ORDERS_MERGED WHERE TS >= 0 EMIT CHANGES LIMIT 2;")
    assert result.columns == ["USER_ID", "NAME", "AGE", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS"]
    assert len(result.rows) == 2 and result.final_message == "Limit Reached"
    joins = join_rows_from_columns("q", result.columns, result.rows, 2,
                                   Columns("USER_ID", ("PRODUCT_ID", "CHANNEL"), ("NAME", "AGE"), ("NAME", "AGE")))
    assert (joins.hits, joins.misses) == (1, 1)
    assert joins.rows[1].key == "7a036b11914a40ad90878d8768b04055" and joins.rows[1].columns["NAME"] is None


def test_open_push_query_stops_at_the_timeout_with_what_arrived(replay: Replay) -> None:
    """The response stays open until the test ends: the client's own timeout ended the query, not ksqlDB."""
    result = KsqlDBClient(replay.url).query("SELECT * FROM DEMO_USER_ORDERS_MERGED_REPARTITION EMIT CHANGES;", timeout=1.0)
    assert not replay.held_out
    assert len(result.rows) == 1 and result.final_message is None


def test_push_query_error_message_and_unknown_source_raise(replay: Replay) -> None:
    client = KsqlDBClient(replay.url)
    with pytest.raises(KsqlDBError, match="Query terminated due to an internal error") as caught:
        client.query("SELECT * FROM BROKEN EMIT CHANGES;")
    assert caught.value.error_code == 50000
    with pytest.raises(KsqlDBError, match="NO_SUCH_STREAM does not exist") as caught:
        client.query("SELECT * FROM NO_SUCH_STREAM EMIT CHANGES;")
    assert caught.value.status == 400


def test_unreachable_server_and_bad_url_are_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(KsqlDBError, match=f"ksqlDB at {url} is unreachable"):
        KsqlDBClient(url).info()
    with pytest.raises(KsqlDBError, match="ksqldb_endpoint='localhost:8088': expected http://host:port"):
        KsqlDBClient("localhost:8088")


def test_schema_columns_handle_nested_types() -> None:
    assert schema_columns("`ID` STRING KEY, `M` MAP<STRING, INTEGER>, `S` STRUCT<`A` INTEGER>") == ["ID", "M", "S"]


def test_produce_through_recorded_ksqldb_creates_the_objects_and_inserts_every_order(
    replay: Replay, bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded ksqlDB accepts the statements but writes nothing, so the orders topic stays empty:
    the report must then say that no order matched rather than invent partitions."""
    import random
    import uuid

    from streamapp.cli import main

    topic = f"demo_user_{uuid.uuid4().hex[:8]}"
    code = main(["produce", "--bootstrap_server", bootstrap, "--topic", topic, "--messages", "4", "--seed", "8",
                 "--ksqldb_endpoint", replay.url, "--wait", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    sent = [r["body"].get("ksql", "") for r in replay.requests if r["path"] == "/ksql"]
    settings = Settings().replace(users_topic=topic, orders_topic=f"{topic}_orders")
    assert sent == ksqldb_statements(settings)
    users = make_table(shape(settings), 4, random.Random(8))
    [inserts] = [r for r in replay.requests if r["path"] == "/inserts-stream"]
    assert inserts["target"] == ksqldb_names(settings)["DEMO_USER_ORDERS"] == topic.upper() + "_ORDERS"
    assert [row["USER_ID"] for row in inserts["rows"]] == [u.key for u in users]
    assert report["stream_via"] == "ksqlDB /inserts-stream (murmur2)"
    [query] = [r["body"]["ksql"] for r in replay.requests if r["path"] == "/query" and "_MERGED " in r["body"]["ksql"]]
    assert query.startswith("SELECT * FROM DEMO_USER_ORDERS_MERGED WHERE ROWTIME >= ")
    direct = report["reports"]["Direct"]
    assert direct["matched"] == 0 and {e["stream_partition"] for e in direct["exceptions"]} == {None}
    assert set(report["joins"]) == {"ksqlDB join, direct", "ksqlDB join, repartitioned"}
    assert report["joins"]["ksqlDB join, direct"]["received"] == 0
