"""One ``streamapp produce`` run: check the endpoints, create the topics, produce, wait for the joins, report.

The table and the stream are the declared ones (:mod:`streamapp.demo.shape`: the
seed's by default), their records generated from the plan (:mod:`streamapp.demo.data`).
The reports read every topic back to its end and compare, scoped to this run's keys
so an earlier run left in the topics cannot blur the numbers.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..kafka.admin import ensure_topics, group_active
from ..kafka.reader import Record, read_topic
from ..kafka.security import ksqldb_http_options
from ..settings import Settings
from ..sql.formats import Codec
from .data import Row, encode, key_text, make_stream, make_table
from .endpoints import Endpoint, check_http, check_kafka, validate_http_url
from ..kafka.ksql_equivalent import query_application_id
from .ksqldb import KsqlDBClient, ksqldb_names, ksqldb_statements
from .producer import Progress, ProduceError, insert_rows, produce_stream, produce_table
from .report import (FAUST, KAFKA_STREAMS, KSQLDB, Columns, JoinResults, MatchReport, join_results,
                     join_rows_from_columns, join_title, match_partitions)
from .shape import DemoJoin, DemoShape, shape
from .waits import TableWait, wait_for_copies, wait_for_keys, wait_for_tables


@dataclass(frozen=True)
class ProduceOptions:
    partitioner: str = "murmur2_random"
    messages: int = 10
    client_id: str = "streamapp"
    c3_endpoint: str = ""
    seed: int | None = None
    wait: float = 30.0


@dataclass
class ProduceRun:
    """Everything one ``streamapp produce`` did and found, for rendering or ``--json``."""

    partitioner: str
    stream_via: str
    endpoints: list[Endpoint]
    shape: DemoShape
    table: tuple[Row, ...]
    stream: tuple[Row, ...]
    worker_running: bool
    seed: int | None = None
    #: ``streamapp ksql-equivalent`` (ksqlDB's joins on Kafka Streams) was running: its joins are reported.
    streams_running: bool = False
    #: The waits for each engine's tables before the stream went out (an incomplete one is in ``notes`` too).
    waits: list[TableWait] = field(default_factory=list)
    reports: list[tuple[str, MatchReport]] = field(default_factory=list)
    joins: list[tuple[str, JoinResults]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def labels(self) -> tuple[str, ...]:
        """The joins' labels (``direct``, ``repartitioned``), in the plan's order."""
        return tuple(join.label for join in self.shape.joins)

    def to_dict(self) -> dict[str, object]:
        return {
            "partitioner": self.partitioner,
            "table": self.shape.table.name,
            "stream": self.shape.stream.name,
            "key_column": self.shape.key_column,
            "stream_via": self.stream_via,
            "messages": len(self.table),
            "seed": self.seed,
            "endpoints": [e.to_dict() for e in self.endpoints],
            "worker_running": self.worker_running,
            "streams_running": self.streams_running,
            "waits": [w.to_dict() for w in self.waits],
            "reports": {title: r.to_dict() for title, r in self.reports},
            "joins": {title: j.to_dict() for title, j in self.joins},
            "notes": self.notes,
        }


def check_endpoints(settings: Settings, options: ProduceOptions) -> tuple[list[Endpoint], KsqlDBClient | None]:
    """Kafka must answer; Control Center and ksqlDB are optional and reported."""
    c3 = validate_http_url("c3_endpoint", options.c3_endpoint) if options.c3_endpoint else ""
    ksqldb = validate_http_url("ksqldb_endpoint", settings.ksqldb_endpoint) if settings.ksqldb_endpoint else ""
    endpoints = [check_kafka(settings.kafka)]
    if not endpoints[0].reachable:
        raise ProduceError(f"bootstrap_server={settings.bootstrap_servers!r} is unreachable: no Metadata answer")
    if c3:
        endpoints.append(check_http("Control Center", c3))
    client = None
    if ksqldb:
        endpoint = check_http("ksqlDB", ksqldb, "/info", **ksqldb_http_options(settings))
        endpoints.append(endpoint)
        client = KsqlDBClient(ksqldb, **ksqldb_http_options(settings)) if endpoint.reachable else None
    return endpoints, client


def _partitions(records: Iterable[Record], wanted: Mapping[bytes | None, str]) -> dict[str, int]:
    """Key (as shown) -> partition of its latest record, for this run's keys only."""
    found: dict[str, int] = {}
    for record in sorted(records, key=lambda r: (r.timestamp, r.offset)):
        if record.key in wanted:
            found[wanted[record.key]] = record.partition
    return found


