"""The web views on a real worker (`faust -A streamapp worker` on the session's Apache Kafka broker).

Users are produced with confluent-kafka's ``consistent`` (crc32) partitioner, as a
librdkafka client would, so their rows sit where ksqlDB's murmur2 does not look:
exactly the case the page must explain.  Expected partitions come from the
broker's delivery reports and from librdkafka's own partitioner functions.
"""
from __future__ import annotations

import itertools
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import aiohttp
import pytest
from confluent_kafka import Producer

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from test_web_placement import rdkafka_partition

TOKEN = "web-test-token"
PARTITIONS = 6
USERS = 24
#: The seed's two tables: the users as their producer placed them, and as the join's partitioner placed them.
DIRECT, REPARTITIONED = "demo_user", "demo_user_repartition"


def declared(value: dict[str, Any]) -> dict[str, Any]:
    """A produced user as its table row holds it: the value columns, named as declared."""
    return {name.upper(): column for name, column in value.items()}


@dataclass
class Running:
    settings: Settings
    workers: list[WorkerProcess]
    users: dict[str, tuple[int, dict[str, Any]]]  # user id -> (delivered partition, value)

    def url(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.workers[index].settings.web_port}"


def unique_settings(broker: EmbeddedBroker, tmp: Path, token: str) -> Settings:
    tag = uuid.uuid4().hex[:8]
    return broker.settings(Settings()).replace(
        app_id=f"web-{tag}", data_dir=str(tmp / "data"), partitions=PARTITIONS, web_token=token,
        users_topic=f"web_users_{tag}", orders_topic=f"web_orders_{tag}",
        users_repartition_topic=f"web_users_rep_{tag}", merged_topic=f"web_merged_{tag}",
        merged_repartition_topic=f"web_merged_rep_{tag}", dead_letter_topic=f"web_dead_{tag}",
    )


def produce_users(settings: Settings, count: int, partitioner: str = "consistent") -> dict[str, tuple[int, dict[str, Any]]]:
    topics = (settings.users_topic, settings.orders_topic, settings.users_repartition_topic,
              settings.merged_topic, settings.merged_repartition_topic, settings.dead_letter_topic)
    ensure_topics(settings.bootstrap_servers, {t: settings.partitions for t in topics})
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "partitioner": partitioner, "linger.ms": 0})
    delivered: dict[str, tuple[int, dict[str, Any]]] = {}

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered[msg.key().decode()] = (msg.partition(), json.loads(msg.value()))

    for i in range(count):
        value = {"name": f"User {i}", "age": 20 + i}
        producer.produce(settings.users_topic, key=uuid.uuid4().hex.encode(), value=json.dumps(value).encode(), on_delivery=report)
        producer.flush(10)
    assert len(delivered) == count
    return delivered


async def get(url: str, token: str | None = TOKEN, method: str = "GET") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        async with session.request(method, url, headers=headers, timeout=aiohttp.ClientTimeout(total=20)) as response:
            if response.content_type == "application/json":
                return response.status, await response.json()
            return response.status, await response.text()


async def wait_for(check: Callable[[], Any], what: str, timeout: float = 90.0) -> Any:
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last answer: {last}")


async def wait_loaded(running: Running, url: str) -> None:
    """Until every produced user is in both tables, seen from ``url``."""

    async def all_found() -> Any:
        for user_id in running.users:
            status, body = await get(f"{url}/tables/{DIRECT}/{user_id}", running.settings.web_token or None)
            if status != 200 or not all(t["found"] for t in body["tables"].values()):
                missing.append((status, body))
                return False
        return True

    missing: list[Any] = []

    try:
        await wait_for(all_found, "all users in both tables")
    except AssertionError:
        logs = "\n".join(w.tail(25) for w in running.workers)
        raise AssertionError(f"not all users are in both tables; last answer: {missing[-1:]}\n{logs}") from None


