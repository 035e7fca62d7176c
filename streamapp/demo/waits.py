"""Waiting for the joins' inputs: follow a topic until this run's keys (their bytes) are in it.

The producer waits for the worker's tables (their changelogs) and the copies of the
table ksqlDB (or Kafka Streams) writes before it sends the stream, as a stream-table
join requires.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

from ..kafka.admin import TopicError, describe, wait_listed
from ..kafka.reader import Record, TopicReader
from ..settings import Settings
from ..sql import plan as p
from ..sql.formats import Codec
from ..sql.topology import topology
from .shape import DemoShape


def keys_of(records: Iterable[Record]) -> set[bytes | None]:
    """The records' keys, as bytes."""
    return {r.key for r in records}


def wait_for_keys(bootstrap: str, topic: str, keys: Iterable[bytes | None], timeout: float) -> list[Record]:
    """Follow ``topic`` until every key has appeared or ``timeout`` passes; every record read either way.

    One reader follows the topic: each round reads only what arrived since the
    last, and waits for records to arrive rather than for a fixed time.
    """
    wanted = set(keys)
    deadline = time.monotonic() + timeout
    try:
        wait_listed(bootstrap, [topic], timeout)
    except TopicError:
        return []
    records: list[Record] = []
    with TopicReader(bootstrap, topic) as reader:
        while True:
            records += reader.read_to_end()
            if wanted <= keys_of(records):
                return records
            left = deadline - time.monotonic()
            if left <= 0:
                return records
            records += reader.read(min(left, 1.0))


@dataclass(frozen=True)
class TableWait:
    """One wait for this run's table keys in an engine's topic: how many arrived, and when the wait ended.

    An incomplete wait means the engine did not load the table before the stream went
    out: those records join NULL table columns, and the report says so rather than
    leaving the reader to guess why.
    """

    engine: str
    topic: str
    expected: int
    found: int
    seconds: float

    @property
    def complete(self) -> bool:
        return self.found >= self.expected

    def line(self) -> str:
        return (f"{self.engine}: {self.expected - self.found} of {self.expected} keys not in {self.topic} "
                f"after {self.seconds:.1f}s; their stream records were sent anyway and may join NULL table columns")

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "complete": self.complete}


def wait_for_rows(engine: str, settings: Settings, topic: str, keys: Sequence[bytes | None],
                  timeout: float) -> TableWait:
    """Follow ``topic`` until every key is in it or ``timeout`` passes; how many were found, and when."""
    started, wanted = time.monotonic(), set(keys)
    found = keys_of(wait_for_keys(settings.kafka, topic, wanted, timeout)) & wanted
    return TableWait(engine, topic, len(wanted), len(found), time.monotonic() - started)


def table_changelogs(settings: Settings) -> list[str]:
    """Changelogs of the worker's tables: a key there means the table holds it, as a join needs before the stream."""
    joins = topology(settings)
    return [joins.changelog_topic(table.name) for table in joins.tables]


def _key_bytes(source: p.Source, keys: Sequence[Any]) -> list[bytes | None]:
    codec = Codec(source)
    return [codec.encode_key(key) for key in keys]


def wait_for_tables(settings: Settings, shape: DemoShape, keys: Sequence[Any], timeout: float,
                    engine: str) -> list[TableWait]:
    """Wait until the worker has written this run's table keys to each copy and loaded them into each table (or
    ``timeout`` passes).  A table's changelog holds its keys' bytes as the table's topic does."""
    deadline = time.monotonic() + timeout
    joins = topology(settings)
    topics = [(copy.worker_topic, copy.source) for copy in shape.copies]
    topics += [(joins.changelog_topic(table.name), table.source) for table in joins.tables]
    waits = []
    for topic, source in topics:
        left = max(deadline - time.monotonic(), 0)
        if describe(settings.kafka, [topic]):
            waits.append(wait_for_rows(engine, settings, topic, _key_bytes(source, keys), left))
    return waits


def wait_for_copies(settings: Settings, shape: DemoShape, keys: Sequence[Any], timeout: float,
                    engine: str) -> list[TableWait]:
    """Wait until ksqlDB (or its queries on Kafka Streams) has written this run's table keys to each copy."""
    return [wait_for_rows(engine, settings, copy.ksqldb_topic, _key_bytes(copy.source, keys), timeout)
            for copy in shape.copies if describe(settings.kafka, [copy.ksqldb_topic])]
