"""A windowed stream-stream join declared only in SQL, run by the worker and by Kafka Streams on the real broker, and
reconciled (issue 37's proof).

orders x shipments, a LEFT JOIN WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS: the orders written by the Java client's
partitioner (murmur2), the shipments by librdkafka's default (crc32), so some shipments sit in another partition than
their order and never meet it, in either engine.  The records come in rounds, one topic each, each round's outputs
awaited before the next: orders; a shipment of every order but one; then a worker restarted on an empty data
directory restores the window stores from their changelogs and joins the last order's shipment, from after the
restart; an order an hour later in each partition moves stream time past every window, so the orders whose shipment
sits elsewhere are written with NULLs (their window closed); a shipment later than the window and its grace is
dropped and counted (/stats and the log line).  The worker writes, key by key, what the test runner predicts for each
partition's records in order, and exactly what Kafka Streams (PlanStreams, ksqlDB's topology, beside it all along)
writes; the reconciliation of the two outputs names every order placed apart from its shipment
``copartition_violation``, and nothing else.
"""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from streamapp.kafka.admin import ensure_topics, topic_configs
from streamapp.settings import Settings
from streamapp.sql.plan import Plan
from streamapp.sql.runner import TestRecord, run
from streamapp.sql.stream_join import EMIT_INTERVAL_MS
from streamapp.worker.process import WorkerProcess

from test_declared_join_broker import crc32_partition
from test_worker_table_join_broker import by_key, shown, written
from workerkit import caught_up, declare, murmur2_partition, produce, start_together, stats, wait_until

pytestmark = pytest.mark.long

STATEMENTS = """
CREATE STREAM orders (id BIGINT KEY, item STRING) WITH (KAFKA_TOPIC='orders_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM shipments (id BIGINT KEY, carrier STRING) WITH (KAFKA_TOPIC='shipments_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM order_shipments WITH (KAFKA_TOPIC='order_shipments_{tag}') AS
  SELECT o.id, item, carrier FROM orders o LEFT JOIN shipments s WITHIN 1 MINUTE GRACE PERIOD 30 SECONDS
  ON o.id = s.id EMIT CHANGES;
"""
T0 = 1_700_000_000_000
#: The reconciliation's window: the hour of T0 (2023-11-14 22:13:20 UTC) and the next.
WINDOW = ("2023-11-14T22:00:00", "2023-11-15T00:00:00")
#: Where each topic's producer puts a key: the orders by murmur2 (Java), the shipments by crc32 (librdkafka).
PARTITIONERS = {"orders": "murmur2_random", "shipments": "consistent_random"}


def key(i: int) -> bytes:
    return struct.pack(">q", i)


def placed(topic: str, i: int, n: int) -> int:
    return murmur2_partition(key(i), n) if PARTITIONERS[topic] == "murmur2_random" else crc32_partition(key(i), n)


def orders(n: int) -> tuple[list[int], list[int]]:
    """The 12 orders' ids, and those whose shipment crc32 places in another partition than murmur2 places the order:
    three shipped together, three apart, one shipped after the restart (together), five apart."""
    together = [i for i in range(1, 500) if placed("orders", i, n) == placed("shipments", i, n)]
    apart = [i for i in range(1, 500) if placed("orders", i, n) != placed("shipments", i, n)]
    return together[:3] + apart[:3] + [together[3]] + apart[3:8], apart[:8]


def rounds(n: int) -> list[tuple[str, list[tuple[int, dict[str, Any], int]]]]:
    """(topic, [(id, value, timestamp)]) per round."""
    ids, _ = orders(n)
    closing = {}  # an order an hour later in every partition: stream time passes every window there
    i = 1000
    while len(closing) < n:
        closing.setdefault(placed("orders", i, n), i)
        i += 1
    stamps = {i: T0 + 1000 * (k + 1) for k, i in enumerate(ids)}
    return [
        ("orders", [(i, {"item": f"i{i}"}, stamps[i]) for i in ids]),
        ("shipments", [(i, {"carrier": f"c{i}"}, stamps[i] + 500) for i in ids if i != ids[6]]),
        ("shipments", [(ids[6], {"carrier": "after the restart"}, T0 + 20_000)]),
        ("orders", [(i, {"item": "an hour later"}, T0 + 3_600_000) for i in sorted(closing.values())]),
    ]


