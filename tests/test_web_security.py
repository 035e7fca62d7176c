"""Input validation and the web server's middlewares, on a real aiohttp server (no worker needed)."""
from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from streamapp.sql import plan as p
from streamapp.sql.formats import Codec
from streamapp.worker.web import params
from streamapp.worker.web.params import MAX_KEY_BYTES, MAX_LIMIT, WebInputError
from streamapp.worker.web.security import middlewares, quiet_malformed_requests, token_ok

TOKEN = "s3cret-token"
BIGINT_TABLE = p.Source("C", p.TABLE, "c", (p.Column("ID", "BIGINT"),), (p.Column("V", "STRING"),), "KAFKA", "JSON")
STRING_TABLE = p.Source("U", p.TABLE, "u", (p.Column("ID", "STRING"),), (p.Column("V", "STRING"),), "KAFKA", "JSON")
JSON_KEYED = p.Source("J", p.TABLE, "j", (p.Column("ID", "STRING"),), (p.Column("V", "STRING"),), "JSON", "JSON")
DOUBLE_TABLE = p.Source("D", p.TABLE, "d", (p.Column("ID", "DOUBLE"),), (p.Column("V", "STRING"),), "JSON", "JSON")


@pytest.mark.parametrize(
    ("call", "field", "fragment"),
    [
        (lambda: params.partitions(None), "partitions", "partitions is required"),
        (lambda: params.partitions("six"), "partitions", "partitions='six': expected an integer"),
        (lambda: params.partitions("１２"), "partitions", "partitions='１２': expected an integer"),  # full-width
        (lambda: params.limit("1_0"), "limit", "limit='1_0': expected an integer"),
        (lambda: params.time_bound("from", "１７００"), "from", "expected milliseconds since the epoch"),
        (lambda: params.partitions("0"), "partitions", "partitions=0: must be between 1"),
        (lambda: params.partition("6", 6), "partition", "partition=6: must be between 0 and 5"),
        (lambda: params.partition("-1", 6), "partition", "partition=-1"),
        (lambda: params.limit(str(MAX_LIMIT + 1)), "limit", f"limit={MAX_LIMIT + 1}: must be between 1 and {MAX_LIMIT}"),
        (lambda: params.limit("0"), "limit", "limit=0"),
        (lambda: params.table("orders", ["demo_user", "demo_user_repartition"]), "table",
         "table='orders': expected one of demo_user, demo_user_repartition"),
        (lambda: params.table_key("x1", None, BIGINT_TABLE), "key", "key='x1': not a BIGINT"),
        (lambda: params.table_key(" ", None, BIGINT_TABLE), "key", "key is empty: give a BIGINT"),
        (lambda: params.key("zz", "hex"), "key", "key='zz': not hex"),
        (lambda: params.key("a", "base64"), "encoding", "encoding='base64'"),
        (lambda: params.key("", None), "key", "key is empty"),
        (lambda: params.key("x" * (MAX_KEY_BYTES + 1)), "key", f"at most {MAX_KEY_BYTES}"),
        (lambda: params.required({}, "partition"), "partition", "partition is required"),
        (lambda: params.table_key("1e309", None, DOUBLE_TABLE), "key", "key='1e309': not a DOUBLE"),
        (lambda: params.time_bound("from", "9" * 5000), "from", "(5000 digits): must be between"),
        (lambda: params.time_bound("to", "-" + "1" * 30), "to", "(31 digits): must be between"),
        (lambda: params.query_text("partition=0&after=%ff", "after"), "after",
         "'after=%ff': its percent escapes are not UTF-8 text; give the key's bytes in hex with encoding=hex"),
        (lambda: params.after("zz", STRING_TABLE, "hex"), "after", "after='zz': not hex"),
        (lambda: params.partitions("9" * 5000), "partitions", "expected an integer"),  # past int()'s digit limit
        (lambda: params.query_text("utm=%e9&after=%ff", "after"), "after", "'after=%ff': its percent escapes"),
    ],
)
def test_bad_input_names_field_and_value(call, field: str, fragment: str) -> None:
    with pytest.raises(WebInputError) as info:
        call()
    assert info.value.field == field
    assert fragment in str(info.value)


def test_good_input() -> None:
    assert params.partitions(" 12 ") == 12
    assert params.partition("5", 6) == 5
    assert params.limit(None) == params.DEFAULT_LIMIT and params.limit(str(MAX_LIMIT)) == MAX_LIMIT
    assert params.key("00ff", "hex") == b"\x00\xff"
    assert params.key("ü") == "ü".encode()
    assert params.after("", STRING_TABLE) is None and params.after("u1", STRING_TABLE) == b"u1"
    assert params.after("00ff", STRING_TABLE, "hex") == b"\x00\xff"  # next_after_hex: any key's bytes
    assert params.query_text("partition=0&after=k%201", "after") == "k 1"
    assert params.query_text("after=a+b", "after") == "a b"  # as aiohttp reads a query
    assert params.query_text("after=%e2%82%ac", "after") == "€" and params.query_text("partition=0", "after") is None
    assert params.query_text("utm=%e9&after=u1", "after") == "u1"  # another parameter's bad escape is not after's
    assert params.table("demo_user", ["demo_user"]) == "demo_user"
    assert params.table_key("-2", None, BIGINT_TABLE) == (-2).to_bytes(8, "big", signed=True)
    assert params.table_key("00ff", "hex", BIGINT_TABLE) == b"\x00\xff"
    assert params.key_text((-2).to_bytes(8, "big", signed=True), Codec(BIGINT_TABLE)) == "-2"
    assert params.key_text(b"u1", Codec(STRING_TABLE)) == "u1"
    # a JSON-format STRING key is stored as its JSON string: looked up, paged after and listed as the text itself
    assert params.table_key("k 1", None, JSON_KEYED) == b'"k 1"' and params.after("k1", JSON_KEYED) == b'"k1"'
    assert params.key_text(b'"k 1"', Codec(JSON_KEYED)) == "k 1"
    assert params.table_key("1.5", None, DOUBLE_TABLE) == b"1.5"
    assert params.time_bound("from", "1700000000000") == 1_700_000_000_000


