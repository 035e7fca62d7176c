"""A root cause for every non-matching row, read off the input topics (the join's table and stream).

"Order" and "user" below are the stream's record and the table's row, as in the demo's join.
For a direct pair the table row's partition is where the table's topic holds it; for a
repartitioned pair (:attr:`~spark_batch.roles.Pair.repartitioned`) it is where the worker's
repartition puts it: the ``partitioner`` setting's partition of the key, written in the key
format of the copy (from ``streamapp.partitioners``, the batch API, vectorised over Arrow).
The stream record's partition is where its own topic holds it; for a join that re-keys its stream
(:attr:`~spark_batch.roles.Pair.rekeys_stream`) it is where the engines re-key it: the ``partitioner``
setting's partition of its join key, in the table's key format (:func:`join_placement`).

Two causes are the engines' documented, legitimate differences (docs/reference/reconciliation.md,
"Causes"), read off the order's own key whatever the status: ``null_key`` (ksqlDB on Kafka Streams 3.7+,
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
from streamapp.sql import plan as p
from streamapp.sql.formats import Codec

from .compare import ENRICHMENT_STATUSES
from .decode import COUNTED_KINDS, decodable, identity_value, kind_counts, kind_totals
from .ksql_json import NON_UTF8_KEY, NULL_KEY, codec_value
from .roles import Field, Group
from .summary import PartitionCell

#: A null ``ts`` as the orders' probe key (see :func:`order_info`); a real ts equal to it only adds a hit.
_NO_TS = -(2**63)
#: Every cause; ``late_record`` is a two-sided join's (``spark_batch.two_sided``).
CAUSES = ("copartition_violation", "late_user", "late_record", "unknown_user", "key_format", NULL_KEY, NON_UTF8_KEY,
          "other")


def normalized_key(column: Column) -> Column:
    """The key with one level of JSON string quoting removed: ``"u1"`` and ``u1`` compare equal."""
    return F.regexp_replace(column, r'^"(.*)"$', "$1")


def identity_hash(group: Group) -> Column:
    """xxhash64 of the identity, a DOUBLE's -0.0 normalized as grouping does."""
    return F.xxhash64(*[identity_value(f) for f in group.identity])


def fixed_identity(group: Group) -> tuple[Field, ...]:
    """The identity fields of fixed width (all but the strings)."""
    return tuple(f for f in group.identity if f.fixed)


def join_key_text(group: Group) -> Column:
    """The stream record's join key as text, as the table's keys are compared with it."""
    return F.col(group.join_key.name).cast("string")


def _partition_batches(partitioner: str, num_partitions: int, placed: p.Source, column: str = "table_key",
                       into: str = "repartitioned_to") -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Each key's (``column``) partition under ``partitioner`` (``into``), its bytes as ``placed`` writes them
    (its key format): a table's copy, or the repartition topic of a join that re-keys its stream."""
    key_type = placed.key_columns[0].type

    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        codec = Codec(placed)
        for batch in batches:
            keys = batch.column(column).to_pylist()
            encoded = [codec.encode_key(codec_value(key, key_type)) for key in keys]
            chosen = [None if key is None else n for key, n in zip(encoded, partition_batch(
                partitioner, [b"" if key is None else key for key in encoded], num_partitions))]
            yield pa.RecordBatch.from_arrays([batch.column(column), pa.array(chosen, pa.int32())], names=[column, into])

    return assign


def join_placement(group: Group, mismatches: DataFrame, num_partitions: int, partitioner: str, few: bool) -> DataFrame | None:
    """For the pairs of ``mismatches`` that re-key their stream (a join on a value column): per join key of a
    mismatch (``_join_key``), the partition its record is re-keyed into (``_join_partition``): ``partitioner``'s
    (the worker's) of the join key in the repartition topic's key format (the table's), among as many partitions
    as the stream's topic has, as both engines re-key it. None when no pair of the group re-keys its stream."""
    rekeying = [pair for pair in group.pairs if pair.rekeys_stream and pair.join.rekeyed is not None]
    if not rekeying:
        return None
    placed = rekeying[0].join.rekeyed
    assert placed is not None
    key = F.col(group.join_key.name)
    keys = mismatches.where(F.col("pair").isin(*[pair.name for pair in rekeying]) & key.isNotNull())
    keys = keys.select(key.alias("_join_key")).distinct()
    key_type = dict(keys.dtypes)["_join_key"]
    placement = keys.mapInArrow(_partition_batches(partitioner, num_partitions, placed, "_join_key", "_join_partition"),
                                f"_join_key {key_type}, _join_partition int")
    return F.broadcast(placement) if few else placement


