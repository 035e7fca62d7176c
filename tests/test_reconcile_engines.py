"""The nightly reconciliation on two real engines: the Faust worker against ksqlDB's joins executed by Kafka Streams.

Both engines run for real on the session's Apache Kafka broker over the same input
topics: the Faust worker (``faust -A streamapp worker``) and the Kafka Streams program
(``streamapp ksql-equivalent``: ksqlDB's five demo statements as a Kafka Streams
topology; not ksqlDB, which cannot run here).  The job reads both engines' outputs
with Spark's own Kafka source (``--kafka-reader spark``), as the nightly run does.

What the job must report is predicted here from the inputs alone: zlib's CRC-32
(librdkafka's ``consistent_random``, which placed the users) against the murmur2
reference (the Java client, ksqlDB, and both engines' repartition), and from which
engine was running when each order was written.
"""
from __future__ import annotations

import json
import random
import uuid
import zlib
from pathlib import Path
from typing import Any, Iterator

import pytest

from spark_batch.reconcile import main
from spark_batch.options import SEED_FLAGS
from streamapp.kafka.ksql_equivalent import KsqlEquivalent
from streamapp.kafka.admin import ensure_topics
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from workerkit import (
    DAY, DAY_START_MS, Order, isolated, make_users, murmur2_partition, produce, read_all, start_together, wait_for_users,
)

pytestmark = pytest.mark.long

PARTITIONS = 6
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
#: The second scenario's day: its own window, so that each reconciliation reads only its scenario's orders.
NEXT_DAY = "2026-11-22"


@pytest.fixture
def settings(broker_settings: Settings) -> Settings:
    """Topics, app ids and web port of this test only; the users and orders topics created for both engines."""
    tag = uuid.uuid4().hex[:8]
    s = isolated(broker_settings, "eng", partitions=PARTITIONS, partitioner="murmur2",
                 ksqldb_users_repartition_topic=f"eng_users_repartition_{tag}")
    ensure_topics(s.bootstrap_servers, {s.users_topic: PARTITIONS, s.orders_topic: PARTITIONS})
    return s


@pytest.fixture
def engines(settings: Settings, tmp_path: Path) -> Iterator[tuple[WorkerProcess, KsqlEquivalent]]:
    """Both engines running; each is stopped at the end whether or not the test stopped it first."""
    streams = KsqlEquivalent(settings, state_dir=tmp_path / "streams")
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    try:
        start_together(streams, worker)
        yield worker, streams
    finally:
        worker.stop()
        streams.stop()


def make_orders(users: list[str], first: int, rng: random.Random, day_start: int = DAY_START_MS) -> list[Order]:
    """One order per user, stamped one minute apart from ``first`` minutes into the day; product_id is unique."""
    return [Order(uid, day_start + HOUR_MS + (first + i) * 60_000, first + i + 1, rng.randint(1, 9),
                  round(rng.uniform(1, 100), 2), "web") for i, uid in enumerate(users)]


def produce_orders(settings: Settings, orders: list[Order]) -> None:
    """As ksqlDB's INSERTs would: murmur2, record timestamp = ts."""
    produce(settings.bootstrap_servers, settings.orders_topic, [(o.user_id.encode(), o.value(), o.ts) for o in orders])


def load_users(settings: Settings, worker: WorkerProcess, users: dict[str, dict[str, object]], partitioner: str,
               day_start: int = DAY_START_MS, loaded: int = 0) -> None:
    """Produce the users, stamped the day before the orders' day (each engine's table holds them before any
    order's time), and wait until both engines hold them and the ``loaded`` users before in both tables."""
    produce(settings.bootstrap_servers, settings.users_topic,
            [(uid.encode(), json.dumps(row).encode(), day_start - DAY_MS) for uid, row in users.items()], partitioner)
    wait_for_users([worker], loaded + len(users))
    # Kafka Streams' direct table reads the users topic in the orders' own task, older records first;
    # its repartitioned table is read back from the topic it writes: wait until they are all there.
    read_all(settings.bootstrap_servers, settings.ksqldb_users_repartition_topic, PARTITIONS, loaded + len(users))


def wait_outputs(settings: Settings, faust: int | None, streams: int | None) -> None:
    """Until each engine's two outputs hold that many records (None: that engine is stopped, not waited on)."""
    for count, topics in ((faust, (settings.merged_topic, settings.merged_repartition_topic)),
                          (streams, (settings.ksqldb_merged_topic, settings.ksqldb_merged_repartition_topic))):
        if count is None:
            continue
        for topic in topics:
            got = read_all(settings.bootstrap_servers, topic, PARTITIONS, count, timeout=120.0)
            assert len(got) == count, f"{topic}: {len(got)} records, expected {count}"


