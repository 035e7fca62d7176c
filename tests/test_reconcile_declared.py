"""The reconciliation of a second join declared only in SQL: customers × payments (issue 34, item 3).

The statements are tests/test_declared_join_broker.py's: a customers table with a BIGINT key in KAFKA
format (8 bytes, big-endian), written with librdkafka's default partitioner (crc32), copied through the
join's partitioner (``CREATE TABLE ... AS SELECT``), and a payments stream written with murmur2 whose event
time is ``TIMESTAMP='paid_at'``, joined with each of the two tables.  The job reads them with
``--statements FILE``: its pairs are ``direct`` (the customers as their producer placed them) and
``repartition`` (the copy); a row's identity is the payment's columns (CUSTOMER_ID, AMOUNT, CURRENCY,
PAID_AT), the table's EMAIL and TIER decide enrichment.

The outputs are the plan's own encodings (:class:`streamapp.sql.formats.Codec` of each sink) of the
rows both engines write: the by-id join finds every known customer, the direct join none whose key crc32
and murmur2 place apart; a few perturbations (a duplicate, a wrong TIER, a missing row, a moved one)
must be found with their causes.  On files (no broker), and on the broker (written by librdkafka, each
record in the partition its engine or producer picks) with both Kafka readers.
"""
from __future__ import annotations

import json
import random
import struct
import uuid
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import reconcile_scenario as sc
from spark_batch.reconcile import main
from streamapp.sql.formats import Codec
from streamapp.sql.plan import Plan
from streamapp.sql.planner import plan_file

from test_declared_join_broker import STATEMENTS

pytestmark = pytest.mark.long

PARTITIONS = 6
PAIRS = ("direct", "repartition")
#: The sinks of the two joins, by pair.
SINKS = {"direct": "PAYMENTS_ENRICHED", "repartition": "PAYMENTS_ENRICHED_BY_ID"}


def crc32_partition(key: bytes) -> int:
    return zlib.crc32(key) % PARTITIONS


def murmur2_partition(key: bytes) -> int:
    return sc.murmur2_partition(key, PARTITIONS)


@dataclass
class Payments:
    """The inputs, both engines' outputs (role -> records) and every row's expected (status, cause)."""

    plan: Plan
    tag: str
    records: dict[str, list[sc.Record]] = field(default_factory=dict)
    #: (pair, customer id, paid_at) -> (status, cause)
    expected: dict[tuple[str, int, int], tuple[str, str]] = field(default_factory=dict)

    def topics(self) -> dict[str, str]:
        """Role -> topic, as the job names them (the outputs: the worker's prefixed topic, ksqlDB's)."""
        sinks = {pair: self.plan.source(sink).topic for pair, sink in SINKS.items()}
        return {"customers": f"customers_{self.tag}", "payments": f"payments_{self.tag}",
                **{f"faust_{pair}": f"streamapp_{topic}" for pair, topic in sinks.items()},
                **{f"ksqldb_{pair}": topic for pair, topic in sinks.items()}}

    def statuses(self, pair: str) -> dict[str, int]:
        counted: dict[str, int] = {}
        for (p, *_), (status, _) in self.expected.items():
            if p == pair:
                counted[status] = counted.get(status, 0) + 1
        return counted

    def causes(self, pair: str) -> dict[str, int]:
        counted: dict[str, int] = {}
        for (p, *_), (status, cause) in self.expected.items():
            if p == pair and status != "match":
                counted[cause] = counted.get(cause, 0) + 1
        return counted


def statements(directory: Path, tag: str) -> Path:
    path = directory / f"payments_{tag}.sql"
    path.write_text(STATEMENTS.format(tag=tag), encoding="utf-8")
    return path


