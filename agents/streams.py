"""A joined stream's topic -> each declared stream-table join's output, as ksqlDB writes it, and each re-key of it.

Thin: decoding and the join are the plan's engine (:mod:`streamapp.sql.engine`), the partition-local
lookup is :class:`~streamapp.worker.tables.RowLookup`, each output goes out in the partition
``Settings.partitioner`` picks, and a join on a non-key column (a stream-table join's, either side of a
stream-stream join's) re-keys the stream first (:class:`~streamapp.sql.topology.Rekeyer`).  A record is
joined into every output or into none (a dead letter); a null key is joined as ksqlDB joins it.
See docs/explanation/worker-internals.md#the-join-agents.
"""
from __future__ import annotations

import time
from typing import Mapping, Sequence

from faust.types import TP

from streamapp.model.records import RecordError
from streamapp.partitioners.sticky import NullKeyPartitions
from streamapp.sql import plan as p
from streamapp.sql.engine import Query, Reader, Row
from streamapp.sql.topology import JOIN_KEY, ROWTIME, Rekeyer
from streamapp.worker.app import StreamappApp
from streamapp.worker.tables import RowLookup
from streamapp.worker.transactions import OpenTransaction, in_transactions
from streamapp.worker.transactions import install as transactions_install
from streamapp.worker.transport import ConsumerRecord, Handler

from .dead_lettering import DeadLettering, OutputChecks

#: What a checked record writes: its event time, then (output, key, value or None on an INNER miss, True when it
#: found its row else the miss's cause, or None for a re-keyed record) per join.
Joined = tuple[int, list[tuple[str, bytes | None, bytes | None, bool | str | None]]]


def reads_right_key(query: p.Query, table: p.Source) -> bool:
    """Whether a join's projection reads its table's key column (looked up rows then carry it)."""
    keys = {c.name for c in table.key_columns}
    return any(isinstance(ref, p.ColumnOf) and ref.side == p.RIGHT_SIDE and ref.name in keys
               for ref in (_column(x.expression) for x in query.projection))


def _column(expression: p.Expression) -> p.Expression:
    return _column(expression.argument) if isinstance(expression, p.AsValue) else expression


class StreamReader:
    """A stream topic's records as rows: the declared stream's, or a re-keyed stream's from its repartition topic,
    whose value carries the stream record's columns and event time (:func:`~streamapp.sql.topology.rekeyed_source`)."""

    def __init__(self, source: p.Source, rekeyed: bool) -> None:
        self.reader, self.rekeyed = Reader(source), rekeyed
        self.time_field = source.timestamp or "timestamp"

    def row(self, msg: ConsumerRecord) -> Row:
        """The record's row; RecordError when it cannot be read, or has no value (ksqlDB ignores it)."""
        _, row = self.reader.read(msg.key, msg.value, msg.timestamp)
        if row is None:
            raise RecordError("value is null: a stream record needs a value (ksqlDB ignores a null stream record)",
                              "value")
        if not self.rekeyed:
            return row
        columns = row[0]
        del columns[JOIN_KEY]
        timestamp = columns.pop(ROWTIME)
        if timestamp is None:
            raise RecordError(f"field {ROWTIME!r} is missing: not a record this worker re-keyed", ROWTIME)
        return columns, timestamp

    def event_time(self, msg: ConsumerRecord) -> int:
        """A record's event time, for the transport's order; the record timestamp for one that does not decode."""
        try:
            return self.row(msg)[1]
        except Exception:  # noqa: BLE001 - the join dead-letters it; its place among the rows does not matter
            return msg.timestamp


