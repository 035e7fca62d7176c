"""State loss: delete a worker's RocksDB directory, restart, and both tables come back from their changelogs.

Real worker, real RocksDB, real Apache Kafka broker. The rows are read through the
worker's own ``/tables/{table}`` pages (every partition, both tables) and hashed; the
expected digest is computed from the records produced (last write per key wins,
a tombstone deletes; partition = murmur2 of the key, which both the producer
and the repartition use), independently of the worker.
"""
from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

from streamapp.kafka.reader import read_topic
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import digest, isolated, loaded, make_dataset, murmur2_partition, produce, stats, table_rows, worker_settings

#: The seed's two tables, both partitioned by murmur2 here (the users are produced with it).
TABLE_NAMES = ("demo_user", "demo_user_repartition")


def expected_rows(records: list[tuple[bytes, bytes | None]], n: int) -> list[tuple[str, int, str, object]]:
    final: dict[bytes, bytes | None] = {}
    for key, value in records:
        final[key] = value
    return [(table, murmur2_partition(key, n), key.hex(), {k.upper(): v for k, v in json.loads(value).items()})
            for key, value in final.items() if value is not None for table in TABLE_NAMES]


async def all_rows(worker: WorkerProcess) -> list[tuple[str, int, str, object]]:
    url = f"http://127.0.0.1:{worker.settings.web_port}"
    n = worker.settings.partitions
    return [(table, *row) for table in TABLE_NAMES for row in await table_rows(url, table, n)]


def wait_for_digest(worker: WorkerProcess, wanted: str, timeout: float) -> float:
    """Seconds until the worker's tables hash to ``wanted`` (503s while it recovers are retried)."""
    started = time.monotonic()
    last: object = None
    while time.monotonic() - started < timeout:
        assert worker.proc is not None and worker.proc.poll() is None, worker.tail()
        try:
            rows = asyncio.run(all_rows(worker))
        except AssertionError as exc:
            last = str(exc)[:200]
        else:
            if digest(rows) == wanted:
                return time.monotonic() - started
            last = f"{len(rows)} rows, digest {digest(rows)[:12]}"
        time.sleep(1.0)
    raise AssertionError(f"tables did not reach digest {wanted[:12]} in {timeout:.0f}s; last: {last}\n{worker.tail()}")


def test_deleted_rocksdb_recovers_from_changelogs(broker_settings: Settings, tmp_path: Path) -> None:
    settings = worker_settings(isolated(broker_settings, "state"), tmp_path, "w")
    n = settings.partitions
    dataset = make_dataset(users=400, orders=0, seed=11)
    records: list[tuple[bytes, bytes | None]] = list(dataset.user_records())
    keys = [key for key, _ in records]
    records += [(key, json.dumps({"name": f"Renamed {i}", "age": 40 + i % 30}).encode()) for i, key in enumerate(keys[:60])]
    records += [(key, None) for key in keys[50:80]]  # tombstones, some after an update
    wanted = digest(expected_rows(records, n))

    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        produce(settings.bootstrap_servers, settings.users_topic, records)
        wait_for_digest(worker, wanted, timeout=120)
    finally:
        assert worker.stop() == 0, worker.tail()
    stores = [p for p in settings.data_path.rglob("CURRENT") if "demo_user" in str(p)]
    assert stores, f"no RocksDB store under {settings.data_path}"
    repartitioned = len(read_topic(settings.bootstrap_servers, settings.users_repartition_topic))

    shutil.rmtree(settings.data_path)
    assert not settings.data_path.exists()
    restarted = WorkerProcess(settings, tmp_path / "worker-restarted.log").start(timeout=120)
    try:
        seconds = wait_for_digest(restarted, wanted, timeout=120)
        assert loaded(stats(restarted), settings) == (0, 0), "the users topic was reprocessed, not recovered"
        assert "Traceback" not in restarted.log(), restarted.tail(40)
    finally:
        assert restarted.stop() == 0, restarted.tail()
    assert [p for p in settings.data_path.rglob("CURRENT") if "demo_user" in str(p)], "tables not rebuilt on disk"
    assert len(read_topic(settings.bootstrap_servers, settings.users_repartition_topic)) == repartitioned
    print(f"state loss: {len(records)} user records, tables identical {seconds:.1f} s after the restart")
