"""Status of every order in each pair of join outputs (Faust vs ksqlDB), with Spark SQL functions only.

The Faust side is joined to the ksqlDB side on (pair, order identity) with a full outer
sort-merge join, as a bare comparison of the two outputs would be; an order's copies are
counted beforehand by a window over the same key, which reuses the join's shuffle and sort.
"""
from __future__ import annotations

from typing import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .decode import IDENTITY, identity_value
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


#: The join key: the order identity with its nulls replaced (join keys must be non-null to meet, and a
#: null-safe join key becomes ``coalesce``/``isnull`` expressions, which the window's shuffle does not
#: provide), then ``_k_tag``: a bit per identity column that was null, and above them the pair's number
#: (1 + its index in PAIRS; an int shuffles and compares cheaper than the pair's name). ``ts`` first:
#: a unique long as the sort's first key lets its 8-byte prefix decide almost every comparison.
_KEY_ORDER = ("ts", *(c for c in IDENTITY if c != "ts"))
_KEYS = (*(f"_k_{c}" for c in _KEY_ORDER), "_k_tag")
_NULL_AS = {"user_id": "", "channel": "", "unit_price": 0.0}
_PAIR_SHIFT = len(IDENTITY)
_FIELDS = ("partition", "name_hash", "age")


def _key_columns() -> list[Column]:
    # -0.0 = 0.0 for the output's unit_price (Spark normalizes float join keys itself, NaN included)
    value = {c: identity_value(c) for c in IDENTITY}
    tag = F.shiftleft(F.array_position(F.array(*[F.lit(p) for p in PAIRS]), F.col("pair")).cast("int"), _PAIR_SHIFT)
    for bit, c in enumerate(IDENTITY):
        tag = tag + F.when(F.col(c).isNull(), F.lit(1 << bit)).otherwise(F.lit(0))
    return [*[F.coalesce(value[c], F.lit(_NULL_AS.get(c, 0))).alias(f"_k_{c}") for c in _KEY_ORDER], tag.alias("_k_tag")]


def _pair_number() -> Column:
    return F.shiftright(F.col("_k_tag"), _PAIR_SHIFT)


def _identity() -> list[Column]:
    """The pair and the identity columns back from the key (a null where its bit is set)."""
    pair = F.element_at(F.array(*[F.lit(p) for p in PAIRS]), _pair_number()).alias("pair")
    return [pair, *[F.when(F.col("_k_tag").bitwiseAND(1 << bit) == 0, F.col(f"_k_{c}")).alias(c)
                    for bit, c in enumerate(IDENTITY)]]


def _one_side(outputs: DataFrame, side: str) -> DataFrame:
    """One row per (pair, identity) of one engine's records: its copy count and the values of its largest copy.

    NAME is compared, not output: its 64-bit hash keeps the shuffled rows fixed-width.
    """
    rows = outputs.select(
        *_key_columns(), "partition",
        F.when(F.col("name").isNotNull(), F.xxhash64("name")).alias("name_hash"), "age",
    )
    # Spark shuffles and sorts by the key before the window; the window and the filter keep that
    # partitioning and order, so the join needs neither again
    ordered = Window.partitionBy(*_KEYS).orderBy(*[F.col(c).desc_nulls_last() for c in _FIELDS])
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    counted = rows.select("*", F.count(F.lit(1)).over(whole).alias("count"), F.row_number().over(ordered).alias("_copy"))
    return counted.where(F.col("_copy") == 1).select(*_KEYS, *[F.col(c).alias(f"{side}_{c}") for c in ("count", *_FIELDS)])


