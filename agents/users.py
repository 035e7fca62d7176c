"""``demo_user`` -> the users table, and re-keyed through the join's partitioner into the repartition topic.

The repartition topic mirrors ksqlDB's ``DEMO_USER_REPARTITION``: the same rows,
but each in the partition the configured partitioner picks for its key, so the
repartitioned join finds users whatever client wrote ``demo_user``.

A user goes into both tables or into neither: every output it causes (the
repartition row, both tables' changelog rows) is checked against its topic's
size limit before anything is written, and a user that fails any check, or
whose work raises, is a dead letter (:mod:`agents.dead_lettering`).
"""
from __future__ import annotations

import json
from functools import partial

from faust.types import Message

from streamapp.kafka.limits import RecordLimits
from streamapp.model.records import decode_user
from streamapp.worker.app import StreamappApp

from .dead_lettering import DeadLettering, check_size


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    dead_letters.agent(app.join_tables.users_topic, "agents.users.load_users", partial(load_user, app, dead_letters))


async def load_user(app: StreamappApp, dead_letters: DeadLettering, msg: Message, limits: RecordLimits) -> None:
    """Decode one users record, check every output it causes, then write them."""
    settings, tables = app.settings, app.join_tables
    user = decode_user(msg.key, msg.value)
    repartition = settings.users_repartition_topic
    if user is None:
        check_size(limits, repartition, msg.key, None, "repartition tombstone")
        check_size(limits, tables.changelog_topic(settings.users_topic), msg.key, None, "changelog tombstone")
        tables.users.pop(msg.key, None)
        await tables.send_raw(repartition, msg.key, None)
        app.counters.users_deleted[msg.partition] += 1
        return
    row = user.to_table_value()
    repartition_value = json.dumps(row).encode()
    check_size(limits, repartition, msg.key, repartition_value, "repartition row")
    for source in (settings.users_topic, repartition):  # the repartitioned table stores the same row
        check_size(limits, tables.changelog_topic(source), msg.key, dead_letters.table_value(source, row),
                   "changelog row")
    tables.users[msg.key] = row
    await tables.send_raw(repartition, msg.key, repartition_value)
    app.counters.users[msg.partition] += 1