@pytest.fixture(scope="module")
def web_worker(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("web")
    settings = unique_settings(broker, tmp, TOKEN).replace(web_port=free_port())
    users = produce_users(settings, USERS)
    worker = WorkerProcess(settings, tmp / "worker.log").start(timeout=120)
    try:
        yield Running(settings, [worker], users)
    finally:
        assert worker.stop() == 0, worker.tail()


async def test_lookup_shows_rows_partitions_placement_and_verdict(web_worker: Running) -> None:
    await wait_loaded(web_worker, web_worker.url())
    misses = 0
    for user_id, (partition, value) in web_worker.users.items():
        status, body = await get(f"{web_worker.url()}/tables/{DIRECT}/{user_id}")
        assert status == 200, body
        key = user_id.encode()
        murmur = rdkafka_partition("murmur2", key, PARTITIONS)
        direct, rep = body["tables"][DIRECT], body["tables"][REPARTITIONED]
        assert (direct["partition"], direct["row"], direct["topic"]) == (partition, declared(value),
                                                                         web_worker.settings.users_topic)
        assert (rep["partition"], rep["row"]) == (murmur, declared(value))
        assert body["key"] == user_id and body["table"] == DIRECT
        assert direct["owner"] == rep["owner"] == body["answered_by"] == web_worker.url()
        assert body["placement"]["by_profile"]["confluent-kafka"] == partition
        assert body["placement"]["by_profile"]["ksqldb"] == body["join"]["partition"] == murmur
        assert body["routed_from"] is None and body["unreachable"] == []
        if partition != murmur:
            misses += 1
            assert f"table {DIRECT} has it in partition {partition}" in body["verdict"]
            assert f"table {REPARTITIONED} has the row in the same partition, so its join finds it" in body["verdict"]
        else:
            assert f"table {DIRECT} has the row in the same partition" in body["verdict"]
    assert misses > 0


async def test_the_old_user_address_redirects_to_the_first_table(web_worker: Running) -> None:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as session:
        async with session.get(f"{web_worker.url()}/users/a%20b?encoding=utf-8", allow_redirects=False) as response:
            assert response.status == 307
            assert response.headers["Location"] == f"/tables/{DIRECT}/a%20b?encoding=utf-8"
        async with session.get(f"{web_worker.url()}/users?partition=1&table={REPARTITIONED}",
                               allow_redirects=False) as response:
            assert (response.status, response.headers["Location"]) == (307, f"/tables/{REPARTITIONED}?partition=1")
        # the query as it was sent: %ff stays %ff (a 400 at /tables), not the U+FFFD aiohttp reads it as
        async with session.get(f"{web_worker.url()}/users?partition=0&after=%ff", allow_redirects=False) as response:
            assert response.headers["Location"].upper() == f"/tables/{DIRECT}?partition=0&after=%ff".upper()


async def test_tables_lists_the_declared_tables(web_worker: Running) -> None:
    status, body = await get(f"{web_worker.url()}/tables")
    s = web_worker.settings
    assert status == 200 and body == {"tables": [
        {"table": DIRECT, "source": "DEMO_USER", "topic": s.users_topic, "key": [{"name": "USER_ID", "type": "STRING"}],
         "key_format": "KAFKA", "joined_by": [s.merged_topic]},
        {"table": REPARTITIONED, "source": "DEMO_USER_REPARTITION", "topic": s.users_repartition_topic,
         "key": [{"name": "USER_ID", "type": "STRING"}], "key_format": "KAFKA", "joined_by": [s.merged_repartition_topic]},
    ]}


async def test_unknown_user_is_in_neither_table(web_worker: Running) -> None:
    status, body = await get(f"{web_worker.url()}/tables/{REPARTITIONED}/nobody-{uuid.uuid4().hex}")
    assert status == 200
    assert not body["tables"][DIRECT]["found"] and not body["tables"][REPARTITIONED]["found"]
    assert f"is in no table ({REPARTITIONED}, {DIRECT})" in body["verdict"]


@pytest.mark.parametrize("table", [DIRECT, REPARTITIONED])
async def test_users_pages_cover_each_partition_in_key_order(web_worker: Running, table: str) -> None:
    await wait_loaded(web_worker, web_worker.url())
    expected: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for user_id, (partition, _) in web_worker.users.items():
        p = partition if table == DIRECT else rdkafka_partition("murmur2", user_id.encode(), PARTITIONS)
        expected[p].append(user_id)
    for partition, cursor in itertools.product(range(PARTITIONS), ("next_after", "next_after_hex")):
        seen: list[str] = []
        after = ""
        while True:
            status, body = await get(f"{web_worker.url()}/tables/{table}?partition={partition}&limit=2&after={after}"
                                     + ("&encoding=hex" if cursor == "next_after_hex" else ""))
            assert status == 200, body
            assert len(body["rows"]) <= 2 and body["owner"] == web_worker.url()
            seen += [row["key"] for row in body["rows"]]
            for row in body["rows"]:
                assert row["row"] == declared(web_worker.users[row["key"]][1])
            if body["next_after"] is None:
                assert body["next_after_hex"] is None
                break
            assert body["next_after_hex"] == body["rows"][-1]["key_hex"]
            after = body[cursor]
        assert seen == sorted(expected[partition]), (partition, cursor)
    status, body = await get(f"{web_worker.url()}/tables/{table}?partition=0&after=%ff")
    assert status == 400 and body["field"] == "after", body  # not read as U+FFFD, another key


async def test_partition_calculator_matches_real_deliveries(web_worker: Running, new_topic: Callable[..., str]) -> None:
    topic = new_topic("web_calc", 7)
    key = "6b1e9c0a4f2d4e8c9a1b2c3d4e5f6a7b"
    status, body = await get(f"{web_worker.url()}/partition/{key}?partitions=7")
    assert status == 200
    for name in ("murmur2", "consistent", "fnv1a"):
        producer = Producer({"bootstrap.servers": web_worker.settings.bootstrap_servers, "partitioner": name})
        got: list[int] = []
        producer.produce(topic, key=key.encode(), value=b"v", on_delivery=lambda err, msg: got.append(msg.partition()))
        producer.flush(10)
        assert body["by_partitioner"][name] == got[0], name
    quoted = f'"{key}"'.encode()
    assert body["json_quoted"]["murmur2"] == rdkafka_partition("murmur2", quoted, 7)
    status, hexed = await get(f"{web_worker.url()}/partition/{key.encode().hex()}?partitions=7&encoding=hex")
    assert status == 200 and hexed["by_partitioner"] == body["by_partitioner"]


async def test_copartition_report(web_worker: Running) -> None:
    status, body = await get(f"{web_worker.url()}/copartition")
    assert status == 200 and body["available"] is True
    assert body["partitioner"] == web_worker.settings.partitioner
    assert any(web_worker.settings.users_topic in check["message"] for check in body["checks"])
    assert body["verdict"].startswith("Co-partitioned" if body["ok"] else "Not co-partitioned")


def produce_orders(settings: Settings, user_ids: list[str]) -> tuple[dict[str, int], int]:
    """One order per user, placed by murmur2 as ksqlDB places them, and one undecodable order.

    Returns each user's order partition and the bad order's partition (from delivery reports).
    """
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "partitioner": "murmur2", "linger.ms": 0})
    placed: dict[str, int] = {}

    def report(err: Any, msg: Any) -> None:
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()

    for i, user_id in enumerate(user_ids):
        order = {"ts": 1677844043886 + i, "product_id": 1000 + i, "qty": 1 + i % 5, "unit_price": 9.5, "channel": "web"}
        producer.produce(settings.orders_topic, key=user_id.encode(), value=json.dumps(order).encode(), on_delivery=report)
    bad_key = "bad-order-" + uuid.uuid4().hex
    producer.produce(settings.orders_topic, key=bad_key.encode(), value=b"{not json", on_delivery=report)
    producer.flush(10)
    return {u: placed[u] for u in user_ids}, placed[bad_key]


