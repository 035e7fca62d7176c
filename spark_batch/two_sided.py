"""Windowed stream-stream and table-table joins reconciled: each row's status and its cause, in Spark SQL.

A pair's rows (:class:`~spark_batch.roles.TwoSidedPair`): a stream-stream row is the pair of records it joins (both
sides' projected columns and the output's timestamp, the later of the two), an outer row with one side NULL its own;
each engine's rows are counted by identity and matched with a full outer join.  A table-table output is the join's
changelog: each key's last record of the window is its final row (a tombstone: none), and final rows are compared.
The statuses are :data:`spark_batch.compare.STATUSES` (an outer row both engines wrote: ``both_unenriched``).

Causes (:data:`spark_batch.causes.CAUSES`), read off the two input topics by the row's join key (a stream's records
within the row's window): ``late_record`` when a record of the key in the row's partition came later than the
window and its grace behind its side's stream time there (its store had moved past it: an engine that read it before
the other side's record joined it, one that read it after did not); ``copartition_violation`` when the other side
has records of the key only in other partitions; ``unknown_user`` when it has none; ``null_key``; else ``other``.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamapp.sql import plan as p
from streamapp.sql.stream_join import JoinWindowSpec

from . import ksql_json
from .causes import _partition_batches
from .compare import STATUSES
from .decode import _millis, identity_value, is_raw, kind_counts
from .roles import SIDES, Field, TwoSidedPair

#: Statuses whose cause is looked for in the inputs (the rest are ``other``, with a sentence).
EXPLAINED = ("missing_in_faust", "missing_in_ksqldb", "both_unenriched", "enriched_only_in_faust",
             "enriched_only_in_ksqldb")
#: Statuses a missing join partner explains (co-partitioning, no such key).
UNJOINED = ("both_unenriched", "enriched_only_in_faust", "enriched_only_in_ksqldb")


def present(fields: tuple[Field, ...], prefix: str = "") -> Column:
    """Whether a row holds a side's record: one of its columns is not null (a side without columns: always)."""
    if not fields:
        return F.lit(True)
    found = F.lit(False)
    for f in fields:
        found = found | F.col(f"{prefix}{f.name}").isNotNull()
    return found


def retention(pair: TwoSidedPair) -> int:
    """How far behind its side's stream time a record is still kept for later joins (the window and its grace)."""
    query = pair.query
    return JoinWindowSpec(query.within_before or 0, query.within_after or 0, query.grace).retention


def _identity_id(pair: TwoSidedPair) -> Column:
    """The pair and the identity as one null-safe, comparable key (a DOUBLE's -0.0 as 0.0)."""
    return F.to_json(F.struct(F.col("pair"), *[identity_value(f).alias(f.name) for f in pair.identity]))


def _one_side(pair: TwoSidedPair, outputs: DataFrame, side: str) -> DataFrame:
    """One row per identity of one engine's records: its copies, and the values of its largest (stream-stream) or
    last (table-table: by partition, then offset) copy."""
    compared = [f.name for f in pair.compared]
    keep = [*[f.name for f in pair.identity], *compared]
    rows = outputs.select("*", _identity_id(pair).alias("_id"))
    if pair.windowed:
        largest = F.max(F.struct("partition", *compared)).alias("_v")
        grouped = rows.groupBy("_id").agg(F.count(F.lit(1)).alias("count"), largest,
                                          *[F.first(f.name).alias(f.name) for f in pair.identity])
        values = [F.col("_v.partition").alias("partition"), *[F.col(f"_v.{c}").alias(c) for c in compared]]
        chosen = grouped.select("_id", "count", *[f.name for f in pair.identity], *values,
                                F.lit(False).alias("tombstone"))
    else:
        last = Window.partitionBy("_id").orderBy(F.col("partition").desc(), F.col("offset").desc())
        whole = Window.partitionBy("_id")
        chosen = rows.select("*", F.row_number().over(last).alias("_n"), F.count(F.lit(1)).over(whole).alias("count")) \
            .where(F.col("_n") == 1).select("_id", "count", *keep, pair.time.name, "partition", "tombstone")
    left, right = present(pair.left_fields), present(pair.right_fields)
    gone = F.col("tombstone")
    flags = [(~gone & left).alias("left"), (~gone & right).alias("right")]
    return chosen.select("_id", *[F.col(c).alias(f"{side}_{c}") for c in chosen.columns if c != "_id"],
                         *[flag.alias(f"{side}_{name}") for flag, name in zip(flags, ("left", "right"))])


