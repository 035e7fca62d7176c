"""A windowed stream-stream join under ``processing_guarantee=exactly_once``: kill -9 mid-window, a restart on the
same data directory, and each result exactly once (issue 37).

orders x shipments, the ``LEFT JOIN ... WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS`` of
tests/test_worker_stream_join_broker.py, declared only in SQL; both topics written by murmur2, so every order meets
its shipment.  Two paced producers stream the orders and, beside them, the shipments of three in four (the others
wait in open windows for the close); the worker is frozen (SIGSTOP) mid-stream until shipments it has not
committed are on the broker, then killed with kill -9, with its transactions open (an order and its shipment
often in the same one), and the producers hold until then, so the rest is certainly
produced after the crash (at full speed, while the new worker starts).  A new worker on the crashed one's data
directory finds no clean-stop mark, so it deletes the window stores' data (which holds the open transactions'
writes) and restores them from their changelogs (written in the transactions: an aborted one's changes are not
read back), then goes on from the committed offsets.  An order an hour later in every partition then
closes every window: the unshipped orders are written with NULLs.  The output, read ``read_committed``, holds each
result exactly once and is exactly what the test runner predicts for each partition's records.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from streamapp.settings import Settings
from streamapp.sql.formats import Codec
from streamapp.sql.runner import TestRecord, run
from streamapp.worker.app import create_app
from streamapp.worker.faust_internals import partition_db
from streamapp.worker.process import WorkerProcess

from test_worker_stream_join_broker import STATEMENTS, T0, key
from test_worker_table_join_broker import shown, written
from workerkit import BackgroundProducer, TopicTail, declare, murmur2_partition, produce, wait_until

#: Orders, one every 10 ms of event time (20 s in all: no window closes before the last records).
ORDERS = 2_000


def shipped(i: int) -> bool:
    return i % 4 != 0


def streams(n: int) -> dict[str, list[tuple[int, dict[str, Any], int]]]:
    """(id, value, timestamp) per topic: the orders and the shipments of three in four, then in every partition an
    order an hour later, which moves stream time past every window there."""
    closing: dict[int, int] = {}
    i = 100_000
    while len(closing) < n:
        closing.setdefault(murmur2_partition(key(i), n), i)
        i += 1
    return {"orders": [(i, {"item": f"i{i}"}, T0 + 10 * i) for i in range(1, ORDERS + 1)],
            "shipments": [(i, {"carrier": f"c{i}"}, T0 + 10 * i + 5) for i in range(1, ORDERS + 1) if shipped(i)],
            "closing": [(i, {"item": "an hour later"}, T0 + 3_600_000) for i in sorted(closing.values())]}


def ticks(n: int, round_: int) -> list[tuple[int, dict[str, Any], int]]:
    """An order an hour later in every partition, ids of round ``round_``: the stream going on after the closing
    orders.  The worker, as Kafka Streams, looks for closed windows on a record and at most once a wall-clock second
    (``EMIT_INTERVAL_MS``), so on a quiet machine the closing orders may come within that second of the records
    before them and close nothing until a record comes later.  None is written: no window of theirs closes."""
    first: dict[int, int] = {}
    i = 1_000_000 + 10_000 * round_
    while len(first) < n:
        first.setdefault(murmur2_partition(key(i), n), i)
        i += 1
    return [(i, {"item": "an hour later"}, T0 + 3_600_000) for i in sorted(first.values())]


def predicted(plan: Any, tag: str, n: int) -> list[tuple[Any, ...]]:
    """The test runner on each partition's records, by event time, as (key, value as JSON text, timestamp)."""
    by_partition: dict[int, list[tuple[int, str, int, Any]]] = {}
    for name, records in streams(n).items():
        topic = "shipments" if name == "shipments" else "orders"
        for i, value, timestamp in records:
            by_partition.setdefault(murmur2_partition(key(i), n), []).append((timestamp, topic, i, value))
    return [(r.key, json.dumps(r.value, sort_keys=True), r.timestamp) for records in by_partition.values()
            for r in run(plan, [TestRecord(f"{topic}_{tag}", i, value, ts, 0)
                                for ts, topic, i, value in sorted(records, key=lambda r: r[0])]).actual.get(
                f"order_shipments_{tag}", [])]


def encoded(records: list[tuple[int, dict[str, Any], int]]) -> list[tuple[bytes, bytes, int]]:
    return [(key(i), json.dumps(value).encode(), ts) for i, value, ts in records]


