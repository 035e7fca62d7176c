"""Waiting for the joins' inputs: follow a topic until this run's keys are in it.

The producer waits for the worker's tables (their changelogs) and ksqlDB's
repartitioned table before it sends the orders, as a stream-table join requires.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

from ..kafka.admin import TopicError, describe, wait_listed
from ..kafka.reader import Record, TopicReader
from ..settings import Settings
from ..sql.topology import topology
from .ksqldb import DemoObjects


def keys_of(records: Iterable[Record]) -> set[str]:
    """The records' keys as text (a null key as the empty string)."""
    return {(r.key or b"").decode("utf-8", "replace") for r in records}


def wait_for_keys(bootstrap: str, topic: str, keys: Iterable[str], timeout: float) -> list[Record]:
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
    """One wait for this run's users in an engine's topic: how many arrived, and when the wait ended.

    An incomplete wait means the engine did not load the users before the orders went
    out: their orders join NULL user columns, and the report says so rather than
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
        return (f"{self.engine}: {self.expected - self.found} of {self.expected} users not in {self.topic} "
                f"after {self.seconds:.1f}s; their orders were sent anyway and may join NULL user columns")

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "complete": self.complete}


def wait_for_users(engine: str, settings: Settings, topic: str, ids: Sequence[str], timeout: float) -> TableWait:
    """Follow ``topic`` until every id is a key in it or ``timeout`` passes; how many were found, and when."""
    started, wanted = time.monotonic(), set(ids)
    found = keys_of(wait_for_keys(settings.kafka, topic, wanted, timeout)) & wanted
    return TableWait(engine, topic, len(wanted), len(found), time.monotonic() - started)


def table_changelogs(settings: Settings) -> list[str]:
    """Changelogs of the worker's tables: a key there means the table holds it, as a join needs before the order."""
    joins = topology(settings)
    return [joins.changelog_topic(table.name) for table in joins.tables]


def wait_for_tables(settings: Settings, ids: Sequence[str], timeout: float, engine: str) -> list[TableWait]:
    """Wait until the worker has loaded this run's users into both tables (or ``timeout`` passes)."""
    deadline = time.monotonic() + timeout
    waits = []
    for topic in (*(copy.output for copy in topology(settings).copies), *table_changelogs(settings)):
        left = max(deadline - time.monotonic(), 0)
        if describe(settings.kafka, [topic]):
            waits.append(wait_for_users(engine, settings, topic, ids, left))
    return waits


def wait_for_ksqldb_table(settings: Settings, ids: Sequence[str], timeout: float, engine: str) -> list[TableWait]:
    """Wait until ksqlDB (or its joins on Kafka Streams) has written this run's users to its repartitioned
    table's topic: its table is loaded."""
    topic = DemoObjects.from_settings(settings).users_repartition_topic
    return [wait_for_users(engine, settings, topic, ids, timeout)] if describe(settings.kafka, [topic]) else []