def classify(pair: TwoSidedPair, faust: DataFrame, ksqldb: DataFrame) -> DataFrame:
    """One row per (pair, identity) with its status, both sides' counts, partitions and values (see the module).

    ``faust``, ``ksqldb``: each engine's decoded, valid output rows of the pair (``decode.valid_outputs``; a table
    join's with its ``tombstone`` flag).  Matches included: the caller counts statuses over these rows.
    """
    joined = _one_side(pair, faust, "faust").join(_one_side(pair, ksqldb, "ksqldb"), "_id", "full_outer")
    f_count, k_count = F.col("faust_count"), F.col("ksqldb_count")
    both = f_count.isNotNull() & k_count.isNotNull()
    f_row = f_count.isNotNull() & ~F.col("faust_tombstone")  # a row the engine holds at the end (a table's)
    k_row = k_count.isNotNull() & ~F.col("ksqldb_tombstone")
    f_matched = F.col("faust_left") & F.col("faust_right")
    k_matched = F.col("ksqldb_left") & F.col("ksqldb_right")
    differs = {f.output: ~F.col(f"faust_{f.name}").eqNullSafe(F.col(f"ksqldb_{f.name}")) for f in pair.compared}
    values_differ = F.lit(False)
    for column in differs.values():
        values_differ = values_differ | column
    row_key = F.coalesce(*[F.coalesce(f"faust_{f.name}", f"ksqldb_{f.name}").cast("string") for f in pair.row_keys]) \
        if pair.row_keys else F.lit(None).cast("string")
    partition_differs = row_key.isNotNull() & ~F.col("faust_partition").eqNullSafe(F.col("ksqldb_partition"))
    if pair.windowed:
        rules = [
            ("missing_in_faust", f_count.isNull()),
            ("missing_in_ksqldb", k_count.isNull()),
            ("duplicate", (f_count > 1) | (k_count > 1)),
            ("partition_mismatch", partition_differs),
            ("both_unenriched", row_key.isNotNull() & ~f_matched),  # a null key joins nothing, in both
            ("value_mismatch", values_differ),
        ]
    else:
        rules = [
            ("match", ~f_row & ~k_row),  # neither holds a row for the key at the end of the window
            ("missing_in_faust", ~f_row),
            ("missing_in_ksqldb", ~k_row),
            ("partition_mismatch", partition_differs),
            ("enriched_only_in_faust", f_matched & ~k_matched),
            ("enriched_only_in_ksqldb", ~f_matched & k_matched),
            ("both_unenriched", ~f_matched & ~k_matched),
            ("value_mismatch", values_differ),
        ]
    code = F.lit(STATUSES.index("match"))
    for name, condition in reversed(rules):  # the first rule that holds wins
        code = F.when(condition, F.lit(STATUSES.index(name))).otherwise(code)
    status = F.element_at(F.array(*[F.lit(s) for s in STATUSES]), code + 1)
    # the side whose record the row holds for sure (an outer row's), judged on a row that lacks the other
    f_has_left = F.coalesce(F.when(f_row & ~f_matched, F.col("faust_left")), F.when(k_row & ~k_matched, F.col("ksqldb_left")),
                            F.lit(True))
    identity = [F.coalesce(f"faust_{f.name}", f"ksqldb_{f.name}").alias(f.name) for f in pair.identity]
    time = [] if pair.windowed else [F.coalesce(f"faust_{pair.time.name}", f"ksqldb_{pair.time.name}").alias(pair.time.name)]
    shown = [F.col(f"{side}_{f.name}") for f in pair.compared if f.fixed for side in SIDES]
    differing = F.array_compact(F.array(*[F.when(d, F.lit(name)) for name, d in differs.items()],
                                        F.when(partition_differs, F.lit("partition"))))
    return joined.select(
        F.lit(pair.name).alias("pair"), status.alias("status"), *identity, *time,
        F.coalesce(f_count, F.lit(0)).cast("bigint").alias("faust_count"),
        F.coalesce(k_count, F.lit(0)).cast("bigint").alias("ksqldb_count"),
        "faust_partition", "ksqldb_partition",
        F.coalesce(f_row & f_matched, F.lit(False)).alias("faust_enriched"),
        F.coalesce(k_row & k_matched, F.lit(False)).alias("ksqldb_enriched"),
        *shown,
        F.when(both, differing).otherwise(F.array().cast("array<string>")).alias("mismatched_columns"),
        "_id", row_key.alias("_rk"),
        F.coalesce(f"faust_{pair.time.name}", f"ksqldb_{pair.time.name}").cast("bigint").alias("_t"),
        f_has_left.alias("_own_left"),
        (F.coalesce(f_matched, k_matched) if pair.windowed else F.lit(False)).alias("_joined"),
    )


