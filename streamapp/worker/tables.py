"""The worker's topics and its RocksDB tables, made for one app and shared by its agents and web views.

Keys and input values stay raw bytes (Faust's JSON-quoted ``str`` key would hash elsewhere than
ksqlDB's); a table is partitioned like its source, and a lookup reads the record's own partition
(:class:`RowLookup`); rows are written a fetch at a time (:class:`RowWrites`).
See docs/explanation/worker-internals.md#the-tables.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from decimal import Decimal
from pathlib import Path
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Callable, Iterable, Mapping

import faust
from faust.serializers import codecs
from faust.types import TP
from rocksdict import WriteBatch

from ..partitioners import get_partitioner
from ..settings import Settings
from ..kafka.admin import TopicError, set_topic_configs, topics_configs
from ..kafka.security import Kafka
from ..kafka.limits import Headers
from ..model.records import column
from ..sql import plan as p
from ..sql.engine import Row
from ..sql.formats import Codec, json_text
from ..sql.stream_join import join_window
from ..sql.topology import ROWTIME, Topology
from . import faust_internals

logger = logging.getLogger(__name__)

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


#: RocksDB block cache of each window store partition's database.  Faust gives each database a 2 GiB LRU cache of
#: its own, and the blocks of SST files a compaction replaced stay in it until evicted, which below 2 GiB never
#: happens: a window store's keys come and go, so its cache (and the worker's RSS) grew with the stream's length,
#: not its retention (135 MiB of cache over 0.3 MiB of live SST after 400,000 writes of a sliding window; capped,
#: flat: issue 37).  A table's keys stay, so its cache stays near its data: its lookups keep Faust's cache (an
#: 8 MiB one read 1,000,000 users at 0.58x the gets per CPU second).  1 MiB: a window store's sweep compacts its
#: files every half retention, so even an 8 MiB cache filled with replaced files' blocks (8.4 MB over 1.4 MiB of
#: SST, the benchmark's partition 0 offline: 6 partitions x 3 stores x 8 MiB of RSS); 1 MiB read as fast there.
WINDOW_BLOCK_CACHE_SIZE = 2**20


def window_store_options() -> dict[str, Any]:
    """A window or outer store's RocksDB options: a table's, with a block cache bounded by the retention's churn."""
    return {**store_options(), "block_cache_size": WINDOW_BLOCK_CACHE_SIZE}


#: How long a window store's changelog keeps a record past the store's retention: Kafka Streams'
#: ``windowstore.changelog.additional.retention.ms`` default (a day), for the changelog's records stamped by the
#: wall clock while the store's retention runs on event time.
WINDOW_CHANGELOG_EXTRA_RETENTION_MS = 24 * 3_600_000


def window_changelog_configs(retention: int) -> dict[str, str]:
    """A window store's changelog topic configs, as Kafka Streams' windowed changelogs: compacted, and deleted by
    time, so that the store drops an expired segment with no changelog record (``window_stores.RocksWindow``)."""
    return {"cleanup.policy": "compact,delete", "retention.ms": str(retention + WINDOW_CHANGELOG_EXTRA_RETENTION_MS)}


