"""A second join declared only in SQL, on the real broker: customers × payments (issue 33's proof).

The customers table has a BIGINT key in KAFKA format and is written with librdkafka's
default partitioner (crc32, ``consistent_random``); the payments stream is written with the
Java client's (murmur2) and takes its event time from ``TIMESTAMP='paid_at'``.  As the seed
does, the statements copy the table through the join's partitioner (``CREATE TABLE ... AS
SELECT``) and join the payments with each of the two tables.

- the join against the copied table writes exactly what the test runner predicts for the same
  records (the customers, then the payments, as they were produced);
- the direct join misses exactly the payments whose key crc32 and murmur2 place apart;
- the guard names the broken pair.
"""
from __future__ import annotations

import json
import random
import re
import struct
from pathlib import Path

import pytest

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.reader import Record
from streamapp.settings import Settings
from streamapp.sql import engine
from streamapp.sql.formats import Codec
from streamapp.sql.runner import TestRecord, read_back, run
from streamapp.worker.process import WorkerProcess

from workerkit import declare, group_progress, murmur2_partition, produce, read_all, start_together, stats, wait_until

pytestmark = pytest.mark.long

CUSTOMERS, PAYMENTS = 60, 120
#: customers x payments, each join with the table as written and with its copy through murmur2 (also the
#: statements of the second join's benchmark).
STATEMENTS = (Path(__file__).resolve().parent.parent / "benchmarks" / "second_join.sql").read_text(encoding="utf-8")


def crc32_partition(key: bytes, n: int) -> int:
    import zlib

    return (zlib.crc32(key) & 0xFFFFFFFF) % n


def test_a_join_declared_in_sql_runs_as_the_test_runner_predicts_and_misses_where_the_partitioners_differ(
        broker_settings: Settings, tmp_path: Path) -> None:
    declared = declare(broker_settings, tmp_path, STATEMENTS, "decl")
    tag, plan, settings = declared.tag, declared.plan, declared.settings
    n = settings.partitions
    rng = random.Random(33)
    ids = rng.sample(range(1, 10**12), CUSTOMERS)
    customers = [(struct.pack(">q", i), json.dumps({"email": f"c{i}@example.com", "tier": rng.choice(["gold", "blue"])})
                  .encode()) for i in ids]
    payments = [(struct.pack(">q", rng.choice(ids)),
                 json.dumps({"amount": f"{rng.randint(1, 99999) / 100:.2f}", "currency": "EUR",
                             "paid_at": 1_700_000_000_000 + k}).encode(), 1_700_000_000_000 + k)
                for k in range(PAYMENTS)]

    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        produce(settings.bootstrap_servers, f"customers_{tag}", customers, "consistent_random")
        wait_until(lambda: stats(worker)["rows"].get(f"streamapp_customers_by_id_{tag}") == CUSTOMERS, 90,
                   "both customer tables loaded", [worker])
        produce(settings.bootstrap_servers, f"payments_{tag}", payments, "murmur2_random")
        direct = read_all(settings.bootstrap_servers, f"streamapp_payments_enriched_{tag}", n, PAYMENTS)
        by_id = read_all(settings.bootstrap_servers, f"streamapp_payments_enriched_by_id_{tag}", n, PAYMENTS)

        def guard_problems() -> str:
            return " ".join(worker.get("/copartition").json().get("problems", []))

        # the guard's first run saw empty topics; it runs again once keyed records were read
        # judged by the guard's sample, or by the worker's own placement check (whichever comes first)
        problems = wait_until(lambda: re.search(f"customers_{tag} (was|is) not written with murmur2",
                                                guard_problems()) and guard_problems(),
                              90, "the guard to judge the customers topic", [worker])
    finally:
        assert worker.stop() == 0, worker.tail()

    # the test runner on the same records, in the order they were produced
    inputs = [TestRecord(f"customers_{tag}", ids[i], json.loads(v), None, i) for i, (_, v) in enumerate(customers)]
    inputs += [TestRecord(f"payments_{tag}", struct.unpack(">q", k)[0], json.loads(v), None, CUSTOMERS + i)
               for i, (k, v, _) in enumerate(payments)]
    predicted = run(plan, inputs).actual[f"payments_enriched_by_id_{tag}"]
    sink = Codec(plan.source("PAYMENTS_ENRICHED_BY_ID"))
    assert sorted(logical(sink, r) for r in by_id) == sorted(logical_test(p) for p in predicted)
    assert len(by_id) == PAYMENTS and all(json.loads(r.value)["EMAIL"] is not None for r in by_id)

    # the direct join: a miss exactly where librdkafka's crc32 and the Java client's murmur2 disagree
    for record in direct:
        apart = crc32_partition(record.key, n) != murmur2_partition(record.key, n)
        assert (json.loads(record.value)["EMAIL"] is None) == apart, record
    assert len(direct) == PAYMENTS and any(json.loads(r.value)["EMAIL"] is None for r in direct)

    assert f"direct join (streamapp_payments_enriched_{tag})" in problems
    assert f"repartitioned join (streamapp_payments_enriched_by_id_{tag}) is the correct one" in problems


