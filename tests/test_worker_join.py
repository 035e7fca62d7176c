"""The real worker on Apache Kafka: users by librdkafka, orders by murmur2, both joins checked record by record.

Expected misses are computed independently of streamapp's partitioner registry:
zlib.crc32 for librdkafka's ``consistent_random`` and the murmur2 reference
hash for ksqlDB's placement of orders.
"""
from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import pytest
from rocksdict import AccessType, Options, Rdict

from streamapp.kafka.admin import describe
from streamapp.kafka.broker import free_port
from streamapp.partitioners.hashes import murmur2
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import isolated, make_order, make_users, orders_read, produce, read_all, stats, to_json, wait_for_users

pytestmark = pytest.mark.long

USERS = 240
COLUMNS = ["NAME", "AGE", "PRODUCT_ID", "QTY", "UNIT_PRICE", "CHANNEL", "TS"]


def murmur2_partition(key: bytes, n: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n


def crc32_partition(key: bytes, n: int) -> int:
    return zlib.crc32(key) % n


def run_scenario(settings: Settings, tmp_path: Path, users_partitioner: str, workers: int) -> None:
    n = settings.partitions
    users = make_users(USERS, seed=len(users_partitioner))
    rng = random.Random(7)
    orders = {user_id: make_order(user_id, rng) for user_id in users}
    procs = [
        WorkerProcess(
            settings.replace(web_port=free_port() if i else settings.web_port, data_dir=str(tmp_path / f"data{i}")),
            tmp_path / f"w{i}.log",
        )
        for i in range(workers)
    ]
    try:
        for proc in procs:
            proc.start(timeout=120)
        created = describe(settings.bootstrap_servers)
        owned = [settings.users_topic, settings.orders_topic, settings.users_repartition_topic,
                 settings.merged_topic, settings.merged_repartition_topic, settings.dead_letter_topic,
                 f"{settings.app_id}-demo_user-changelog", f"{settings.app_id}-demo_user_repartition-changelog"]
        assert {t: created[t].partitions for t in owned} == {t: n for t in owned}

        produce(settings.bootstrap_servers, settings.users_topic,
                ((uid.encode(), to_json(row)) for uid, row in users.items()), users_partitioner)
        wait_for_users(procs, USERS)
        produce(settings.bootstrap_servers, settings.orders_topic,
                ((uid.encode(), to_json(order)) for uid, order in orders.items()), "murmur2")

        if users_partitioner == "consistent_random":
            direct_misses = {u for u in users if crc32_partition(u.encode(), n) != murmur2_partition(u.encode(), n)}
        else:
            direct_misses = set()
        assert 0 < len(direct_misses) < USERS or users_partitioner != "consistent_random"
        for topic, misses in ((settings.merged_topic, direct_misses), (settings.merged_repartition_topic, set())):
            records = read_all(settings.bootstrap_servers, topic, n, USERS)
            assert len(records) == USERS, f"{topic}: {len(records)} records"
            seen = set()
            for rec in records:
                user_id = rec.key.decode()
                seen.add(user_id)
                order, user = orders[user_id], users[user_id]
                matched = user_id not in misses
                value = json.loads(rec.value)
                assert list(value) == COLUMNS
                assert value == {
                    "NAME": user["name"] if matched else None, "AGE": user["age"] if matched else None,
                    "PRODUCT_ID": order["product_id"], "QTY": order["qty"], "UNIT_PRICE": order["unit_price"],
                    "CHANNEL": order["channel"], "TS": order["ts"],
                }, f"{topic} {user_id}"
                assert rec.timestamp == order["ts"]
                assert rec.partition == murmur2_partition(rec.key, n)
            assert seen == set(users)
        for proc in procs:
            assert proc.proc is not None and proc.proc.poll() is None, proc.tail()
            if workers > 1:
                assert orders_read(stats(proc), proc.settings) > 0, f"a worker joined no orders: {proc.tail()}"
    finally:
        for proc in procs:
            assert proc.stop() == 0, proc.tail()
    if workers == 1:
        placed = crc32_partition if users_partitioner == "consistent_random" else murmur2_partition
        # a table row is its value columns, named as declared
        assert stored_rows(Path(procs[0].settings.data_dir), "demo_user", n) == {
            uid.encode(): (placed(uid.encode(), n), {k.upper(): v for k, v in row.items()}) for uid, row in users.items()
        }
        assert stored_rows(Path(procs[0].settings.data_dir), "demo_user_repartition", n) == {
            uid.encode(): (murmur2_partition(uid.encode(), n), {k.upper(): v for k, v in row.items()})
            for uid, row in users.items()
        }


def stored_rows(data_dir: Path, table: str, n: int) -> dict[bytes, tuple[int, dict]]:
    """Every row in the worker's RocksDB files: raw key -> (partition file it is in, value)."""
    rows: dict[bytes, tuple[int, dict]] = {}
    for p in range(n):
        path = data_dir / "v1" / "tables" / f"{table}-{p}.db"
        if not path.exists():
            continue
        db = Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            for key, value in db.items():
                if not key.startswith(b"__faust"):
                    assert key not in rows, f"{key!r} stored in partitions {rows[key][0]} and {p}"
                    rows[key] = (p, json.loads(value))
        finally:
            db.close()
    return rows


@pytest.mark.parametrize("users_partitioner", ["consistent_random", "murmur2_random"])
def test_one_worker_joins_like_ksqldb(broker_settings: Settings, tmp_path: Path, users_partitioner: str) -> None:
    run_scenario(isolated(broker_settings), tmp_path, users_partitioner, workers=1)


@pytest.mark.parametrize("users_partitioner", ["consistent_random", "murmur2_random"])
def test_two_workers_share_partitions(broker_settings: Settings, tmp_path: Path, users_partitioner: str) -> None:
    run_scenario(isolated(broker_settings), tmp_path, users_partitioner, workers=2)
