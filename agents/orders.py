"""``demo_user_orders`` LEFT JOIN both users tables -> the two merged topics, as ksqlDB writes them.

Thin: decoding is :mod:`streamapp.records`, the value is built by
:mod:`streamapp.join`, records go out through :class:`streamapp.batch_sender.BatchSender`
in the partition ``Settings.partitioner`` picks.

Orders are taken in chunks (``stream.take_events``): Faust acks a chunk's
events only after this agent has handed the whole chunk's output to the
producer, and flushes the producer before it commits those offsets, so a
crash at any point loses no order (at-least-once).  Each lookup reads the
RocksDB database of the order's own partition directly, which is what Faust's
store does for the current event, minus its per-call codec layers: the join
stays partition-local by construction.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from faust import StreamT
from faust.types import EventT

from streamapp.application import app, settings
from streamapp.batch_sender import BatchSender
from streamapp.counters import counters
from streamapp.join import join_value, order_tail
from streamapp.records import RecordError, decode_order
from streamapp.tables import PARTITIONER, orders_topic, users_repartition_table, users_table

from .decoding import send_dead_letter

#: Most orders per chunk, and the longest a chunk waits to fill (seconds): the added latency.
CHUNK_SIZE = 1000
CHUNK_WAIT = 0.01

JOINS = (
    (users_table, settings.merged_topic),
    (users_repartition_table, settings.merged_repartition_topic),
)


def _row(db: Any, key: bytes) -> dict[str, Any] | None:
    raw = db.get(key)
    return None if raw is None else json.loads(raw)


async def join_chunk(events: Sequence[EventT]) -> None:
    sender = BatchSender(app.producer._ensure_producer(), PARTITIONER, app.partition_counts)
    orders, record_join = counters.orders, counters.record_join
    for event in events:
        msg = event.message
        try:
            order = decode_order(msg.key, msg.value)
        except RecordError as error:
            await send_dead_letter(event, error)
            continue
        partition, key = msg.partition, msg.key
        orders[partition] += 1
        tail = order_tail(order)
        for table, output in JOINS:
            row = _row(table.data._db_for_partition(partition), key)
            sender.add(output, key, join_value(tail, row), order.ts)
            record_join(output, partition, row is not None)
    await sender.send()


def hold_offsets(events: Sequence[EventT]) -> None:
    """Keep a failed chunk's offsets from being committed, so a restart processes it again.

    ``take_events`` acks a chunk even when the agent fails or is cancelled inside
    it; a message already marked acked is skipped by that ack, and Faust never
    commits past an offset that was not acked.
    """
    for event in events:
        event.message.acked = True


@app.agent(orders_topic)
async def join_orders(stream: StreamT) -> None:
    async for events in stream.take_events(CHUNK_SIZE, within=CHUNK_WAIT):
        try:
            await join_chunk(events)
        except BaseException:
            hold_offsets(events)
            raise
