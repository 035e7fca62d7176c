"""A table source's topic -> its RocksDB table(s), each declared copy of it (``CREATE TABLE ... AS SELECT``), and
each table-table join it is a side of (:mod:`agents.table_joins`).

A copy goes out in the partition the configured partitioner picks for its key, so a join against it
finds rows whatever client wrote the source.  A fetch's rows go into RocksDB as one write batch per
partition and out as whole producer batches; a record goes into every table and topic it feeds or
into none (a dead letter).  See docs/explanation/worker-internals.md#the-table-agents.
"""
from __future__ import annotations

import time
from typing import Mapping, Sequence

from faust.types import TP

from streamapp.sql import plan as p
from streamapp.sql.engine import Query, Reader, Record, null_table_key
from streamapp.sql.topology import Output
from streamapp.worker.app import StreamappApp
from streamapp.worker.tables import RowWrites, table_row
from streamapp.worker.transactions import OpenTransaction, in_transactions
from streamapp.worker.transactions import install as transactions_install
from streamapp.worker.transport import ConsumerRecord, Handler

from .dead_lettering import DeadLettering, OutputChecks
from .table_joins import UndoLog, sides_of

#: A row's value where the topic loads no table: the record is a row, not a delete, with no bytes to store.
DELETE_NOT = b""
#: What a checked record writes: its event time, its row's table bytes (None: a delete), per copy and per joined
#: record the (output, key, value, timestamp) it sends, and per table-table join side the other side's key on a miss
#: (None: the other side had the key's row).
Checked = tuple[int, bytes | None, list[tuple[str, bytes | None, bytes | None, int]], list[bytes | None]]


def is_identity(copy: Output, plan: p.Plan, target: p.Source) -> bool:
    """Whether a copy's output rows, read back as ``target``, are its source's rows column for column.

    Then the table loaded from the copy's topic stores the bytes the source's table stores,
    and a record this worker wrote there need not be decoded again (:class:`WrittenRows`).
    """
    source = plan.source(copy.query.left)
    mapped = [(x.name, x.expression) for x in copy.query.value]
    return (target.value_columns == source.value_columns and target.value_format == "JSON"
            and target.wrap_single_value is None
            and mapped == [(c.name, p.ColumnOf(p.LEFT_SIDE, c.name)) for c in source.value_columns])