def user_index(group: Group, users: DataFrame, mismatches: DataFrame, num_partitions: int, partitioner: str, few: bool,
               placed: p.Source | None = None) -> DataFrame:
    """Per normalized join key of a mismatch (``norm_key``), one entry per table key that differs from
    it at most by JSON quoting (``user_keys``): the key as text, its first record time, its partitions and,
    given ``placed`` (the copy a repartitioned pair of the group joins, when the caller knows such a
    pair has mismatches), where ``partitioner`` (the worker's) places it there.  :func:`explain` picks a
    mismatch's own key out of them.

    Only the users whose normalized key is a mismatch's are grouped (a broadcast semi join), in one
    aggregation per key, then one per normalized key on the same shuffle; the Python partitioner worker
    starts only when some mismatch needs it.  ``few`` (see :func:`explain`): the mismatches' ids are
    broadcast as they are; else distinct first (every order may mismatch, its users may not).
    """
    # as they are when few: a distinct is a shuffle, whose second stage queued the users' scan behind the orders'
    wanted = mismatches.select(normalized_key(join_key_text(group)).alias("norm_key"))
    wanted = F.broadcast(wanted if few else wanted.distinct())
    relevant = users.withColumn("norm_key", normalized_key(F.col("table_key").cast("string"))).join(wanted, "norm_key", "left_semi")
    # shuffled by the normalized key alone, so that both aggregations below share the one exchange
    relevant = relevant.repartition("norm_key")
    per_key = relevant.groupBy("norm_key", "table_key").agg(
        F.min("timestamp_ms").alias("first_ms"), F.sort_array(F.collect_set("partition")).alias("partitions"))
    if placed is not None:
        key_type = dict(per_key.dtypes)["table_key"]
        where = per_key.select("table_key").mapInArrow(
            _partition_batches(partitioner, num_partitions, placed), f"table_key {key_type}, repartitioned_to int")
        # broadcast when few: the explain step then runs without AQE (reconcile.PLANNED_ONCE), which would have
        # chosen it at run time
        per_key = per_key.join(F.broadcast(where) if few else where, "table_key")
    else:
        per_key = per_key.withColumn("repartitioned_to", F.lit(None).cast("int"))
    entry = F.struct(F.col("table_key").cast("string").alias("user_key"), "first_ms", "partitions", "repartitioned_to")
    return per_key.groupBy("norm_key").agg(F.sort_array(F.collect_list(entry)).alias("user_keys"))


def order_info(group: Group, orders: DataFrame, mismatches: DataFrame, few: bool,
               kinds: Observation | None = None) -> DataFrame:
    """Per mismatching identity (``_o_hash``, its :func:`identity_hash`, and ``_o_<column>`` for
    :func:`fixed_identity`): its lowest partition in the stream's topic and its key's kind (``order_key``).

    ``orders``: every record of the stream (``decode.all_orders``). ``kinds`` counts them all by kind on the way, over
    the probe's own aggregation, where every record that is not a mismatch's falls in one group: at 10 M
    orders an Observation on every scanned row cost about as much again as the scan, and a query of its
    own a second scan. Every key and aggregate is fixed-width (the strings of the identity are grouped
    through the hash, the kind as a number) and no key is null but a hit's own, so Spark hash-aggregates
    the scan with its fast map.
    """
    # the orders are probed by ts alone (one long key: Spark's fast hash relation; IN, an existence join: an
    # identity mismatching in both pairs needs no distinct beforehand), and only the hits' whole identity is
    # hashed, not every scanned order's. A null ts probes as _NO_TS (a nullable key would make IN null-aware:
    # no hash join at all); an order that merely shares a ts is a hit grouped apart by its identity, and
    # joins no mismatch. Two orders grouped together share the hash and every fixed-width column: the odds
    # that they differ in a string column are those of a 64-bit collision between orders alike in
    # everything else.
    ts = F.coalesce(F.col(group.time.name).cast("bigint"), F.lit(_NO_TS))
    wanted = mismatches.select(ts)
    probed = orders.select("*", ts.isin(F.broadcast(wanted) if few else wanted).alias("_wanted"))
    hit = F.col("_wanted") & decodable()
    names = F.array(*[F.lit(k) for k in COUNTED_KINDS])
    # 0, not null, outside the hits: Spark's fast map takes only rows whose keys are all non-null (a null key
    # sent every other order to its general map: 40% of the scan's profile samples); _hit keeps the two apart
    fixed = fixed_identity(group)
    keys = [F.when(hit, identity_hash(group)).otherwise(0).alias("_o_hash"),
            *[F.when(hit, identity_value(f)).otherwise(F.lit(0).cast(f.spark)).alias(f"_o_{f.name}") for f in fixed]]
    grouped = probed.groupBy(hit.alias("_hit"), *keys).agg(
        *kind_counts(), F.min("partition").alias("order_partition"),
        F.max(F.coalesce(F.array_position(names, F.col("kind")), F.lit(0))).alias("_kind"))
    if kinds is not None:
        grouped = grouped.observe(kinds, *kind_totals())
    # an identity has one kind at most (a null key or a key not UTF-8; no kind is the least)
    order_key = F.when(F.col("_kind") > 0, F.element_at(names, F.col("_kind").cast("int")))
    return grouped.where("_hit").select("_o_hash", *[f"_o_{f.name}" for f in fixed], "order_partition",
                                        order_key.alias("order_key"))


