"""Thin adapter over the worker's Faust tables: find a key in each local partition, page through one.

Faust's ``table[key]`` answers from the partition of the event being processed,
or from any local partition outside an event, and never says which one.  The
question here is exactly *which partition* holds the row, so this reads the
RocksDB database of each partition this worker holds (active or standby), through
:func:`streamapp.worker.faust_internals.partition_db`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faust.stores.rocksdb import Store as RocksDBStore
from faust.types import AppT, CollectionT
from yarl import URL

from ...errors import StreamappError
from ..assignment import active_partitions, changelog_topic, local_partitions
from ..faust_internals import partition_db


class LookupUnavailable(StreamappError):
    """The table cannot be inspected (not a RocksDB store, or not assigned yet)."""


@dataclass(frozen=True)
class LocalRow:
    """A row found in this worker's copy of one partition; ``active`` False = a standby copy."""

    partition: int
    active: bool
    value: Any


def store_db(table: CollectionT, partition: int) -> Any:
    if not isinstance(table.data, RocksDBStore):
        raise LookupUnavailable(f"table {table.name} is not in RocksDB: its partitions cannot be inspected")
    return partition_db(table, partition)


def owners(app: AppT, table: CollectionT) -> dict[int, str]:
    """Partition -> URL of the worker that is active for it, from the group's assignment metadata."""
    topic = changelog_topic(table)
    result: dict[int, str] = {}
    for url, topics in app.router.table_metadata(table.name).items():
        for partition in topics.get(topic, ()):
            result[partition] = str(URL(url))
    return result


def plain(value: Any) -> Any:
    """A table value as JSON-ready data, whether the worker stores dicts or Faust records."""
    if hasattr(value, "asdict"):
        return value.asdict()
    return value


def decode_value(app: AppT, table: CollectionT, raw: bytes) -> Any:
    return plain(app.serializers.loads_value(table.value_type, raw, serializer=table.value_serializer))


def find(app: AppT, table: CollectionT, key: bytes) -> list[LocalRow]:
    """Every local partition (active or standby) whose copy of ``table`` holds ``key``."""
    actives = active_partitions(app, table)
    rows = []
    for partition in sorted(local_partitions(app, table)):
        raw = store_db(table, partition).get(key)
        if raw is not None:
            rows.append(LocalRow(partition, partition in actives, decode_value(app, table, raw)))
    return rows


def page(app: AppT, table: CollectionT, partition: int, after: bytes | None, limit: int) -> tuple[list[tuple[bytes, Any]], bool]:
    """Up to ``limit`` rows of one local partition in key order after ``after``; and whether more follow."""
    if partition not in local_partitions(app, table):
        return [], False
    db = store_db(table, partition)
    offset_key = getattr(table.data, "offset_key", None)
    it = db.iter()
    if after is None:
        it.seek_to_first()
    else:
        it.seek(after)
        if it.valid() and it.key() == after:
            it.next()
    rows: list[tuple[bytes, Any]] = []
    while it.valid():
        key = it.key()
        if key != offset_key:
            if len(rows) == limit:
                return rows, True
            rows.append((key, decode_value(app, table, it.value())))
        it.next()
    return rows, False