async def test_stats_count_per_partition(web_worker: Running) -> None:
    await wait_loaded(web_worker, web_worker.url())
    s = web_worker.settings
    order_partitions, bad_partition = produce_orders(s, list(web_worker.users))

    async def settled() -> Any:
        status, body = await get(f"{web_worker.url()}/stats")
        totals = body["group"]["totals"]
        return body if totals["records"].get(s.orders_topic) == USERS and totals["dead_lettered"] == 1 else None

    body = await wait_for(settled, "all orders counted")
    assert list(body["workers"]) == [web_worker.url()] and body["unreachable"] == []
    group = body["group"]
    assert group["rows"][s.users_topic] == dict(Counter(str(p) for p, _ in web_worker.users.values()))
    assert group["records"][s.orders_topic] == dict(Counter(str(p) for p in order_partitions.values()))
    direct_hits = Counter(str(p) for u, p in order_partitions.items() if web_worker.users[u][0] == p)
    direct_misses = Counter(str(p) for u, p in order_partitions.items() if web_worker.users[u][0] != p)
    assert group["joined"].get(s.merged_topic, {}) == dict(direct_hits)
    assert group["missed"].get(s.merged_topic, {}) == dict(direct_misses)
    assert group["joined"][s.merged_repartition_topic] == group["records"][s.orders_topic]
    assert group["missed"].get(s.merged_repartition_topic, {}) == {}
    assert group["dead_lettered"] == {s.orders_topic: {str(bad_partition): 1}}
    assert sum(direct_misses.values()) > 0


