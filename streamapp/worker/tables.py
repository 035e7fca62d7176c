"""The worker's topics and its two RocksDB tables, made for one app and shared by its agents and web views.

Every key is the raw key bytes (``key_type=bytes``, hence ``key_serializer="raw"``):
Faust's default would JSON-quote a ``str`` key, and ``b'"u1"'`` hashes to a
different partition than ksqlDB's ``b'u1'``.  Input values are read raw too, so
that a malformed record reaches :mod:`streamapp.model.records` (and the dead-letter
topic) instead of being dropped by Faust's deserializer.

A table is partitioned like its source topic: a row lives in the partition its
record came from, and the join looks an order's user up in the order's
partition only (:func:`partition_row`), exactly as a Kafka Streams/ksqlDB join does.

Rows are written a fetch at a time (:class:`RowWrites`): each partition's rows go
into RocksDB as one write batch, and their changelog records go out with the
fetch's other outputs as whole producer batches, in the row's partition, with the
bytes Faust's own ``table[key] = row`` would store and send.  Once the broker has
stored a changelog batch, the table's persisted offset moves to its last record,
as Faust does after each changelog send, so a restart recovers only what came after.
"""
from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Callable

import faust
from faust.serializers import codecs
from faust.types import TP
from rocksdict import WriteBatch

from ..model.join import faust_timestamp
from ..model.topology import Join, joins
from ..partitioners import get_partitioner
from ..settings import Settings
from . import faust_internals

RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


def json_encoder(separators: tuple[str, str]) -> Callable[[Any], bytes]:
    """``json.dumps(value, separators=separators).encode()``, with the standard library's C encoder built once.

    ``json.dumps`` builds a new encoder on every call, which costs more than
    encoding a table row; a user is encoded three times on its way into both tables.
    """
    item, key = separators
    dumps = json.JSONEncoder(separators=separators).encode
    if c_make_encoder is None:  # no C accelerator: the library's own path
        return lambda value: dumps(value).encode()
    encode = c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, None, key, item,
                            False, False, True)
    return lambda value: "".join(encode(value, 0)).encode()


#: ``json.dumps(row).encode()``: a row as the repartition topic carries it.
dumps_spaced = json_encoder((", ", ": "))
#: ``json.dumps(row, separators=(",", ":")).encode()``: a row as Faust's ``json`` codec stores it.
dumps_compact = json_encoder((",", ":"))


#: RocksDB memtable size of each table partition's database.  Faust's 64 MiB default keeps a partition's
#: whole share of a million users (about 17 MB of rows) in memory, unflushed, in each of the
#: 2 tables x 6 partitions' databases: 8 MiB flushes them to disk, and the worker's RSS with
#: 1,000,000 users in both tables drops by about 90 MiB (benchmarks/README.md, issue 16).
WRITE_BUFFER_SIZE = 8 * 2**20


def store_options() -> dict[str, Any]:
    """A table's RocksDB options (a new dict each time: Faust's store pops keys from the one it is given)."""
    return {"write_buffer_size": WRITE_BUFFER_SIZE}