def predicted(plan: Plan, tag: str, n: int, upto: int) -> list[tuple[Any, ...]]:
    """The test runner on each partition's records of the first ``upto`` rounds, in order (what a partition-local
    join writes), as (key, value as JSON text, timestamp)."""
    by_partition: dict[int, list[TestRecord]] = {}
    for topic, records in rounds(n)[:upto]:
        for i, value, timestamp in records:
            by_partition.setdefault(placed(topic, i, n), []).append(TestRecord(f"{topic}_{tag}", i, value, timestamp, 0))
    return [(r.key, json.dumps(r.value, sort_keys=True), r.timestamp) for records in by_partition.values()
            for r in run(plan, records).actual.get(f"order_shipments_{tag}", [])]


def test_a_windowed_left_join_runs_as_the_test_runner_predicts_and_as_kafka_streams_does_and_reconciles(
        broker_settings: Settings, spark: Any, tmp_path: Path) -> None:
    from spark_batch.reconcile import main
    from streamapp.kafka.ksql_equivalent import KsqlEquivalent, cluster_plan, query_application_id
    from streamapp.sql.formats import Codec

    declared = declare(broker_settings, tmp_path, STATEMENTS, "ss", data_dir=str(tmp_path / "data-1"))
    tag, plan, settings = declared.tag, declared.plan, declared.settings
    bootstrap, n = settings.bootstrap_servers, settings.partitions
    output, codec = declared.output("order_shipments"), Codec(plan.source("ORDER_SHIPMENTS"))
    inputs = [declared.topic("orders"), declared.topic("shipments")]
    ensure_topics(bootstrap, dict.fromkeys(inputs, n))
    streams = KsqlEquivalent(settings, state_dir=tmp_path / "ks", plan=cluster_plan(settings))
    group = query_application_id(settings, "ORDER_SHIPMENTS")
    worker = WorkerProcess(settings, tmp_path / "worker-1.log")
    start_together(streams, worker)
    try:
        for k, (topic, records) in enumerate(rounds(n)):
            if k == 2:  # a new worker on an empty data directory: the window stores come back from their changelogs
                assert worker.stop() == 0, worker.tail()
                worker = WorkerProcess(settings.replace(data_dir=str(tmp_path / "data-2")),
                                       tmp_path / "worker-2.log").start()
            if k == 3:  # the restarted worker's first look for closed windows found none: the next waits that long
                time.sleep(EMIT_INTERVAL_MS / 1000 + 0.2)
                # Kafka Streams read every earlier record too (it picks a task's next record by time, not round)
                wait_until(lambda: caught_up(bootstrap, group, inputs, n), 60, "Kafka Streams to read the rounds",
                           [worker])
            produce(bootstrap, f"{topic}_{tag}", [(key(i), json.dumps(v).encode(), ts) for i, v, ts in records],
                    PARTITIONERS[topic])
            expected = predicted(plan, tag, n, k + 1)
            got = written(bootstrap, output, n, len(expected))
            assert by_key([shown(codec, r) for r in got]) == by_key(expected), k
            assert all(r.partition == murmur2_partition(r.key, n) for r in got)
        joined = {json.loads(text)["CARRIER"] for _, text, _ in expected}
        assert "after the restart" in joined  # from before the restart, met its shipment after it
        changelog = f"{settings.app_id}-order_shipments-%s-changelog"  # as Kafka Streams' windowed ones: by time too
        assert [topic_configs(bootstrap, changelog % store).get("cleanup.policy")
                for store in ("left-window", "right-window", "outer")] == ["compact,delete"] * 2 + ["compact"]
        unshipped = sorted(k for k, text, _ in expected if json.loads(text)["CARRIER"] is None)
        _, apart = orders(n)
        assert unshipped == sorted(apart)  # their shipment sits elsewhere: written once their window closed, with NULLs
        # a shipment an hour later moves its side's store on: one of the first hour after it is too late to keep
        late = apart[6]
        produce(bootstrap, f"shipments_{tag}", [(key(late), b'{"carrier": "an hour later"}', T0 + 3_600_000),
                                                (key(late), b'{"carrier": "too late"}', T0 + 8000)],
                PARTITIONERS["shipments"])
        dropped = wait_until(lambda: stats(worker).get("late", {}).get(f"shipments_{tag}"), 30, "the late shipment",
                             [worker])
        ours = written(bootstrap, output, n, len(expected))
        assert dropped == 1 and len(ours) == len(expected)
        # the log line follows the counter /stats reads: waited for, not read once
        wait_until(lambda: "too late for the join window" in worker.tail(200), 30, "the late shipment's log line",
                   [worker])
        wait_until(lambda: caught_up(bootstrap, group, inputs, n), 60, "Kafka Streams to read every round", [worker])
        theirs = written(bootstrap, f"order_shipments_{tag}", n, len(expected))
        assert sorted((r.key, r.value, r.timestamp, r.partition) for r in ours) == \
            sorted((r.key, r.value, r.timestamp, r.partition) for r in theirs)
    finally:
        streams.stop()
        assert worker.stop() == 0, worker.tail()

    # the reconciliation of the two outputs: every order apart from its shipment, and nothing else, a co-partitioning miss
    out = tmp_path / "reconciled"
    assert main(["--statements", settings.statements, "--from", WINDOW[0], "--to", WINDOW[1], "--bootstrap-server",
                 bootstrap, "--kafka-reader", "spark", "--output", str(out), "--max-mismatch-rate", "1"]) == 0
    day = next(out.glob("dt=*"))
    summary = json.loads((day / "summary.json").read_text())
    pair = "order_shipments"
    assert {s: c for s, c in summary["statuses"][pair].items() if c} == {
        "match": len(expected) - len(apart), "both_unenriched": len(apart)}
    assert {c: k for c, k in summary["causes"][pair].items() if k} == {"copartition_violation": len(apart)}
    rows = spark.read.parquet(str(day / "detail")).collect()
    assert sorted((r["o_id"], r["order_partition"], r["user_partition"]) for r in rows) == sorted(
        (i, placed("orders", i, n), placed("shipments", i, n)) for i in apart)
    assert summary["output_records"][f"faust_{pair}"]["rows"] == summary["output_records"][f"ksqldb_{pair}"]["rows"] \
        == len(expected)