def explain(group: Group, mismatches: DataFrame, orders: DataFrame, users: DataFrame, num_partitions: int,
            partitioner: str, few: bool = True, repartitioned: bool = True,
            order_kinds: Observation | None = None, table: str | None = None) -> DataFrame:
    """``mismatches`` (classified rows of ``group`` that are not ``match``, all of pairs joining the table
    whose rows ``users`` holds) with ``cause`` and ``cause_detail``.

    ``orders``: every record of the group's stream (``decode.all_orders``), counted by kind into
    ``order_kinds`` (see ``order_info``). ``few`` (the caller knows the count) broadcasts the
    mismatches' identities and table rows, so neither the stream nor the mismatches are shuffled;
    ``repartitioned``: a repartitioned pair has mismatches (else no key is placed, see ``user_index``).
    ``table``: the role of the table ``users`` holds (default: the group's first).
    """
    table = table or group.table_roles[0]
    mine = [pair for pair in group.pairs if pair.table_role == table]
    copies = [pair for pair in mine if pair.repartitioned]
    placed = None
    if repartitioned and copies:
        pair = copies[0]
        placed = pair.stream if pair.query.repartition_right else pair.table
    index = user_index(group, users, mismatches, num_partitions, partitioner, few, placed)
    info = order_info(group, orders, mismatches, few, order_kinds)
    if few:
        info, index = F.broadcast(info), F.broadcast(index)
    fixed = fixed_identity(group)
    # null-safe: an identity column may be null (a null-key record is a record too; the hash leaves nulls out)
    same_order = [identity_hash(group) == F.col("_o_hash"),
                  *[identity_value(f).eqNullSafe(F.col(f"_o_{f.name}")) for f in fixed]]
    rows = (mismatches.join(info, same_order, "left").drop("_o_hash", *[f"_o_{f.name}" for f in fixed])
            .join(index, normalized_key(join_key_text(group)) == F.col("norm_key"), "left").drop("norm_key"))
    # the mismatch's own key among those that normalize like it (a key appears once): null when unknown
    own = F.filter("user_keys", lambda entry: entry["user_key"] == join_key_text(group))
    known = F.get(own, 0)
    copied = [pair.name for pair in copies]
    user_partitions = F.when(F.col("pair").isin(*copied), F.array(known["repartitioned_to"])).otherwise(
        known["partitions"]
    ) if copied else known["partitions"]
    placement = join_placement(group, mismatches, num_partitions, partitioner, few)
    rekeyed = F.lit(False)
    if placement is not None:  # judged where the join key is re-keyed to, not where the record's own key put it
        rows = rows.join(placement, F.col(group.join_key.name).eqNullSafe(F.col("_join_key")), "left").drop("_join_key")
        rekeyed = F.col("pair").isin(*[pair.name for pair in group.pairs if pair.rekeys_stream])
    else:
        rows = rows.withColumn("_join_partition", F.lit(None).cast("int"))
    rows = rows.select("*", known["first_ms"].alias("user_first_ms"), user_partitions.alias("user_partitions"),
                       F.col("user_keys.user_key").alias("similar_keys"), rekeyed.alias("_rekeyed")).drop("user_keys")
    cause, detail = _cause_and_detail(group, mine[0].table_input)
    # a re-keyed record's partition is the one its join key was re-keyed into, where it was joined
    joined_in = F.when(F.col("_rekeyed") & F.col("order_partition").isNotNull(), F.col("_join_partition")).otherwise(
        F.col("order_partition"))
    return rows.withColumn("cause", cause).withColumn("cause_detail", detail).withColumn(
        "user_partition", F.col("user_partitions")[0]
    ).withColumn("order_partition", joined_in).drop("similar_keys", "order_key", "_rekeyed", "_join_partition")


