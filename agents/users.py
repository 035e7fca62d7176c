"""``demo_user`` -> the users table, and re-keyed through the join's partitioner into the repartition topic.

The repartition topic mirrors ksqlDB's ``DEMO_USER_REPARTITION``: the same rows,
but each in the partition the configured partitioner picks for its key, so the
repartitioned join finds users whatever client wrote ``demo_user``.
"""
from __future__ import annotations

import json

from faust import StreamT

from streamapp.application import app, settings
from streamapp.counters import counters
from streamapp.records import decode_user
from streamapp.tables import send_raw, users_table, users_topic

from .decoding import decoded


@app.agent(users_topic)
async def load_users(stream: StreamT) -> None:
    async for msg, user in decoded(stream, decode_user):
        if user is None:
            users_table.pop(msg.key, None)
            counters.users_deleted[msg.partition] += 1
            await send_raw(settings.users_repartition_topic, msg.key, None)
            continue
        row = user.to_table_value()
        users_table[msg.key] = row
        counters.users[msg.partition] += 1
        await send_raw(settings.users_repartition_topic, msg.key, json.dumps(row).encode())
