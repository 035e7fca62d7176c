"""Status of every stream record in each pair of join outputs (Faust vs ksqlDB), with Spark SQL functions only.

The Faust side is joined to the ksqlDB side on (pair, identity: the stream's projected columns and its
event time, :mod:`spark_batch.roles`) with a full outer sort-merge join, as a bare comparison of the
two outputs would be; a record's copies are counted beforehand by a window over the same key, which
reuses the join's shuffle and sort.  The table's projected columns decide enrichment and value
mismatches.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .decode import identity_value
from .roles import SIDES, Field, Group

STATUSES = (
    "match",
    "missing_in_faust",
    "missing_in_ksqldb",
    "duplicate",
    "partition_mismatch",
    "enriched_only_in_faust",
    "enriched_only_in_ksqldb",
    "both_unenriched",
    "value_mismatch",
)
#: Statuses where the two joins disagree on (or both lack) the table's columns: the input topics explain them.
ENRICHMENT_STATUSES = ("enriched_only_in_faust", "enriched_only_in_ksqldb", "both_unenriched", "value_mismatch")


def _enriched(side: dict[str, Column]) -> Column:
    if not side:
        return F.lit(False)
    found = F.lit(False)
    for column in side.values():
        found = found | column.isNotNull()
    return found


def _differs(a: Column, b: Column) -> Column:
    return ~a.eqNullSafe(b)


#: What a null identity value is replaced by in the join key (its null bit in ``_k_tag`` tells the two apart).
_NULL_AS = {"string": "", "binary": b"", "boolean": False, "double": 0.0}


def _ordered(group: Group) -> tuple[Field, ...]:
    """The identity with the event time first: a unique long as the sort's first key lets its 8-byte prefix
    decide almost every comparison."""
    return (group.time, *(f for f in group.identity if f != group.time))


def _keys(group: Group) -> tuple[str, ...]:
    """The join key: the identity with its nulls replaced (join keys must be non-null to meet, and a null-safe
    join key becomes ``coalesce``/``isnull`` expressions, which the window's shuffle does not provide), then
    ``_k_tag``: a bit per identity column that was null, and above them the pair's number (1 + its index in
    the group; a long shuffles and compares cheaper than the pair's name)."""
    return (*(f"_k_{f.name}" for f in _ordered(group)), "_k_tag")


def _key_columns(group: Group) -> list[Column]:
    # -0.0 = 0.0 for a DOUBLE (Spark normalizes float join keys itself, NaN included)
    tag = F.shiftleft(F.array_position(F.array(*[F.lit(p) for p in group.names]), F.col("pair")).cast("bigint"),
                      len(group.identity))
    for bit, f in enumerate(group.identity):
        tag = tag + F.when(F.col(f.name).isNull(), F.lit(1 << bit)).otherwise(F.lit(0))
    keys = [F.coalesce(identity_value(f), F.lit(_NULL_AS.get(f.spark, 0)).cast(f.spark)).alias(f"_k_{f.name}")
            for f in _ordered(group)]
    return [*keys, tag.alias("_k_tag")]


def _identity(group: Group) -> list[Column]:
    """The pair and the identity columns back from the key (a null where its bit is set)."""
    number = F.shiftright(F.col("_k_tag"), len(group.identity)).cast("int")
    pair = F.element_at(F.array(*[F.lit(p) for p in group.names]), number).alias("pair")
    return [pair, *[F.when(F.col("_k_tag").bitwiseAND(1 << bit) == 0, F.col(f"_k_{f.name}")).alias(f.name)
                    for bit, f in enumerate(group.identity)]]


def shown(group: Group) -> tuple[str, ...]:
    """The table fields each side's row shows as they are (the fixed-width ones; a string is compared by its hash)."""
    return tuple(f.name for f in group.joined if f.fixed)


def _fields(group: Group) -> tuple[str, ...]:
    """What a side's row keeps of its copy: its partition, then each table field (a string as its 64-bit hash)."""
    return ("partition", *(f.name if f.fixed else f"{f.name}_hash" for f in group.joined))


def _one_side(group: Group, outputs: DataFrame, side: str) -> DataFrame:
    """One row per (pair, identity) of one engine's records: its copy count and the values of its largest copy.

    A string column is compared, not output: its 64-bit hash keeps the shuffled rows fixed-width.
    """
    rows = outputs.select(
        *_key_columns(group), "partition",
        *[F.col(f.name) if f.fixed else F.when(F.col(f.name).isNotNull(), F.xxhash64(f.name)).alias(f"{f.name}_hash")
          for f in group.joined],
    )
    keys, fields = _keys(group), _fields(group)
    # Spark shuffles and sorts by the key before the window; the window and the filter keep that
    # partitioning and order, so the join needs neither again
    ordered = Window.partitionBy(*keys).orderBy(*[F.col(c).desc_nulls_last() for c in fields])
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    counted = rows.select("*", F.count(F.lit(1)).over(whole).alias("count"), F.row_number().over(ordered).alias("_copy"))
    return counted.where(F.col("_copy") == 1).select(*keys, *[F.col(c).alias(f"{side}_{c}") for c in ("count", *fields)])


def classify(group: Group, faust: DataFrame, ksqldb: DataFrame, matches: bool = True) -> DataFrame:
    """One row per (pair, identity): counts per side, each side's values, and the status.

    ``faust``, ``ksqldb``: each engine's records of the group's pairs, tagged ``pair``.
    With a single record per side the values are that record's; for a ``duplicate`` they are the
    copy that sorts last by (partition, each table field or its 64-bit hash; null lowest), so reruns
    give the same row whatever the order of reading.
    ``matches=False`` leaves the matching rows out before the output columns are computed (for
    ~99 % of them; ``status_counts`` counts them without a counter on every row).
    """
    keys = _keys(group)
    joined = _one_side(group, faust, "faust").join(_one_side(group, ksqldb, "ksqldb"), list(keys), "full_outer")
    names = {f.name: f.name if f.fixed else f"{f.name}_hash" for f in group.joined}
    f = {name: F.col(f"faust_{column}") for name, column in names.items()}
    k = {name: F.col(f"ksqldb_{column}") for name, column in names.items()}
    faust_count, ksqldb_count = F.coalesce("faust_count", F.lit(0)), F.coalesce("ksqldb_count", F.lit(0))
    both = F.col("faust_count").isNotNull() & F.col("ksqldb_count").isNotNull()
    # A null-key record has no table row to find and no partition of its own: both engines join it with NULL
    # table columns in a partition their producer picks at random (docs/reference/reconciliation.md, "Causes"),
    # so neither its partition nor its lack of a table row is a disagreement.
    keyed = F.col("_k_tag").bitwiseAND(1 << group.identity.index(group.join_key)) == 0
    partition_differs = keyed & _differs(F.col("faust_partition"), F.col("ksqldb_partition"))
    values_differ = F.lit(False)
    for field in group.joined:
        values_differ = values_differ | _differs(f[field.name], k[field.name])
    differing = F.array_compact(F.array(
        *[F.when(_differs(f[field.name], k[field.name]), F.lit(field.output)) for field in group.joined],
        F.when(partition_differs, F.lit("partition")),
    ))
    rules = [
        ("missing_in_faust", F.col("faust_count").isNull()),
        ("missing_in_ksqldb", F.col("ksqldb_count").isNull()),
        ("duplicate", (faust_count > 1) | (ksqldb_count > 1)),
        ("partition_mismatch", keyed & (F.col("faust_partition") != F.col("ksqldb_partition"))),
        ("enriched_only_in_faust", _enriched(f) & ~_enriched(k)),
        ("enriched_only_in_ksqldb", ~_enriched(f) & _enriched(k)),
        ("both_unenriched", keyed & ~_enriched(f) & ~_enriched(k)),
        ("value_mismatch", values_differ),
    ]
    code = F.lit(STATUSES.index("match"))
    for name, condition in reversed(rules):  # first rule that holds wins
        code = F.when(condition, F.lit(STATUSES.index(name))).otherwise(code)
    status = F.element_at(F.array(*[F.lit(s) for s in STATUSES]), code + 1)
    if not matches:
        joined = joined.where(code != STATUSES.index("match"))
    pair, *identity = _identity(group)
    return joined.select(
        pair,
        status.alias("status"),
        *identity,
        faust_count.cast("bigint").alias("faust_count"),
        ksqldb_count.cast("bigint").alias("ksqldb_count"),
        "faust_partition",
        "ksqldb_partition",
        _enriched(f).alias("faust_enriched"),
        _enriched(k).alias("ksqldb_enriched"),
        *[F.col(f"{side}_{name}") for name in shown(group) for side in SIDES],
        F.when(both, differing).otherwise(F.array().cast("array<string>")).alias("mismatched_columns"),
    )


def status_metrics(pairs: Sequence[str]) -> list[Column]:
    """Aggregates over ``classify``'s rows, for an Observation on its output: per pair, its non-matches by
    status (``<pair>:<status>``) and the extra copies of its duplicates (``<pair>:extra_copies``: the sum
    of ``faust_count - 1``). Without the matches (``matches=False``) that is ~1 % of the rows: counted
    on their way out, they cost nothing measurable, where a query of its own took ~0.4 s."""
    metrics = []
    for pair in pairs:
        mine = F.col("pair") == pair
        metrics += [F.count_if(mine & (F.col("status") == s)).alias(f"{pair}:{s}") for s in STATUSES if s != "match"]
        extra = F.when(mine & (F.col("status") != "match"), F.greatest(F.col("faust_count") - 1, F.lit(0)))
        metrics.append(F.coalesce(F.sum(extra), F.lit(0)).alias(f"{pair}:extra_copies"))
    return metrics


def status_counts(pairs: Sequence[str], faust_records: Mapping[str, int], metrics: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """{pair: {status: count}}, every status present: non-matches counted (``status_metrics``), match =
    rows - non-matches.

    A pair's rows are the ones Faust wrote and the ones it lacks (``missing_in_faust``). The ones it
    wrote are its decodable records (``faust_records``, counted while reading) less the extra copies of
    those it wrote more than once (every such row is a non-match), so nothing counts the ~99 % of
    matching rows one by one. ``metrics`` may be empty: nothing was classified.
    """
    counts = {pair: {s: int(metrics.get(f"{pair}:{s}", 0)) for s in STATUSES} for pair in pairs}
    for pair in pairs:
        written = int(faust_records.get(pair, 0)) - int(metrics.get(f"{pair}:extra_copies", 0))
        orders = written + counts[pair]["missing_in_faust"]
        counts[pair]["match"] = orders - sum(n for s, n in counts[pair].items() if s != "match")
    return counts
