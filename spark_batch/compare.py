"""Status of every order in each pair of join outputs (Faust vs ksqlDB), with Spark SQL functions only.

Both sides of both pairs are one DataFrame (``pair``, ``side`` + output
columns), so one aggregation by (pair, order identity) classifies everything:
no join, one shuffle.
"""
from __future__ import annotations

from typing import Mapping

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from .decode import IDENTITY
from .roles import PAIRS

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
#: Statuses where the two joins disagree on (or both lack) the user's columns: the input topics explain them.
ENRICHMENT_STATUSES = ("enriched_only_in_faust", "enriched_only_in_ksqldb", "both_unenriched", "value_mismatch")


def _enriched(side: dict[str, Column]) -> Column:
    return side["name"].isNotNull() | side["age"].isNotNull()


def _differs(a: Column, b: Column) -> Column:
    return ~a.eqNullSafe(b)


def classify(outputs: DataFrame, totals: Observation | None = None, matches: bool = True) -> DataFrame:
    """One row per (pair, order identity): counts per side, each side's values, and the status.

    With a single record per side the values are that record's; for a ``duplicate`` they are
    the largest of the copies, so reruns give the same row whatever the order of reading.
    ``totals`` counts the orders of each pair (every status); ``matches=False`` leaves the
    matching orders out before the output columns are computed (for ~99 % of the orders).
    """
    is_faust = F.col("is_faust")

    def first(column: str, mine: Column) -> Column:
        # one fixed-width buffer per value keeps the aggregation's hash map small; min(struct)/min_by
        # would be sort-based or carry two buffers per value
        return F.max(F.when(mine, F.col(column)))

    # Shuffled by the grouping key *before* the aggregation: a map-side partial aggregation over
    # the scan reduces nothing (an order's two records come from two exports, so two tasks), yet
    # its hash map of one split's distinct identities fills the heap and spills (Spark 4.2 cannot
    # skip it). After this exchange the partial step sees both records of each order. unit_price
    # as grouping normalizes it (-0.0 = 0.0), so that both records of an order meet.
    # NAME enters the aggregation as a 64-bit hash: fixed-width buffers keep Spark on its hash
    # aggregate (strings force a sort-based one, 3-4x slower at 10 M rows; see benchmarks/README.md)
    price = F.when(F.col("unit_price") == 0, F.lit(0.0)).otherwise(F.col("unit_price")).alias("unit_price")
    hashed = outputs.select(
        "pair", *[price if c == "unit_price" else c for c in IDENTITY], "partition", "age",
        (F.col("side") == "faust").alias("is_faust"),
        F.when(F.col("name").isNotNull(), F.xxhash64("name")).alias("name_hash"),
    ).repartition("pair", *IDENTITY)
    fields = ("partition", "name_hash", "age")
    grouped = hashed.groupBy("pair", *IDENTITY).agg(
        F.count_if(is_faust).alias("faust_count"),
        F.count_if(~is_faust).alias("ksqldb_count"),
        *[first(c, is_faust).alias(f"faust_{c}") for c in fields],
        *[first(c, ~is_faust).alias(f"ksqldb_{c}") for c in fields],
    )
    f = {c.removesuffix("_hash"): F.col(f"faust_{c}") for c in fields}
    k = {c.removesuffix("_hash"): F.col(f"ksqldb_{c}") for c in fields}
    both = (F.col("faust_count") > 0) & (F.col("ksqldb_count") > 0)
    # A null-key order has no user to find and no partition of its own: both engines join it with
    # NULL user columns in a partition their producer picks at random (README, "Decoding"), so
    # neither its partition nor its lack of a user is a disagreement.
    keyed = F.col("user_id").isNotNull()
    differing = F.array_compact(
        F.array(
            F.when(_differs(f["name"], k["name"]), F.lit("NAME")),
            F.when(_differs(f["age"], k["age"]), F.lit("AGE")),
            F.when(keyed & _differs(f["partition"], k["partition"]), F.lit("partition")),
        )
    )
    rules = [
        ("missing_in_faust", F.col("faust_count") == 0),
        ("missing_in_ksqldb", F.col("ksqldb_count") == 0),
        ("duplicate", (F.col("faust_count") > 1) | (F.col("ksqldb_count") > 1)),
        ("partition_mismatch", keyed & (f["partition"] != k["partition"])),
        ("enriched_only_in_faust", _enriched(f) & ~_enriched(k)),
        ("enriched_only_in_ksqldb", ~_enriched(f) & _enriched(k)),
        ("both_unenriched", keyed & ~_enriched(f) & ~_enriched(k)),
        ("value_mismatch", _differs(f["name"], k["name"]) | _differs(f["age"], k["age"])),
    ]
    code = F.lit(STATUSES.index("match"))
    for name, condition in reversed(rules):  # first rule that holds wins
        code = F.when(condition, F.lit(STATUSES.index(name))).otherwise(code)
    status = F.element_at(F.array(*[F.lit(s) for s in STATUSES]), code + 1)
    if totals is not None:  # on the grouped rows, before any output column is computed
        grouped = grouped.observe(totals, *[F.count_if(F.col("pair") == pair).alias(pair) for pair in PAIRS])
    if not matches:
        grouped = grouped.where(code != STATUSES.index("match"))
    return grouped.select(
        "pair",
        status.alias("status"),
        *IDENTITY,
        "faust_count",
        "ksqldb_count",
        "faust_partition",
        "ksqldb_partition",
        _enriched(f).alias("faust_enriched"),
        _enriched(k).alias("ksqldb_enriched"),
        "faust_age",
        "ksqldb_age",
        F.when(both, differing).otherwise(F.array().cast("array<string>")).alias("mismatched_columns"),
    )


def status_counts(totals: Mapping[str, int], mismatches: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    """{pair: {status: count}}, every status present: non-matches counted, match = total - non-matches."""
    counts = {pair: {status: int(mismatches.get((pair, status), 0)) for status in STATUSES} for pair in PAIRS}
    for pair in PAIRS:
        counts[pair]["match"] = int(totals.get(pair, 0)) - sum(n for s, n in counts[pair].items() if s != "match")
    return counts