def reconcile(spark: Any, settings: Settings, output: Path,
              day: str = DAY) -> tuple[dict[str, Any], dict[tuple[str, str, str, int], str]]:
    """The job over ``day`` with Spark's Kafka source; its summary and its detail rows
    {(pair, status, user_id, product_id): cause}."""
    argv = ["--date", day, "--bootstrap-server", settings.bootstrap_servers, "--kafka-reader", "spark",
            "--max-mismatch-rate", "1", "--partitioner", "murmur2", "--output", str(output),
            *[arg for flag, setting in SEED_FLAGS.items() for arg in (flag, getattr(settings, setting))]]
    assert main(argv) == 0
    written = output / f"dt={day}"
    summary = json.loads((written / "summary.json").read_text())
    rows = spark.read.parquet(str(written / "detail")).collect()
    return summary, {(r["pair"], r["status"], r["user_id"], r["product_id"]): r["cause"] for r in rows}


def nonzero(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {pair: {name: n for name, n in by.items() if n} for pair, by in counts.items()}


def test_direct_joins_miss_each_misplaced_users_orders_and_a_stopped_engine_misses_exactly_its_orders(
        spark: Any, settings: Settings, engines: tuple[WorkerProcess, KsqlEquivalent], tmp_path: Path) -> None:
    """Two scenarios on one start of both engines (a start of each costs more than a scenario), each on a day of its
    own, so that each reconciliation reads only that scenario's orders.

    ``DAY``: users written by librdkafka's crc32: both direct joins miss the same orders, each a
    copartition_violation.  ``NEXT_DAY``: Kafka Streams stopped while orders B arrive: missing_in_ksqldb for B.
    Then Kafka Streams runs again (and catches up B) while the Faust worker is stopped for orders C:
    missing_in_faust for C only."""
    worker, streams = engines
    rng = random.Random(15)
    users = make_users(30, seed=15)
    load_users(settings, worker, users, "consistent_random")  # librdkafka's default: crc32, not murmur2
    orders = make_orders(list(users), 0, rng)
    produce_orders(settings, orders)
    wait_outputs(settings, faust=len(orders), streams=len(orders))

    misplaced = {o.user_id for o in orders
                 if zlib.crc32(o.user_id.encode()) % PARTITIONS != murmur2_partition(o.user_id.encode(), PARTITIONS)}
    assert 0 < len(misplaced) < len(orders), "30 users: crc32 and murmur2 agree on some and not others"
    summary, detail = reconcile(spark, settings, tmp_path / "out")
    assert summary["source"] == "kafka"
    assert nonzero(summary["statuses"]) == {
        "direct": {"match": len(orders) - len(misplaced), "both_unenriched": len(misplaced)},
        "repartition": {"match": len(orders)},
    }
    assert nonzero(summary["causes"]) == {"direct": {"copartition_violation": len(misplaced)}, "repartition": {}}
    expected = {("direct", "both_unenriched", o.user_id, o.product_id): "copartition_violation"
                for o in orders if o.user_id in misplaced}
    assert detail == expected
    # the partitions the job names are where the users and the orders really are
    cells = {(c["pair"], c["order_partition"], c["user_partition"]) for c in summary["by_partition_pair"]}
    assert cells == {("direct", murmur2_partition(u.encode(), PARTITIONS), zlib.crc32(u.encode()) % PARTITIONS)
                     for u in misplaced}

    # the next day: an engine stopped for part of the stream
    before, next_day = len(orders), DAY_START_MS + DAY_MS
    rng = random.Random(16)
    users, loaded = make_users(24, seed=16), len(users)
    load_users(settings, worker, users, "murmur2_random", next_day, loaded)  # co-partitioned: every join finds its user
    ids = list(users)
    a, b, c = (make_orders(ids[:8], 0, rng, next_day), make_orders(ids[8:16], 8, rng, next_day),
               make_orders(ids[16:], 16, rng, next_day))

    produce_orders(settings, a)
    wait_outputs(settings, faust=before + len(a), streams=before + len(a))
    streams.stop()
    produce_orders(settings, b)
    wait_outputs(settings, faust=before + len(a + b), streams=None)
    summary, detail = reconcile(spark, settings, tmp_path / "streams-stopped", NEXT_DAY)
    assert nonzero(summary["statuses"]) == {pair: {"match": len(a), "missing_in_ksqldb": len(b)}
                                            for pair in ("direct", "repartition")}
    assert detail == {(pair, "missing_in_ksqldb", o.user_id, o.product_id): "other"
                      for pair in ("direct", "repartition") for o in b}

    streams.start()
    worker.stop()
    produce_orders(settings, c)
    wait_outputs(settings, faust=None, streams=before + len(a + b + c))
    summary, detail = reconcile(spark, settings, tmp_path / "faust-stopped", NEXT_DAY)
    assert nonzero(summary["statuses"]) == {pair: {"match": len(a + b), "missing_in_faust": len(c)}
                                            for pair in ("direct", "repartition")}
    assert detail == {(pair, "missing_in_faust", o.user_id, o.product_id): "other"
                      for pair in ("direct", "repartition") for o in c}