def build(path: Path, tag: str, customers: int = 40, payments: int = 80, seed: int = 34,
          faust_perturbed: bool = True) -> Payments:
    """Customers by crc32 a day early, payments by murmur2 in the day; both engines' outputs, perturbed
    (the worker's side only with ``faust_perturbed``; ksqlDB's misses one by-id row either way)."""
    plan = plan_file(path)
    rng = random.Random(seed)
    s = Payments(plan, tag)
    ids = rng.sample(range(1, 10**12), customers)
    unknown = max(ids) + 1
    table = {i: {"email": f"c{i}@example.com", "tier": rng.choice(["gold", "blue"])} for i in ids}
    key = Codec(plan.source("PAYMENTS")).encode_key
    s.records["customers"] = [sc.Record(key(i), row, sc.DAY_START_MS - 24 * sc.HOUR_MS, crc32_partition(key(i)))
                              for i, row in table.items()]
    paid = [(rng.choice(ids), Decimal(rng.randint(1, 99999)) / 100, sc.DAY_START_MS + sc.HOUR_MS + k * 60_000)
            for k in range(payments)]
    paid.append((unknown, Decimal("1.50"), sc.DAY_START_MS + 2 * sc.HOUR_MS + 30_000))
    s.records["payments"] = [sc.Record(key(i), {"amount": f"{amount:.2f}", "currency": "EUR", "paid_at": at}, at,
                                       murmur2_partition(key(i))) for i, amount, at in paid]
    duplicate, wrong_tier, missing = paid[0], paid[1], paid[2]
    moved = next(p for p in paid[3:-1] if crc32_partition(key(p[0])) == murmur2_partition(key(p[0])))
    if not faust_perturbed:
        duplicate = wrong_tier = moved = (0, Decimal(0), 0)  # no such payment
    for pair, sink in SINKS.items():
        codec = Codec(plan.source(sink))
        for side in ("faust", "ksqldb"):
            role = f"{side}_{pair}"
            s.records[role] = []
            for payment in paid:
                customer, amount, at = payment
                found = customer in table and (pair == "repartition" or crc32_partition(key(customer))
                                               == murmur2_partition(key(customer)))
                row = {"AMOUNT": amount, "CURRENCY": "EUR", "PAID_AT": at,
                       "EMAIL": table[customer]["email"] if found else None,
                       "TIER": table[customer]["tier"] if found else None}
                copies = 1
                if pair == "repartition" and side == "faust" and payment == duplicate:
                    copies = 2
                if pair == "repartition" and side == "faust" and payment == wrong_tier:
                    row["TIER"] = "platinum"
                if pair == "repartition" and side == "ksqldb" and payment == missing:
                    copies = 0
                where = murmur2_partition(key(customer))
                if pair == "direct" and side == "faust" and payment == moved:
                    where = (where + 1) % PARTITIONS
                value = json.loads(codec.encode_value(row))  # the sink's JSON, DECIMAL as ksqlDB writes it
                s.records[role] += [sc.Record(codec.encode_key(customer), value, at, where) for _ in range(copies)]
    for customer, _, at in paid:
        for pair in PAIRS:
            placed = crc32_partition(key(customer)) == murmur2_partition(key(customer))
            status, cause = "match", "other"
            if customer == unknown:
                status, cause = "both_unenriched", "unknown_user"
            elif pair == "direct" and not placed:
                status, cause = "both_unenriched", "copartition_violation"
            payment = next(p for p in paid if p[0] == customer and p[2] == at)
            if pair == "repartition" and payment == duplicate:
                status, cause = "duplicate", "other"
            if pair == "repartition" and payment == wrong_tier:
                status, cause = "value_mismatch", "other"
            if pair == "repartition" and payment == missing:
                status, cause = "missing_in_ksqldb", "other"
            if pair == "direct" and payment == moved:
                status, cause = "partition_mismatch", "other"
            s.expected[(pair, customer, at)] = (status, cause)
    return s


