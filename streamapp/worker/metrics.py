"""Prometheus metrics of the worker: ``GET /metrics``, read from what the worker already keeps, at scrape time.

A custom collector reads the agents' counters, the health probe, the guard, the doctor and the
transactions when Prometheus scrapes (:func:`read`, the only part that touches the app), and
:func:`families` turns that reading into metric families (pure).  Nothing runs when nobody scrapes
but three measurements nothing else makes (:class:`Instruments`).  See
docs/explanation/worker-internals.md#metrics; the metrics themselves: docs/how-to/monitor.md.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import metadata
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

import faust
from faust import web
from faust.stores.rocksdb import Store as RocksDBStore
from prometheus_client import Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from ..copartition.drift import Placement
from ..copartition.guard import joined_pairs
from .assignment import active_partitions
from .faust_internals import partition_db
from .transactions import transaction_counts
from .transport import Handler

if TYPE_CHECKING:
    from faust.types import TP

    from .app import StreamappApp

logger = logging.getLogger(__name__)

PREFIX = "streamapp"
#: Batch handling times (seconds): a fetch's piece is joined in well under a millisecond to seconds.
BATCH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Offset commit times (seconds): a flush of the producer, then OffsetCommit.
COMMIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Rebalance times (seconds), from its start to the tables recovered.
REBALANCE_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: RocksDB's own estimate of a partition's keys (cheap: no scan); it includes Faust's offset key.
ESTIMATE_KEYS = "rocksdb.estimate-num-keys"
#: A fetched record's key (``map`` over a batch with it costs half a comprehension's attribute reads).
_KEY = attrgetter("key")


# -- what the worker measures that nothing else does ------------------------------------------------------------


class Instruments:
    """The batch times, the placement check and the commit counts of one app (see the module's docstring).

    Installed once per app (:func:`instrument`): every batch handler, present or registered later,
    is wrapped (:class:`_Handlers`), and a Faust sensor is added for the commits and rebalances.
    """

    def __init__(self, watched: Iterable[str], partition_batch: Callable[[Sequence[bytes], int], list[int]],
                 counts: Callable[[], Mapping[str, int]]) -> None:
        #: The topics whose placement a join depends on: joined streams and the tables they look up.
        self.watched = frozenset(watched)
        self.partition_batch = partition_batch
        #: Partition count per topic (the app's ``partition_counts``, read at start: asked each time).
        self.counts = counts
        self.placement = Placement()
        self.commits = 0
        # prometheus_client's histograms, in no registry: the app's collector yields them with its own families.
        self.batch_seconds = Histogram(_name("batch_processing_seconds"), "Time to handle one batch of fetched "
                                       "records (decode, join or load, queue the outputs), per input topic.",
                                       ["topic"], buckets=BATCH_BUCKETS, registry=None)
        self.commit_latency = Histogram(_name("commit_latency_seconds"), "Time of each commit: an offset commit that "
                                        "moved an offset (kind=offsets: the producer's flush, then OffsetCommit), an "
                                        "exactly-once transaction (kind=transaction: flush, offsets, commit).",
                                        ["kind"], buckets=COMMIT_BUCKETS, registry=None)
        self.commit_seconds = self.commit_latency.labels("offsets")
        #: exactly_once: each transaction's commit (None under at_least_once: no such series).
        self.transaction_seconds: Histogram | None = None
        self.rebalance_seconds = Histogram(_name("rebalance_seconds"), "Time from a rebalance's start to its end "
                                           "(tables recovered).", buckets=REBALANCE_BUCKETS, registry=None)

    def time_transactions(self) -> Callable[[float], None]:
        """The observer of each transaction's commit time (exactly_once): its series starts at zero."""
        self.transaction_seconds = self.commit_latency.labels("transaction")
        return self.transaction_seconds.observe

    def histograms(self) -> Iterator[Metric]:
        """The three histograms' families, as prometheus_client collects them, without their ``_created`` samples
        (the text format makes each a gauge of its own; the app's counters have none either)."""
        for histogram in (self.batch_seconds, self.commit_latency, self.rebalance_seconds):
            for family in histogram.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family

    def wrap(self, topic: str, handler: Handler) -> Handler:
        """``handler`` timed, and its batches' placement checked once it has handled them."""
        if getattr(handler.handle, "streamapp_metrics", False):
            return handler
        inner = handler.handle
        times = self.batch_seconds.labels(topic)
        check = topic in self.watched

        async def handle(batches: Mapping[TP, Sequence[Any]]) -> None:
            start = time.perf_counter()
            await inner(batches)
            times.observe(time.perf_counter() - start)
            if check:
                self.check(batches)

        handle.streamapp_metrics = True  # type: ignore[attr-defined]
        return dataclasses.replace(handler, handle=handle)

    def check(self, batches: Mapping[TP, Sequence[Any]]) -> None:
        """Count the keyed records of ``batches`` and those the declared partitioner places elsewhere."""
        counts = self.counts()
        for tp, records in batches.items():
            n = counts.get(tp.topic)
            keys = list(filter(None, map(_KEY, records)))  # a null or empty key: some partitioners pick at random
            if n and keys:
                self.placement.count(tp.topic, tp.partition, keys, self.partition_batch(keys, n))


class _Handlers(dict):  # type: ignore[type-arg]
    """``app.batch_handlers``, wrapping each handler as it is registered (the agents may register after us)."""

    def __init__(self, instruments: Instruments, handlers: Mapping[str, Handler]) -> None:
        super().__init__()
        self.instruments = instruments
        for topic, handler in handlers.items():
            self[topic] = handler

    def __setitem__(self, topic: str, handler: Handler) -> None:
        super().__setitem__(topic, self.instruments.wrap(topic, handler))


class CommitSensor(faust.Sensor):
    """Counts the offset commits that moved a committed offset, times them, and times rebalances.

    Faust calls ``on_commit_completed`` after every commit attempt, most of which have nothing
    to commit; its monitor's ``tp_committed_offsets`` changes only when offsets were committed.
    """

    def __init__(self, app: Any, instruments: Instruments, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streamapp = app
        self.instruments = instruments
        self._seen: dict[Any, int] = {}

    def on_commit_initiated(self, consumer: Any) -> Any:
        return time.perf_counter()

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        committed = self.streamapp.monitor.tp_committed_offsets
        if committed and committed != self._seen:
            self._seen = dict(committed)
            self.instruments.commits += 1
            self.instruments.commit_seconds.observe(time.perf_counter() - state)

    def on_rebalance_start(self, app: Any) -> dict[str, float]:
        return {"start": time.perf_counter()}

    def on_rebalance_end(self, app: Any, state: dict[str, float]) -> None:
        if "start" in state:
            self.instruments.rebalance_seconds.observe(time.perf_counter() - state["start"])


def watched_topics(app: StreamappApp) -> set[str]:
    """The topics a join reads by partition: both topics of each pair the guard checks (stream-table, table-table
    and stream-stream joins), so a misplaced key of any of them reaches its verdict (:mod:`..copartition.drift`)."""
    return {topic for pair in joined_pairs(app.topology) for topic in pair}


def instrument(app: StreamappApp) -> Instruments:
    """The app's :class:`Instruments`, installed once: handlers wrapped, the commit sensor added."""
    existing = getattr(app, "streamapp_instruments", None)
    if existing is not None:
        return existing
    instruments = Instruments(watched_topics(app), app.join_tables.partitioner.partition_batch,
                              lambda: app.partition_counts)
    app.batch_handlers = _Handlers(instruments, app.batch_handlers)
    app.sensors.add(CommitSensor(app, instruments))
    if app.transactions:  # installed by the agents, before the routes
        observe = instruments.time_transactions()
        for transactions in app.transactions.values():
            transactions.on_committed = observe
    app.streamapp_instruments = instruments  # type: ignore[attr-defined]
    return instruments


# -- one scrape: what the app holds, read at once ---------------------------------------------------------------


@dataclass(frozen=True)
class JoinFacts:
    """A declared join as the metrics label it."""

    join: str
    output: str
    stream: str
    table: str
    table_topic: str
    type: str
    #: For a join that re-keys its stream: the topic it re-keys, and the repartition topic it writes.
    rekeyed_from: str | None = None
    repartition: str | None = None


@dataclass(frozen=True)
class TableJoinFacts:
    """A declared table-table join as the metrics label it: each update of a side looks the other side's row up."""

    join: str
    output: str


@dataclass(frozen=True)
class StreamJoinFacts:
    """A declared windowed stream-stream join as the metrics label it, with its stores (their Faust tables) and the
    repartition topics of the sides it re-keys."""

    join: str
    output: str
    stores: tuple[str, ...] = ()
    repartitions: tuple[str, ...] = ()


@dataclass
class Scrape:
    """Everything one scrape exposes, as plain data (see :func:`read`); :func:`families` is pure over it."""

    joins: Sequence[JoinFacts]
    counters: Mapping[str, Any]
    app_id: str = ""
    partitioner: str = ""
    guarantee: str = ""
    ready: bool | None = None
    health: Mapping[str, Any] | None = None
    guard: Mapping[str, Any] | None = None
    doctor: Mapping[str, Any] | None = None
    checks_run: int = 0
    checks_finished: float | None = None
    rebalances: int | None = None
    #: Revokes whose offset commit left acked offsets uncommitted (:class:`~streamapp.worker.transport.Consumer`).
    revoke_commits_failed: int | None = None
    transactions: Mapping[str, int] | None = None
    #: (topic, partition) -> records between the committed offset and the end of the log.
    lag: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: (changelog topic, partition, "active"/"standby") -> changelog records left to restore.
    restore: Mapping[tuple[str, int, str], int] = field(default_factory=dict)
    #: (table, partition) -> rows, as RocksDB estimates them, of the active partitions held here.
    table_rows: Mapping[tuple[str, int], int] = field(default_factory=dict)
    instruments: Instruments | None = None
    table_joins: Sequence[TableJoinFacts] = ()
    stream_joins: Sequence[StreamJoinFacts] = ()
    #: (store, partition, part) -> bytes of a windowed join's store in RocksDB's memtables and SST files, of the
    #: active partitions held here.
    window_bytes: Mapping[tuple[str, int, str], int] = field(default_factory=dict)


def join_facts(app: StreamappApp) -> list[JoinFacts]:
    return [JoinFacts(j.pair, j.output, j.stream, j.table.name, j.table_topic, j.query.join_type,
                      j.rekeyed_from, j.source_topic if j.rekeyed_from is not None else None)
            for j in app.topology.joins]


def stream_join_facts(app: StreamappApp) -> list[StreamJoinFacts]:
    """Each windowed join with its stores and the repartition topics the stream agent re-keys its sides into."""
    rekeys = app.topology.rekeys
    return [StreamJoinFacts(j.pair, j.output, j.stores, tuple(r.topic for r in rekeys if r.query.name == j.query.name))
            for j in app.topology.stream_joins]


def read(app: StreamappApp, instruments: Instruments | None = None) -> Scrape:
    """What the app holds now; a part that cannot be read yet (no assignment, no store) is left out, not an error."""
    settings = app.settings
    scrape = Scrape(join_facts(app), app.counters.snapshot(), settings.app_id, settings.partitioner,
                    settings.processing_guarantee, instruments=instruments,
                    table_joins=[TableJoinFacts(j.pair, j.output) for j in app.topology.table_joins],
                    stream_joins=stream_join_facts(app))
    parts: dict[str, Callable[[], None]] = {
        "readiness": lambda: setattr(scrape, "ready", bool(app.ready)),
        "health": lambda: setattr(scrape, "health", app.kafka_monitor.status()),
        "rechecks": lambda: _read_rechecks(app, scrape),
        "rebalances": lambda: setattr(scrape, "rebalances", int(app.rebalancing_count)),
        "revoke commits": lambda: setattr(scrape, "revoke_commits_failed", int(app.consumer.revoke_commits_failed)),
        "transactions": lambda: _read_transactions(app, scrape),
        "lag": lambda: setattr(scrape, "lag", consumer_lag(app)),
        "restore": lambda: setattr(scrape, "restore", restore_remaining(app)),
        "table rows": lambda: setattr(scrape, "table_rows", table_rows(app)),
        "window bytes": lambda: setattr(scrape, "window_bytes", window_bytes(app)),
    }
    for name, part in parts.items():
        try:
            part()
        except Exception as exc:  # noqa: BLE001 - a scrape shows what it can; the part is simply absent
            logger.debug("metrics: %s not read (%r)", name, exc)
    return scrape


def _read_rechecks(app: StreamappApp, scrape: Scrape) -> None:
    rechecks = app.rechecks
    latest = rechecks.latest
    scrape.guard = rechecks.guard_report()
    scrape.doctor = latest.doctor if latest else None
    scrape.checks_run = rechecks.runs
    scrape.checks_finished = latest.finished if latest else None


def _read_transactions(app: StreamappApp, scrape: Scrape) -> None:
    if app.transactions:
        scrape.transactions = transaction_counts(app.transactions)


def consumer_lag(app: StreamappApp) -> dict[tuple[str, int], int]:
    """Per assigned partition: end of the log (as last fetched) minus the group's committed offset.

    The end offsets and Faust's commits are its monitor's (cleared at each rebalance, until the next
    fetch and commit); the exactly-once stream's offsets are committed in its transactions instead.
    """
    monitor = app.monitor
    committed: dict[tuple[str, int], int] = {(tp.topic, tp.partition): offset
                                             for tp, offset in monitor.tp_committed_offsets.items()}
    for topic, transactions in list(app.transactions.items()):
        for partition, txn in list(transactions.open.items()):
            if topic in txn.base_offsets:
                committed[(topic, partition)] = txn.base_offsets[topic]
    assigned = {(tp.topic, tp.partition) for tp in app.consumer.assignment()}
    lag = {}
    for tp, end in list(monitor.tp_end_offsets.items()):
        key = (tp.topic, tp.partition)
        if key in assigned and key in committed and end is not None:
            lag[key] = max(0, end - committed[key])
    return lag


def restore_remaining(app: StreamappApp) -> dict[tuple[str, int, str], int]:
    """Changelog records each table partition has left to restore, active and standby (Faust's recovery)."""
    recovery = app.tables.recovery
    remaining: dict[tuple[str, int, str], int] = {}
    for kind, counts in (("active", recovery.active_remaining()), ("standby", recovery.standby_remaining())):
        for tp, left in counts.items():
            remaining[(tp.topic, tp.partition, kind)] = max(0, int(left))
    return remaining


def active_dbs(app: StreamappApp, table: faust.Table) -> Iterator[tuple[int, Any]]:
    """Each partition of ``table`` this worker is active for, with its RocksDB database (none of a table in memory)."""
    if isinstance(table.data, RocksDBStore):
        for partition in sorted(active_partitions(app, table)):
            yield partition, partition_db(table, partition)


def table_rows(app: StreamappApp) -> dict[tuple[str, int], int]:
    """Rows of each active table partition held here, as RocksDB estimates them (no scan), less Faust's offset key."""
    rows: dict[tuple[str, int], int] = {}
    for name, table in app.join_tables.by_name.items():
        offset_key = getattr(table.data, "offset_key", None)
        for partition, db in active_dbs(app, table):
            estimate = int(db.property_int_value(ESTIMATE_KEYS) or 0)
            if offset_key is not None and db.get(offset_key) is not None:
                estimate -= 1
            rows[(name, partition)] = max(0, estimate)
    return rows


#: What a store's bytes are, by the RocksDB property that counts them (RocksDB's own accounting, no scan): its
#: memtables (in memory: the writes since the last flush) and its live SST files (on disk).
STORE_BYTES = {"memtables": "rocksdb.cur-size-all-mem-tables", "sst_files": "rocksdb.live-sst-files-size"}


def window_bytes(app: StreamappApp) -> dict[tuple[str, int, str], int]:
    """Bytes of each windowed join's store per active partition held here, in memory and on disk (the state's size:
    a count of its records would need a scan, and RocksDB's estimate of its keys counts overwrites and deletes)."""
    held: dict[tuple[str, int, str], int] = {}
    for join in app.topology.stream_joins:
        for name in join.stores:
            for partition, db in active_dbs(app, app.join_tables.windows[name]):
                for part, count in store_bytes(db).items():
                    held[(name, partition, part)] = count
    return held


def store_bytes(db: Any) -> dict[str, int]:
    """One partition's database's bytes, by :data:`STORE_BYTES`."""
    return {part: int(db.property_int_value(name) or 0) for part, name in STORE_BYTES.items()}


# -- the families (pure) ----------------------------------------------------------------------------------------


def _name(name: str) -> str:
    return f"{PREFIX}_{name}"


def _per_partition(family: Any, groups: Mapping[str, Mapping[Any, int]], *extra: str) -> None:
    """One sample per (name, partition) of a counters group (partitions as strings in snapshots, ints elsewhere)."""
    for name, by_partition in sorted(groups.items()):
        for partition, count in sorted(by_partition.items(), key=lambda item: int(item[0])):
            family.add_metric([name, str(partition), *extra], count)


def families(scrape: Scrape) -> Iterator[Metric]:
    """The metric families of one scrape; pure (see the module's docstring for the names' rules)."""
    yield from _info(scrape)
    yield from _joins(scrape)
    yield from _inputs_outputs(scrape)
    yield from _state(scrape)
    yield from _verdicts(scrape)
    if scrape.instruments is not None:
        yield from _instruments(scrape.instruments)
    yield from _commits(scrape)


def _info(scrape: Scrape) -> Iterator[Metric]:
    info = GaugeMetricFamily(_name("info"), "The worker: its app id, the declared partitioner, its processing "
                             "guarantee.",
                             labels=["app_id", "partitioner", "processing_guarantee", "version"])
    info.add_metric([scrape.app_id, scrape.partitioner, scrape.guarantee, _version()], 1)
    yield info
    joins = GaugeMetricFamily(_name("join_info"), "Each declared stream-table join: its output, stream, table and "
                              "type.",
                              labels=["join", "output", "stream", "table", "table_topic", "type"])
    for j in scrape.joins:
        joins.add_metric([j.join, j.output, j.stream, j.table, j.table_topic, j.type], 1)
    yield joins


def _joins(scrape: Scrape) -> Iterator[Metric]:
    counters = scrape.counters
    # a table-table join's updates are counted as lookups (each looks up the other side's row), in the same counters
    joins = [(j.join, j.output) for j in (*scrape.joins, *scrape.table_joins)]
    lookups = CounterMetricFamily(
        _name("join_lookups"), "Table lookups of each declared join by partition (a stream-table join's records, a "
        "table-table join's updates of either side): hit (the key's row was found in that partition) or miss (no row "
        "there, or a null key).",
        labels=["join", "output", "partition", "result"])
    for join, output in joins:
        hits, misses = counters["joined"].get(output, {}), counters["missed"].get(output, {})
        # both results of every partition looked up in: a ratio's numerator must exist while it is zero
        for partition in sorted(set(hits) | set(misses), key=int):
            lookups.add_metric([join, output, partition, "hit"], hits.get(partition, 0))
            lookups.add_metric([join, output, partition, "miss"], misses.get(partition, 0))
    yield lookups
    causes = CounterMetricFamily(
        _name("join_misses"), "Misses of each declared join by cause: null_key (nothing to look up), "
        "copartition_violation (the key's row is in another partition of the table, held here), no_row (no row in "
        "the table partitions held here: unknown, late, or held by another worker), unclassified (metrics off).",
        labels=["join", "output", "cause"])
    by_output = counters.get("miss_causes", {})
    for join, output in joins:
        for cause, count in sorted(by_output.get(output, {}).items()):
            causes.add_metric([join, output, cause], count)
    yield causes


def written(scrape: Scrape) -> dict[tuple[str, str], int]:
    """Records each join queued to its output (LEFT: every record; INNER: hits) and to its repartition topic."""
    totals = scrape.counters["totals"]
    out: dict[tuple[str, str], int] = {}
    for j in scrape.joins:
        joined, missed = totals["joined"].get(j.output, 0), totals["missed"].get(j.output, 0)
        out[(j.output, j.join)] = joined + (missed if j.type != "INNER" else 0)
        if j.repartition is not None and j.rekeyed_from is not None:
            out[(j.repartition, j.join)] = totals["records"].get(j.rekeyed_from, 0)
    counted = scrape.counters.get("written", {})  # the joins that write none, one or more per record read
    for facts in (*scrape.table_joins, *scrape.stream_joins):
        out[(facts.output, facts.join)] = sum(counted.get(facts.output, {}).values())
    for s in scrape.stream_joins:  # the stream agent's re-keys of its sides
        for topic in s.repartitions:
            out[(topic, s.join)] = sum(counted.get(topic, {}).values())
    return out


def _inputs_outputs(scrape: Scrape) -> Iterator[Metric]:
    counters = scrape.counters
    read_total = CounterMetricFamily(
        _name("records_read"), "Records processed per input topic and partition (stream records and table rows; "
        "dead letters are counted apart).", labels=["topic", "partition"])
    merged: dict[str, Counter[str]] = defaultdict(Counter)
    for group in ("records", "rows", "deleted"):
        for topic, by_partition in counters[group].items():
            merged[topic].update(by_partition)
    _per_partition(read_total, merged)
    yield read_total
    updates = CounterMetricFamily(_name("table_updates"), "Table rows loaded (upsert) or deleted (tombstone) per "
                                  "table topic and partition.", labels=["topic", "partition", "kind"])
    _per_partition(updates, counters["rows"], "upsert")
    _per_partition(updates, counters["deleted"], "delete")
    yield updates
    out = CounterMetricFamily(_name("records_written"), "Records each join queued to its output topic (and a "
                              "re-keyed join to its repartition topic): stream-table, table-table and windowed "
                              "stream-stream joins.", labels=["output", "join"])
    for (output, join), count in sorted(written(scrape).items()):
        out.add_metric([output, join], count)
    yield out
    dead = CounterMetricFamily(_name("dead_letters"), "Records sent to the dead-letter topic, by source topic and "
                               "partition.", labels=["topic", "partition"])
    _per_partition(dead, counters["dead_lettered"])
    yield dead
    reasons = CounterMetricFamily(_name("dead_letters_by_reason"), "Records sent to the dead-letter topic, by source "
                                  "topic and reason: undecodable, timestamp_refused, too_large, broker_refused, "
                                  "processing_error (the letter's header has the sentence).", labels=["topic", "reason"])
    for topic, by_reason in sorted(counters.get("dead_letter_reasons", {}).items()):
        for reason, count in sorted(by_reason.items()):
            reasons.add_metric([topic, reason], count)
    yield reasons


def _state(scrape: Scrape) -> Iterator[Metric]:
    if scrape.ready is not None:
        yield GaugeMetricFamily(_name("ready"), "1 while the worker holds its partitions with its tables recovered "
                                "(no rebalance under way).", value=int(scrape.ready))
    if scrape.health is not None:
        kafka = scrape.health["kafka"]
        # kafka.reachable, not healthy: /health is also unhealthy while an output cannot be written
        yield GaugeMetricFamily(_name("kafka_reachable"), "1 while a broker has answered within "
                                "kafka_unreachable_timeout (what /health's kafka.reachable says).",
                                value=int(bool(kafka["reachable"])))
        yield GaugeMetricFamily(_name("kafka_seconds_without_answer"), "Seconds since a broker last answered the "
                                "worker's probe.", value=float(kafka["seconds_without_answer"]))
    lag = GaugeMetricFamily(_name("consumer_lag_records"), "Records between the group's committed offset and the end "
                            "of the log, per assigned input partition.", labels=["topic", "partition"])
    for (topic, partition), count in sorted(scrape.lag.items()):
        lag.add_metric([topic, str(partition)], count)
    yield lag
    restore = GaugeMetricFamily(_name("restore_remaining_records"), "Changelog records left to restore per table "
                                "partition (replica: active or standby).", labels=["topic", "partition", "replica"])
    for (topic, partition, kind), count in sorted(scrape.restore.items()):
        restore.add_metric([topic, str(partition), kind], count)
    yield restore
    rows = GaugeMetricFamily(_name("table_estimated_rows"), "Rows of each table partition this worker is active for, "
                             "as RocksDB estimates them (estimate-num-keys: an overwrite counts until a compaction).",
                             labels=["table", "partition"])
    for (table, partition), count in sorted(scrape.table_rows.items()):
        rows.add_metric([table, str(partition)], count)
    yield rows
    joins = {store: j.join for j in scrape.stream_joins for store in j.stores}
    held = GaugeMetricFamily(_name("window_store_bytes"), "Bytes of each store of a windowed stream-stream join (a "
                             "side's window store, or the outer store of the unmatched records waiting for their "
                             "window to close) per partition this worker is active for, in RocksDB's memtables "
                             "(part=memtables: memory) and live SST files (part=sst_files: disk).",
                             labels=["join", "store", "partition", "part"])
    for (store, partition, part), count in sorted(scrape.window_bytes.items()):
        held.add_metric([joins.get(store, ""), store, str(partition), part], count)
    yield held


def _verdicts(scrape: Scrape) -> Iterator[Metric]:
    guard = GaugeMetricFamily(_name("guard_check_ok"), "The co-partitioning guard's latest verdict per check: 1 ok, "
                              "0 problem (a check that could not run yet has no sample).", labels=["check"])
    for check in (scrape.guard or {}).get("checks", []):
        if check.get("ok") is not None:
            guard.add_metric([check["name"]], int(bool(check["ok"])))
    yield guard
    by_pair = {j.join: j for j in scrape.joins}
    pair_ok = GaugeMetricFamily(_name("doctor_pair_ok"), "The doctor's latest verdict per joined pair: 1 sound, "
                                "0 broken (undecided: no sample).", labels=["join", "stream", "table_topic"])
    miss = GaugeMetricFamily(_name("doctor_predicted_miss_ratio"), "Share of the sampled keys both topics hold that a "
                             "partition-local join misses, per join (the doctor's latest sample).", labels=["join"])
    apart = GaugeMetricFamily(_name("doctor_keys_apart_ratio"), "Share of the sampled keys both topics hold that sit "
                              "in different partitions of the two, per join (the doctor's latest sample).",
                              labels=["join"])
    for pair in (scrape.doctor or {}).get("pairs", []):
        for source in pair.get("joined_by", []):
            name = source.removeprefix("worker:")
            if not source.startswith("worker:") or name not in by_pair:
                continue
            if pair["status"] in ("sound", "broken"):
                join = by_pair[name]
                pair_ok.add_metric([name, join.stream, join.table_topic], int(pair["status"] == "sound"))
            if pair.get("miss_rate") is not None:
                miss.add_metric([name], pair["miss_rate"])
            if pair.get("partition_miss_rate") is not None:
                apart.add_metric([name], pair["partition_miss_rate"])
    yield pair_ok
    yield miss
    yield apart
    yield CounterMetricFamily(_name("copartition_check_runs"), "Runs of the guard and the doctor since the worker "
                              "started (after the guard's start-up check).", value=scrape.checks_run)
    if scrape.checks_finished is not None:
        yield GaugeMetricFamily(_name("copartition_check_last_run_timestamp_seconds"), "When the guard and the doctor "
                                "last finished (Unix time).", value=scrape.checks_finished)


def _commits(scrape: Scrape) -> Iterator[Metric]:
    if scrape.rebalances is not None:
        yield CounterMetricFamily(_name("rebalances"), "Consumer-group rebalances this worker took part in (the first "
                                  "assignment included).", value=scrape.rebalances)
    commits = CounterMetricFamily(_name("commits"), "Commits that made progress durable: offset commits that moved a "
                                  "committed offset (kind=offsets), exactly-once transactions committed "
                                  "(kind=transaction).", labels=["kind"])
    if scrape.instruments is not None:
        commits.add_metric(["offsets"], scrape.instruments.commits)
    if scrape.transactions is not None:
        commits.add_metric(["transaction"], scrape.transactions.get("committed", 0))
    yield commits
    failed = CounterMetricFamily(_name("revoke_commits_failed"), "Rebalances whose commit on revoke failed, so the "
                                 "partitions' next owner reads some records again: offsets left uncommitted "
                                 "(kind=offsets), a transaction not committed (kind=transaction).", labels=["kind"])
    if scrape.revoke_commits_failed is not None:
        failed.add_metric(["offsets"], scrape.revoke_commits_failed)
    if scrape.transactions is not None:
        failed.add_metric(["transaction"], scrape.transactions.get("revoke_failed", 0))
    yield failed
    counts = scrape.transactions
    if counts is not None:
        txns = CounterMetricFamily(_name("transactions"), "Exactly-once transactions ended, by result.",
                                   labels=["result"])
        for result in ("committed", "aborted"):
            txns.add_metric([result], counts.get(result, 0))
        yield txns
        yield CounterMetricFamily(_name("transaction_partitions_fenced"), "Stream partitions this worker fenced "
                                  "(InitProducerId) before reading them.", value=counts.get("fenced", 0))
        yield CounterMetricFamily(_name("transaction_producer_fenced"), "Times a partition's producer was fenced and "
                                  "its open work dropped (read again).", value=counts.get("producer_fenced", 0))


def _instruments(instruments: Instruments) -> Iterator[Metric]:
    placement = instruments.placement
    labels = ["topic", "partition"]
    checked = CounterMetricFamily(_name("keyed_records_checked"), "Keyed records of the joined topics whose partition "
                                  "was checked against the declared partitioner.", labels=labels)
    misplaced = CounterMetricFamily(_name("misplaced_keys"), "Keyed records that arrived in another partition than "
                                    "the declared partitioner picks for their key: a join looks them up in the wrong "
                                    "partition.", labels=labels)
    for family, groups in ((checked, placement.checked), (misplaced, placement.misplaced)):
        for topic, by_partition in sorted(groups.items()):
            for partition, count in sorted(by_partition.items()):
                family.add_metric([topic, str(partition)], count)
    yield checked
    yield misplaced
    yield from instruments.histograms()


# -- the collector and the route --------------------------------------------------------------------------------


class StreamappCollector:
    """A prometheus_client collector that reads ``app`` at each scrape (see the module's docstring)."""

    def __init__(self, app: StreamappApp, instruments: Instruments | None = None) -> None:
        self.app, self.instruments = app, instruments

    def collect(self) -> Iterator[Metric]:
        return families(read(self.app, self.instruments))


def registry_for(app: StreamappApp) -> CollectorRegistry:
    """A registry of its own per app (never the process-wide default: a test builds several apps)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StreamappCollector(app, instrument(app)))
    return registry


def encoder_for(accept: str) -> tuple[Callable[[CollectorRegistry], bytes], str]:
    """prometheus_client's choice of format for an ``Accept`` header; the text format when it cannot read the
    header (``version=abc``: it compared a string with a number, a 500 otherwise)."""
    try:
        return choose_encoder(accept)
    except (TypeError, ValueError):
        return choose_encoder("")


class MetricsView(web.View):
    """``GET /metrics``: Prometheus' text format (OpenMetrics when asked), behind the same bearer token as every route.

    Built once per app when the route is registered, which installs the :class:`Instruments`.
    """

    def __init__(self, app: Any, web: Any) -> None:
        super().__init__(app, web)
        self.registry = registry_for(app)

    async def get(self, request: web.Request) -> web.Response:
        encode, content_type = encoder_for(request.headers.get("Accept", ""))
        return self.bytes(encode(self.registry), headers={"Content-Type": content_type})


def _version() -> str:
    """streamapp's installed version (the package root's ``__version__``, read without importing the root)."""
    try:
        return metadata.version("streamapp")
    except metadata.PackageNotFoundError:
        return "unknown"
