"""A root cause for every non-matching order, read off the input topics (users and orders).

For the direct pair the user's partition is where the users topic holds it;
for the repartitioned pair it is where the worker's repartition puts it: the
``partitioner`` setting's partition of the key (from ``streamapp.partitioners``,
the batch API, vectorised over Arrow).

Two causes are the engines' documented, legitimate differences (README, "Decoding"), read
off the order's own key whatever the status: ``null_key`` (ksqlDB on Kafka Streams 3.7+,
KIP-962, the Kafka Streams program and the worker all join a null-key order with NULL user
columns, with a null key, in a partition their producer picks at random: such an order in both
outputs is a ``match`` (:func:`~spark_batch.compare.classify`), so this cause names one that an
engine lacks or wrote twice) and ``non_utf8_key`` (Kafka Streams reads the key with U+FFFD for each bad
byte; the worker dead-letters it: ``missing_in_faust``).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from streamapp.partitioners import partition_batch

from .compare import ENRICHMENT_STATUSES
from .decode import COUNTED_KINDS, IDENTITY, decodable, kind_counts, kind_totals
from .ksql_json import NON_UTF8_KEY, NULL_KEY
from .roles import PAIRS
from .summary import PartitionCell

CAUSES = ("copartition_violation", "late_user", "unknown_user", "key_format", NULL_KEY, NON_UTF8_KEY, "other")


def normalized_key(column: Column) -> Column:
    """The key with one level of JSON string quoting removed: ``"u1"`` and ``u1`` compare equal."""
    return F.regexp_replace(column, r'^"(.*)"$', "$1")


def identity_hash() -> Column:
    """xxhash64 of the order identity, ``unit_price`` normalized as grouping does (-0.0 = 0.0)."""
    price = F.when(F.col("unit_price") == 0, F.lit(0.0)).otherwise(F.col("unit_price"))
    return F.xxhash64(*[price if c == "unit_price" else F.col(c) for c in IDENTITY])


def _partition_batches(partitioner: str, num_partitions: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            keys = batch.column("user_key").to_pylist()
            encoded = [None if key is None else key.encode("utf-8") for key in keys]
            chosen = partition_batch(partitioner, encoded, num_partitions)
            yield pa.RecordBatch.from_arrays(
                [batch.column("user_key"), pa.array(chosen, pa.int32())], names=["user_key", "repartitioned_to"]
            )

    return assign


def user_index(users: DataFrame, mismatches: DataFrame, num_partitions: int, partitioner: str,
               repartitioned: bool = True) -> DataFrame:
    """Per user id of a mismatch: the first record time and the partitions of that key, the keys that
    differ from it only by JSON quoting (``similar_keys``) and, when ``repartitioned`` (the caller knows
    the repartition pair has mismatches), where ``partitioner`` (the worker's) repartitions a known key.

    Only the users whose normalized key is a mismatch's are grouped (a broadcast semi join), and the
    Python partitioner worker starts only when some mismatch needs it.
    """
    ids = mismatches.select("user_id").distinct()
    wanted = F.broadcast(ids.select(normalized_key(F.col("user_id")).alias("norm_key")).distinct())
    relevant = users.join(wanted, normalized_key(F.col("user_key")) == F.col("norm_key"), "left_semi")
    per_key = relevant.groupBy("user_key").agg(
        F.min("timestamp_ms").alias("user_first_ms"),
        F.sort_array(F.collect_set("partition")).alias("user_partitions"),
    )
    similar = per_key.groupBy(normalized_key(F.col("user_key")).alias("norm_key")).agg(
        F.sort_array(F.collect_set("user_key")).alias("similar_keys")
    )
    if repartitioned:
        placed = per_key.select("user_key").mapInArrow(
            _partition_batches(partitioner, num_partitions), "user_key string, repartitioned_to int"
        )
        per_key = per_key.join(placed, "user_key")
    else:
        per_key = per_key.withColumn("repartitioned_to", F.lit(None).cast("int"))
    return (
        ids.join(per_key.withColumnRenamed("user_key", "user_id"), "user_id", "left")
        .join(similar, normalized_key(F.col("user_id")) == F.col("norm_key"), "left")
        .drop("norm_key")
    )


def order_info(orders: DataFrame, mismatches: DataFrame, few: bool, kinds: Observation | None = None) -> DataFrame:
    """Per mismatching order identity (as ``_o_<column>``): its lowest partition in the orders topic and its
    key's kind (``order_key``).

    ``orders``: every record (``decode.all_orders``). ``kinds`` counts them all by kind on the way, over
    the probe's own aggregation, where every record that is not a mismatch's falls in one group: at 10 M
    orders an Observation on every scanned row cost about as much again as the scan, and a query of its
    own a second scan. The kind is aggregated as a number, so that every aggregate is fixed-width and Spark
    hash-aggregates the scan instead of sorting it.
    """
    # the orders are probed by a 64-bit hash of the identity (one long key: Spark's fast hash relation
    # instead of a six-column one); an order whose hash merely collides is dropped by the exact join in explain.
    # IN (an existence join): an identity mismatching in both pairs needs no distinct beforehand
    wanted = mismatches.select(identity_hash())
    probed = orders.select("*", identity_hash().isin(F.broadcast(wanted) if few else wanted).alias("_wanted"))
    hit = F.col("_wanted") & decodable()
    names = F.array(*[F.lit(k) for k in COUNTED_KINDS])
    grouped = probed.groupBy(hit.alias("_hit"), *[F.when(hit, F.col(c)).alias(c) for c in IDENTITY]).agg(
        *kind_counts(), F.min("partition").alias("order_partition"),
        F.max(F.coalesce(F.array_position(names, F.col("kind")), F.lit(0))).alias("_kind"))
    if kinds is not None:
        grouped = grouped.observe(kinds, *kind_totals())
    # an identity has one kind at most (a null key or a key not UTF-8; no kind is the least)
    order_key = F.when(F.col("_kind") > 0, F.element_at(names, F.col("_kind").cast("int")))
    return grouped.where("_hit").select(*[F.col(c).alias(f"_o_{c}") for c in IDENTITY], "order_partition",
                                        order_key.alias("order_key"))


def explain(mismatches: DataFrame, orders: DataFrame, users: DataFrame, num_partitions: int, partitioner: str,
            few: bool = True, repartitioned: bool = True, order_kinds: Observation | None = None) -> DataFrame:
    """``mismatches`` (classified rows that are not ``match``) with ``cause`` and ``cause_detail``.

    ``orders``: every record of the orders stream (``decode.all_orders``), counted by kind into
    ``order_kinds`` (see ``order_info``). ``few`` (the caller knows the count) broadcasts the
    mismatches' identities and users, so neither the orders nor the mismatches are shuffled;
    ``repartitioned``: see ``user_index``.
    """
    index = user_index(users, mismatches, num_partitions, partitioner, repartitioned)
    info = order_info(orders, mismatches, few, order_kinds)
    if few:
        info, index = F.broadcast(info), F.broadcast(index)
    # null-safe: a null-key order (user_id NULL) is an order too
    same_order = [F.col(c).eqNullSafe(F.col(f"_o_{c}")) for c in IDENTITY]
    index = index.withColumnRenamed("user_id", "_u_user_id")
    rows = (mismatches.join(info, same_order, "left").drop(*[f"_o_{c}" for c in IDENTITY])
            .join(index, F.col("user_id").eqNullSafe(F.col("_u_user_id")), "left").drop("_u_user_id"))
    user_partitions = F.when(F.col("pair") == "repartition", F.array("repartitioned_to")).otherwise(
        F.col("user_partitions")
    )
    rows = rows.withColumn("user_partitions", user_partitions)
    cause, detail = _cause_and_detail()
    return rows.withColumn("cause", cause).withColumn("cause_detail", detail).withColumn(
        "user_partition", F.col("user_partitions")[0]
    ).drop("similar_keys", "repartitioned_to", "order_key")


def _cause_and_detail() -> tuple[Column, Column]:
    known = F.col("user_first_ms").isNotNull()
    similar = F.col("similar_keys").isNotNull()
    located = F.col("order_partition").isNotNull()
    colocated = F.array_contains(F.col("user_partitions"), F.col("order_partition"))
    late = F.col("user_first_ms") > F.col("ts")
    enrichment = F.col("status").isin(*ENRICHMENT_STATUSES)
    partitions = F.array_join(F.col("user_partitions").cast("array<string>"), ",")
    key = F.col("order_key")
    cause = (
        F.when(key == NULL_KEY, NULL_KEY)
        .when(key == NON_UTF8_KEY, NON_UTF8_KEY)
        .when(~enrichment, "other")
        .when(~known & ~similar, "unknown_user")
        .when(~known, "key_format")
        .when(~located, "other")
        .when(~colocated, "copartition_violation")
        .when(late, "late_user")
        .otherwise("other")
    )
    not_in_orders = F.when(~located, F.lit("; the order is not in the orders topic")).otherwise(F.lit(""))
    detail = (
        F.when(key == NULL_KEY, F.concat(
            F.lit("the order's key is null: ksqlDB on Kafka Streams 3.7+ (KIP-962) and the worker join it with NULL "
                  "user columns in a random partition; "), _status_words()))
        .when(key == NON_UTF8_KEY, F.concat(F.format_string(
            "the order's key is not UTF-8: Kafka Streams reads it as '%s' (U+FFFD for each bad byte), "
            "the worker dead-letters it; ", "user_id"), _status_words()))
        .when(F.col("status") == "missing_in_faust", F.concat(F.lit("no record in the Faust output"), not_in_orders))
        .when(F.col("status") == "missing_in_ksqldb", F.concat(F.lit("no record in the ksqlDB output"), not_in_orders))
        .when(F.col("status") == "duplicate",
              F.format_string("Faust output has %d record(s), ksqlDB output %d", "faust_count", "ksqldb_count"))
        .when(F.col("status") == "partition_mismatch",
              F.format_string("Faust wrote partition %d, ksqlDB partition %d", "faust_partition", "ksqldb_partition"))
        .when(~known & ~similar, F.format_string("no record for key '%s' in the users topic", "user_id"))
        .when(~known, F.format_string("users topic has key(s) %s, the order has '%s'",
                                      F.array_join("similar_keys", ", "), "user_id"))
        .when(~located, F.lit("the order is not in the orders topic"))
        .when(~colocated, F.format_string("order in partition %d, user in partition(s) %s", F.col("order_partition"), partitions))
        .when(late, F.format_string("the user's first record is %d ms newer than the order", F.col("user_first_ms") - F.col("ts")))
        .otherwise(F.format_string("user and order both in partition %d, user %d ms older than the order",
                                   F.col("order_partition"), F.col("ts") - F.col("user_first_ms")))
    )
    return cause, detail


def _status_words() -> Column:
    """What the outputs hold of the order, in a few words."""
    return (F.when(F.col("status") == "missing_in_faust", F.lit("no record in the Faust output"))
            .when(F.col("status") == "missing_in_ksqldb", F.lit("no record in the ksqlDB output"))
            .otherwise(F.format_string("status %s", "status")))


def tally(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[str, dict[str, int]], tuple[PartitionCell, ...]]:
    """Mismatches by (pair, cause) and by (pair, order partition, user partition), from one aggregation's rows.

    ``rows`` are counts by (pair, cause, order_partition, user_partition): one
    Spark aggregation gives both tables (cells only where both partitions are known).
    """
    by_cause: dict[str, dict[str, int]] = {pair: {c: 0 for c in CAUSES} for pair in PAIRS}
    cells: dict[tuple[str, int, int], int] = {}
    for row in rows:
        n = int(row["count"])
        by_cause[row["pair"]][row["cause"]] += n
        if row["order_partition"] is not None and row["user_partition"] is not None:
            cell = (row["pair"], int(row["order_partition"]), int(row["user_partition"]))
            cells[cell] = cells.get(cell, 0) + n
    return by_cause, tuple(PartitionCell(pair, order, user, n) for (pair, order, user), n in sorted(cells.items()))
