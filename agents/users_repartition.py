"""The repartition topic -> the repartitioned users table (ksqlDB's ``DEMO_USER_REPARTITION`` table).

The users agent has checked what it wrote here; a record from anyone else gets
the same checks, and any failure is that record's dead letter (:mod:`agents.dead_lettering`).
"""
from __future__ import annotations

from functools import partial

from faust.types import Message

from streamapp.kafka.limits import RecordLimits
from streamapp.model.records import decode_user
from streamapp.worker.app import StreamappApp

from .dead_lettering import DeadLettering, check_size


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    dead_letters.agent(app.join_tables.users_repartition_topic, "agents.users_repartition.load_repartitioned_users",
                       partial(load_repartitioned_user, app, dead_letters))


def load_repartitioned_user(app: StreamappApp, dead_letters: DeadLettering, msg: Message,
                            limits: RecordLimits) -> None:
    """Decode one repartitioned user, check its changelog row, then write it."""
    tables, source = app.join_tables, app.settings.users_repartition_topic
    user = decode_user(msg.key, msg.value)
    if user is None:
        check_size(limits, tables.changelog_topic(source), msg.key, None, "changelog tombstone")
        tables.users_repartition.pop(msg.key, None)
        app.counters.users_repartition_deleted[msg.partition] += 1
        return
    row = user.to_table_value()
    check_size(limits, tables.changelog_topic(source), msg.key, dead_letters.table_value(source, row), "changelog row")
    tables.users_repartition[msg.key] = row
    app.counters.users_repartitioned[msg.partition] += 1