def _cause_and_detail(group: Group, table: p.Source) -> tuple[Column, Column]:
    """The cause and its sentence, naming the stream and the table by their sources (``%`` escaped)."""
    stream, rows = group.stream.name.replace("%", "%%"), table.name.replace("%", "%%")
    known = F.col("user_first_ms").isNotNull()
    similar = F.col("similar_keys").isNotNull()
    located = F.col("order_partition").isNotNull()
    rekeyed = F.col("_rekeyed")
    # a join that re-keys its stream looks the row up in the partition of the join key (``join_placement``)
    joined_in = F.when(rekeyed, F.col("_join_partition")).otherwise(F.col("order_partition"))
    colocated = F.array_contains(F.col("user_partitions"), joined_in)
    ts = F.col(group.time.name).cast("bigint")
    late = F.col("user_first_ms") > ts
    key_text = join_key_text(group)
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
    not_in_orders = F.when(~located, F.lit(f"; the record is not in {stream}'s topic")).otherwise(F.lit(""))
    detail = (
        F.when(key == NULL_KEY, F.concat(
            F.lit(f"the {stream} record's key is null: ksqlDB on Kafka Streams 3.7+ (KIP-962) and the worker join it with "
                  f"NULL {rows} columns in a random partition; "), _status_words()))
        .when(key == NON_UTF8_KEY, F.concat(F.format_string(
            f"the {stream} record's key is not UTF-8: Kafka Streams reads it as '%s' (U+FFFD for each bad byte), "
            "the worker dead-letters it; ", key_text), _status_words()))
        .when(F.col("status") == "missing_in_faust", F.concat(F.lit("no record in the Faust output"), not_in_orders))
        .when(F.col("status") == "missing_in_ksqldb", F.concat(F.lit("no record in the ksqlDB output"), not_in_orders))
        .when(F.col("status") == "duplicate",
              F.format_string("Faust output has %d record(s), ksqlDB output %d", "faust_count", "ksqldb_count"))
        .when(F.col("status") == "partition_mismatch",
              F.format_string("Faust wrote partition %d, ksqlDB partition %d", "faust_partition", "ksqldb_partition"))
        .when(~known & ~similar, F.format_string(f"no {rows} row for key '%s'", key_text))
        .when(~known, F.format_string(f"{rows} has key(s) %s, the {stream} record has '%s'",
                                      F.array_join("similar_keys", ", "), key_text))
        .when(~located, F.lit(f"the record is not in {stream}'s topic"))
        .when(~colocated & rekeyed, F.format_string(
            f"{stream} record re-keyed by {group.join_key.output.replace('%', '%%')} into partition %d, {rows} row in "
            "partition(s) %s", F.col("_join_partition"), partitions))
        .when(~colocated, F.format_string(f"{stream} record in partition %d, {rows} row in partition(s) %s",
                                          F.col("order_partition"), partitions))
        .when(late, F.format_string(f"the {rows} row's first record is %d ms newer than the {stream} record",
                                    F.col("user_first_ms") - ts))
        .otherwise(F.format_string(f"{rows} row and {stream} record both in partition %d, the row %d ms older than the record",
                                   joined_in, ts - F.col("user_first_ms")))
    )
    return cause, detail


def _status_words() -> Column:
    """What the outputs hold of the record, in a few words."""
    return (F.when(F.col("status") == "missing_in_faust", F.lit("no record in the Faust output"))
            .when(F.col("status") == "missing_in_ksqldb", F.lit("no record in the ksqlDB output"))
            .otherwise(F.format_string("status %s", "status")))


def tally(pairs: Iterable[str], rows: Iterable[Mapping[str, Any]]) -> tuple[dict[str, dict[str, int]], tuple[PartitionCell, ...]]:
    """Mismatches by (pair, cause) and by (pair, order partition, user partition), from one aggregation's rows.

    ``rows`` are counts by (pair, cause, order_partition, user_partition): one
    Spark aggregation gives both tables (cells only where both partitions are known).
    """
    by_cause: dict[str, dict[str, int]] = {pair: {c: 0 for c in CAUSES} for pair in pairs}
    cells: dict[tuple[str, int, int], int] = {}
    for row in rows:
        n = int(row["count"])
        by_cause[row["pair"]][row["cause"]] += n
        if row["order_partition"] is not None and row["user_partition"] is not None:
            cell = (row["pair"], int(row["order_partition"]), int(row["user_partition"]))
            cells[cell] = cells.get(cell, 0) + n
    return by_cause, tuple(PartitionCell(pair, order, user, n) for (pair, order, user), n in sorted(cells.items()))