def _wanted(codec: Codec, keys: Iterable[Any]) -> dict[bytes | None, str]:
    """Each key's bytes as ``codec`` writes them -> the key as a report shows it."""
    return {codec.encode_key(key): key_text(key) for key in keys}


def columns_of(demo: DemoShape, join: DemoJoin) -> Columns:
    return Columns(join.key_column, demo.shown_stream_columns, join.table_columns[:len(demo.shown_table_columns)],
                   join.table_columns)


def streams_active(settings: Settings, demo: DemoShape) -> bool:
    """Kafka Streams (``streamapp ksql-equivalent``) runs the first reported join's query."""
    return group_active(settings.kafka, query_application_id(settings, demo.joins[0].query.name))


def run(settings: Settings, options: ProduceOptions, progress: Progress | None = None) -> ProduceRun:
    """Steps 1-5 of the demo: endpoints, topics (+ ksqlDB objects), produce, wait for the joins, report."""
    demo = shape(settings)
    endpoints, ksql = check_endpoints(settings, options)
    try:
        bootstrap = settings.kafka
        ensure_topics(bootstrap, {demo.table_topic: settings.partitions, demo.stream_topic: settings.partitions},
                      settings.replication_factor)
        notes: list[str] = []
        if ksql is not None:
            statements = ksqldb_statements(settings)
            ksql.execute_all(statements)
            notes.append(f"ksqlDB: the {len(statements)} declared objects exist")
        rng = random.Random(options.seed)
        table = make_table(demo, options.messages, rng)
        keys = [row.key for row in table]
        worker = group_active(bootstrap, settings.app_id)
        # Without ksqlDB, the same joins may run on Kafka Streams (streamapp ksql-equivalent), into ksqlDB's topics.
        streams = ksql is None and streams_active(settings, demo)
        produce_table(bootstrap, demo.table_topic, encode(demo.table_codec, table), options.partitioner,
                      options.client_id, progress)
        waits = wait_for_tables(settings, demo, keys, options.wait, FAUST) if worker else []
        if ksql is not None or streams:
            waits += wait_for_copies(settings, demo, keys, options.wait, KSQLDB if ksql is not None else KAFKA_STREAMS)
        notes += [wait.line() for wait in waits if not wait.complete]
        stream = make_stream(demo, table, rng, int(time.time() * 1000))
        if ksql is not None:
            key = demo.stream.key_columns[0].name if demo.stream.key_columns else None
            insert_rows(ksql, ksqldb_names(settings)[demo.stream.name], key, stream, progress)
            stream_via = "ksqlDB /inserts-stream (murmur2)"
        else:
            produce_stream(bootstrap, demo.stream_topic, encode(demo.stream_codec, stream), options.client_id, progress)
            stream_via = "confluent-kafka partitioner=murmur2 (Java-compatible)"
        result = ProduceRun(options.partitioner, stream_via, endpoints, demo, table, stream, worker, options.seed,
                            streams, waits=waits, notes=notes)
        # each stream record joins its table row's key; its own key is that key, or one of its own
        stream_keys = {demo.stream_codec.encode_key(record.key): key_text(row.key) for record, row in zip(stream, table)}
        if demo.stream.key_columns:
            stream_partitions = _partitions(wait_for_keys(bootstrap, demo.stream_topic, stream_keys, options.wait),
                                            stream_keys)
        else:  # a keyless stream's records go to any partition: only its joins (which re-key it) say where they went
            stream_partitions = {}
            result.notes.append(f"{demo.stream.name} has no key: its records' partitions are not compared")
        table_keys = _wanted(demo.table_codec, keys)
        table_partitions = _partitions(read_topic(bootstrap, demo.table_topic), table_keys)
        result.reports.append(("Direct", match_partitions(demo.table_topic, table_partitions,
                                                          demo.stream_topic, stream_partitions)))
        if result.worker_running:
            _report_topics(result, settings, FAUST, "Faust worker", stream_partitions, options.wait)
        else:
            result.notes.append(
                f"No Faust worker is running (consumer group {settings.app_id!r} has no members): its copies of "
                f"{demo.table_topic} ({', '.join(c.worker_topic for c in demo.copies) or 'none'}) and its joins are "
                f"not reported")
        if ksql is not None:
            _report_ksqldb(result, settings, ksql, stream_partitions, options.wait)
        if streams:
            _report_topics(result, settings, KAFKA_STREAMS, KAFKA_STREAMS, stream_partitions, options.wait)
        return result
    finally:
        if ksql is not None:
            ksql.close()


