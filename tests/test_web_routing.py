"""Two real workers in one group: a question sent to either is answered by the worker that owns the key.

Standby replicas are off (Faust's ``TABLE_STANDBY_REPLICAS=0``), so each worker
holds only the partitions it owns: a users row written by crc32 into the other
worker's partition can only be found by asking that worker.  The two workers also hold users whose ids a router
could get wrong (tests/test_web_keys.py's): forwarded and gathered with their escapes kept.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.worker.process import WorkerProcess
from test_web_keys import IDS, found_at, produce_ids
from test_web_placement import rdkafka_partition
from test_web_views import (DIRECT, PARTITIONS, REPARTITIONED, TOKEN, Running, declared, get, produce_users, unique_settings,
                            wait_for, wait_loaded)

USERS = 30


@pytest.fixture(scope="module")
def two_workers(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp: Path = tmp_path_factory.mktemp("web2")
    base = unique_settings(broker, tmp, TOKEN)
    users = produce_users(base, USERS)
    produce_ids(base)  # users whose ids a router could get wrong (braces, a slash, percent signs...), placed by crc32
    workers: list[WorkerProcess] = []
    try:
        for name in ("a", "b"):
            settings = base.replace(web_port=free_port(), data_dir=str(tmp / name))
            worker = WorkerProcess(settings, tmp / f"{name}.log", extra_env={"TABLE_STANDBY_REPLICAS": "0"})
            workers.append(worker.start(timeout=120))
        yield Running(base, workers, users)
    finally:
        codes = [(w.stop(), w.tail()) for w in workers]
        assert all(code == 0 for code, _ in codes), codes


async def assignment(running: Running, table: str) -> dict[int, str]:
    """Partition -> owner URL of ``table``'s changelog, once both workers report the same two owners."""

    async def agreed() -> Any:
        views = []
        for i in range(2):
            status, body = await get(f"{running.url(i)}/router/")
            if status != 200:
                return None
            owners = {
                partition: url.rstrip("/")
                for url, topics in body.items()
                for topic, partitions in topics.items()
                if topic.endswith(f"-{table}-changelog")
                for partition in partitions
            }
            views.append(owners)
        one = views[0]
        if one == views[1] and len(one) == PARTITIONS and set(one.values()) == {running.url(0), running.url(1)}:
            return one
        return None

    return await wait_for(agreed, "both workers to agree on a two-worker assignment", timeout=120)


async def test_lookup_sent_to_the_non_owner_is_answered_by_the_owner(two_workers: Running) -> None:
    rep_owners = await assignment(two_workers, REPARTITIONED)
    direct_owners = await assignment(two_workers, DIRECT)
    await wait_loaded(two_workers, two_workers.url(0))
    urls = [two_workers.url(0), two_workers.url(1)]
    answered_by = set()
    fanned_out = 0
    for user_id, (partition, value) in two_workers.users.items():
        murmur = rdkafka_partition("murmur2", user_id.encode(), PARTITIONS)
        owner = rep_owners[murmur]
        other = urls[1 - urls.index(owner)]
        status, routed = await get(f"{other}/tables/{REPARTITIONED}/{user_id}")
        assert status == 200, routed
        assert (routed["answered_by"], routed["routed_from"]) == (owner, other)
        direct, rep = routed["tables"][DIRECT], routed["tables"][REPARTITIONED]
        row = declared(value)
        assert (direct["partition"], direct["row"], direct["owner"]) == (partition, row, direct_owners[partition])
        assert (rep["partition"], rep["row"], rep["owner"]) == (murmur, row, owner)
        assert routed["unreachable"] == []
        assert [c["worker"] for c in direct["copies"]] == [direct_owners[partition]]
        fanned_out += direct_owners[partition] != owner
        status, straight = await get(f"{owner}/tables/{REPARTITIONED}/{user_id}")
        assert status == 200 and straight["routed_from"] is None
        assert {**routed, "routed_from": None} == straight
        answered_by.add(owner)
    assert answered_by == set(urls)
    assert fanned_out > 0


async def test_local_scope_marks_active_and_standby_copies(two_workers: Running) -> None:
    owners = await assignment(two_workers, DIRECT)
    await wait_loaded(two_workers, two_workers.url(0))
    for i in range(2):
        url = two_workers.url(i)
        for user_id, (partition, value) in list(two_workers.users.items())[:10]:
            status, body = await get(f"{url}/tables/{DIRECT}/{user_id}?scope=local")
            assert status == 200 and body["worker"] == url
            for copy in body["tables"][DIRECT]:
                assert (copy["partition"], copy["row"]) == (partition, declared(value))
                assert copy["active"] == (owners[partition] == url)
            assert [c["active"] for c in body["tables"][DIRECT]] == ([True] if owners[partition] == url else [])


async def test_partition_page_sent_to_the_non_owner_is_answered_by_the_owner(two_workers: Running) -> None:
    owners = await assignment(two_workers, DIRECT)
    await wait_loaded(two_workers, two_workers.url(1))
    urls = [two_workers.url(0), two_workers.url(1)]
    for key in IDS:  # the odd ids' users too, before pages that list every key
        await wait_for(lambda: found_at(urls[0], key), f"user {key!r} in both tables")
    for partition, owner in owners.items():
        other = urls[1 - urls.index(owner)]
        status, body = await get(f"{other}/tables/{DIRECT}?partition={partition}&limit=500")
        assert status == 200, body
        assert body["answered_by"] == body["owner"] == owner
        expected = sorted([u for u, (p, _) in two_workers.users.items() if p == partition]
                          + [k for k in IDS if rdkafka_partition("consistent", k.encode(), PARTITIONS) == partition])
        assert [row["key"] for row in body["rows"]] == expected


async def test_stats_add_up_both_workers(two_workers: Running) -> None:
    await assignment(two_workers, DIRECT)
    await wait_loaded(two_workers, two_workers.url(0))
    status, body = await get(f"{two_workers.url(1)}/stats")
    assert status == 200 and set(body["workers"]) == {two_workers.url(0), two_workers.url(1)}
    topic = two_workers.settings.users_topic
    per_worker = [w["totals"]["rows"].get(topic, 0) for w in body["workers"].values()]
    assert body["group"]["totals"]["rows"][topic] == sum(per_worker) >= USERS


async def test_two_workers_forward_and_gather_any_key(two_workers: Running) -> None:
    """A lookup sent to the worker that does not own the key is forwarded with its escapes (``x/y``, ``%ff``),
    and the other table's row is gathered from the other worker the same way (the ids of tests/test_web_keys.py)."""
    running = two_workers
    rep_owners = await assignment(running, REPARTITIONED)
    direct_owners = await assignment(running, DIRECT)
    urls = [running.url(0), running.url(1)]
    forwarded = gathered = 0
    for i, key in enumerate(IDS):
        owner = rep_owners[rdkafka_partition("murmur2", key.encode(), PARTITIONS)]
        other = urls[1 - urls.index(owner)]
        body = await wait_for(lambda: found_at(other, key), f"user {key!r} in both tables, asked at {other}")
        assert (body["key"], body["answered_by"], body["routed_from"]) == (key, owner, other)
        assert body["tables"][DIRECT]["row"]["NAME"] == f"U{i}" and body["unreachable"] == []
        forwarded += 1
        gathered += direct_owners[body["tables"][DIRECT]["partition"]] != owner
    assert forwarded == len(IDS) and gathered > 0