def install_topic(app: StreamappApp, dead_letters: DeadLettering, topic: str) -> None:
    """The agent of one stream topic: every stream-table join that reads it, and every join that re-keys it first.

    A join on a non-key column of the stream reads it twice, as ksqlDB's does: here, where each record is
    re-keyed by its join key into the join's repartition topic (partitioned by the join's partitioner),
    then from that topic, where it is joined (a stream-stream join's by ``agents/stream_joins.py``).  A null
    value, which a stream-stream join ignores, is re-keyed nowhere; a stream-table join dead-letters it.
    """
    topology, tables, counters = app.topology, app.join_tables, app.counters
    plan = topology.plan
    direct = [join for join in topology.joins if join.stream == topic]
    rekeyed = next((join.rekeyed for join in direct if join.rekeyed is not None), None)
    rows = StreamReader(rekeyed or topology.source_at(topic), rekeyed is not None)
    joins = [(join.output, Query(plan, join.query),
              RowLookup(tables.by_name[join.table.name], join.table.source,
                        reads_right_key(join.query, join.table.source)))
             for join in direct]
    #: Each re-key, with a reader of its own for a stream declared over this topic with other columns.
    rekeys = [(Rekeyer(rekey), None if rekey.declared == rows.reader.source else StreamReader(rekey.declared, False))
              for rekey in topology.rekeys if rekey.stream == topic]
    #: Read for stream-stream joins only, which ignore a null value (a stream-table join dead-letters it).
    ignores_null = not direct and all(r.query.kind == p.STREAM_STREAM_JOIN
                                      for r in topology.rekeys if r.stream == topic)
    exactly_once = app.settings.exactly_once
    transactions = transactions_install(app, topic, dead_letters.refused_in) if exactly_once else None
    null_keys = NullKeyPartitions()  # sticky across fetches, as one producer's partitioner is
    time_field = rows.time_field
    #: A miss's cause costs lookups in the table's other partitions: measured for the metrics only.
    classify = app.settings.metrics

    async def join_records(batches: Mapping[TP, Sequence[ConsumerRecord]]) -> None:
        checks = OutputChecks(await dead_letters.size_limits(),
                              [output for output, _, _ in joins] + [rekey.topic for rekey, _ in rekeys],
                              int(time.time() * 1000))

        def join(partition: int, msg: ConsumerRecord) -> Joined:
            if msg.value is None and ignores_null:  # on to the join, where it moves stream time (Rekeyer.null_value)
                try:
                    return msg.timestamp, [(rekey.topic, rekey.null_value(msg.key), None, None)
                                           for rekey, _ in rekeys if rekey.forwards_null]
                except RecordError:  # its key cannot be read: dropped, as ksqlDB drops it at the source
                    return msg.timestamp, []
            row = rows.row(msg)
            checks.check_timestamp(row[1], time_field)
            joined: list[tuple[str, bytes | None, bytes | None, bool | str | None]] = []
            for rekey, own in rekeys:  # re-keyed by the join key, in the format of the keys it meets
                new_key, value = rekey.rekey(row if own is None else own.row(msg), partition, msg.offset)
                checks.check_size(rekey.topic, new_key, value, "re-keyed record")
                joined.append((rekey.topic, new_key, value, None))
            texts: dict[str, str] = {}  # the record's columns as JSON, written once for every join
            for output, query, lookup in joins:
                found: Row | None = None if msg.key is None else lookup.get(partition, msg.key)
                result = True if found is not None else (
                    lookup.miss_cause(partition, msg.key) if classify else "unclassified")
                if found is None and query.query.join_type == "INNER":
                    joined.append((output, None, None, result))
                    continue
                out_key, value, _ = query.encode(row, found, texts)
                checks.check_size(output, out_key, value, "joined record")
                joined.append((output, out_key, value, result))
            return row[1], joined

        def write(partition: int, msg: ConsumerRecord, checked: Joined) -> None:
            timestamp, joined = checked
            counters.record_read(topic, partition)
            for output, key, value, result in joined:
                if value is not None or result is None:  # a join's row, or a re-keyed record (a null value too)
                    if key is None:  # the producer's choice for a null key, not the partitioner's for a key
                        where = null_keys.partition(output, app.partition_counts[output], len(value or b""))
                        sender.add_to(output, where, None, value, timestamp, msg)
                    else:
                        sender.add(output, key, value, timestamp, msg)
                if result is True:
                    counters.record_join(output, partition, True)
                elif result is not None:  # a join's miss, with its cause
                    counters.record_miss(output, partition, result)
                else:  # a re-keyed record, into its repartition topic
                    counters.record_written(output, partition)

        if transactions is None:
            sender = dead_letters.sender()
            await dead_letters.handle(batches, join, write, sender)
            return

        async def in_transaction(tp: TP, messages: Sequence[ConsumerRecord], txn: OpenTransaction) -> None:
            nonlocal sender  # each partition's outputs, dead letters and offset in its transaction
            sender = dead_letters.sender(producer=txn.producer, on_failure=txn.on_failure)
            await dead_letters.handle({tp: messages}, join, write, sender, producer=txn.producer)

        await in_transactions(transactions, batches, in_transaction)

    stream = tables.topics[topic]
    if exactly_once:  # Faust never commits the stream: its offsets go in the transactions only
        stream.acks = False
    app.batch_agent(stream)(Handler(join_records, event_time=rows.event_time))


def install(app: StreamappApp, dead_letters: DeadLettering) -> None:
    for topic in dict.fromkeys((*app.topology.rekeyed_topics, *app.topology.stream_topics)):
        install_topic(app, dead_letters, topic)