def classify(faust: DataFrame, ksqldb: DataFrame, matches: bool = True) -> DataFrame:
    """One row per (pair, order identity): counts per side, each side's values, and the status.

    ``faust``, ``ksqldb``: each engine's records of both pairs, tagged ``pair`` (one of ``PAIRS``).
    With a single record per side the values are that record's; for a ``duplicate`` they are the
    copy that sorts last by (partition, NAME's 64-bit hash, AGE; null lowest), so reruns give the
    same row whatever the order of reading.
    ``matches=False`` leaves the matching orders out before the output columns are computed (for
    ~99 % of the orders; ``status_counts`` counts them without a counter on every order).
    """
    faust_side = _one_side(faust, "faust")
    joined = faust_side.join(_one_side(ksqldb, "ksqldb"), list(_KEYS), "full_outer")
    f = {c.removesuffix("_hash"): F.col(f"faust_{c}") for c in _FIELDS}
    k = {c.removesuffix("_hash"): F.col(f"ksqldb_{c}") for c in _FIELDS}
    faust_count, ksqldb_count = F.coalesce("faust_count", F.lit(0)), F.coalesce("ksqldb_count", F.lit(0))
    both = F.col("faust_count").isNotNull() & F.col("ksqldb_count").isNotNull()
    # A null-key order has no user to find and no partition of its own: both engines join it with
    # NULL user columns in a partition their producer picks at random (README, "Decoding"), so
    # neither its partition nor its lack of a user is a disagreement.
    keyed = F.col("_k_tag").bitwiseAND(1 << IDENTITY.index("user_id")) == 0
    differing = F.array_compact(
        F.array(
            F.when(_differs(f["name"], k["name"]), F.lit("NAME")),
            F.when(_differs(f["age"], k["age"]), F.lit("AGE")),
            F.when(keyed & _differs(f["partition"], k["partition"]), F.lit("partition")),
        )
    )
    rules = [
        ("missing_in_faust", F.col("faust_count").isNull()),
        ("missing_in_ksqldb", F.col("ksqldb_count").isNull()),
        ("duplicate", (faust_count > 1) | (ksqldb_count > 1)),
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
    if not matches:
        joined = joined.where(code != STATUSES.index("match"))
    pair, *identity = _identity()
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
        "faust_age",
        "ksqldb_age",
        F.when(both, differing).otherwise(F.array().cast("array<string>")).alias("mismatched_columns"),
    )


def status_metrics() -> list[Column]:
    """Aggregates over ``classify``'s rows, for an Observation on its output: per pair, its non-matches by
    status (``<pair>:<status>``) and the extra copies of its duplicates (``<pair>:extra_copies``: the sum
    of ``faust_count - 1``). Without the matches (``matches=False``) that is ~1 % of the orders: counted
    on their way out, they cost nothing measurable, where a query of its own took ~0.4 s."""
    metrics = []
    for pair in PAIRS:
        mine = F.col("pair") == pair
        metrics += [F.count_if(mine & (F.col("status") == s)).alias(f"{pair}:{s}") for s in STATUSES if s != "match"]
        extra = F.when(mine & (F.col("status") != "match"), F.greatest(F.col("faust_count") - 1, F.lit(0)))
        metrics.append(F.coalesce(F.sum(extra), F.lit(0)).alias(f"{pair}:extra_copies"))
    return metrics


def status_counts(faust_records: Mapping[str, int], metrics: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """{pair: {status: count}}, every status present: non-matches counted (``status_metrics``), match =
    orders - non-matches.

    A pair's orders are the ones Faust wrote and the ones it lacks (``missing_in_faust``). The ones it
    wrote are its decodable records (``faust_records``, counted while reading) less the extra copies of
    those it wrote more than once (every such order is a non-match), so nothing counts the ~99 % of
    matching orders one by one. ``metrics`` may be empty: nothing was classified.
    """
    counts = {pair: {s: int(metrics.get(f"{pair}:{s}", 0)) for s in STATUSES} for pair in PAIRS}
    for pair in PAIRS:
        written = int(faust_records.get(pair, 0)) - int(metrics.get(f"{pair}:extra_copies", 0))
        orders = written + counts[pair]["missing_in_faust"]
        counts[pair]["match"] = orders - sum(n for s, n in counts[pair].items() if s != "match")
    return counts
