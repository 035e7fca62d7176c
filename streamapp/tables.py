"""The worker's topics and its two RocksDB tables, shared by the agents and the web views.

Every key is the raw key bytes (``key_type=bytes``, hence ``key_serializer="raw"``):
Faust's default would JSON-quote a ``str`` key, and ``b'"u1"'`` hashes to a
different partition than ksqlDB's ``b'u1'``.  Input values are read raw too, so
that a malformed record reaches :mod:`streamapp.records` (and the dead-letter
topic) instead of being dropped by Faust's deserializer.

A table is partitioned like its source topic: a row lives in the partition its
record came from, and a lookup made while processing an order reads only the
order's partition (Faust's RocksDB store reads only the current event's
partition; :func:`lookup` insists that there is one and that it is the
order's), exactly as a Kafka Streams/ksqlDB join does.
"""
from __future__ import annotations

from typing import Any

import faust
from faust.streams import current_event

from .application import app, settings
from .errors import StreamappError
from .join import faust_timestamp
from .partitioners import get_partitioner

PARTITIONER = get_partitioner(settings.partitioner)

RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}

users_topic = app.topic(settings.users_topic, partitions=settings.partitions, **RAW)
orders_topic = app.topic(settings.orders_topic, partitions=settings.partitions, **RAW)
users_repartition_topic = app.topic(settings.users_repartition_topic, partitions=settings.partitions, **RAW)

#: ``key_type=bytes`` makes Faust store table keys raw; values are plain JSON objects.
TABLE_OPTIONS: dict[str, Any] = {"key_type": bytes, "partitions": settings.partitions}

#: Users from ``users_topic``, in the partition their producer chose (the direct join's table).
users_table: faust.Table = app.Table("users", **{**TABLE_OPTIONS, "help": f"rows of {settings.users_topic}"})

#: Users from ``users_repartition_topic``, re-keyed by the join's partitioner (the repartitioned join's table).
users_repartition_table: faust.Table = app.Table(
    "users_repartition", **{**TABLE_OPTIONS, "help": f"rows of {settings.users_repartition_topic}"}
)

TABLES = {settings.users_topic: users_table, settings.users_repartition_topic: users_repartition_table}


class CrossPartitionLookupError(StreamappError):
    """A table lookup was attempted outside the processing of a record (it would search every partition)."""


def lookup(table: faust.Table, key: bytes, partition: int) -> dict[str, Any] | None:
    """The row for ``key`` in ``partition`` only, or None: never a row from another partition."""
    event = current_event()
    if event is None or event.message.partition != partition:
        raise CrossPartitionLookupError(
            f"lookup of {key!r} in table {table.name} for partition {partition} needs the current "
            f"event of that partition (Faust would otherwise search every partition)"
        )
    try:
        return table.data[key]
    except KeyError:
        return None


async def send_raw(
    topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int | None = None,
    headers: dict[str, bytes] | None = None,
) -> None:
    """Hand already-encoded bytes to Faust's producer, in the partition ``Settings.partitioner`` picks.

    Skips ``Topic.send``'s per-record layers and the client's per-record partition
    lookup (the counts are read at start), two thirds of a send's cost in the
    join's profile.  Delivery is unchanged: the producer is flushed before every
    offset commit, so processing stays at-least-once.
    """
    timestamp = faust_timestamp(timestamp_ms) if timestamp_ms is not None else None
    partition = PARTITIONER(key, app.partition_counts[topic])
    await app.producer.send(topic, key, value, partition, timestamp, headers)


def key_serializers() -> dict[str, str]:
    """Key serializer of each table, by source topic: what the guard checks."""
    return {topic: str(table.key_serializer) for topic, table in TABLES.items()}