def install_topic(app: StreamappApp, dead_letters: DeadLettering, topic: str) -> None:
    """The agent of one table topic: the tables loaded from it and the copies that read it."""
    topology, tables = app.topology, app.join_tables
    plan, counters = topology.plan, app.counters
    source = topology.source_at(topic)  # the engine knows it by its declared topic (the seed's may be renamed)
    reader = Reader(source)
    loaded = tables.by_source.get(topic, [])
    copies = [(copy, Query(plan, copy.query)) for copy in topology.copies if copy.source_topic == topic]
    written = tables.written
    sides = sides_of(app, topic)  # the table-table joins this topic's updates feed
    side_outputs = frozenset(side.output for side in sides)  # their records are counted as written (the metrics)
    timestamped = any(t.timestamped for t in topology.tables if t.topic == topic)
    # a copy whose rows are this topic's rows, loaded into a table as they are: its records need no decoding later
    remembered = {copy.output for copy, _ in copies
                  if any(t.topic == copy.output and is_identity(copy, plan, t.source) and not t.timestamped
                         and not timestamped for t in topology.tables)}
    exactly_once = app.settings.exactly_once and bool(sides)
    transactions = transactions_install(app, topic, dead_letters.refused_in) if exactly_once else None
    undo = None if transactions is None else UndoLog(loaded, tables.clean_stops.distrust)
    if transactions is not None and undo is not None:
        transactions.on_ended = undo.ended
    classify = app.settings.metrics

    async def load(batches: Mapping[TP, Sequence[ConsumerRecord]]) -> None:
        rows = [RowWrites(table) for table in loaded]
        changelogs = [r.changelog for r in rows]
        checks = OutputChecks(await dead_letters.size_limits(), (*changelogs, *(c.output for c, _ in copies),
                                                                 *(side.output for side in sides)),
                              int(time.time() * 1000))
        by_changelog = {r.changelog: r for r in rows}

        def on_sent(changelog: str, partition: int, offset: int) -> None:
            if changelog in by_changelog:
                by_changelog[changelog].sent(partition, offset)

        sender = changelog_sender = dead_letters.sender(on_sent=on_sent)

        def check(partition: int, msg: ConsumerRecord) -> Checked:
            value = written.take(msg.key, msg.value) if written_here else None
            row = None
            if value is not None:  # this worker wrote it: its row's bytes are known
                timestamp = event_time(msg)
            else:
                if msg.key is None:  # before the value: a table ignores the record whatever its value holds
                    raise null_table_key()
                key, row = reader.read(msg.key, msg.value, msg.timestamp)
                timestamp = msg.timestamp if row is None else row[1]
                value = None if row is None else rows[0].value(
                    table_row(row[0], source, row[1] if timestamped else None)) if rows else DELETE_NOT
            checks.check_timestamp(timestamp, source.timestamp or "timestamp")
            outputs: list[tuple[str, bytes | None, bytes | None, int]] = []
            misses = []
            for side in sides:  # the key's rows before this update, as the join sees them
                joined, missed = side.update(partition, msg, key)
                for output, out_key, out_value, out_time in joined:
                    checks.check_size(output, out_key, out_value,
                                      "joined row" if out_value is not None else "joined tombstone")
                    outputs.append((output, out_key, out_value, out_time))
                misses.append(missed)
            texts: dict[str, str] = {}
            for copy, query in copies:
                if row is not None:  # decoded once above, for the tables and every copy
                    out_key, out_value, _ = query.encode(row, None, texts)
                    copied = [(out_key, out_value)]
                else:
                    copied = [(o.record.key, o.record.value) for o in query.process(
                        Record(source.topic, msg.key, msg.value, msg.timestamp))]
                for out_key, out_value in copied:
                    checks.check_size(copy.output, out_key, out_value,
                                      "copied row" if out_value is not None else "copied tombstone")
                    outputs.append((copy.output, out_key, out_value, timestamp))
            for changelog in changelogs:
                checks.check_size(changelog, msg.key, value, "changelog row" if value is not None else
                                  "changelog tombstone")
            for side in sides:  # last: a record that fails a check above changes no side's row
                side.wrote(partition, msg.key, row)
            return timestamp, value, outputs, misses

        def write(partition: int, msg: ConsumerRecord, checked: Checked) -> None:
            timestamp, value, outputs, misses = checked
            if undo is not None and msg.key is not None:
                undo.touch(partition, msg.key)
            for table_rows in rows:
                table_rows.put(partition, msg.key, value)
                changelog_sender.add_to(table_rows.changelog, partition, msg.key, value, timestamp, msg)
            for output, key, out_value, out_time in outputs:
                sender.add(output, key, out_value, out_time, msg)
                if output in remembered and out_value is not None and value is not None and key is not None:
                    written.add(key, out_value, value)
                if output in side_outputs:
                    counters.record_written(output, partition)
            counters.record_row(topic, partition, value is not None)
            for side, missed in zip(sides, misses):  # each update of a side: did the other side hold the key?
                if missed is None:
                    counters.record_join(side.output, partition, True)
                else:
                    counters.record_miss(side.output, partition, side.other.miss_cause(partition, missed)
                                         if classify else "unclassified")

        async def in_transaction(tp: TP, messages: Sequence[ConsumerRecord], txn: OpenTransaction) -> None:
            """The outputs, dead letters and the tables' changelog records in the transaction, which commits the
            offset: a dropped one's rows are never restored (read_committed; Faust's recovery of a changelog ending
            in a commit marker: :func:`~streamapp.worker.faust_internals.past_markers`)."""
            nonlocal sender, changelog_sender
            sender = changelog_sender = dead_letters.sender(on_sent=on_sent, producer=txn.producer,
                                                            on_failure=txn.on_failure)
            await dead_letters.handle({tp: messages}, check, write, sender, rows, producer=txn.producer)

        try:
            if transactions is None:
                await dead_letters.handle(batches, check, write, sender, rows)
            else:
                await in_transactions(transactions, batches, in_transaction)
        finally:
            for side in sides:
                side.stored()

    written_here = any(copy.output == topic for copy in topology.copies) and not sides  # a side needs the row

    def event_time(msg: ConsumerRecord) -> int:
        """A record's event time: its ``TIMESTAMP`` column, else the record timestamp (for the transport's order)."""
        if source.timestamp is None:
            return msg.timestamp
        try:
            _, row = reader.read(msg.key, msg.value, msg.timestamp)
        except Exception:  # noqa: BLE001 - it is dead-lettered anyway; its place does not matter
            return msg.timestamp
        return msg.timestamp if row is None else row[1]

    if transactions is not None:  # Faust never commits it: its offsets go in the transactions only
        tables.topics[topic].acks = False
    # a side of a table-table join is merged with the other side's records by event time, as Kafka Streams takes a
    # task's records (a table's records otherwise go in one round, before a stream's: streamapp.worker.transport)
    app.batch_agent(tables.topics[topic])(Handler(load, table=not sides, event_time=event_time))


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    for topic in app.topology.table_topics:
        install_topic(app, dead_letters, topic)
    # written in transactions: each changelog ends with a commit marker, and RocksDB is trusted after a clean stop only
    app.join_tables.clean_stops.add(table for topic in app.topology.table_topics if topic in app.transactions
                                    for table in app.join_tables.by_source.get(topic, []))
