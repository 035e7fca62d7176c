"""The worker's topology as facts of the settings: the topics it owns (more in later steps).

Pure, so the CLI, the benchmarks and the tests know the worker's topics without
building an app.
"""
from __future__ import annotations

from ..settings import Settings


def owned_topics(settings: Settings) -> dict[str, int]:
    """The topics the worker reads or writes, each with the configured partition count."""
    names = (
        settings.users_topic,
        settings.orders_topic,
        settings.users_repartition_topic,
        settings.merged_topic,
        settings.merged_repartition_topic,
        settings.dead_letter_topic,
    )
    return {name: settings.partitions for name in names}
