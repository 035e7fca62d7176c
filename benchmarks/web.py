"""Latency of the web views on two workers, as ratios of the calculator's (no table, no routing).

One run starts Apache Kafka (one KRaft node), loads ``--users`` users (written with crc32, as a
librdkafka client would), starts two workers of one group and times each request
``--requests`` times from one client, one at a time, the cases interleaved so that
the machine's load falls on all of them alike:

- ``/partition/{key}?partitions=6`` — pure computation over HTTP: the baseline;
- ``/tables/demo_user_repartition/{id}`` sent to the key's owner — answered locally;
- ``/tables/demo_user_repartition/{id}`` sent to the other worker — forwarded once to the owner;
- ``/tables/demo_user_repartition?partition=P&limit=50`` — one page of RocksDB rows;
- ``/stats`` — asks the other worker too.

    .venv/bin/python benchmarks/web.py [--users 2000] [--requests 300]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.sql.topology import topology
from streamapp.partitioners import partition
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess


def load_users(settings: Settings, count: int) -> list[str]:
    ensure_topics(settings.bootstrap_servers, topology(settings).owned_topics())
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "partitioner": "consistent"})
    ids = [uuid.uuid4().hex for _ in range(count)]
    for i, user_id in enumerate(ids):
        producer.produce(settings.users_topic, key=user_id, value=json.dumps({"name": f"U{i}", "age": i % 90}))
        producer.poll(0)
    producer.flush(30)
    return ids


async def owners(session: aiohttp.ClientSession, url: str, table: str) -> dict[int, str]:
    while True:
        async with session.get(f"{url}/router/") as response:
            body = await response.json()
        found = {p: u.rstrip("/") for u, topics in body.items() for t, ps in topics.items()
                 if t.endswith(f"-{table}-changelog") for p in ps}
        if len(set(found.values())) == 2:
            return found
        await asyncio.sleep(0.5)


async def timed(session: aiohttp.ClientSession, urls: list[str]) -> list[float]:
    times = []
    for url in urls:
        start = time.perf_counter()
        async with session.get(url) as response:
            await response.read()
            assert response.status == 200, (url, response.status)
        times.append(time.perf_counter() - start)
    return times


async def measure(workers: list[str], ids: list[str], n: int, requests: int) -> dict[str, list[float]]:
    async with aiohttp.ClientSession() as session:
        rep = await owners(session, workers[0], "demo_user_repartition")
        last = f"{workers[0]}/tables/demo_user_repartition/{ids[-1]}"
        while True:
            async with session.get(last) as response:
                body = await response.json()
            if all(t["found"] for t in body["tables"].values()):
                break
            await asyncio.sleep(0.5)
        sample = ids[:requests]

        def owner_of(user_id: str) -> str:
            return rep[partition("murmur2", user_id.encode(), n)]

        def other(user_id: str) -> str:
            return workers[1] if owner_of(user_id) == workers[0] else workers[0]

        cases = {
            "/partition/{key} (baseline)": [f"{workers[0]}/partition/{u}?partitions={n}" for u in sample],
            "/tables/{table}/{id} at the owner": [f"{owner_of(u)}/tables/demo_user_repartition/{u}" for u in sample],
            "/tables/{table}/{id} at the other worker (routed)": [f"{other(u)}/tables/demo_user_repartition/{u}"
                                                              for u in sample],
            "/tables/{table}?partition=P&limit=50": [f"{rep[i % n]}/tables/demo_user_repartition?partition={i % n}&limit=50"
                                                     for i in range(requests)],
            "/stats (both workers)": [f"{workers[0]}/stats"] * requests,
        }
        for urls in cases.values():
            await timed(session, urls[:10])
        results: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(requests):
            for name, urls in cases.items():
                results[name] += await timed(session, [urls[i]])
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-web-"))
    with EmbeddedBroker() as broker:
        settings = broker.settings(Settings()).replace(app_id=f"bench-web-{uuid.uuid4().hex[:6]}", data_dir=str(tmp / "data"))
        ids = load_users(settings, args.users)
        workers = []
        try:
            for name in ("a", "b"):
                s = settings.replace(web_port=free_port(), data_dir=str(tmp / name))
                workers.append(WorkerProcess(s, tmp / f"{name}.log").start(timeout=120))
            urls = [f"http://127.0.0.1:{w.settings.web_port}" for w in workers]
            results = asyncio.run(measure(urls, ids, settings.partitions, min(args.requests, args.users)))
        finally:
            for worker in workers:
                worker.stop()
    base = statistics.median(next(iter(results.values())))
    table = Table(title=f"Web views, {args.users:,} users, 2 workers, {args.requests} sequential requests each")
    for column in ("request", "median ms", "p95 ms", "× baseline median"):
        table.add_column(column, justify="left" if column == "request" else "right")
    for name, times in results.items():
        times.sort()
        median, p95 = statistics.median(times), times[int(len(times) * 0.95) - 1]
        table.add_row(name, f"{median * 1000:.2f}", f"{p95 * 1000:.2f}", f"{median / base:.2f}×")
    Console().print(table)


if __name__ == "__main__":
    main()
