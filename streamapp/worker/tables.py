"""The worker's topics and its two RocksDB tables, shared by the agents and the web views.

Every key is the raw key bytes (``key_type=bytes``, hence ``key_serializer="raw"``):
Faust's default would JSON-quote a ``str`` key, and ``b'"u1"'`` hashes to a
different partition than ksqlDB's ``b'u1'``.  Input values are read raw too, so
that a malformed record reaches :mod:`streamapp.records` (and the dead-letter
topic) instead of being dropped by Faust's deserializer.

A table is partitioned like its source topic: a row lives in the partition its
record came from, and the join looks an order's user up in the order's
partition only (:func:`partition_row`), exactly as a Kafka Streams/ksqlDB join does.
"""
from __future__ import annotations

import json
from typing import Any

import faust

from ..model.join import faust_timestamp
from ..partitioners import get_partitioner
from .app import app, settings

PARTITIONER = get_partitioner(settings.partitioner)

RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}

users_topic = app.topic(settings.users_topic, partitions=settings.partitions, **RAW)
orders_topic = app.topic(settings.orders_topic, partitions=settings.partitions, **RAW)
users_repartition_topic = app.topic(settings.users_repartition_topic, partitions=settings.partitions, **RAW)

#: ``key_type=bytes`` makes Faust store table keys raw; values are JSON (the app's default value serializer).
TABLE_OPTIONS: dict[str, Any] = {"key_type": bytes, "partitions": settings.partitions}

#: Users from ``users_topic``, in the partition their producer chose (the direct join's table).
users_table: faust.Table = app.Table("users", **{**TABLE_OPTIONS, "help": f"rows of {settings.users_topic}"})

#: Users from ``users_repartition_topic``, re-keyed by the join's partitioner (the repartitioned join's table).
users_repartition_table: faust.Table = app.Table(
    "users_repartition", **{**TABLE_OPTIONS, "help": f"rows of {settings.users_repartition_topic}"}
)

TABLES = {settings.users_topic: users_table, settings.users_repartition_topic: users_repartition_table}


def partition_row(table: faust.Table, partition: int, key: bytes) -> dict[str, Any] | None:
    """The row for ``key`` in ``partition``'s RocksDB database only, or None: never a row from another partition."""
    raw = table.data._db_for_partition(partition).get(key)
    return None if raw is None else json.loads(raw)


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
