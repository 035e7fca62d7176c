"""The reconciliation's gaps for any declared join (issue 34): KAFKA keys of every type, and re-keyed streams.

- A KAFKA-format key of each type ksqlDB allows (INT, BIGINT, DOUBLE, STRING, BYTES) is read by Spark SQL as the
  plan's codec reads it, bit for bit (a DOUBLE's NaN, infinities, subnormals and -0.0; a BYTES key as its
  base64 text, as the codec's rows hold it); join outputs keyed by a DOUBLE and by BYTES decode and compare,
  and a BYTES key is placed by its own bytes, not by its text.
- A join on a value column re-keys its stream: a miss there is judged where the join key is re-keyed to
  (the partitioner's partition of the key in the table's key format), not where the record's own key is.

Files-source runs: no broker.
"""
from __future__ import annotations

import base64
import json
import math
import random
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

import reconcile_scenario as sc
from spark_batch import ksql_json
from spark_batch.reconcile import main
from spark_batch.roles import Roles
from streamapp.model.records import RecordError
from streamapp.settings import Settings
from streamapp.sql.formats import Codec
from streamapp.sql import plan as sql_plan
from streamapp.sql.declarations import KAFKA_KEY_TYPES
from streamapp.sql.planner import plan_file
from streamapp.sql.topology import topology

from test_reconcile_declared import PARTITIONS, export



def keyed(kind: str) -> sql_plan.Source:
    """A stream with a KAFKA-format key of ``kind``."""
    return sql_plan.Source(name=f"S_{kind}", kind=sql_plan.STREAM, topic=f"t_{kind}", key_columns=(sql_plan.Column("K", kind),),
                    value_columns=(sql_plan.Column("V", "INT"),), key_format="KAFKA", value_format="JSON")


def murmur2(key: bytes) -> int:
    return sc.murmur2_partition(key, PARTITIONS)


def crc32(key: bytes) -> int:
    return zlib.crc32(key) % PARTITIONS


