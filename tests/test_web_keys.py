"""Any key can be looked up in the web views, and an escape that is not UTF-8 is a 400 naming it.

The router's own reading refused ``{`` and ``}`` (404) and kept ``%ff%fe`` as its
text, so ``%ff`` and ``%25ff`` looked up the same key. Pure parts first, then a real
worker on the session's broker holding users whose ids are made of such characters.  Two workers forwarding
and gathering such keys: tests/test_web_routing.py (its two workers hold these users too).
"""
from __future__ import annotations

import json
from typing import Any, Iterator
from urllib.parse import quote

import aiohttp
import pytest
from confluent_kafka import Producer
from yarl import URL

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from streamapp.worker.web.params import WebInputError, path_key
from streamapp.worker.web.views import any_segment
from test_web_views import DIRECT, REPARTITIONED, TOKEN, Running, unique_settings, wait_for

#: User ids a router or a decoder could get wrong: braces, a slash, percent signs, a plus, non-ASCII, a space.
IDS = ("a{b}", "{}", "x/y", "50%", "%ff", "%25", "a+b", "ü-ñ", "a b", "?q=1", "#h")


def test_path_key_undoes_escapes_as_utf8_and_refuses_the_rest() -> None:
    for key in IDS:
        assert path_key(f"/tables/{DIRECT}/{quote(key, safe='')}?encoding=utf-8") == key
    assert path_key("/users/a{b}") == "a{b}"
    with pytest.raises(WebInputError, match=r"^user_id='%ff%fe': its percent escapes are not UTF-8 text; give the "
                                            r"key's bytes in hex with encoding=hex$"):
        path_key("/users/%ff%fe", "user_id")


def test_every_placeholder_matches_any_one_segment() -> None:
    assert any_segment("/tables/{table}/{key}") == "/tables/{table:[^/]+}/{key:[^/]+}"
    assert any_segment("/stats") == "/stats"


async def fetch(url: URL, allow_redirects: bool = True) -> tuple[int, Any, str]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as session:
        async with session.get(url, allow_redirects=allow_redirects, timeout=aiohttp.ClientTimeout(total=20)) as r:
            body = await r.json() if r.content_type == "application/json" else await r.text()
            return r.status, body, r.headers.get("Location", "")


def produce_ids(settings: Settings) -> None:
    """A user for each of :data:`IDS`, placed by crc32 (a librdkafka client), so many sit where murmur2 does not."""
    topics = (settings.users_topic, settings.orders_topic, settings.users_repartition_topic,
              settings.merged_topic, settings.merged_repartition_topic, settings.dead_letter_topic)
    ensure_topics(settings.bootstrap_servers, {t: settings.partitions for t in topics})
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "partitioner": "consistent"})
    for i, key in enumerate(IDS):
        producer.produce(settings.users_topic, key=key.encode(), value=json.dumps({"name": f"U{i}", "age": i}).encode())
    producer.flush(30)


@pytest.fixture(scope="module")
def keys_worker(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("web_keys")
    settings = unique_settings(broker, tmp, TOKEN).replace(web_port=free_port())
    produce_ids(settings)
    worker = WorkerProcess(settings, tmp / "worker.log").start(timeout=120)
    try:
        yield Running(settings, [worker], {})
    finally:
        assert worker.stop() == 0, worker.tail()


async def test_users_with_any_id_are_found_by_their_escaped_id(keys_worker: Running) -> None:
    base = keys_worker.url()

    async def found(key: str) -> Any:
        status, body, _ = await fetch(URL(f"{base}/tables/{DIRECT}/{quote(key, safe='')}", encoded=True))
        return body if status == 200 and all(t["found"] for t in body["tables"].values()) else None

    for i, key in enumerate(IDS):
        body = await wait_for(lambda: found(key), f"user {key!r} in both tables")
        assert body["key"] == key and body["key_hex"] == key.encode().hex()
        assert body["tables"][DIRECT]["row"]["NAME"] == body["tables"][REPARTITIONED]["row"]["NAME"] == f"U{i}"
    status, body, _ = await fetch(URL(f"{base}/tables/{DIRECT}/a{{b}}", encoded=True))  # braces as typed
    assert status == 200 and body["key"] == "a{b}" and body["tables"][DIRECT]["found"]
    status, _, location = await fetch(URL(f"{base}/users/a%7Bb%7D", encoded=True), allow_redirects=False)
    assert (status, location) == (307, f"/tables/{DIRECT}/a%7Bb%7D")
    status, body, _ = await fetch(URL(f"{base}/partition/a%7Bb%7D?partitions=6", encoded=True))
    assert status == 200 and body["key"] == "a{b}"


@pytest.mark.parametrize(
    ("path", "field"),
    [("/users/%ff%fe", "user_id"), (f"/tables/{DIRECT}/%ff%fe", "key"), ("/partition/%ff?partitions=3", "key")],
)
async def test_escapes_that_are_not_utf8_are_a_400_naming_the_value(keys_worker: Running, path: str,
                                                                    field: str) -> None:
    status, body, _ = await fetch(URL(keys_worker.url() + path, encoded=True))
    value = path.rsplit("/", 1)[1].split("?")[0]
    assert status == 400, body
    assert body["error"].startswith(f"{field}={value!r}: its percent escapes are not UTF-8 text"), body


async def found_at(base: str, key: str) -> Any:
    """The lookup's answer once ``key`` is in both tables (None before)."""
    status, body, _ = await fetch(URL(f"{base}/tables/{REPARTITIONED}/{quote(key, safe='')}", encoded=True))
    return body if status == 200 and all(t["found"] for t in body["tables"].values()) else None
