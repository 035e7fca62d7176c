"""``demo_user_orders`` LEFT JOIN both users tables -> the two merged topics, as ksqlDB writes them.

Thin: decoding is :mod:`streamapp.model.records`, the value is built by
:mod:`streamapp.model.join`, the partition-local lookup is
:func:`streamapp.worker.tables.partition_row`, and each record goes out in the
partition ``Settings.partitioner`` picks.

Orders arrive a whole fetch at a time, by partition (``app.batch_agent``):
joining one order is a few microseconds of work, less than Faust's per-event
delivery would cost, and the fetch's outputs go out as whole producer batches.  The messages
are acked once their outputs (or dead letters) are queued; Faust flushes the
producer before it commits, so a crash at any point loses no order
(at-least-once).

An order is joined into both outputs or into neither: both values are built and
checked first (size, and ``ts`` as a record timestamp the outputs take), and any
failure of the record (see :mod:`agents.dead_lettering`) makes it a dead letter instead
of stopping the fetch loop, which runs this handler inline.  Should the broker
still refuse a batch, its orders are dead-lettered too, not lost
(:class:`~streamapp.worker.batch_sender.BatchSender`'s ``on_failure``).
"""
from __future__ import annotations

import time
from typing import Mapping, Sequence

from faust.types import TP, Message

from streamapp.model.join import join_value, order_tail
from streamapp.model.records import RecordError, decode_order
from streamapp.worker.app import StreamappApp
from streamapp.worker.batch_sender import BatchSender
from streamapp.worker.faust_internals import aiokafka_producer
from streamapp.worker.tables import partition_row

from .dead_lettering import RECORD_OVERHEAD, DeadLettering, is_record_fault


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    tables = app.join_tables
    joins = [(table, join.output) for join, table in tables.joins]

    @app.batch_agent(tables.orders_topic)
    async def join_orders(batches: Mapping[TP, Sequence[Message]]) -> None:
        limits = await dead_letters.size_limits()
        # Key and value lengths within a budget fit for sure; above it, the exact size decides.
        budgets = [(table, output, limits.limit(output)[0] - RECORD_OVERHEAD) for table, output in joins]
        now_ms = int(time.time() * 1000)
        windows = [limits.timestamp_bounds(output, now_ms) for _, output in joins]
        low, high = max(w[0] for w in windows), min(w[1] for w in windows)
        sender = BatchSender(aiokafka_producer(app), tables.partitioner, app.partition_counts,
                             on_failure=dead_letters.refused)
        counters = app.counters
        for tp, messages in batches.items():
            partition = tp.partition
            for msg in messages:
                key = msg.key
                try:
                    order = decode_order(key, msg.value)
                    if not low <= order.ts <= high:
                        refused = [limits.bad_timestamp(output, order.ts, now_ms) for _, output in joins]
                        raise RecordError(next(r for r in refused if r is not None), "ts")
                    tail = order_tail(order)
                    joined = []
                    for table, output, budget in budgets:
                        row = partition_row(table, partition, key)
                        value = join_value(tail, row)
                        if len(key) + len(value) > budget:
                            reason = limits.too_large(output, key, value, what="joined record")
                            if reason is not None:
                                raise RecordError(reason, "value")
                        joined.append((output, value, row is not None))
                except Exception as exc:  # noqa: BLE001 - is_record_fault decides
                    if not is_record_fault(exc):
                        raise
                    await dead_letters.send(msg, exc)
                    continue
                counters.orders[partition] += 1
                for output, value, matched in joined:
                    sender.add(output, key, value, order.ts, msg)
                    counters.record_join(output, partition, matched)
        await sender.send()
        for messages in batches.values():
            for msg in messages:
                app.consumer.ack(msg)