def same(a: Any, b: Any) -> bool:
    """Equal values, a double by its bits' meaning (NaN equals NaN, -0.0 is not 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return a == b


def test_a_kafka_key_of_every_type_is_read_by_sql_as_the_codec_reads_it(spark) -> None:
    rng = random.Random(34)
    doubles = [0.0, -0.0, 1.0, -2.5, math.pi, 1e300, -1e-300, 5e-324, -5e-324, 2.2250738585072014e-308,
               2.225073858507201e-308, 1.7976931348623157e308, math.inf, -math.inf, math.nan]
    keys = [struct.pack(">d", d) for d in doubles]
    keys += [struct.pack(">q", rng.getrandbits(64) - 2**63) for _ in range(400)]  # any bits: NaN payloads too
    keys += [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12))) for _ in range(200)]
    keys += [struct.pack(">i", rng.getrandbits(32) - 2**31) for _ in range(200)] + [f"user-{n}".encode() for n in range(200)]
    keys += [b"", b"\xff\xfe", "Zoë".encode(), b"1234", struct.pack(">i", -1), struct.pack(">i", -(2**31)), None]
    frame = spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "key binary, i int")
    for kind in KAFKA_KEY_TYPES:
        source = keyed(kind)
        codec = Codec(source)
        read = ksql_json.sql_key(source, F.col("key"))
        assert read is not None, kind
        rows = frame.select("i", read[0].alias("value"), read[1].alias("ok")).collect()
        for row in rows:
            key = keys[row["i"]]
            if key is None:
                assert not row["ok"], kind
                continue
            try:
                want = ksql_json._spark_value(codec.decode_key(key), ksql_json.key_type(source))
            except RecordError:
                assert not row["ok"], (kind, key)
                continue
            if kind == "STRING" and not row["ok"]:
                continue  # not UTF-8: the codec path reads it (U+FFFD), as Kafka Streams does
            assert row["ok"] and same(row["value"], want), (kind, key, row["value"], want)
        assert sum(row["ok"] for row in rows) >= 200, kind  # SQL read them: it is SQL that was compared


def statements(directory: Path, text: str) -> tuple[Path, str]:
    tag = uuid.uuid4().hex[:8]
    path = directory / f"joins_{tag}.sql"
    path.write_text(text.format(tag=tag), encoding="utf-8")
    return path, tag


def record(codec: Codec, row: dict[str, Any], timestamp: int, partition: int | None = None) -> sc.Record:
    """A record of ``codec``'s source as its engine or producer writes it (by default in murmur2's partition)."""
    source = codec.source
    key = codec.encode_key(row[source.key_columns[0].name])
    value = json.loads(codec.encode_value({c.name: row.get(c.name) for c in source.value_columns}))
    return sc.Record(key, value, timestamp, murmur2(key) if partition is None else partition)


def run(spark, path: Path, directory: Path, records: dict[str, list[sc.Record]]) -> tuple[dict, list[dict]]:
    """The job on Kafka-shaped exports of ``records``; its summary and detail rows by (pair, join key as text)."""
    topics = Roles(topology(Settings().replace(statements=str(path)))).topics()
    export(directory / "in", topics, records)
    assert main(["--statements", str(path), "--date", sc.DAY, "--source", "files", "--input", str(directory / "in"),
                 "--output", str(directory / "out"), "--partitions", str(PARTITIONS), "--partitioner", "murmur2",
                 "--max-mismatch-rate", "1"]) == 0
    day = directory / "out" / f"dt={sc.DAY}"
    summary = json.loads((day / "summary.json").read_text())
    return summary, [r.asDict() for r in spark.read.parquet(str(day / "detail")).collect()]


DOUBLE_AND_BYTES = """
CREATE TABLE rates (price DOUBLE PRIMARY KEY, label STRING) WITH (KAFKA_TOPIC='rates_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM ticks (price DOUBLE KEY, qty INT, at BIGINT)
  WITH (KAFKA_TOPIC='ticks_{tag}', VALUE_FORMAT='JSON', TIMESTAMP='at');
CREATE STREAM labelled WITH (KAFKA_TOPIC='labelled_{tag}') AS
  SELECT t.price AS price, qty, at, label FROM ticks t LEFT JOIN rates r ON t.price = r.price EMIT CHANGES;
CREATE TABLE files (digest BYTES PRIMARY KEY, name STRING) WITH (KAFKA_TOPIC='files_{tag}', VALUE_FORMAT='JSON');
CREATE TABLE files_by_digest WITH (KAFKA_TOPIC='files_by_digest_{tag}') AS SELECT digest, name FROM files EMIT CHANGES;
CREATE STREAM reads (digest BYTES KEY, size BIGINT, at BIGINT)
  WITH (KAFKA_TOPIC='reads_{tag}', VALUE_FORMAT='JSON', TIMESTAMP='at');
CREATE STREAM named WITH (KAFKA_TOPIC='named_{tag}') AS
  SELECT r.digest AS digest, size, at, name FROM reads r LEFT JOIN files_by_digest f ON r.digest = f.digest EMIT CHANGES;
"""


def test_join_outputs_keyed_by_a_double_and_by_bytes_decode_and_compare(spark, tmp_path: Path) -> None:
    """Ticks keyed by a DOUBLE price joined with rates (as written), reads keyed by a BYTES digest joined with a copy
    of the files (placed by murmur2): every row decodes; a missing row, a wrong label, an unknown price, and a read
    its producer put outside its digest's partition are found, the last as a ``copartition_violation`` in the
    partition murmur2 gives the digest's own bytes."""
    path, _ = statements(tmp_path, DOUBLE_AND_BYTES)
    plan = plan_file(path)
    codec = {name: Codec(plan.source(name)) for name in ("RATES", "TICKS", "LABELLED", "FILES", "READS", "NAMED")}
    rng = random.Random(341)
    prices = [0.1, -2.5, 1e300, 5e-324, 0.0, math.pi, 7.0, -0.125]
    labels = {price: f"rate {n}" for n, price in enumerate(prices)}
    digests = [bytes([0xFF, n]) + bytes(rng.getrandbits(8) for _ in range(14)) for n in range(8)]  # not UTF-8
    names = {digest: f"file {n}" for n, digest in enumerate(digests)}
    at = iter(range(sc.DAY_START_MS + sc.HOUR_MS, sc.DAY_START_MS + 2 * sc.HOUR_MS, 1000))
    earlier = sc.DAY_START_MS - sc.HOUR_MS
    ticks = [(rng.choice(prices), next(at)) for _ in range(24)] + [(42.42, next(at))]  # the last: no such rate
    reads = [(rng.choice(digests), next(at)) for _ in range(24)]
    moved = reads[0]
    records = {
        "rates": [record(codec["RATES"], {"PRICE": p, "LABEL": label}, earlier) for p, label in labels.items()],
        "ticks": [record(codec["TICKS"], {"PRICE": p, "QTY": 1, "AT": t}, t) for p, t in ticks],
        "files": [record(codec["FILES"], {"DIGEST": d, "NAME": n}, earlier, crc32(d)) for d, n in names.items()],
        "reads": [record(codec["READS"], {"DIGEST": d, "SIZE": 9, "AT": t}, t,
                         (murmur2(d) + 1) % PARTITIONS if (d, t) == moved else None) for d, t in reads],
    }
    missing, wrong = ticks[3], ticks[5]
    for side in ("faust", "ksqldb"):
        records[f"{side}_direct"] = [
            record(codec["LABELLED"], {"PRICE": p, "QTY": 1, "AT": t, "LABEL": (
                "wrong" if side == "faust" and (p, t) == wrong else labels.get(p))}, t)
            for p, t in ticks if not (side == "ksqldb" and (p, t) == missing)]
        records[f"{side}_repartition"] = [  # the moved read found nothing in either engine
            record(codec["NAMED"], {"DIGEST": d, "SIZE": 9, "AT": t, "NAME": None if (d, t) == moved else names[d]}, t)
            for d, t in reads]
    summary, detail = run(spark, path, tmp_path, records)
    assert summary["output_records"]["faust_direct"] == {"rows": len(ticks), "undecodable": 0}
    assert summary["output_records"]["ksqldb_repartition"] == {"rows": len(reads), "undecodable": 0}
    assert {p: {s: n for s, n in by.items() if n} for p, by in summary["statuses"].items()} == {
        "direct": {"match": len(ticks) - 3, "missing_in_ksqldb": 1, "value_mismatch": 1, "both_unenriched": 1},
        "repartition": {"match": len(reads) - 1, "both_unenriched": 1}}
    by_pair = {(r["pair"], r["status"]): r for r in detail}
    assert by_pair[("direct", "missing_in_ksqldb")]["price"] == missing[0]
    assert by_pair[("direct", "value_mismatch")]["mismatched_columns"] == ["LABEL"]
    assert by_pair[("direct", "both_unenriched")]["cause"] == "unknown_user"
    unplaced = by_pair[("repartition", "both_unenriched")]
    assert unplaced["digest"] == base64.b64encode(moved[0]).decode()  # as the codec's rows hold a BYTES value
    assert (unplaced["cause"], unplaced["user_partition"], unplaced["order_partition"]) == (
        "copartition_violation", murmur2(moved[0]), (murmur2(moved[0]) + 1) % PARTITIONS), unplaced


REKEYED = """
CREATE TABLE customers (id BIGINT PRIMARY KEY, email STRING, tier STRING)
  WITH (KAFKA_TOPIC='customers_{tag}', VALUE_FORMAT='JSON');
CREATE STREAM payments (payment_id STRING KEY, customer_id BIGINT, amount DOUBLE, paid_at BIGINT)
  WITH (KAFKA_TOPIC='payments_{tag}', VALUE_FORMAT='JSON', TIMESTAMP='paid_at');
CREATE STREAM paid WITH (KAFKA_TOPIC='paid_{tag}') AS
  SELECT p.payment_id, p.customer_id, amount, paid_at, tier
  FROM payments p LEFT JOIN customers c ON p.customer_id = c.id EMIT CHANGES;
"""


def test_a_rekeyed_streams_misses_are_judged_where_its_join_key_goes(spark, tmp_path: Path) -> None:
    """Payments keyed by their id (crc32, librdkafka) joined on CUSTOMER_ID with customers written by crc32: both
    engines re-key each payment by its customer's 8-byte key through murmur2, so a payment finds its customer
    exactly where crc32 and murmur2 agree on that key. Every other one is a ``copartition_violation`` naming
    murmur2's partition of the join key and crc32's of the customer, whatever partition the payment's own key had."""
    path, _ = statements(tmp_path, REKEYED)
    plan = plan_file(path)
    codec = {name: Codec(plan.source(name)) for name in ("CUSTOMERS", "PAYMENTS", "PAID")}
    rng = random.Random(342)
    ids = rng.sample(range(1, 10**12), 30)
    tiers = {i: rng.choice(["gold", "blue"]) for i in ids}
    key = codec["CUSTOMERS"].encode_key
    at = iter(range(sc.DAY_START_MS + sc.HOUR_MS, sc.DAY_START_MS + 2 * sc.HOUR_MS, 1000))
    payments = [(f"pay-{n}", rng.choice(ids), next(at)) for n in range(60)]
    found = {i for i in ids if crc32(key(i)) == murmur2(key(i))}
    assert found and set(ids) - found
    records = {
        "customers": [record(codec["CUSTOMERS"], {"ID": i, "EMAIL": f"c{i}@x", "TIER": t}, sc.DAY_START_MS - sc.HOUR_MS,
                             crc32(key(i))) for i, t in tiers.items()],
        "payments": [record(codec["PAYMENTS"], {"PAYMENT_ID": p, "CUSTOMER_ID": c, "AMOUNT": 1.5, "PAID_AT": t}, t,
                            crc32(p.encode())) for p, c, t in payments],
    }
    for side in ("faust", "ksqldb"):
        records[f"{side}_direct"] = [
            record(codec["PAID"], {"PAYMENT_ID": p, "CUSTOMER_ID": c, "AMOUNT": 1.5, "PAID_AT": t,
                                   "TIER": tiers[c] if c in found else None}, t) for p, c, t in payments]
    summary, detail = run(spark, path, tmp_path, records)
    missed = [(p, c) for p, c, _ in payments if c not in found]
    assert {s: n for s, n in summary["statuses"]["direct"].items() if n} == {
        "match": len(payments) - len(missed), "both_unenriched": len(missed)}
    assert {c: n for c, n in summary["causes"]["direct"].items() if n} == {"copartition_violation": len(missed)}
    assert sorted((r["payment_id"], r["customer_id"], r["order_partition"], r["user_partition"]) for r in detail) == sorted(
        (p, c, murmur2(key(c)), crc32(key(c))) for p, c in missed)
    assert all("re-keyed by CUSTOMER_ID into partition" in r["cause_detail"] for r in detail), detail[0]["cause_detail"]
