"""A stream-stream join that re-keys a side, run by the worker on the real broker (issue 37, R1's re-keys).

orders x shipments joined on the shipment's ORDER_ID (a value column): the shipments, keyed by their own id, land
in partitions that have nothing to do with their order's; the worker re-keys them by ORDER_ID into ksqlDB's
``<app_id>-ORDER_SHIPMENTS-Join-right-repartition`` (murmur2, as Kafka Streams places it, with their event time),
where each meets its order.  What it writes equals the test runner's prediction; a shipment without a value, which
the join ignores, goes on through the repartition topic with a null key (its new key reads the value), where it moves
the join's stream time as in Kafka Streams, and is no dead letter.  The re-key step and every
re-keyed QTT case are checked without a broker (tests/test_stream_joins.py, tests/test_worker_stream_join.py).
"""
from __future__ import annotations

import json
import struct
from collections import Counter
from pathlib import Path

from streamapp.kafka.admin import ensure_topics
from streamapp.settings import Settings
from streamapp.sql.formats import Codec
from streamapp.sql.runner import TestRecord, run
from streamapp.worker.process import WorkerProcess

from test_worker_table_join_broker import shown
from workerkit import declare, murmur2_partition, produce, read_all, stats, wait_until

STATEMENTS = """
CREATE STREAM orders (id BIGINT KEY, item STRING) WITH (KAFKA_TOPIC='orders_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM shipments (id BIGINT KEY, order_id BIGINT, carrier STRING)
  WITH (KAFKA_TOPIC='shipments_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM order_shipments WITH (KAFKA_TOPIC='order_shipments_{tag}') AS
  SELECT o.id, item, carrier FROM orders o JOIN shipments s WITHIN 1 MINUTE ON o.id = s.order_id EMIT CHANGES;
"""
T0 = 1_700_000_000_000
ORDERS = [(i, {"ITEM": f"i{i}"}, T0 + 1000 * i) for i in range(1, 13)]
# (shipment id, its order, carrier, time): two for order 2, one of an unknown order, one outside its order's window
SHIPMENTS = [(100 + j, {"ORDER_ID": order, "CARRIER": f"c{j}"}, T0 + 1000 * order + 500 + t)
             for j, (order, t) in enumerate([(1, 0), (2, 0), (2, 9000), (3, 0), (5, 0), (8, 0), (99, 0), (9, 120_000)])]


def key(i: int) -> bytes:
    return struct.pack(">q", i)


def test_a_join_on_a_value_column_re_keys_its_side_and_writes_what_the_test_runner_predicts(
        broker_settings: Settings, tmp_path: Path) -> None:
    declared = declare(broker_settings, tmp_path, STATEMENTS, "rekey")
    settings, plan = declared.settings, declared.plan
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    orders, shipments = declared.topic("orders"), declared.topic("shipments")
    assert sum(murmur2_partition(key(i), n) != murmur2_partition(key(v["ORDER_ID"]), n) for i, v, _ in SHIPMENTS) >= 3
    records = [TestRecord(orders, *r, 0) for r in ORDERS] + [TestRecord(shipments, *r, 0) for r in SHIPMENTS]
    expected = Counter((r.key, json.dumps(r.value, sort_keys=True), r.timestamp)
                       for r in run(plan, records).actual[declared.topic("order_shipments")])
    assert sum(expected.values()) == 6  # orders 1, 2 (twice), 3, 5, 8
    ensure_topics(bootstrap, {orders: n, shipments: n})
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        produce(bootstrap, orders, [(key(i), json.dumps(v).encode(), ts) for i, v, ts in ORDERS])
        produce(bootstrap, shipments, [(key(i), json.dumps(v).encode(), ts) for i, v, ts in SHIPMENTS]
                + [(key(200), None, T0)])
        got = read_all(bootstrap, declared.output("order_shipments"), n, sum(expected.values()))
        codec = Codec(plan.source("ORDER_SHIPMENTS"))
        assert Counter(shown(codec, r) for r in got) == expected, worker.tail()
        assert all(r.partition == murmur2_partition(r.key, n) for r in got)
        rekeyed = read_all(bootstrap, f"{settings.app_id}-ORDER_SHIPMENTS-Join-right-repartition", n, len(SHIPMENTS) + 1)
        read = wait_until(lambda: stats(worker)["records"].get(shipments) == len(SHIPMENTS) + 1 and stats(worker),
                          30, "the null shipment read", [worker])
        assert read["dead_lettered"] == 0
        counted = worker.get("/stats?scope=local").json()["counters"]["written"]  # /metrics' records written of it
        assert sum(counted[f"{settings.app_id}-ORDER_SHIPMENTS-Join-right-repartition"].values()) == len(SHIPMENTS) + 1
    finally:
        assert worker.stop() == 0, worker.tail()
    # the null shipment once, its key and value null; each other shipment once, keyed by its order id, in the
    # partition its order's key is in, carrying its event time
    assert [(r.key, r.timestamp) for r in rekeyed if r.value is None] == [(None, T0)]
    assert sorted((r.key, r.partition, json.loads(r.value)["ROWTIME"]) for r in rekeyed if r.value is not None) == sorted(
        (key(v["ORDER_ID"]), murmur2_partition(key(v["ORDER_ID"]), n), ts) for _, v, ts in SHIPMENTS)
