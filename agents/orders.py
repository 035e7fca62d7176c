"""``demo_user_orders`` LEFT JOIN both users tables -> the two merged topics, as ksqlDB writes them.

Thin: decoding is :mod:`streamapp.records`, the record is
:func:`streamapp.join.join_record`, the partition-local lookup is
:func:`streamapp.tables.lookup`.  The output partition is chosen by the
producer's partitioner (``Settings.partitioner``).
"""
from __future__ import annotations

from faust import StreamT

from streamapp.application import app, settings
from streamapp.counters import counters
from streamapp.join import join_record
from streamapp.records import decode_order, user_from_table
from streamapp.tables import (
    lookup,
    orders_topic,
    send_raw,
    users_repartition_table,
    users_table,
)

from .decoding import decoded

JOINS = (
    (users_table, settings.merged_topic),
    (users_repartition_table, settings.merged_repartition_topic),
)


@app.agent(orders_topic)
async def join_orders(stream: StreamT) -> None:
    async for msg, order in decoded(stream, decode_order):
        counters.orders[msg.partition] += 1
        for table, output in JOINS:
            user = user_from_table(order.user_id, lookup(table, msg.key, msg.partition))
            record = join_record(order, user)
            await send_raw(output, record.key, record.value, record.timestamp_ms)
            counters.record_join(output, msg.partition, record.matched)