def decoded_side(frame: DataFrame, source: p.Source, stream: bool) -> DataFrame:
    """An input's records (Kafka-shaped, or an export of its columns) as its columns (lower-cased; the key as
    ``ksql_json.KEY``), ``_ts`` (its event time), ``partition``, ``offset`` and ``kind`` (``ksql_json``'s)."""
    if is_raw(frame):
        decoded = ksql_json.read(frame, source, stream)
        ts = F.col(source.timestamp.lower()).cast("bigint") if stream and source.timestamp else F.col("timestamp_ms")
        return decoded.withColumn("_ts", ts)
    by_lower = {c.lower(): c for c in frame.columns}
    key = source.key_columns[0].name.lower() if source.key_columns else None
    values = [c.name.lower() for c in source.value_columns]
    if source.timestamp and stream and source.timestamp.lower() in by_lower:
        ts = F.col(by_lower[source.timestamp.lower()]).cast("bigint")
    else:
        stamp = by_lower.get("timestamp_ms") or by_lower.get("timestamp")
        ts = _millis(frame, stamp) if stamp else F.lit(None).cast("bigint")
    offset = F.col(by_lower["offset"]) if "offset" in by_lower else F.monotonically_increasing_id()
    columns = [(F.col(by_lower[key]) if key in by_lower else F.lit(None)).cast(ksql_json.key_type(source)).alias(ksql_json.KEY),
               *[(F.col(by_lower[v]) if v in by_lower else F.lit(None)).cast(t).alias(v)
                 for v, t in ksql_json.value_columns(source).items()]]
    empty = F.lit(True)
    for value in values:
        empty = empty & F.col(by_lower[value]).isNull() if value in by_lower else empty
    kind = (F.when(ts.isNull() | (ts < 0), F.lit(ksql_json.UNDECODABLE))
            .when(F.lit(key is not None) & F.col(ksql_json.KEY).isNull(), F.lit(ksql_json.NULL_KEY)))
    if not stream:
        kind = kind.when(empty, F.lit(ksql_json.TOMBSTONE))
    staged = frame.select(*columns, F.col(by_lower["partition"]).cast("int").alias("partition"),
                          offset.cast("bigint").alias("offset"), ts.alias("_ts"))
    return staged.select("*", kind.alias("kind"))


def kinds(decoded: DataFrame) -> dict[str, int]:
    """An input's records counted by kind (``decode.kind_counts``), as ``summary.InputRecords``' fields take them."""
    row = decoded.agg(*kind_counts()).first()
    found = row.asDict() if row is not None else {}
    return {k: int(found.get(k) or 0) for k in ("rows", *ksql_json.KINDS)}


def _join_column(source: p.Source, key: p.Expression | None) -> str | None:
    """The decoded column that holds a side's join key (None: the join key is computed: causes are not looked for)."""
    if not isinstance(key, p.ColumnOf):
        return None
    if any(c.name == key.name for c in source.key_columns):
        return ksql_json.KEY
    return key.name.lower()