def test_a_window_changelog_made_before_the_segments_is_set_to_delete_by_time_too(
        broker_settings: Settings, tmp_path: Path) -> None:
    """Faust leaves an existing changelog as it is: the worker sets a window store's (made compacted only, before an
    expired segment wrote no deletion) as it makes new ones, and leaves the outer store's and a set one alone."""
    from streamapp.kafka.admin import create_topic, topics_configs, wait_listed
    from streamapp.worker.app import create_app
    from streamapp.worker.tables import configure_window_changelogs

    path = tmp_path / "joins.sql"
    path.write_text(STATEMENTS.format(tag="old"), encoding="utf-8")
    tables = create_app(broker_settings.replace(statements=str(path))).join_tables
    wanted = tables.window_changelogs()
    left, right = sorted(wanted)
    outer = next(t.changelog_topic.get_topic_name() for n, t in tables.windows.items() if n.endswith("-outer"))
    for topic in (left, outer):
        create_topic(broker_settings.kafka, topic, 1, config={"cleanup.policy": "compact"})
    wait_listed(broker_settings.kafka, [left, outer])
    retention = str((2 * 60 + 30) * 1000 + 24 * 3_600_000)  # the window's, and a day
    assert topics_configs(broker_settings.kafka, [left, right, outer]) == {  # one DescribeConfigs; the right missing
        left: {"cleanup.policy": "compact"}, outer: {"cleanup.policy": "compact"}}
    assert configure_window_changelogs(broker_settings.kafka, wanted) == [
        f"{left} (cleanup.policy=compact,delete, retention.ms={retention})"]  # the right one does not exist
    # The broker answers the alter before its DescribeConfigs shows it (KRaft applies it from the metadata log).
    wait_until(lambda: topic_configs(broker_settings.kafka, left).get("cleanup.policy") == "compact,delete", 30,
               f"{left}'s cleanup.policy described as set")
    assert {name: topic_configs(broker_settings.kafka, name).get("cleanup.policy") for name in (left, outer)} == {
        left: "compact,delete", outer: "compact"}
    assert topic_configs(broker_settings.kafka, left)["retention.ms"] == retention
    assert configure_window_changelogs(broker_settings.kafka, wanted) == []  # set once
