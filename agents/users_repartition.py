"""The repartition topic -> the repartitioned users table (ksqlDB's ``DEMO_USER_REPARTITION`` table).

A whole fetch at a time, like the users (:mod:`agents.users`): one RocksDB write
batch per partition, the changelog records in whole producer batches with each
record's timestamp, acked once queued.  The users agent has checked what it wrote
here; a record from anyone else gets the same checks, and any failure is that
record's dead letter (:mod:`agents.dead_lettering`).  A record this worker wrote
lately is not decoded again: its row's bytes are the ones the users agent computed
(:class:`~streamapp.worker.tables.WrittenRows`).
"""
from __future__ import annotations

import time
from typing import Mapping, Sequence

from faust.types import TP

from streamapp.model.records import decode_user
from streamapp.worker.app import StreamappApp
from streamapp.worker.tables import RowWrites
from streamapp.worker.transport import Handler, Record, record_time

from .dead_lettering import DeadLettering, OutputChecks


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    tables = app.join_tables
    counters = app.counters
    written = tables.written

    async def load_repartitioned_users(batches: Mapping[TP, Sequence[Record]]) -> None:
        rows = RowWrites(tables.users_repartition)
        checks = OutputChecks(await dead_letters.size_limits(), (rows.changelog,), int(time.time() * 1000))
        sender = dead_letters.sender(on_sent=lambda _topic, partition, offset: rows.sent(partition, offset))

        def check(partition: int, msg: Record) -> tuple[int, bytes | None]:
            timestamp = record_time(msg)
            checks.check_timestamp(timestamp, "timestamp")
            value = written.take(msg.key, msg.value)
            if value is None:
                user = decode_user(msg.key, msg.value)
                value = None if user is None else rows.value(user.to_table_value())
            checks.check_size(rows.changelog, msg.key, value, "changelog row" if value else "changelog tombstone")
            return timestamp, value

        def write(partition: int, msg: Record, checked: tuple[int, bytes | None]) -> None:
            timestamp, value = checked
            rows.put(partition, msg.key, value)
            sender.add_to(rows.changelog, partition, msg.key, value, timestamp, msg)
            (counters.users_repartitioned if value is not None else counters.users_repartition_deleted)[partition] += 1

        await dead_letters.handle(batches, check, write, sender, [rows])

    app.batch_agent(tables.users_repartition_topic)(Handler(load_repartitioned_users, table=True))
