"""A windowed stream-stream join declared only in SQL, run by the worker on the real broker (issue 37's proof, R1).

orders x shipments, a LEFT JOIN WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS, both topics written with murmur2 (the Java
client's partitioner).  The records come in rounds, one topic each, each round's outputs awaited before the next:
orders; shipments of half of them; then a worker restarted on an empty data directory restores the window stores
from their changelogs and joins a shipment of an order from before the restart; an order an hour later in each
partition moves stream time past every window, so the orders never shipped are written with NULLs (their window
closed); a shipment later than the window and its grace is dropped and counted (/stats and the log line).  The worker writes, key by key,
what the test runner predicts for each partition's records in order.
"""
from __future__ import annotations

import json
import struct
import time
import uuid
from pathlib import Path
from typing import Any

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import free_port
from streamapp.settings import Settings
from streamapp.sql.planner import plan_file
from streamapp.sql.plan import Plan
from streamapp.sql.runner import TestRecord, run
from streamapp.sql.stream_join import EMIT_INTERVAL_MS
from streamapp.worker.process import WorkerProcess

from test_worker_table_join_broker import by_key, shown, written
from workerkit import murmur2_partition, produce, stats, wait_until

STATEMENTS = """
CREATE STREAM orders (id BIGINT KEY, item STRING) WITH (KAFKA_TOPIC='orders_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM shipments (id BIGINT KEY, carrier STRING) WITH (KAFKA_TOPIC='shipments_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM order_shipments WITH (KAFKA_TOPIC='order_shipments_{tag}') AS
  SELECT o.id, item, carrier FROM orders o LEFT JOIN shipments s WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS
  ON o.id = s.id EMIT CHANGES;
"""
T0 = 1_700_000_000_000
ORDERS = list(range(1, 13))


def key(i: int) -> bytes:
    return struct.pack(">q", i)


def rounds(n: int) -> list[tuple[str, list[tuple[int, dict[str, Any], int]]]]:
    """(topic, [(id, value, timestamp)]) per round."""
    closing = {}  # an order an hour later in every partition: stream time passes every window there
    i = 1000
    while len(closing) < n:
        closing.setdefault(murmur2_partition(key(i), n), i)
        i += 1
    return [
        ("orders", [(i, {"item": f"i{i}"}, T0 + 1000 * i) for i in ORDERS]),
        ("shipments", [(i, {"carrier": f"c{i}"}, T0 + 1000 * i + 500) for i in ORDERS[:6]]),
        ("shipments", [(7, {"carrier": "after the restart"}, T0 + 20_000)]),
        ("orders", [(i, {"item": "an hour later"}, T0 + 3_600_000) for i in sorted(closing.values())]),
    ]


def predicted(plan: Plan, tag: str, n: int, upto: int) -> list[tuple[Any, ...]]:
    """The test runner on each partition's records of the first ``upto`` rounds, in order (what a partition-local
    join writes), as (key, value as JSON text, timestamp)."""
    by_partition: dict[int, list[TestRecord]] = {}
    for topic, records in rounds(n)[:upto]:
        for i, value, timestamp in records:
            by_partition.setdefault(murmur2_partition(key(i), n), []).append(
                TestRecord(f"{topic}_{tag}", i, value, timestamp, 0))
    return [(r.key, json.dumps(r.value, sort_keys=True), r.timestamp) for records in by_partition.values()
            for r in run(plan, records).actual.get(f"order_shipments_{tag}", [])]


def test_a_windowed_left_join_runs_as_the_test_runner_predicts_across_a_restart(
        broker_settings: Settings, tmp_path: Path) -> None:
    from streamapp.sql.formats import Codec

    tag = uuid.uuid4().hex[:8]
    statements = tmp_path / "streams.sql"
    statements.write_text(STATEMENTS.format(tag=tag), encoding="utf-8")
    plan = plan_file(statements)
    settings = broker_settings.replace(statements=str(statements), dead_letter_topic=f"dead_{tag}", web_port=free_port(),
                                       app_id=f"ss-{tag}", data_dir=str(tmp_path / "data-1"))
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    output, codec = f"streamapp_order_shipments_{tag}", Codec(plan.source("ORDER_SHIPMENTS"))
    ensure_topics(bootstrap, {f"orders_{tag}": n, f"shipments_{tag}": n})
    worker = WorkerProcess(settings, tmp_path / "worker-1.log").start()
    try:
        for k, (topic, records) in enumerate(rounds(n)):
            if k == 2:  # a new worker on an empty data directory: the window stores come back from their changelogs
                assert worker.stop() == 0, worker.tail()
                worker = WorkerProcess(settings.replace(data_dir=str(tmp_path / "data-2")),
                                       tmp_path / "worker-2.log").start()
            if k == 3:  # the restarted worker's first look for closed windows found none: the next waits that long
                time.sleep(EMIT_INTERVAL_MS / 1000 + 0.2)
            produce(bootstrap, f"{topic}_{tag}", [(key(i), json.dumps(v).encode(), ts) for i, v, ts in records],
                    "murmur2_random")
            expected = predicted(plan, tag, n, k + 1)
            got = written(bootstrap, output, n, len(expected))
            assert by_key([shown(codec, r) for r in got]) == by_key(expected), k
            assert all(r.partition == murmur2_partition(r.key, n) for r in got)
        joined = {json.loads(text)["CARRIER"] for _, text, _ in expected}
        assert "after the restart" in joined  # order 7, from before the restart, met its shipment after it
        unshipped = [k for k, text, _ in expected if json.loads(text)["CARRIER"] is None]
        assert sorted(unshipped) == ORDERS[7:]  # written once their window closed, with NULLs
        # a shipment an hour later moves its side's store on: one of the first hour after it is too late to keep
        produce(bootstrap, f"shipments_{tag}", [(key(8), b'{"carrier": "an hour later"}', T0 + 3_600_000),
                                                (key(8), b'{"carrier": "too late"}', T0 + 8000)], "murmur2_random")
        late = wait_until(lambda: stats(worker).get("late", {}).get(f"shipments_{tag}"), 30, "the late shipment",
                          [worker])
        assert late == 1 and len(written(bootstrap, output, n, len(expected))) == len(expected)
        assert "too late for the join window" in worker.tail(200)
    finally:
        assert worker.stop() == 0, worker.tail()
