"""``demo_user_orders`` LEFT JOIN both users tables -> the two merged topics, as ksqlDB writes them.

Thin: decoding is :mod:`streamapp.records`, the value is built by
:mod:`streamapp.join`, the partition-local lookup is
:func:`streamapp.tables.partition_row`, and each record goes out in the
partition ``Settings.partitioner`` picks.

Orders arrive a whole fetch at a time, by partition (``app.batch_agent``):
joining one order is a few microseconds of work, less than Faust's per-event
delivery would cost, and the fetch's outputs go out as whole producer batches.  The messages
are acked once their outputs (or dead letters) are queued; Faust flushes the
producer before it commits, so a crash at any point loses no order
(at-least-once).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from faust.types import TP, Message

from streamapp.application import app, settings
from streamapp.batch_sender import BatchSender
from streamapp.counters import counters
from streamapp.join import join_value, order_tail
from streamapp.records import RecordError, decode_order
from streamapp.tables import PARTITIONER, orders_topic, partition_row, users_repartition_table, users_table

from .decoding import send_dead_letter

JOINS = (
    (users_table, settings.merged_topic),
    (users_repartition_table, settings.merged_repartition_topic),
)


@app.batch_agent(orders_topic)
async def join_orders(batches: Mapping[TP, Sequence[Message]]) -> None:
    sender = BatchSender(app.producer._ensure_producer(), PARTITIONER, app.partition_counts)
    for tp, messages in batches.items():
        partition = tp.partition
        for msg in messages:
            try:
                order = decode_order(msg.key, msg.value)
            except RecordError as error:
                await send_dead_letter(msg, error)
                continue
            counters.orders[partition] += 1
            tail = order_tail(order)
            for table, output in JOINS:
                row = partition_row(table, partition, msg.key)
                sender.add(output, msg.key, join_value(tail, row), order.ts)
                counters.record_join(output, partition, row is not None)
    await sender.send()
    for messages in batches.values():
        for msg in messages:
            app.consumer.ack(msg)
