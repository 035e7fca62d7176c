"""``demo_user`` -> the users table, and re-keyed through the join's partitioner into the repartition topic.

The repartition topic mirrors ksqlDB's ``DEMO_USER_REPARTITION``: the same rows,
but each in the partition the configured partitioner picks for its key, so the
repartitioned join finds users whatever client wrote ``demo_user``.

Users arrive a whole fetch at a time, by partition, like orders
(``app.batch_agent``; a table's source, so the transport hands them over before
the orders of the same partition with a later event time).  Each partition's rows
go into RocksDB as one write batch, and the changelog and repartition records go
out as whole producer batches (:class:`~streamapp.worker.tables.RowWrites`,
:class:`~streamapp.worker.batch_sender.BatchSender`), each with the user's record
timestamp, as Kafka Streams keeps it.  The messages are acked once all that is
queued; Faust flushes the producer before it commits, so a crash loses no user
(at-least-once: a user fetched again is written again, to the same row).

A user goes into the table and both topics or into none: every output it causes
(the repartition row, both tables' changelog rows, their timestamps) is checked
before anything is written, and a user that fails a check, or whose work raises,
is a dead letter (:mod:`agents.dead_lettering`), as is every user of a batch the
broker refuses.
"""
from __future__ import annotations

import time
from typing import Mapping, Sequence

from faust.types import TP

from streamapp.model.records import decode_user
from streamapp.worker.app import StreamappApp
from streamapp.worker.tables import RowWrites, dumps_spaced
from streamapp.worker.transport import Handler, Record, record_time

from .dead_lettering import DeadLettering, OutputChecks

#: What a checked user writes: its timestamp, its table row's bytes and its repartition value (None: a tombstone).
Checked = tuple[int, bytes | None, bytes | None]


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    tables = app.join_tables
    repartition = app.settings.users_repartition_topic
    counters = app.counters
    # the repartitioned table stores the same row: with the same serializer, the same bytes (tables.WrittenRows)
    written = tables.written if tables.users.value_serializer == tables.users_repartition.value_serializer else None

    async def load_users(batches: Mapping[TP, Sequence[Record]]) -> None:
        users, shadow = RowWrites(tables.users), RowWrites(tables.users_repartition)
        checks = OutputChecks(await dead_letters.size_limits(), (repartition, users.changelog, shadow.changelog),
                              int(time.time() * 1000))
        sender = dead_letters.sender(
            on_sent=lambda topic, partition, offset: users.sent(partition, offset) if topic == users.changelog else None)

        def check(partition: int, msg: Record) -> Checked:
            key, timestamp = msg.key, record_time(msg)
            checks.check_timestamp(timestamp, "timestamp")
            user = decode_user(key, msg.value)
            if user is None:
                checks.check_size(repartition, key, None, "repartition tombstone")
                checks.check_size(users.changelog, key, None, "changelog tombstone")
                return timestamp, None, None
            row = user.to_table_value()
            repartition_value, row_value = dumps_spaced(row), users.value(row)
            checks.check_size(repartition, key, repartition_value, "repartition row")
            # the repartitioned table stores the same row: its changelog gets the same bytes
            checks.check_size(users.changelog, key, row_value, "changelog row")
            checks.check_size(shadow.changelog, key, row_value, "changelog row")
            return timestamp, row_value, repartition_value

        def write(partition: int, msg: Record, checked: Checked) -> None:
            timestamp, row_value, repartition_value = checked
            users.put(partition, msg.key, row_value)
            sender.add_to(users.changelog, partition, msg.key, row_value, timestamp, msg)
            sender.add(repartition, msg.key, repartition_value, timestamp, msg)
            if row_value is not None and written is not None:  # the repartitioned table's bytes when read back
                written.add(msg.key, repartition_value, row_value)  # type: ignore[arg-type]
            (counters.users if row_value is not None else counters.users_deleted)[partition] += 1

        await dead_letters.handle(batches, check, write, sender, [users])

    app.batch_agent(tables.users_topic)(Handler(load_users, table=True))
