"""The reconciliation reads users and orders as the worker's model does (``streamapp.model.records``), byte for byte.

The same generated records (keys and values of every decoding class: the plain record the
producers write, case-insensitive names, coercions, nulls, missing fields, malformed values,
other encodings, null and non-UTF-8 keys) go through the model's decoders here and through
the job's Spark path (``spark_batch.ksql_json``: Spark SQL for the plain records, the
model's decoder in an Arrow UDF for the others) in the session's SparkSession; the rows
must be the same.  The test also checks that the SQL path took a good share of them, so
that it is the SQL reading that is compared, not the model with itself.
"""
from __future__ import annotations

import json
import math
import random
from typing import Any, Callable

from pyspark.sql import functions as F

from spark_batch import ksql_json
from spark_batch.roles import Roles
from streamapp.model.records import RecordError
from streamapp.sql import plan as p
from streamapp.sql.engine import Reader
from streamapp.settings import Settings

from test_json_row_oracle import NODES, ORDER_NAMES, RAW, USER_NAMES, documents

#: The seed's stream and table, as the job reads them (their codecs: the worker's reading).
SEED = Roles.of(Settings())
ORDERS, USERS = SEED.inputs["demo_user_orders"], SEED.inputs["demo_user"]
ORDER_FIELDS, USER_FIELDS = ksql_json.value_columns(ORDERS), ksql_json.value_columns(USERS)


def read(source, stream: bool):
    """The job's reading of ``source``'s records, its key named as the model names it."""
    return lambda frame: ksql_json.read(frame, source, stream).withColumnRenamed(ksql_json.KEY, "user_id")


KEYS = [b"u1", b"", "Zoë".encode(), None, b"\xff\xfej-bad", b"\xed\xa0\x80", b'"u1"', b"u\x00"]
#: Plain-shaped values: exactly the lower-case fields, values from the node list: most read by SQL, the rest not.
PLAIN_NODES = ["0", "1", "-5", "30", "1677844043886", "9223372036854775807", "-1", "12.5", "-0.0", "0.0", "1e5",
               "2.5E-3", "1e400", "27.9", "9223372036854775808", "\"web\"", "\"Zoë 😀\"", "\"\"", "null", "true",
               "\"41\"", "\"NaN\"", "\"Infinity\""]