def test_token_compare() -> None:
    assert token_ok(f"Bearer {TOKEN}", TOKEN)
    assert not token_ok(f"Bearer {TOKEN}x", TOKEN)
    assert not token_ok(TOKEN, TOKEN)
    assert not token_ok(None, TOKEN)


async def _data(request: web.Request) -> web.Response:
    return web.json_response({"data": 1})


async def _bad(request: web.Request) -> web.Response:
    params.partitions(request.query.get("partitions"))
    return web.json_response({})


async def _bug(request: web.Request) -> web.Response:
    raise RuntimeError("secret internal detail")


async def _page(request: web.Request) -> web.Response:
    return web.Response(text="<html></html>", content_type="text/html")


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    app = web.Application(middlewares=middlewares(TOKEN))
    app.router.add_get("/", _page)
    app.router.add_get("/data", _data)
    app.router.add_get("/bad", _bad)
    app.router.add_get("/bug", _bug)
    app.router.add_post("/copartition/recheck", _data)
    async with TestServer(app, host="127.0.0.1") as running:
        yield running


async def _get(server: TestServer, path: str, token: str | None = TOKEN, method: str = "GET",
               headers: dict[str, str] | None = None) -> tuple[int, dict]:
    status, body, _ = await _request(server, path, token, method, headers)
    return status, body


async def _request(server: TestServer, path: str, token: str | None = TOKEN, method: str = "GET",
                   headers: dict[str, str] | None = None) -> tuple[int, dict, dict[str, str]]:
    """(status, JSON body or {}, response headers)."""
    sent = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, server.make_url(path), headers=sent) as response:
            body = await response.json(content_type=None) if response.content_type == "application/json" else {}
            return response.status, body, dict(response.headers)


async def test_token_required_except_for_the_page(server: TestServer) -> None:
    assert await _get(server, "/data") == (200, {"data": 1})
    for token in (None, "wrong"):
        status, body = await _get(server, "/data", token)
        assert status == 401 and "bearer token" in body["error"]
    assert (await _get(server, "/", None))[0] == 200


async def test_read_only(server: TestServer) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, body, headers = await _request(server, "/data", method=method)
        assert status == 405 and "read-only" in body["error"] and method in body["error"]
        assert headers["Allow"] == "GET, HEAD"  # a 405 says what the resource takes (RFC 9110)
    # the one action takes POST alone: another method there is told so; GET reaches the router, whose Allow is kept
    status, body, headers = await _request(server, "/copartition/recheck", method="PUT")
    assert status == 405 and headers["Allow"] == "POST"
    status, body, headers = await _request(server, "/copartition/recheck")
    assert status == 405 and body["status"] == 405 and headers["Allow"] == "POST"


async def test_errors_are_json_without_traceback(server: TestServer) -> None:
    status, body = await _get(server, "/bad?partitions=x")
    assert status == 400 and body["field"] == "partitions" and "'x'" in body["error"]
    status, body = await _get(server, "/missing")
    assert status == 404 and "/missing" in body["error"]
    status, body = await _get(server, "/bug")
    assert status == 500 and "RuntimeError" in body["error"]
    assert "secret internal detail" not in body["error"] and "Traceback" not in body["error"]


async def _raw(server: TestServer, request: bytes) -> bytes:
    """Send bytes no HTTP client library would send, and return the status line."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(request)
    await writer.drain()
    status = await reader.readline()
    writer.close()
    return status


async def test_token_header_that_is_not_utf8_is_401_not_500(server: TestServer) -> None:
    status = await _raw(server, b"GET /data HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\nConnection: close\r\n\r\n")
    assert status.split()[1] == b"401"
    assert not token_ok("Bearer \udcff\udcfe", TOKEN)


async def test_100kb_url_is_400_and_one_log_line(server: TestServer, caplog: pytest.LogCaptureFixture) -> None:
    quiet_malformed_requests()
    with caplog.at_level(logging.DEBUG, logger="aiohttp.server"):
        status = await _raw(server, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status.split()[1] == b"400"
    records = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert len(records) == 1
    assert records[0].exc_info is None and "\n" not in records[0].getMessage()
    assert records[0].getMessage().startswith("refused a malformed HTTP request (400 Got more than 8190 bytes")


async def test_an_oversized_header_is_logged_without_its_bytes(server: TestServer,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """aiohttp quotes the start of a header it refuses: a bearer token's first bytes, which no log may hold."""
    quiet_malformed_requests()
    token = "Bearer " + "t0ken" * 3000
    with caplog.at_level(logging.DEBUG, logger="aiohttp.server"):
        status = await _raw(server, b"GET /data HTTP/1.1\r\nHost: x\r\nAuthorization: " + token.encode() + b"\r\n\r\n")
    assert status.split()[1] == b"400"
    [record] = [r for r in caplog.records if r.name == "aiohttp.server"]
    assert record.getMessage().startswith("refused a malformed HTTP request (400 Got more than 8190 bytes")
    assert "t0ken" not in record.getMessage() and "Bearer" not in record.getMessage()