def export(directory: Path, topics: dict[str, str], by_role: dict[str, list[sc.Record]], decoded: tuple[str, ...] = ()) -> None:
    """Kafka-shaped Parquet exports (binary keys: the 8-byte BIGINT), roles in ``decoded`` one column per field."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    for role, records in by_role.items():
        if role in decoded:
            rows = [{"customer_id": struct.unpack(">q", r.key)[0], **{k.lower(): v for k, v in r.value.items()},
                     "partition": r.partition, "offset": offset} for offset, r in enumerate(records)]
            for row in rows:
                row["amount"] = Decimal(str(row["amount"])).quantize(Decimal("0.01"))
            pq.write_table(pa.Table.from_pylist(rows), directory / f"{topics[role]}.parquet")
            continue
        table = pa.table({
            "key": pa.array([r.key for r in records], pa.binary()),
            "value": pa.array([json.dumps(r.value).encode() for r in records], pa.binary()),
            "partition": pa.array([r.partition for r in records], pa.int32()),
            "offset": pa.array(range(len(records)), pa.int64()),
            "timestamp": pa.array([r.timestamp for r in records], pa.int64()),
        })
        pq.write_table(table, directory / f"{topics[role]}.parquet")


def check_run(spark: Any, s: Payments, output: Path) -> dict[str, Any]:
    """The run's summary and detail are the expected ones, row for row; returns the summary."""
    day = output / f"dt={sc.DAY}"
    summary = json.loads((day / "summary.json").read_text())
    for pair in PAIRS:
        assert {st: n for st, n in summary["statuses"][pair].items() if n} == s.statuses(pair), pair
        assert {c: n for c, n in summary["causes"][pair].items() if n} == s.causes(pair), pair
    rows = spark.read.parquet(str(day / "detail")).collect()
    assert {(r["pair"], r["customer_id"], r["paid_at"]): (r["status"], r["cause"]) for r in rows} == {
        k: v for k, v in s.expected.items() if v[0] != "match"}
    wrong = [r for r in rows if r["status"] == "value_mismatch"]
    assert [r["mismatched_columns"] for r in wrong] == [["TIER"]]
    # the partitions named are where the customers and the payments are: crc32 and murmur2 of the 8-byte key
    cells = {(c["pair"], c["order_partition"], c["user_partition"]) for c in summary["by_partition_pair"]}
    violations = {k[1] for k, (status, cause) in s.expected.items() if cause == "copartition_violation"}
    key = Codec(s.plan.source("PAYMENTS")).encode_key
    assert {c for c in cells if c[0] == "direct"} >= {
        ("direct", murmur2_partition(key(i)), crc32_partition(key(i))) for i in violations}
    assert summary["pairs"]["direct"]["identity"] == ["CUSTOMER_ID", "AMOUNT", "CURRENCY", "PAID_AT"]
    assert summary["pairs"]["repartition"]["table_columns"] == ["EMAIL", "TIER"]
    assert summary["pairs"]["repartition"]["table_input"] == "CUSTOMERS"
    assert summary["input_records"]["payments"]["rows"] == len(s.records["payments"])
    assert summary["input_records"]["customers"]["rows"] == len(s.records["customers"])
    html = (day / "report.html").read_text()
    assert "copartition_violation" in html and "PAYMENTS_ENRICHED_BY_ID" in html
    return summary