def logical(codec: Codec, record: Record) -> tuple:
    decoded = read_back(codec, engine.Record("out", record.key, record.value, record.timestamp), 0)
    return decoded.key, json.dumps(decoded.value, sort_keys=True, default=str), record.timestamp


def logical_test(record: TestRecord) -> tuple:
    return record.key, json.dumps(record.value, sort_keys=True, default=str), record.timestamp


REKEYED = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, email STRING, tier STRING)
  WITH (KAFKA_TOPIC='customers_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM payments (payment_id STRING KEY, customer_id BIGINT, amount DECIMAL(10, 2), paid_at BIGINT)
  WITH (KAFKA_TOPIC='payments_{tag}', VALUE_FORMAT='JSON', TIMESTAMP='paid_at');
CREATE STREAM paid WITH (KAFKA_TOPIC='paid_{tag}') AS
  SELECT p.payment_id, p.customer_id, amount, paid_at, tier
  FROM payments p LEFT JOIN customers c ON p.customer_id = c.id EMIT CHANGES;
CREATE STREAM refunds (customer_id BIGINT KEY, amount DOUBLE)
  WITH (KAFKA_TOPIC='refunds_{tag}', KEY_FORMAT='JSON', VALUE_FORMAT='JSON');
CREATE STREAM refunded WITH (KAFKA_TOPIC='refunded_{tag}') AS
  SELECT r.customer_id, amount, email FROM refunds r JOIN customers c ON r.customer_id = c.id EMIT CHANGES;
"""


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_join_rekeys_the_stream_or_the_table_as_ksqldb_does(
        guarantee: str, broker_settings: Settings, tmp_path: Path) -> None:
    """The payments are keyed by payment id (written by librdkafka, crc32) and joined on their customer_id column:
    the worker re-keys them into the join's repartition topic by customer id, in the table's key format and
    murmur2's partition, then joins each there; every payment with a customer finds it, as the test runner
    predicts, whatever partitioner wrote the payments.

    The refunds are keyed by customer id in JSON (``5``, not the customers' 8-byte KAFKA BIGINT), so murmur2
    puts a customer and its refunds apart: the worker re-keys the customers into the JSON key format (ksqlDB's
    ``RightSourceKeyed-SelectKey-repartition``) and every refund finds its customer there.

    Under exactly_once each of the three streams the worker reads (payments, their repartition topic, refunds)
    has its own transactions, and the same records come out, once each."""
    declared = declare(broker_settings, tmp_path, REKEYED, "rekey", processing_guarantee=guarantee)
    tag, plan, settings = declared.tag, declared.plan, declared.settings
    n = settings.partitions
    rng = random.Random(97)
    ids = rng.sample(range(1, 10**12), 40)
    customers = [(struct.pack(">q", i), json.dumps({"email": f"c{i}@x", "tier": "gold"}).encode()) for i in ids]
    payments = [(f"pay-{k}".encode(), json.dumps({"customer_id": rng.choice(ids + [None]), "amount": "1.50",
                                                 "paid_at": 1_700_000_000_000 + k}).encode(),
                 1_700_000_000_000 + k) for k in range(80)]
    refunds = [(str(rng.choice(ids)).encode(), json.dumps({"amount": 0.5}).encode()) for _ in range(40)]
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        produce(settings.bootstrap_servers, f"customers_{tag}", customers, "murmur2_random")
        wait_until(lambda: stats(worker)["rows"].get(f"customers_{tag}") == len(customers), 90,
                   "the customers loaded", [worker])
        produce(settings.bootstrap_servers, f"payments_{tag}", payments, "consistent_random")
        out = read_all(settings.bootstrap_servers, f"streamapp_paid_{tag}", n, len(payments))
        repartitioned = read_all(settings.bootstrap_servers, f"{settings.app_id}-PAID-Join-repartition", n,
                                 len(payments))
        rekeyed_customers = read_all(settings.bootstrap_servers,
                                     f"{settings.app_id}-REFUNDED-RightSourceKeyed-SelectKey-repartition", n,
                                     len(customers))
        produce(settings.bootstrap_servers, f"refunds_{tag}", refunds, "murmur2_random")
        refunded = read_all(settings.bootstrap_servers, f"streamapp_refunded_{tag}", n, len(refunds))
        for topic in (f"payments_{tag}", f"refunds_{tag}"):  # every stream's offsets committed, in transactions or not
            wait_until(lambda: group_progress(settings.bootstrap_servers, settings.app_id, topic, n)[0], 30,
                       f"the worker to commit {topic}", [worker])
    finally:
        assert worker.stop() == 0, worker.tail()
    # without the re-key most refunds would look in another partition than their customer's
    assert sum(murmur2_partition(k, n) != murmur2_partition(struct.pack(">q", int(k)), n) for k, _ in refunds) > 0
    assert sorted((r.key, r.partition) for r in rekeyed_customers) == sorted(
        (str(i).encode(), murmur2_partition(str(i).encode(), n)) for i in ids)
    assert sorted((int(r.key), json.loads(r.value)["EMAIL"], r.partition) for r in refunded) == sorted(
        (int(k), f"c{int(k)}@x", murmur2_partition(k, n)) for k, _ in refunds)
    inputs = [TestRecord(f"customers_{tag}", ids[i], json.loads(v), None, i) for i, (_, v) in enumerate(customers)]
    inputs += [TestRecord(f"payments_{tag}", k.decode(), json.loads(v), None, len(customers) + i)
               for i, (k, v, _) in enumerate(payments)]
    predicted = run(plan, inputs).actual[f"paid_{tag}"]
    sink = Codec(plan.source("PAID"))
    assert sorted(logical(sink, r) for r in out) == sorted(logical_test(p) for p in predicted)
    matched = [r for r in out if json.loads(r.value)["TIER"] is not None]
    assert len(matched) == sum(1 for _, v, _ in payments if json.loads(v)["customer_id"] is not None) > 0
    # the repartition topic: keyed by the customer id in the table's format, in murmur2's partition
    assert all(r.key is None or r.partition == murmur2_partition(r.key, n) for r in repartitioned)
    assert {r.key for r in repartitioned if r.key is not None} <= {k for k, _ in customers}


def test_the_worker_and_kafka_streams_agree_record_for_record_on_the_declared_join(
        broker_settings: Settings, tmp_path: Path) -> None:
    """customers × payments declared only in SQL, run by both engines on the broker: the worker writes
    streamapp_<topic>, Kafka Streams (PlanStreams, one application per query) ksqlDB's own topics; the same
    records, the direct join's misses included."""
    from streamapp.kafka.ksql_equivalent import KsqlEquivalent, cluster_plan

    declared = declare(broker_settings, tmp_path, STATEMENTS, "both")
    tag, settings = declared.tag, declared.settings
    n = settings.partitions
    rng = random.Random(34)
    ids = rng.sample(range(1, 10**12), 30)
    customers = [(struct.pack(">q", i), json.dumps({"email": f"c{i}@x", "tier": "blue"}).encode()) for i in ids]
    payments = [(struct.pack(">q", rng.choice(ids)), json.dumps({"amount": 2, "currency": "EUR",
                                                                 "paid_at": 1_700_000_000_000 + k}).encode(),
                 1_700_000_000_000 + k) for k in range(60)]
    ensure_topics(settings.bootstrap_servers, {f"customers_{tag}": n, f"payments_{tag}": n})
    produce(settings.bootstrap_servers, f"customers_{tag}", customers, "consistent_random")
    worker = WorkerProcess(settings, tmp_path / "worker.log")
    streams = KsqlEquivalent(settings, state_dir=tmp_path / "ks", plan=cluster_plan(settings))
    try:
        start_together(streams, worker)
        assert set(streams.created_topics) >= {f"payments_enriched_{tag}", f"customers_by_id_{tag}"}
        wait_until(lambda: stats(worker)["rows"].get(f"streamapp_customers_by_id_{tag}") == len(customers), 90,
                   "the worker's tables", [worker])
        for query, table in (("PAYMENTS_ENRICHED", f"customers_{tag}"),
                             ("PAYMENTS_ENRICHED_BY_ID", f"customers_by_id_{tag}")):  # Kafka Streams' two tables
            group = f"{streams.application_id}-{query}"
            wait_until(lambda: group_progress(settings.bootstrap_servers, group, table, n) == (True, len(customers)), 90,
                       f"{group} to load {table}", [worker])
        produce(settings.bootstrap_servers, f"payments_{tag}", payments, "murmur2_random")
        for output in (f"payments_enriched_{tag}", f"payments_enriched_by_id_{tag}"):
            ours = read_all(settings.bootstrap_servers, f"streamapp_{output}", n, len(payments))
            theirs = read_all(settings.bootstrap_servers, output, n, len(payments))
            assert sorted((r.key, r.value, r.timestamp, r.partition) for r in ours) == \
                sorted((r.key, r.value, r.timestamp, r.partition) for r in theirs), output
            assert len(ours) == len(payments)
    finally:
        streams.stop()
        assert worker.stop() == 0, worker.tail()

