"""The repartition topic -> the repartitioned users table (ksqlDB's ``DEMO_USER_REPARTITION`` table)."""
from __future__ import annotations

from faust import StreamT

from streamapp.application import app
from streamapp.counters import counters
from streamapp.records import decode_user
from streamapp.tables import users_repartition_table, users_repartition_topic

from .decoding import decoded


@app.agent(users_repartition_topic)
async def load_repartitioned_users(stream: StreamT) -> None:
    async for msg, user in decoded(stream, decode_user):
        if user is None:
            users_repartition_table.pop(msg.key, None)
            counters.users_repartition_deleted[msg.partition] += 1
        else:
            users_repartition_table[msg.key] = user.to_table_value()
            counters.users_repartitioned[msg.partition] += 1