def test_a_store_written_in_transactions_is_trusted_after_a_clean_stop_only(tmp_path: Path,
                                                                            caplog: Any) -> None:
    """Runs of a real app on one data directory (RocksDB, no broker): a run that ends without a clean stop (a crash)
    leaves a partition whose data the next run deletes and says so; a clean stop's is kept; at_least_once keeps all."""
    def one_run(clean_stop: bool, write: bytes | None, guarantee: str = "exactly_once") -> bytes | None:
        app = create_app(Settings(data_dir=str(tmp_path / "data"), processing_guarantee=guarantee))
        table = app.join_tables.by_name["demo_user"]
        if guarantee == "exactly_once":
            app.join_tables.clean_stops.add([table])
        db = partition_db(table, 2)
        found = db.get(b"k")
        if write is not None:
            db[b"k"] = write
        if clean_stop:
            asyncio.run(app.join_tables.clean_stops.stopped())
        asyncio.run(table.data.stop())  # Faust's store lets its databases go
        return found

    caplog.set_level(logging.INFO, "streamapp.worker.tables")
    assert one_run(clean_stop=False, write=b"1") is None  # a first run, killed
    assert "demo_user[2]" not in caplog.text
    assert one_run(clean_stop=True, write=b"2") is None  # the killed run's write is gone
    assert "1 store partitions were not stopped clean" in caplog.text and "demo_user[2]" in caplog.text
    assert one_run(clean_stop=False, write=None) == b"2"  # after a clean stop: kept; this run is killed
    assert one_run(clean_stop=False, write=b"3") is None  # so this one starts empty, and is killed too
    assert one_run(clean_stop=False, write=None, guarantee="at_least_once") == b"3"  # at_least_once: as it is


def test_kill9_mid_window_then_a_restart_on_the_same_data_directory_writes_each_result_exactly_once(
        broker_settings: Settings, tmp_path: Path) -> None:
    declared = declare(broker_settings, tmp_path, STATEMENTS, "sseos", data_dir=str(tmp_path / "data-1"),
                       processing_guarantee="exactly_once")
    tag, plan, settings = declared.tag, declared.plan, declared.settings
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    output, codec = declared.output("order_shipments"), Codec(plan.source("ORDER_SHIPMENTS"))
    records, expected = streams(n), predicted(plan, tag, n)
    assert sum(1 for _, text, _ in expected if json.loads(text)["CARRIER"] is None) == ORDERS // 4
    first = WorkerProcess(settings, tmp_path / "worker-1.log")
    second = WorkerProcess(settings, tmp_path / "worker-2.log")  # the SAME data directory: what the crash left
    # in step: 40 orders and their 30 shipments a chunk, so a pair is often joined in one transaction
    holds = (ORDERS * 3 // 5, len(records["shipments"]) * 3 // 5)
    paced = [BackgroundProducer(bootstrap, declared.topic("orders"), encoded(records["orders"]), chunk=40,
                                pause=0.2, hold_at=holds[0]),
             BackgroundProducer(bootstrap, declared.topic("shipments"), encoded(records["shipments"]), chunk=30,
                                pause=0.2, hold_at=holds[1])]
    tail = TopicTail(bootstrap, output, n)
    try:
        first.start(timeout=120)
        for producer in paced:
            producer.start()
        wait_until(lambda: tail.poll(0.2) >= 0 and len(tail.records) >= 50, 120, "50 joined records committed",
                   [first])
        # mid-stream: frozen (SIGSTOP), the worker commits nothing more of what it has not sent yet, while the
        # producers go on until shipments it has not joined in a committed transaction are certainly on the broker
        # (a worker that keeps up with their pace had committed every one produced when it was killed at once)
        assert first.proc is not None
        os.kill(first.proc.pid, signal.SIGSTOP)

        def shipments_ahead() -> bool:
            tail.poll(0.5)  # a commit under way when it froze may still end
            return paced[1].produced > len(tail.records)

        wait_until(shipments_ahead, 120, "shipments produced that the frozen worker has not committed", [])
        produced_at_kill, committed_at_kill = [producer.produced for producer in paced], len(tail.records)
        first.kill()
        assert committed_at_kill < produced_at_kill[1], (committed_at_kill, produced_at_kill)
        for producer in paced:  # the rest at full speed while the new worker starts
            producer.pause = 0
            producer.resume()
        second.start(timeout=120)
        for producer in paced:
            producer.finish(120)
        produce(bootstrap, declared.topic("orders"), encoded(records["closing"]))
        done = threading.Event()

        def go_on() -> None:
            for round_ in range(1, 400):
                if done.wait(1.5):
                    return
                produce(bootstrap, declared.topic("orders"), encoded(ticks(n, round_)))

        ticking = threading.Thread(target=go_on, daemon=True)
        ticking.start()
        try:  # up to the count, then to the end: a duplicate shows (a busy machine's worker may take minutes)
            got = written(bootstrap, output, n, len(expected), timeout=600)
        finally:
            done.set()
            ticking.join()
        assert second.stop() == 0, second.tail()
    finally:
        tail.close()
        first.kill()
        second.stop()
    results = [shown(codec, r) for r in got]
    twice = [r for r, count in Counter(results).items() if count > 1]
    assert not twice, (len(twice), twice[:3])
    assert sorted(results) == sorted(expected), (len(results), len(expected))
    assert all(r.partition == murmur2_partition(r.key, n) for r in got)