def plain_values(fields: list[str], rng: random.Random, count: int) -> list[bytes]:
    made = []
    for _ in range(count):
        shuffled = rng.sample(fields, len(fields))
        space = rng.choice(["", " ", "\n  "])
        made.append(("{" + f",{space}".join(f'"{f}":{space}{rng.choice(PLAIN_NODES)}' for f in shuffled) + "}").encode())
    for _ in range(count // 2):  # the common record exactly, as the producers write it
        if "ts" in fields:
            row = {"ts": rng.randint(0, 2**41), "product_id": rng.randint(-5, 10**6), "qty": rng.randint(0, 9),
                   "unit_price": rng.choice([round(rng.uniform(0, 100), 2), rng.randint(0, 50)]), "channel": "web"}
        else:
            row = {"name": rng.choice(["Ann", "Zoë", ""]), "age": rng.randint(-1, 120)}
        made.append(json.dumps(dict(rng.sample(list(row.items()), len(row)))).encode())
    return made


def worker_reading(source: p.Source) -> Callable[[bytes | None, bytes | None], dict[str, Any] | None]:
    """The worker's reading of ``source``'s records (the plan's Reader): its value columns by the job's lower-case
    names, None for a table's tombstone; RecordError for what neither engine uses (a stream record needs a value)."""
    reader = Reader(source)

    def decode(key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
        _, row = reader.read(key, value, 0)
        if row is None and source.kind == p.STREAM:
            raise RecordError("value is null: a stream record needs a value", "value")
        return None if row is None else {name.lower(): v for name, v in row[0].items()}
    return decode


def expected(decode, columns: dict[str, str], key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """The worker's reading: the row, or why neither engine uses it, or (a null or non-UTF-8 key) the row as
    Kafka Streams reads it, which the worker dead-letters."""
    if key is None:
        kind, user_id = "null_key", None
    else:
        try:
            kind, user_id = None, key.decode("utf-8")
        except UnicodeDecodeError:
            kind, user_id = "non_utf8_key", key.decode("utf-8", "replace")
    try:
        record = decode(b"k" if kind else key, value)
    except RecordError:
        return {"user_id": user_id, **dict.fromkeys(columns), "kind": "undecodable"}
    if record is None:
        return {"user_id": user_id, **dict.fromkeys(columns), "kind": kind or "tombstone"}
    return {"user_id": user_id, **{c: record[c] for c in columns}, "kind": kind}


def comparable(row: dict[str, Any]) -> tuple:
    """A row with doubles by their bits' meaning: NaN equal to NaN, -0.0 unequal to 0.0."""
    return tuple((k, ("nan",) if isinstance(v, float) and math.isnan(v) else (v, math.copysign(1, v))
                  if isinstance(v, float) else v) for k, v in sorted(row.items()))


def check(spark, decode, source, read, values: list[bytes | None], rng: random.Random) -> None:
    columns = ksql_json.value_columns(source)
    records = [(rng.choice(KEYS) if rng.random() < 0.25 else b"u1", v, i) for i, v in enumerate(values)]
    frame = spark.createDataFrame(records, "key binary, value binary, offset bigint").repartition(3)
    plain = ksql_json.SqlPath(source).condition()
    rows = read(frame.withColumn("by_sql", F.coalesce(plain, F.lit(False)))).collect()
    assert len(rows) == len(records)
    differences, by_sql = [], 0
    for row in rows:
        key, value, _ = records[row["offset"]]
        got = {c: row[c] for c in ("user_id", *columns, "kind")}
        want = expected(decode, columns, key, value)
        by_sql += row["by_sql"]
        if comparable(got) != comparable(want):
            differences.append((key, value, got, want))
    assert not differences, f"{len(differences)} of {len(rows)} differ, e.g. {differences[:4]}"
    assert by_sql > len(rows) // 8, f"only {by_sql} of {len(rows)} rows took the SQL path"
    kinds = {row["kind"] for row in rows}
    assert {None, "undecodable", "null_key", "non_utf8_key"} <= kinds, kinds


def test_orders_read_by_spark_are_the_models_orders(spark) -> None:
    rng = random.Random(21)
    fields = list(ORDER_FIELDS)
    values = documents(ORDER_NAMES, rng, 1500) + plain_values(fields, rng, 2000)
    values += [b'{"ts": -1, "product_id": 1, "qty": 1, "unit_price": 1.5, "channel": "web"}',
               b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.5, "channel": "w\\ud800"}',
               b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.5, "channel": "web"} trailing',
               b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": NaN, "channel": "web"}',
               b"{'ts': 5, 'product_id': 1, 'qty': 1, 'unit_price': 1.5, 'channel': 'web'}",
               b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.5, "channel": "web", "ts": 6}']
    check(spark, worker_reading(ORDERS), ORDERS, read(ORDERS, stream=True), values, rng)


def test_users_read_by_spark_are_the_models_users(spark) -> None:
    rng = random.Random(22)
    values = documents(USER_NAMES, rng, 1500) + plain_values(list(USER_FIELDS), rng, 2000) + [None, b"null"]
    check(spark, worker_reading(USERS), USERS, read(USERS, stream=False), values, rng)


def test_the_spark_schema_is_the_models() -> None:
    """Derived from the seed's declared columns: the same names and types as the model's records."""
    assert ORDER_FIELDS == {"ts": "bigint", "product_id": "bigint", "qty": "bigint", "unit_price": "double",
                            "channel": "string"}
    assert USER_FIELDS == {"name": "string", "age": "bigint"}
    assert NODES and RAW  # the generator's own classes are in the values above
