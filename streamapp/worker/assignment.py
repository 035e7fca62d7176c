"""Which partitions of a table this worker holds, read from the group's assignment (Faust's assignor).

Both the web views (:mod:`streamapp.worker.web.lookup`) and the metrics
(:mod:`streamapp.worker.metrics`) ask it; the web views serve the metrics, so it
lives below both.
"""
from __future__ import annotations

from faust.types import AppT, CollectionT


def changelog_topic(table: CollectionT) -> str:
    return table.changelog_topic.get_topic_name()


def active_partitions(app: AppT, table: CollectionT) -> set[int]:
    """The partitions of ``table`` this worker is active for (it processes their events)."""
    topic = changelog_topic(table)
    return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}


def local_partitions(app: AppT, table: CollectionT) -> set[int]:
    """The partitions of ``table`` this worker holds a copy of: active, or standby."""
    topic = changelog_topic(table)
    return {tp.partition for tp in (*app.assignor.assigned_actives(), *app.assignor.assigned_standbys())
            if tp.topic == topic}
