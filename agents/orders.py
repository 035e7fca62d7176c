"""``demo_user_orders`` LEFT JOIN both users tables -> the two merged topics, as ksqlDB writes them.

Thin: decoding is :mod:`streamapp.model.records`, the value is built by
:mod:`streamapp.model.join`, the partition-local lookup is
:func:`streamapp.worker.tables.partition_row`, and each record goes out in the
partition ``Settings.partitioner`` picks.

Orders arrive a whole fetch at a time, by partition (``app.batch_agent``):
joining one order is a few microseconds of work, less than Faust's per-event
delivery would cost, and the fetch's outputs go out as whole producer batches.
Their event time is ``ts`` (ksqlDB's stream is declared with ``TIMESTAMP='ts'``):
the transport hands over a fetch's users before the orders of the same partition
with a later ``ts`` (:mod:`streamapp.worker.transport`).  The messages
are acked once their outputs (or dead letters) are queued; Faust flushes the
producer before it commits, so a crash at any point loses no order
(at-least-once).

An order with a null key is joined too, as ksqlDB joins it (Kafka Streams 3.7+, KIP-962): it
looks no user up, and goes to each output with NULL user columns, a null key, its ``ts`` as
timestamp, in the partition the Java producer's sticky partitioner would pick
(:class:`~streamapp.partitioners.sticky.NullKeyPartitions`), under either processing guarantee.

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

from faust.types import TP

from streamapp.model.join import join_value, order_tail
from streamapp.partitioners.sticky import NullKeyPartitions
from streamapp.model.records import Order, decode_order
from streamapp.worker.app import StreamappApp
from streamapp.worker.tables import partition_row
from streamapp.worker.transactions import install as transactions_install
from streamapp.worker.transport import Handler, Record, record_time

from .dead_lettering import DeadLettering, OutputChecks

#: What a checked order writes: the order, then (output, value, whether it found its user) per join.
Joined = tuple[Order, list[tuple[str, bytes, bool]]]


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    tables = app.join_tables
    joins = [(table, join.output) for join, table in tables.joins]
    counters = app.counters
    exactly_once = app.settings.processing_guarantee == "exactly_once"
    transactions = transactions_install(app, dead_letters.refused_in) if exactly_once else None
    null_keys = NullKeyPartitions()  # sticky across fetches, as one producer's partitioner is

    async def join_orders(batches: Mapping[TP, Sequence[Record]]) -> None:
        checks = OutputChecks(await dead_letters.size_limits(), [output for _, output in joins], int(time.time() * 1000))

        def join(partition: int, msg: Record) -> Joined:
            key = msg.key
            order = decode_order(key, msg.value)
            checks.check_timestamp(order.ts, "ts")
            tail = order_tail(order)
            joined = []
            for table, output in joins:
                row = None if key is None else partition_row(table, partition, key)  # a null key finds no user
                value = join_value(tail, row)
                checks.check_size(output, key, value, "joined record")
                joined.append((output, value, row is not None))
            return order, joined

        def write(partition: int, msg: Record, checked: Joined) -> None:
            order, joined = checked
            counters.orders[partition] += 1
            for output, value, matched in joined:
                if msg.key is None:  # the producer's choice for a null key, not the partitioner's for a key
                    where = null_keys.partition(output, app.partition_counts[output], len(value))
                    sender.add_to(output, where, None, value, order.ts, msg)
                else:
                    sender.add(output, msg.key, value, order.ts, msg)
                counters.record_join(output, partition, matched)

        if transactions is None:
            sender = dead_letters.sender()
            await dead_letters.handle(batches, join, write, sender)
            return
        async with transactions.lock:  # each partition's outputs, dead letters and offset in its transaction
            for tp, messages in batches.items():
                txn = transactions.get(tp.partition)
                messages = txn.unprocessed(messages) if txn is not None else ()
                if not messages:  # not fenced yet (the seek after its fence reads them again), or done already
                    continue
                sender = dead_letters.sender(producer=txn.producer, on_failure=txn.on_failure)
                try:
                    await dead_letters.handle({tp: messages}, join, write, sender, producer=txn.producer)
                except Exception as exc:  # noqa: BLE001 - not the records' (they are netted): the transaction's
                    await transactions.failed(tp.partition, exc)
                    continue
                txn.processed(messages[-1].offset + 1, len(messages))
        await transactions.commit_due()

    if exactly_once:  # Faust never commits the orders: their offsets go in the transactions only
        tables.orders_topic.acks = False
    app.batch_agent(tables.orders_topic)(Handler(join_orders, event_time=order_time))


def order_time(msg: Record) -> int:
    """An order's event time: its ``ts``; the record timestamp for one that does not decode (a dead letter anyway)."""
    try:
        return decode_order(msg.key, msg.value).ts
    except Exception:  # noqa: BLE001 - the join dead-letters it; its place among the users does not matter
        return record_time(msg)
