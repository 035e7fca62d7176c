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

from faust import StreamT
from faust.types import Message

from streamapp.kafka.limits import RecordLimits
from streamapp.model.records import decode_user
from streamapp.worker.app import app, settings
from streamapp.worker.counters import counters
from streamapp.worker.tables import send_raw, users_table, users_topic

from .dead_lettering import changelog_topic, check_size, is_record_fault, send_dead_letter, size_limits, table_value


@app.agent(users_topic)
async def load_users(stream: StreamT) -> None:
    limits = await size_limits()
    async for event in stream.events():
        msg = event.message
        try:
            await load_user(msg, limits)
        except Exception as exc:  # noqa: BLE001 - is_record_fault decides
            if not is_record_fault(exc):
                raise
            await send_dead_letter(msg, exc)


async def load_user(msg: Message, limits: RecordLimits) -> None:
    """Decode one users record, check every output it causes, then write them."""
    user = decode_user(msg.key, msg.value)
    repartition = settings.users_repartition_topic
    if user is None:
        check_size(limits, repartition, msg.key, None, "repartition tombstone")
        check_size(limits, changelog_topic(settings.users_topic), msg.key, None, "changelog tombstone")
        users_table.pop(msg.key, None)
        await send_raw(repartition, msg.key, None)
        counters.users_deleted[msg.partition] += 1
        return
    row = user.to_table_value()
    repartition_value = json.dumps(row).encode()
    check_size(limits, repartition, msg.key, repartition_value, "repartition row")
    for source in (settings.users_topic, repartition):  # the repartitioned table stores the same row
        check_size(limits, changelog_topic(source), msg.key, table_value(source, row), "changelog row")
    users_table[msg.key] = row
    await send_raw(repartition, msg.key, repartition_value)
    counters.users[msg.partition] += 1