def _report_copies(result: ProduceRun, settings: Settings, engine: str, topics: list[str],
                   stream_partitions: dict[str, int], wait: float) -> None:
    """Each copy of the table (the repartition through murmur2) against the stream, as ``engine`` wrote it."""
    demo, keys = result.shape, [row.key for row in result.table]
    for copy, topic in zip(demo.copies, topics):
        wanted = _wanted(Codec(copy.source), keys)
        copied = _partitions(wait_for_keys(settings.kafka, topic, wanted, wait), wanted)
        title = f"Repartitioned ({engine})" if len(demo.copies) == 1 else f"Repartitioned {copy.source.name} ({engine})"
        result.reports.append((title, match_partitions(topic, copied, demo.stream_topic, stream_partitions)))


def _report_topics(result: ProduceRun, settings: Settings, engine: str, copies_engine: str,
                   stream_partitions: dict[str, int], wait: float) -> None:
    """An engine that writes topics (the Faust worker, Kafka Streams): its copies of the table, its joins."""
    demo, keys = result.shape, [row.key for row in result.table]
    faust = engine == FAUST
    # the copies were waited for before the stream went out
    _report_copies(result, settings, copies_engine, [c.worker_topic if faust else c.ksqldb_topic for c in demo.copies],
                   stream_partitions, 0)
    for join in demo.joins:
        topic = join.worker_topic if faust else join.ksqldb_topic
        codec = Codec(join.sink)
        wanted = _wanted(codec, keys)
        records = wait_for_keys(settings.kafka, topic, wanted, wait)
        result.joins.append((join_title(engine, join.label),
                             join_results(topic, records, wanted, codec, columns_of(demo, join))))


def _report_ksqldb(result: ProduceRun, settings: Settings, ksql: KsqlDBClient, stream_partitions: dict[str, int],
                   wait: float) -> None:
    demo, names = result.shape, ksqldb_names(settings)
    _report_copies(result, settings, KSQLDB, [c.ksqldb_topic for c in demo.copies], stream_partitions, wait)
    since = min(row.timestamp or 0 for row in result.stream)
    wanted = {key_text(row.key) for row in result.table}
    for join in demo.joins:
        sink = names[join.sink.name]
        answer = ksql.query(f"SELECT * FROM {sink} WHERE ROWTIME >= {since} EMIT CHANGES LIMIT {len(result.stream)};",
                            wait)
        key = join.key_column.upper()
        rows = [row for row in answer.rows if str(dict(zip([c.upper() for c in answer.columns], row)).get(key))
                in wanted]
        result.joins.append((join_title(KSQLDB, join.label), join_rows_from_columns(
            f"push query on {sink}", answer.columns, rows, len(wanted), columns_of(demo, join))))
