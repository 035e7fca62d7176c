"""The repartition topic -> the repartitioned users table (ksqlDB's ``DEMO_USER_REPARTITION`` table).

The users agent has checked what it wrote here; a record from anyone else gets
the same checks, and any failure is that record's dead letter (:mod:`agents.dead_lettering`).
"""
from __future__ import annotations

from faust import StreamT
from faust.types import Message

from streamapp.kafka.limits import RecordLimits
from streamapp.model.records import decode_user
from streamapp.worker.app import app, settings
from streamapp.worker.counters import counters
from streamapp.worker.tables import users_repartition_table, users_repartition_topic

from .dead_lettering import changelog_topic, check_size, is_record_fault, send_dead_letter, size_limits, table_value


@app.agent(users_repartition_topic)
async def load_repartitioned_users(stream: StreamT) -> None:
    limits = await size_limits()
    async for event in stream.events():
        msg = event.message
        try:
            load_repartitioned_user(msg, limits)
        except Exception as exc:  # noqa: BLE001 - is_record_fault decides
            if not is_record_fault(exc):
                raise
            await send_dead_letter(msg, exc)


def load_repartitioned_user(msg: Message, limits: RecordLimits) -> None:
    """Decode one repartitioned user, check its changelog row, then write it."""
    user = decode_user(msg.key, msg.value)
    source = settings.users_repartition_topic
    if user is None:
        check_size(limits, changelog_topic(source), msg.key, None, "changelog tombstone")
        users_repartition_table.pop(msg.key, None)
        counters.users_repartition_deleted[msg.partition] += 1
        return
    row = user.to_table_value()
    check_size(limits, changelog_topic(source), msg.key, table_value(source, row), "changelog row")
    users_repartition_table[msg.key] = row
    counters.users_repartitioned[msg.partition] += 1