def test_a_second_declared_join_reconciles_from_files(spark, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    path = statements(tmp_path, tag)
    s = build(path, tag)
    assert s.causes("direct")["copartition_violation"] > 0  # 40 customers: crc32 and murmur2 disagree on some
    export(tmp_path / "in", s.topics(), s.records, decoded=("ksqldb_repartition",))
    argv = ["--statements", str(path), "--date", sc.DAY, "--source", "files", "--input", str(tmp_path / "in"),
            "--output", str(tmp_path / "out"), "--partitions", str(PARTITIONS), "--partitioner", "murmur2"]
    assert main([*argv, "--max-mismatch-rate", "1"]) == 0
    summary = check_run(spark, s, tmp_path / "out")
    assert summary["topics"] == s.topics() and summary["source"] == "files"
    assert main([*argv, "--max-mismatch-rate", "0"]) == 1  # every pair has mismatches: breached


def test_a_join_output_exported_without_a_row_is_left_out_of_the_classification(spark, tmp_path: Path) -> None:
    """Both engines' by-id outputs exported as Parquet without a row (as the cold benchmark's second join has them):
    the classification reads the direct pair's exports only, the by-id pair counts no record and no status, and the
    direct pair's verdicts are those of a run that reads all four."""
    from spark_batch.options import parse
    from spark_batch.reconcile import _inputs

    tag = uuid.uuid4().hex[:8]
    path = statements(tmp_path, tag)
    s = build(path, tag)
    records = {**s.records, "faust_repartition": [], "ksqldb_repartition": []}
    topics = s.topics()
    export(tmp_path / "in", topics, records)
    argv = ["--statements", str(path), "--date", sc.DAY, "--source", "files", "--input", str(tmp_path / "in"),
            "--output", str(tmp_path / "out"), "--partitions", str(PARTITIONS), "--partitioner", "murmur2",
            "--max-mismatch-rate", "1"]
    [by_side] = _inputs(spark, parse(argv), tmp_path / "out").outputs
    read = {side: {uri.rsplit("/", 1)[-1] for uri in frame.inputFiles()} for side, frame in by_side.items()}
    assert read == {side: {f"{topics[f'{side}_direct']}.parquet"} for side in ("faust", "ksqldb")}
    assert main(argv) == 0
    summary = json.loads((tmp_path / "out" / f"dt={sc.DAY}" / "summary.json").read_text())
    assert {st: n for st, n in summary["statuses"]["direct"].items() if n} == s.statuses("direct")
    assert {c: n for c, n in summary["causes"]["direct"].items() if n} == s.causes("direct")
    assert not any(summary["statuses"]["repartition"].values())
    assert [summary["output_records"][f"{side}_repartition"] for side in ("faust", "ksqldb")] == [
        {"rows": 0, "undecodable": 0}] * 2
    assert summary["output_records"]["faust_direct"]["rows"] == len(s.records["faust_direct"])


def test_statements_that_cannot_be_reconciled_are_one_line_exit_2(tmp_path: Path, capsys) -> None:
    """A file that cannot be read or planned, one without a join, a seed flag with a statements file: one line naming it."""
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE STREAM s (id BIGINT KEY) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='NOPE');\n")
    copy = tmp_path / "copy.sql"
    copy.write_text("CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');\n")
    good = statements(tmp_path, "x")
    cases = [
        (["--statements", str(tmp_path / "missing.sql")], "missing.sql"),
        (["--statements", str(bad)], "bad.sql"),
        (["--statements", str(copy)], "copy.sql: no query"),
        (["--statements", str(good), "--users-topic", "people"], "--users-topic"),
    ]
    for extra, named in cases:
        assert main(["--date", sc.DAY, "--output", str(tmp_path / "out"), *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith("reconcile: error: ") and named in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("reader", ["spark", "python"])
def test_a_second_declared_join_reconciles_from_kafka(spark, bootstrap: str, tmp_path: Path, reader: str) -> None:
    """The same rows on the broker, written by librdkafka (customers by crc32, the rest by murmur2): the job
    finds the same statuses and causes with either Kafka reader."""
    tag = uuid.uuid4().hex[:8]
    path = statements(tmp_path, tag)
    s = build(path, tag, customers=24, payments=40, seed=35)
    topics = s.topics()
    from streamapp.kafka.admin import ensure_topics

    ensure_topics(bootstrap, {topic: PARTITIONS for topic in topics.values()})
    sc.produce(bootstrap, topics, sc.Scenario(PARTITIONS, {role: s.records[role] for role in topics}))
    output = tmp_path / "out"
    assert main(["--statements", str(path), "--date", sc.DAY, "--bootstrap-server", bootstrap, "--kafka-reader", reader,
                 "--partitioner", "murmur2", "--output", str(output), "--max-mismatch-rate", "1"]) == 0
    summary = check_run(spark, s, output)
    assert summary["offsets"]["topics"]["customers"]["filter_by_time"] is False
    assert summary["stream_partitions"] == {"payments": PARTITIONS}



def test_joins_on_two_streams_one_rekeyed_reconcile_from_files(spark, tmp_path: Path) -> None:
    """Two joins of other shapes in one file (test_declared_join_broker.py's REKEYED): payments keyed by payment id
    joined on their CUSTOMER_ID column (the stream re-keyed; the output keyed by the customer), and refunds keyed
    in JSON without a TIMESTAMP= (their identity's time is the record's) joined with a table the worker re-keys.
    Each is classified on its own identity, in one run: a missing payment, a refund with another EMAIL."""
    from test_declared_join_broker import REKEYED

    tag = uuid.uuid4().hex[:8]
    path = tmp_path / "rekeyed.sql"
    path.write_text(REKEYED.format(tag=tag), encoding="utf-8")
    plan = plan_file(path)
    rng = random.Random(36)
    ids = rng.sample(range(1, 10**9), 12)
    customers = {i: {"email": f"c{i}@x", "tier": rng.choice(["gold", "blue"])} for i in ids}
    codecs = {name: Codec(plan.source(name)) for name in ("CUSTOMERS", "PAYMENTS", "REFUNDS", "PAID", "REFUNDED")}
    at = iter(range(sc.DAY_START_MS + sc.HOUR_MS, sc.DAY_START_MS + 2 * sc.HOUR_MS, 1000))
    payments = [(f"pay-{k}", rng.choice(ids), next(at)) for k in range(20)]
    refunds = [(rng.choice(ids), next(at)) for _ in range(10)]

    def record(codec: Codec, row: dict[str, Any], timestamp: int) -> sc.Record:
        source = codec.source
        key = codec.encode_key(row[source.key_columns[0].name])
        value = json.loads(codec.encode_value({c.name: row[c.name] for c in source.value_columns}))
        return sc.Record(key, value, timestamp, murmur2_partition(key))

    records = {
        "customers": [record(codecs["CUSTOMERS"], {"ID": i, "EMAIL": c["email"], "TIER": c["tier"]},
                             sc.DAY_START_MS - sc.HOUR_MS) for i, c in customers.items()],
        "payments": [record(codecs["PAYMENTS"], {"PAYMENT_ID": p, "CUSTOMER_ID": c, "AMOUNT": Decimal("1.50"), "PAID_AT": t}, t)
                     for p, c, t in payments],
        "refunds": [record(codecs["REFUNDS"], {"CUSTOMER_ID": c, "AMOUNT": 0.5}, t) for c, t in refunds],
    }
    for side in ("faust", "ksqldb"):
        records[f"{side}_direct"] = [
            record(codecs["PAID"], {"CUSTOMER_ID": c, "PAYMENT_ID": p, "AMOUNT": Decimal("1.50"), "PAID_AT": t,
                                    "TIER": customers[c]["tier"]}, t)
            for p, c, t in payments if not (side == "faust" and p == payments[4][0])]
        records[f"{side}_repartition"] = [
            record(codecs["REFUNDED"], {"CUSTOMER_ID": c, "AMOUNT": 0.5,
                                        "EMAIL": "other@x" if side == "ksqldb" and t == refunds[2][1] else customers[c]["email"]}, t)
            for c, t in refunds]
    topics = {"customers": f"customers_{tag}", "payments": f"payments_{tag}", "refunds": f"refunds_{tag}",
              "faust_direct": f"streamapp_paid_{tag}", "ksqldb_direct": f"paid_{tag}",
              "faust_repartition": f"streamapp_refunded_{tag}", "ksqldb_repartition": f"refunded_{tag}"}
    export(tmp_path / "in", topics, records)
    assert main(["--statements", str(path), "--date", sc.DAY, "--source", "files", "--input", str(tmp_path / "in"),
                 "--output", str(tmp_path / "out"), "--partitions", str(PARTITIONS), "--max-mismatch-rate", "1"]) == 0
    day = tmp_path / "out" / f"dt={sc.DAY}"
    summary = json.loads((day / "summary.json").read_text())
    assert summary["topics"] == topics
    assert summary["pairs"]["direct"]["identity"] == ["PAYMENT_ID", "CUSTOMER_ID", "AMOUNT", "PAID_AT"]  # as projected
    assert summary["pairs"]["repartition"]["identity"] == ["CUSTOMER_ID", "AMOUNT", "ROWTIME"]
    assert {p: {st: n for st, n in by.items() if n} for p, by in summary["statuses"].items()} == {
        "direct": {"match": len(payments) - 1, "missing_in_faust": 1},
        "repartition": {"match": len(refunds) - 1, "value_mismatch": 1}}
    rows = {r["pair"]: r for r in spark.read.parquet(str(day / "detail")).collect()}
    assert (rows["direct"]["payment_id"], rows["direct"]["customer_id"], rows["direct"]["cause"]) == (
        payments[4][0], payments[4][1], "other")
    assert (rows["repartition"]["customer_id"], rows["repartition"]["rowtime"], rows["repartition"]["mismatched_columns"]) == (
        refunds[2][0], refunds[2][1], ["EMAIL"])
    assert rows["direct"]["rowtime"] is None and rows["repartition"]["payment_id"] is None  # each pair its own identity


def test_the_workers_own_output_of_a_declared_join_reconciles(spark, broker_settings, tmp_path: Path) -> None:
    """The real Faust worker runs the statements and writes its side; ksqlDB's side is what it would write
    (ksqlDB cannot run here), less one by-id row. The worker's own encoding (the 8-byte key, the DECIMAL
    AMOUNT, the record time) meets the predicted one row for row: the direct join's misses, where crc32 and
    murmur2 place a customer apart, are each a ``copartition_violation`` in both engines, the lacking row
    ``missing_in_ksqldb``, and nothing else differs."""
    from streamapp.kafka.broker import free_port
    from streamapp.worker.process import WorkerProcess
    from workerkit import read_all, stats, wait_until

    tag = uuid.uuid4().hex[:8]
    path = statements(tmp_path, tag)
    settings = broker_settings.replace(statements=str(path), app_id=f"rec-{tag}", web_port=free_port(),
                                       dead_letter_topic=f"dead_{tag}", partitions=PARTITIONS, partitioner="murmur2")
    s = build(path, tag, customers=24, payments=40, seed=37, faust_perturbed=False)
    topics = s.topics()
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        sc.produce(settings.bootstrap_servers, topics, sc.Scenario(PARTITIONS, {"customers": s.records["customers"]}))
        loaded = {f"customers_{tag}", f"streamapp_customers_by_id_{tag}"}
        wait_until(lambda: all(stats(worker)["rows"].get(t) == len(s.records["customers"]) for t in loaded),
                   90, "both customer tables loaded", [worker])
        sc.produce(settings.bootstrap_servers, topics, sc.Scenario(PARTITIONS, {"payments": s.records["payments"]}))
        for pair in PAIRS:
            written = read_all(settings.bootstrap_servers, topics[f"faust_{pair}"], PARTITIONS, len(s.records["payments"]))
            assert len(written) == len(s.records["payments"]), pair
    finally:
        assert worker.stop() == 0, worker.tail()
    from streamapp.kafka.admin import ensure_topics

    ksqldb = ("ksqldb_direct", "ksqldb_repartition")
    ensure_topics(settings.bootstrap_servers, {topics[role]: PARTITIONS for role in ksqldb})
    sc.produce(settings.bootstrap_servers, topics, sc.Scenario(PARTITIONS, {role: s.records[role] for role in ksqldb}))
    output = tmp_path / "out"
    assert main(["--statements", str(path), "--date", sc.DAY, "--bootstrap-server", settings.bootstrap_servers,
                 "--kafka-reader", "spark", "--partitioner", "murmur2", "--output", str(output),
                 "--max-mismatch-rate", "1"]) == 0
    summary = json.loads((output / f"dt={sc.DAY}" / "summary.json").read_text())
    for pair in PAIRS:
        assert {st: n for st, n in summary["statuses"][pair].items() if n} == s.statuses(pair), pair
        assert {c: n for c, n in summary["causes"][pair].items() if n} == s.causes(pair), pair
    assert s.causes("direct")["copartition_violation"] > 0 and s.statuses("repartition")["missing_in_ksqldb"] == 1
