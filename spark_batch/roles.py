"""The job's roles, defined once: the six topics it reads, the two pairs of join outputs, the two sides of a pair."""
from __future__ import annotations

#: The two joins compared: Faust's and ksqlDB's direct join, and their repartitioned join.
PAIRS = ("direct", "repartition")
#: The two engines of a pair.
SIDES = ("faust", "ksqldb")
#: Output role -> (pair, side): ``faust_direct``, ``ksqldb_direct``, ``faust_repartition``, ``ksqldb_repartition``.
OUTPUT_ROLES = {f"{side}_{pair}": (pair, side) for pair in PAIRS for side in SIDES}
#: Every role -> (its option, the ``Settings`` field that gives its default topic).
TOPIC_OPTIONS = {
    "users": ("--users-topic", "users_topic"),
    "orders": ("--orders-topic", "orders_topic"),
    "faust_direct": ("--faust-topic", "merged_topic"),
    "ksqldb_direct": ("--ksqldb-topic", "ksqldb_merged_topic"),
    "faust_repartition": ("--faust-repartition-topic", "merged_repartition_topic"),
    "ksqldb_repartition": ("--ksqldb-repartition-topic", "ksqldb_merged_repartition_topic"),
}
#: Role -> its option, for errors that name a topic.
FLAGS = {role: flag for role, (flag, _) in TOPIC_OPTIONS.items()}
#: Roles whose records are cut to the window; users are read whole (a user may predate the day).
TIMED_ROLES = ("orders", *OUTPUT_ROLES)
