"""The worker's topology as facts of the settings, each defined here once: its joins, tables and topics.

The worker builds its tables and joins from :func:`joins`, the guard checks the
pairs they join, the web views show their tables, the producer waits on their
changelogs, the reconciliation compares their outputs pair by pair.  Pure, so
none of them needs an app to know the topology.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..settings import Settings

#: The two joins, by the name the reconciliation gives their pair of outputs.
DIRECT, REPARTITION = "direct", "repartition"
PAIRS = (DIRECT, REPARTITION)


@dataclass(frozen=True)
class Join:
    """One of the worker's LEFT JOINs: the orders stream with a users table, written to an output topic."""

    pair: str
    #: The orders topic.
    stream: str
    #: The Faust table's name (its changelog is ``<app_id>-<table>-changelog``).
    table: str
    #: The topic the table is loaded from.
    table_topic: str
    #: The worker's output topic.
    output: str
    #: ksqlDB's output topic of the same join.
    ksqldb_output: str


def joins(settings: Settings) -> tuple[Join, Join]:
    """The direct join (the users as their producer placed them) and the repartitioned one."""
    return (
        Join(DIRECT, settings.orders_topic, "users", settings.users_topic, settings.merged_topic,
             settings.ksqldb_merged_topic),
        Join(REPARTITION, settings.orders_topic, "users_repartition", settings.users_repartition_topic,
             settings.merged_repartition_topic, settings.ksqldb_merged_repartition_topic),
    )


#: The tables' names, in the joins' order (what ``/users?table=`` takes).
TABLE_NAMES = tuple(join.table for join in joins(Settings()))


def changelog_topic(settings: Settings, table: str) -> str:
    """The changelog topic Faust names and creates for ``table`` of the app ``settings.app_id``."""
    return f"{settings.app_id}-{table}-changelog"


def owned_topics(settings: Settings) -> dict[str, int]:
    """The topics the worker reads or writes, each with the configured partition count."""
    names = (
        settings.users_topic,
        settings.orders_topic,
        settings.users_repartition_topic,
        *(join.output for join in joins(settings)),
        settings.dead_letter_topic,
    )
    return {name: settings.partitions for name in names}