class JoinTables:
    """The input topics and the two tables of one app; values are JSON (the app's default value serializer)."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        #: The join's partitioner: where every record the worker writes goes.
        self.partitioner = get_partitioner(settings.partitioner)
        self.users_topic = app.topic(settings.users_topic, partitions=settings.partitions, **RAW)
        self.orders_topic = app.topic(settings.orders_topic, partitions=settings.partitions, **RAW)
        self.users_repartition_topic = app.topic(settings.users_repartition_topic, partitions=settings.partitions, **RAW)
        options: dict[str, Any] = {"key_type": bytes, "partitions": settings.partitions}
        #: The joins, each with its table: the users as their producer placed them (direct), and re-keyed
        #: by the join's partitioner (repartitioned).
        self.joins: tuple[tuple[Join, faust.Table], ...] = tuple(
            (join, app.Table(join.table, help=f"rows of {join.table_topic}", options=store_options(), **options))
            for join in joins(settings))
        (_, self.users), (_, self.users_repartition) = self.joins
        #: Source topic -> the table loaded from it.
        self.by_source: dict[str, faust.Table] = {join.table_topic: table for join, table in self.joins}
        #: Table name -> the table.
        self.by_name: dict[str, faust.Table] = {join.table: table for join, table in self.joins}
        #: The repartition records this worker wrote lately, with their rows' bytes (:class:`WrittenRows`).
        self.written = WrittenRows()

    def changelog_topic(self, source: str) -> str:
        """The changelog topic of the table loaded from ``source`` (Faust names and creates it)."""
        return self.by_source[source].changelog_topic.get_topic_name()

    def key_serializers(self) -> dict[str, str]:
        """Key serializer of each table, by source topic: what the guard checks."""
        return {topic: str(table.key_serializer) for topic, table in self.by_source.items()}

    async def send_raw(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int | None = None,
        headers: dict[str, bytes] | None = None,
    ) -> Any:
        """Hand already-encoded bytes to Faust's producer, in the partition the join's partitioner picks.

        Skips ``Topic.send``'s per-record layers and the client's per-record partition
        lookup (the counts are read at start), two thirds of a send's cost in the
        join's profile.  Delivery is unchanged: the producer is flushed before every
        offset commit, so processing stays at-least-once.  Returns the delivery future.
        """
        timestamp = faust_timestamp(timestamp_ms) if timestamp_ms is not None else None
        partition = self.partitioner(key, self.app.partition_counts[topic])
        return await self.app.producer.send(topic, key, value, partition, timestamp, headers)


class RowWrites:
    """One fetch's writes to one table: a RocksDB write batch per partition, and the changelog records to send."""

    def __init__(self, table: faust.Table) -> None:
        self.table = table
        #: The table's changelog topic, where each row's record goes, in the row's partition.
        self.changelog = table.changelog_topic.get_topic_name()
        self._serializer = table.value_serializer
        self._batches: dict[int, WriteBatch] = {}

    def value(self, row: dict[str, Any]) -> bytes:
        """The bytes Faust stores and sends for ``row`` (the table's value serializer).

        For Faust's ``json`` codec, the standard library's C encoder with Faust's
        separators gives the same bytes for a row of strings, numbers and nulls
        (``tests/test_worker_tables.py``) at a tenth of the cost of Faust's encoder class.
        """
        if self._serializer == "json":
            return dumps_compact(row)
        return codecs.dumps(self._serializer, row)

    def put(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Set (``value`` from :meth:`value`) or delete (None) a row; written by :meth:`write`."""
        batch = self._batches.get(partition)
        if batch is None:
            batch = self._batches[partition] = WriteBatch(raw_mode=True)
        if value is None:
            batch.delete(key)
        else:
            batch.put(key, value)

    def write(self) -> None:
        """Write each partition's rows to its RocksDB database, one write batch each (in the order put)."""
        batches, self._batches = self._batches, {}
        for partition, batch in batches.items():
            faust_internals.partition_db(self.table, partition).write(batch)

    def sent(self, partition: int, offset: int) -> None:
        """A changelog batch is stored up to ``offset``: recovery may start after it (Faust's persisted offset)."""
        self.table.data.set_persisted_offset(TP(self.changelog, partition), offset)


#: How many repartition records :class:`WrittenRows` remembers at most (about 200 bytes each): far more than one
#: fetch of the repartition topic holds, which the worker reads a fetch or two after writing it.
WRITTEN_ROWS = 2 * 2**16


class WrittenRows:
    """The repartition records this worker wrote lately, by key: the value bytes sent and the row's table bytes.

    The repartitioned table stores the row the users table stores, and its source
    is the repartition topic the worker itself writes (``json.dumps(row)``).  Read
    back, such a record would be decoded and its row encoded again, only to give
    the bytes already computed for the users table (decoding what
    ``dumps_spaced`` wrote gives the same row: ``tests/test_written_rows.py``).
    So a record whose key and value bytes are those of one written here takes that
    row's bytes instead; any other record (another client's, one forgotten) is
    decoded as before.  Bounded: two generations of at most ``limit / 2`` each,
    the older dropped whole when the newer is full.
    """

    def __init__(self, limit: int = WRITTEN_ROWS) -> None:
        self._half = limit // 2
        self._new: dict[bytes, tuple[bytes, bytes]] = {}
        self._old: dict[bytes, tuple[bytes, bytes]] = {}

    def add(self, key: bytes, sent: bytes, row: bytes) -> None:
        """``sent`` went to the repartition topic with ``key``; ``row`` is its row's table bytes."""
        if len(self._new) >= self._half:
            self._old, self._new = self._new, {}
        self._new[key] = (sent, row)

    def take(self, key: bytes | None, value: bytes | None) -> bytes | None:
        """The table bytes of the row written here as (``key``, ``value``), forgotten once taken; else None."""
        for rows in (self._new, self._old):
            entry = rows.get(key)  # type: ignore[arg-type]
            if entry is not None and entry[0] == value:
                del rows[key]  # type: ignore[arg-type]
                return entry[1]
        return None


def partition_row(table: faust.Table, partition: int, key: bytes) -> dict[str, Any] | None:
    """The row for ``key`` in ``partition``'s RocksDB database only, or None: never a row from another partition."""
    raw = faust_internals.partition_db(table, partition).get(key)
    return None if raw is None else json.loads(raw)