def side_records(pair: TwoSidedPair, side: str, decoded: DataFrame, partitioner: str = "murmur2",
                 partitions: int = 1) -> DataFrame:
    """The records of one side the join reads (decodable, keyed; a table's rows as they are at the end: each key's
    last record in each partition, unless a tombstone) as ``_side``, ``_key`` (the join key as text), ``_ts``,
    ``partition``, ``_late`` (stored by neither engine: see the module).

    A side the join re-keys is where ``partitioner`` puts its join key among ``partitions``, in the key format the
    join's repartition topic has (``streamapp.sql.topology.stream_join_key``; a table join's right table copied
    into the left's key format, ``rekey_tables``): there it is joined.
    """
    source = pair.left if side == p.LEFT_SIDE else pair.right
    if pair.windowed:
        key = pair.query.left_key if side == p.LEFT_SIDE else pair.query.right_key
    else:
        key = p.ColumnOf(side, source.key_columns[0].name) if source.key_columns else None
    column = _join_column(source, key)
    kept = decoded.where(F.col("kind").isNull())
    if not pair.windowed:  # a table's row is its key's last record, a tombstone deleting it
        last = Window.partitionBy(ksql_json.KEY, "partition").orderBy(F.col("offset").desc())
        live = decoded.where(F.col("kind").isNull() | (F.col("kind") == ksql_json.TOMBSTONE))
        kept = live.select("*", F.row_number().over(last).alias("_n")).where(
            (F.col("_n") == 1) & F.col("kind").isNull()).drop("_n")
    if column is None:
        kept = kept.where(F.lit(False)).withColumn("_join", F.lit(None).cast("string"))
    else:
        kept = kept.withColumn("_join", F.col(column))
    kept = kept.select(F.lit(side).alias("_side"), "_join", F.col("_join").cast("string").alias("_key"), "_ts",
                       "partition", "offset")
    if pair.windowed:  # a stream's store in each partition: the latest time of the records before, less the retention
        before = Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
        late = F.coalesce(F.col("_ts") < F.max("_ts").over(before) - retention(pair) + 1, F.lit(False))
    else:
        late = F.lit(False)
    kept = kept.where(F.col("_key").isNotNull()).select("*", late.alias("_late"))
    rekeyed = pair.query.repartition if side == p.LEFT_SIDE else pair.query.repartition_right
    if rekeyed and column is not None and pair.join_key_format is not None:
        join_key, key_format = pair.join_key_format
        placed = p.Source("", p.STREAM, "", (join_key,), (), key_format, "JSON")
        keys = kept.select("_join").distinct()
        where = keys.mapInArrow(_partition_batches(partitioner, partitions, placed, "_join", "_placed"),
                                f"_join {dict(keys.dtypes)['_join']}, _placed int")
        kept = kept.join(where, "_join", "left").withColumn("partition", F.col("_placed"))
    return kept.select("_side", "_key", "_ts", "partition", "_late")


def _bounds(pair: TwoSidedPair) -> tuple[Column, Column]:
    """(whether a candidate record may be the row's own, whether it may be its partner), over a mismatch joined with
    the records of its key: a stream's within the window of the row's time (``_t``), a table's any."""
    if not pair.windowed:
        own = F.col("_side") == F.when(F.col("_own_left"), F.lit(p.LEFT_SIDE)).otherwise(F.lit(p.RIGHT_SIDE))
        return own, ~own
    before, after = pair.query.within_before or 0, pair.query.within_after or 0
    t, ts, side = F.col("_t"), F.col("_ts"), F.col("_side")
    left, right = side == p.LEFT_SIDE, side == p.RIGHT_SIDE
    joined = F.col("_joined")
    # a joined row: its time is the later record's, so left in [t - after, t], right in [t - before, t];
    # an outer row: its own record at t, the other side's would be in the window of t
    own = F.when(joined, left & ts.between(t - after, t)).when(F.col("_own_left"), left & (ts == t)).otherwise(
        right & (ts == t))
    other = F.when(joined, right & ts.between(t - before, t)).when(F.col("_own_left"), right & ts.between(t - before, t + after)).otherwise(
        left & ts.between(t - after, t + before))
    return own, other


def explain(pair: TwoSidedPair, mismatches: DataFrame, left: DataFrame, right: DataFrame) -> DataFrame:
    """``mismatches`` (``classify``'s rows that are not ``match``) with ``cause``, ``cause_detail``, ``order_partition``
    (the row's own record's partition), ``user_partition`` and ``user_partitions`` (the other side's records' of the
    key); ``left``, ``right``: ``side_records`` of each side."""
    records = left.unionByName(right)
    own, other = _bounds(pair)
    wanted = mismatches.where(F.col("status").isin(*EXPLAINED) & F.col("_rk").isNotNull()).select(
        "_id", "_rk", "_t", "_own_left", "_joined")
    candidates = wanted.join(records, F.col("_key") == F.col("_rk")).select(
        "_id", "partition", "_late", own.alias("_own"), other.alias("_other"))
    mine = candidates.groupBy("_id").agg(F.min(F.when(F.col("_own"), F.col("partition"))).alias("order_partition"),
                                         F.max(F.when(F.col("_own"), F.col("_late"))).alias("_own_late"))
    same = F.col("_other") & (F.col("partition") == F.col("order_partition"))
    theirs = candidates.join(mine, "_id").groupBy("_id").agg(
        F.sort_array(F.collect_set(F.when(F.col("_other"), F.col("partition")))).alias("user_partitions"),
        F.coalesce(F.max(F.when(same, F.lit(True))), F.lit(False)).alias("_same"),
        F.coalesce(F.max(F.when(same, F.col("_late"))), F.lit(False)).alias("_other_late"),
        F.first("order_partition").alias("order_partition"), F.first("_own_late").alias("_own_late"))
    rows = mismatches.join(theirs, "_id", "left")
    cause, detail = _cause_and_detail(pair)
    apart = F.filter("user_partitions", lambda x: x != F.col("order_partition"))
    user_partition = F.when(F.col("_same"), F.col("order_partition")).otherwise(F.get(apart, 0))
    return rows.select("*", cause.alias("cause"), detail.alias("cause_detail"),
                       user_partition.alias("user_partition")).drop(
        "_id", "_rk", "_t", "_own_left", "_joined", "_same", "_other_late", "_own_late")


