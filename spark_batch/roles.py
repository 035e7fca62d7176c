"""The job's roles, defined once: the six topics it reads, the two pairs of join outputs, the two sides of a pair."""
from __future__ import annotations

from streamapp.model.topology import PAIRS, joins
from streamapp.settings import Settings

__all__ = ["FLAGS", "OUTPUT_ROLES", "PAIRS", "SIDES", "TIMED_ROLES", "role_topics"]

#: The two engines of a pair.
SIDES = ("faust", "ksqldb")
#: Output role -> (pair, side): ``faust_direct``, ``ksqldb_direct``, ``faust_repartition``, ``ksqldb_repartition``.
OUTPUT_ROLES = {f"{side}_{pair}": (pair, side) for pair in PAIRS for side in SIDES}
#: Every role -> its option.
FLAGS = {
    "users": "--users-topic",
    "orders": "--orders-topic",
    "faust_direct": "--faust-topic",
    "ksqldb_direct": "--ksqldb-topic",
    "faust_repartition": "--faust-repartition-topic",
    "ksqldb_repartition": "--ksqldb-repartition-topic",
}
#: Roles whose records are cut to the window; users are read whole (a user may predate the day).
TIMED_ROLES = ("orders", *OUTPUT_ROLES)


def role_topics(settings: Settings) -> dict[str, str]:
    """Every role's topic under ``settings``: the two inputs, then each join's two outputs."""
    topics = {"users": settings.users_topic, "orders": settings.orders_topic}
    for join in joins(settings):
        topics[f"faust_{join.pair}"] = join.output
        topics[f"ksqldb_{join.pair}"] = join.ksqldb_output
    return topics