def configure_window_changelogs(bootstrap: Kafka, wanted: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The window changelogs of ``wanted`` that exist with other configs set to them (Faust leaves an existing topic as
    it is: one made before the window stores' segments only compacts, and would keep every record now that an expired
    segment writes none); what was set, one entry a topic.  At each start: one DescribeConfigs for them all."""
    if not wanted:  # no windowed join: no call
        return []
    done = []
    for topic, have in topics_configs(bootstrap, wanted).items():  # the missing ones Faust makes as they should be
        changes = {name: value for name, value in wanted[topic].items() if have.get(name) != value}
        if changes:
            shown = ", ".join(f"{name}={value}" for name, value in changes.items())
            try:
                set_topic_configs(bootstrap, topic, changes)
            except TopicError as exc:  # not fatal: the join is right, the changelog only keeps more
                logger.warning("Could not set %s on the window changelog %s (%s): it keeps every record", shown, topic,
                               exc)
                continue
            done.append(f"{topic} ({shown})")
    return done


class JoinTables:
    """The worker's input topics and its RocksDB tables, one per table a declared join looks up.

    Built from the plan's :class:`~streamapp.sql.topology.Topology`: a Faust table per
    table source (named after it), a raw Faust topic per topic the worker reads.
    """

    def __init__(self, app: Any, settings: Settings, topology: Topology) -> None:
        self.app = app
        self.topology = topology
        #: The join's partitioner: where every record the worker writes goes.
        self.partitioner = get_partitioner(settings.partitioner)
        #: Each topic the worker reads, as a raw Faust topic (tables' first, then the streams').
        self.topics: dict[str, faust.TopicT] = {
            name: app.topic(name, partitions=settings.partitions, **RAW)
            for name in dict.fromkeys((*topology.table_topics, *topology.rekeyed_topics, *topology.stream_topics,
                                       *topology.stream_join_topics))}
        options: dict[str, Any] = {"key_type": bytes, "partitions": settings.partitions}
        #: Table name -> the Faust table holding that source's rows, partitioned like its topic.
        self.by_name: dict[str, faust.Table] = {
            table.name: app.Table(table.name, help=f"rows of {table.topic}", options=store_options(), **options)
            for table in topology.tables}
        #: Store name -> the Faust table of a stream-stream join's window or outer store (``agents/stream_joins.py``).
        self.windows: dict[str, faust.Table] = {}
        for join in topology.stream_joins:
            windowed = window_changelog_configs(join_window(join.query).retention)
            for name, configs in zip(join.stores, (windowed, windowed, {})):  # the outer store's only compacts
                self.windows[name] = app.Table(name, help=f"state of the stream-stream join {join.query.name}",
                                               options=window_store_options(), **options, value_type=bytes,
                                               extra_topic_configs=configs)
        #: Source topic -> the tables loaded from it.
        self.by_source: dict[str, list[faust.Table]] = {}
        for table in topology.tables:
            self.by_source.setdefault(table.topic, []).append(self.by_name[table.name])
        #: The copies' records this worker wrote lately, with their rows' bytes (:class:`WrittenRows`).
        self.written = WrittenRows()
        #: exactly_once: the stores whose changelog is written in transactions (:class:`CleanStops`).
        self.clean_stops = CleanStops(app)

    def window_changelogs(self) -> dict[str, dict[str, str]]:
        """The window stores' changelogs with the configs they are made with (:func:`window_changelog_configs`)."""
        return {table.changelog_topic.get_topic_name(): dict(table.extra_topic_configs)
                for table in self.windows.values() if table.extra_topic_configs}

    def changelog_topics(self) -> list[str]:
        """The tables' changelog topics (Faust names and creates them)."""
        return [table.changelog_topic.get_topic_name() for table in (*self.by_name.values(), *self.windows.values())]

    def key_serializers(self) -> dict[str, str]:
        """Key serializer of each table, by source topic: what the guard checks."""
        return {topic: str(tables[0].key_serializer) for topic, tables in self.by_source.items()}
    async def send_raw(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp_ms: int | None = None,
        headers: Headers | None = None,
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


#: Seconds after a deletion its line is logged at the latest (at the end of the assignment, if sooner).
WIPED_LINE_AFTER = 5.0
#: Beside a store partition's RocksDB directory: its last run stopped clean (``<table>-<partition>.db.clean``).
CLEAN_SUFFIX = ".clean"


class CleanStops:
    """exactly_once: a store whose changelog is written in transactions is trusted on disk only after a clean stop.

    Its RocksDB data holds the writes of the open transactions, which a kill -9 leaves there though the changelog
    never commits them.  As Kafka Streams does under EOS (a task with no checkpoint and a non-empty store is
    corrupted: wiped, restored from its changelog), a clean stop leaves a mark beside each partition's database,
    and the first open of a partition in a process (at start, or at a later assignment) takes the mark away,
    or, with none, deletes the partition's data: Faust then restores it from the changelog's start.  A partition
    opened again in the same process holds what this process left (a dropped transaction's writes are put back).
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        #: Each store's changelog topic (what :func:`~streamapp.worker.faust_internals.past_markers` watches).
        self.changelogs: set[str] = set()
        self._tables: dict[str, faust.Table] = {}
        #: Each store's partitions opened (and judged) in this process, marked clean at a clean stop.
        self._opened: dict[str, set[int]] = {}
        self._wiped: list[str] = []
        self._flush: asyncio.TimerHandle | None = None

    def add(self, tables: Iterable[faust.Table]) -> None:
        """``tables`` write their changelog in transactions: judged at open, marked at a clean stop."""
        for table in tables:
            if table.name in self._tables:
                continue
            if not self._tables:  # the first: the app's hooks, once
                self._connect()
            self._tables[table.name] = table
            self._opened[table.name] = set()
            self.changelogs.add(table.changelog_topic.get_topic_name())
            faust_internals.before_open(table, lambda partition, path, name=table.name: self.opening(
                name, partition, path))

    def opening(self, name: str, partition: int, path: Path) -> None:
        """Before Faust opens ``name``'s partition at ``path``: the first time here, its mark or its data goes."""
        opened = self._opened[name]
        if partition in opened:
            return
        opened.add(partition)
        mark = path.with_name(path.name + CLEAN_SUFFIX)
        if mark.exists():  # stopped clean: trusted, and from now on written again (a crash must find no mark)
            mark.unlink()
            _sync_dir(mark.parent)
        elif path.exists():
            shutil.rmtree(path)
            self._wiped.append(f"{name}[{partition}]")
            if len(self._wiped) == 1:  # one line for the assignment's opens (or for standbys opened after it)
                try:
                    self._flush = asyncio.get_running_loop().call_later(WIPED_LINE_AFTER, self._log_wiped)
                except RuntimeError:
                    self._log_wiped()

    def distrust(self, table: faust.Table, partition: int) -> None:
        """The partition's data may hold a dropped transaction's writes (not put back): not marked clean, and wiped
        at its next open."""
        self._opened.get(table.name, set()).discard(partition)

    def _log_wiped(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        wiped, self._wiped = self._wiped, []
        if not wiped:
            return
        logger.info("exactly_once: %d store partitions were not stopped clean (no %s mark: a crash may have left "
                    "aborted transactions' writes in RocksDB), their data deleted, restored from their changelogs: %s",
                    len(wiped), CLEAN_SUFFIX, ", ".join(wiped))

    def _connect(self) -> None:
        watching: list[asyncio.Future[None]] = []

        async def on_assigned(sender: Any, assigned: Any, **kwargs: Any) -> None:
            self._log_wiped()  # Faust has opened the assignment's active partitions by now
            if not watching:  # from the first assignment on: Faust starts an app's tasks only once it recovered
                watching.append(asyncio.ensure_future(faust_internals.past_markers(self.app, self.changelogs)))

        async def on_shutdown(sender: Any, **kwargs: Any) -> None:
            await self.stopped()

        self.app.on_partitions_assigned.connect(on_assigned, weak=False)
        self.app.on_before_shutdown.connect(on_shutdown, weak=False)

    async def stopped(self) -> None:
        """A clean stop: every transaction ended (committed, or dropped and put back), then each partition opened
        here is marked clean; none is when a transaction could not end (its writes' fate is unknown)."""
        every = {id(t): t for t in self.app.transactions.values()}.values()
        for transactions in every:  # the transactions' own shutdown does it too: whichever runs first, once
            await transactions.close()
        failed = sum(t.counts["revoke_failed"] for t in every)
        if failed:
            logger.info("exactly_once: %d transactions could not end cleanly: no store partition marked clean, the "
                        "next start restores them from their changelogs", failed)
            return
        marks = [self._tables[name].data.partition_path(partition) for name, opened in self._opened.items()
                 for partition in sorted(opened)]
        for path in marks:
            path.with_name(path.name + CLEAN_SUFFIX).touch()
        for folder in {path.parent for path in marks}:
            _sync_dir(folder)
        logger.info("exactly_once: clean stop: %d store partitions marked clean (%s), kept at the next start",
                    len(marks), ", ".join(sorted(self._tables)))


def _sync_dir(folder: Path) -> None:
    """A mark's creation or removal in ``folder`` made durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
            try:
                return dumps_compact(row)
            except TypeError:  # a DECIMAL column: written exactly, as ksqlDB's JSON writes it
                return json_text(row).encode("utf-8")
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


def table_row(columns: dict[str, Any], source: p.Source, timestamp: int | None = None) -> dict[str, Any]:
    """The row a table stores for a decoded record: its value columns (the key is the RocksDB key), and in a
    timestamped table (a table-table join's side) its event time as :data:`ROWTIME`, a name no column takes."""
    row = {c.name: columns[c.name] for c in source.value_columns}
    if timestamp is not None:
        row[ROWTIME] = timestamp
    return row


#: Why a lookup found no row, as the metrics count it (``streamapp_join_misses_total``'s ``cause``): a null key
#: looks nothing up; a row of the key in another partition of the table that this worker holds is a
#: co-partitioning violation (the reconciliation's cause of the same name); else there is no row here (an unknown
#: or late key, or a row in a partition another worker holds).  ``unclassified``: the metrics are off.
MISS_CAUSES = ("null_key", "copartition_violation", "no_row", "unclassified")


def miss_cause(key: bytes | None, elsewhere: Callable[[bytes], bool]) -> str:
    """The cause of a miss of ``key`` (see :data:`MISS_CAUSES`); ``elsewhere(key)``: a row of it in another partition."""
    if key is None:
        return "null_key"
    return "copartition_violation" if elsewhere(key) else "no_row"


#: How many decoded rows a :class:`RowLookup` keeps (about 3 MiB for the seed's users).
DECODED_ROWS = 16_384


class RowLookup:
    """A table's rows as the join engine reads them, from one partition's RocksDB database at a time.

    Rows are stored as JSON objects of their value columns, as declared; a row stored by an
    older streamapp (lower-case field names) is read by ksqlDB's case-insensitive rule.  A timestamped
    table's row carries its event time (:func:`table_row`), the row's time here; other rows' is 0.
    """

    def __init__(self, table: faust.Table, source: p.Source, with_key: bool) -> None:
        self.table = table
        self._names = tuple(c.name for c in source.value_columns)
        self._all_names = frozenset(self._names)
        exact = json.JSONDecoder(parse_float=Decimal).decode
        self._loads: Callable[[bytes], Any] = (lambda raw: exact(raw.decode("utf-8"))) if any(
            c.type.startswith("DECIMAL") for c in source.value_columns) else json.loads
        #: The key column and its codec, when a projection reads the table's key column.
        self._key = (source.key_columns[0].name, Codec(source)) if with_key and source.key_columns else None
        #: Rows decoded lately, by their stored bytes (and key, when the row carries it): a hot key's row is
        #: decoded once, not at every lookup.  Rows are never changed once built; the cache starts over when full.
        self._decoded: dict[Any, Row] = {}

    def get(self, partition: int, key: bytes) -> Row | None:
        """The row of ``key`` in ``partition``'s RocksDB database only, as an engine row, or None: never a row
        from another partition."""
        raw = faust_internals.partition_db(self.table, partition).get(key)
        if raw is None:
            return None
        cached = (key, raw) if self._key is not None else raw
        found = self._decoded.get(cached)
        if found is not None:
            return found
        row = self._loads(raw)
        timestamp = row.pop(ROWTIME, 0)
        if not self._all_names <= row.keys():
            row = {name: column(row, name.upper()) if name not in row else row[name] for name in self._names}
        if self._key is not None:
            row[self._key[0]] = self._key[1].decode_key(key)
        if len(self._decoded) >= DECODED_ROWS:
            self._decoded.clear()
        found = self._decoded[cached] = (row, timestamp)
        return found

    def miss_cause(self, partition: int, key: bytes | None) -> str:
        """Why ``key`` found no row in ``partition`` (:func:`miss_cause`): asked on a miss only, so a hit pays nothing."""
        def elsewhere(key: bytes) -> bool:
            return any(other != partition and db.get(key) is not None
                       for other, db in faust_internals.open_partition_dbs(self.table).items())
        return miss_cause(key, elsewhere)


def faust_timestamp(timestamp_ms: int) -> float:
    """Seconds for Faust's ``send(timestamp=...)``, which sends ``int(seconds * 1000.0)``.

    ``ts / 1000 * 1000`` can come back one below ``ts`` in floating point; half a
    millisecond of headroom makes the truncation land exactly on ``ts``.
    """
    return (timestamp_ms + 0.5) / 1000.0