def _cause_and_detail(pair: TwoSidedPair) -> tuple[Column, Column]:
    """The cause and its sentence, naming the sides by their sources (``%`` escaped)."""
    names = (pair.left.name.replace("%", "%%"), pair.right.name.replace("%", "%%"))
    mine = F.when(F.col("_own_left") | F.col("_joined"), F.lit(names[0])).otherwise(F.lit(names[1]))
    theirs = F.when(F.col("_own_left") | F.col("_joined"), F.lit(names[1])).otherwise(F.lit(names[0]))
    status = F.col("status")
    found = F.col("order_partition").isNotNull()
    late = F.col("_same") & (F.col("_own_late") | F.col("_other_late"))
    others = F.size(F.coalesce(F.col("user_partitions"), F.array().cast("array<int>"))) > 0
    where = "within the window" if pair.windowed else "in its table"
    cause = (F.when(F.col("_rk").isNull(), F.lit("null_key") if pair.row_keys else F.lit("other"))
             .when(~status.isin(*EXPLAINED) | ~found, F.lit("other"))
             .when(late, F.lit("late_record"))
             .when(~status.isin(*UNJOINED) | F.col("_same"), F.lit("other"))
             .when(others, F.lit("copartition_violation"))
             .otherwise(F.lit("unknown_user")))
    partitions = F.array_join(F.col("user_partitions").cast("array<string>"), ",")
    words = (F.when(status == "missing_in_faust", F.lit("no record in the Faust output"))
             .when(status == "missing_in_ksqldb", F.lit("no record in the ksqlDB output"))
             .otherwise(F.format_string("status %s", status)))
    detail = (
        F.when(F.col("_rk").isNull(), F.concat(F.lit("the row's join key is null: it joins nothing; "), words)
               if pair.row_keys else F.lit("the query projects no join key: its records cannot be looked up"))
        .when(status == "duplicate", F.format_string("Faust output has %d record(s), ksqlDB output %d",
                                                     "faust_count", "ksqldb_count"))
        .when(status == "partition_mismatch", F.format_string("Faust wrote partition %d, ksqlDB partition %d",
                                                              "faust_partition", "ksqldb_partition"))
        .when(status == "value_mismatch", F.concat(F.lit("the engines differ in "),
                                                   F.array_join("mismatched_columns", ", ")))
        .when(~found, F.concat(words, F.lit("; the row's record is not in "), mine, F.lit("'s topic")))
        .when(late, F.format_string(
            "a record of key '%s' in partition %d came more than %d ms (the window and its grace) behind its side's "
            "stream time: kept only by an engine that read it before its partner; %s",
            F.col("_rk"), F.col("order_partition"), F.lit(retention(pair)), words))
        .when(~status.isin(*UNJOINED), F.concat(words, F.lit("; nothing late in its partition")))
        .when(F.col("_same"), F.concat(mine, F.format_string(" and %s ", theirs), F.format_string(
            f"records of key '%s' both in partition %d {where}, not joined", F.col("_rk"), F.col("order_partition"))))
        .when(others, F.format_string("%s record in partition %d, %s record(s) of key '%s' in partition(s) %s",
                                      mine, F.col("order_partition"), theirs, F.col("_rk"), partitions))
        .otherwise(F.format_string(f"no %s record of key '%s' {where}", theirs, F.col("_rk")))
    )
    return cause, detail


__all__ = ["EXPLAINED", "UNJOINED", "classify", "decoded_side", "explain", "kinds", "present", "retention",
           "side_records"]