@pytest.mark.parametrize(
    ("path", "status", "fragment"),
    [
        ("/partition/abc", 400, "partitions is required"),
        ("/partition/abc?partitions=many", 400, "partitions='many'"),
        ("/partition/abc?partitions=0", 400, "partitions=0"),
        ("/partition/zz?partitions=3&encoding=hex", 400, "not hex"),
        (f"/tables/{DIRECT}/abc?encoding=base64", 400, "encoding='base64'"),
        (f"/tables/{DIRECT}", 400, "partition is required"),
        (f"/tables/{DIRECT}?partition=6", 400, "partition=6: must be between 0 and 5"),
        (f"/tables/{DIRECT}?partition=x", 400, "partition='x'"),
        (f"/tables/{DIRECT}?partition=0&limit=501", 400, "limit=501"),
        ("/tables/orders?partition=0", 400, f"table='orders': expected one of {DIRECT}, {REPARTITIONED}"),
        ("/tables/orders/u1", 400, "table='orders'"),
        ("/nope", 404, "/nope"),
        ("/table/users/", 404, "/table/users/"),
    ],
)
async def test_bad_requests_get_json_errors(web_worker: Running, path: str, status: int, fragment: str) -> None:
    got, body = await get(web_worker.url() + path)
    assert got == status, body
    assert fragment in body["error"] and "Traceback" not in json.dumps(body)


async def test_token_and_read_only(web_worker: Running) -> None:
    for token in (None, "wrong"):
        status, body = await get(f"{web_worker.url()}/stats", token)
        assert status == 401 and "bearer token" in body["error"]
    status, body = await get(f"{web_worker.url()}/router/", None)
    assert status == 401
    status, body = await get(f"{web_worker.url()}/tables/{DIRECT}/abc", method="POST")
    assert status == 405 and "read-only" in body["error"]
    status, page = await get(f"{web_worker.url()}/", None)
    assert status == 200 and 'id="key-input"' in page and 'id="table-input"' in page


def test_binds_loopback_only(web_worker: Running) -> None:
    """Bound to 127.0.0.1 (the default web_host): another loopback address, 127.0.0.2, is refused."""
    import socket

    port = web_worker.settings.web_port
    assert web_worker.settings.web_host == "127.0.0.1"
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
