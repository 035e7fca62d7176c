"""One ``streamapp produce`` run: check the endpoints, create the topics, produce, wait for the joins, report.

The reports read every topic back to its end and compare, scoped to this run's
users so an earlier run left in the topics cannot blur the numbers.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..kafka.admin import ensure_topics, group_active
from ..kafka.reader import key_partitions, read_topic
from ..kafka.security import ksqldb_http_options
from ..model.records import Order, User
from ..settings import Settings
from .data import make_orders, make_users
from .endpoints import Endpoint, check_http, check_kafka, validate_http_url
from .ksql_equivalent import application_id as streams_application_id
from .ksqldb import DemoObjects, KsqlDBClient, demo_statements
from .producer import Progress, ProduceError, insert_orders, produce_orders, produce_users
from .report import (FAUST, KAFKA_STREAMS, KSQLDB, JoinResults, MatchReport, join_results, join_rows_from_columns,
                     join_title, match_partitions)
from .waits import TableWait, wait_for_keys, wait_for_ksqldb_table, wait_for_tables


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
    orders_via: str
    endpoints: list[Endpoint]
    users: list[User]
    orders: list[Order]
    worker_running: bool
    seed: int | None = None
    #: ``streamapp ksql-equivalent`` (ksqlDB's joins on Kafka Streams) was running: its joins are reported.
    streams_running: bool = False
    #: The waits for each engine's tables before the orders went out (an incomplete one is in ``notes`` too).
    waits: list[TableWait] = field(default_factory=list)
    reports: list[tuple[str, MatchReport]] = field(default_factory=list)
    joins: list[tuple[str, JoinResults]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "partitioner": self.partitioner,
            "orders_via": self.orders_via,
            "messages": len(self.users),
            "seed": self.seed,
            "endpoints": [e.to_dict() for e in self.endpoints],
            "worker_running": self.worker_running,
            "streams_running": self.streams_running,
            "waits": [w.to_dict() for w in self.waits],
            "reports": {title: r.to_dict() for title, r in self.reports},
            "joins": {title: j.to_dict() for title, j in self.joins},
            "notes": self.notes,
        }


def _only(partitions: dict[str, int], keys: Iterable[str]) -> dict[str, int]:
    return {k: partitions[k] for k in keys if k in partitions}


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


def run(settings: Settings, options: ProduceOptions, progress: Progress | None = None) -> ProduceRun:
    """Steps 1-5 of the demo: endpoints, topics (+ ksqlDB objects), produce, wait for the joins, report."""
    endpoints, ksql = check_endpoints(settings, options)
    try:
        bootstrap = settings.kafka
        ensure_topics(bootstrap, {settings.users_topic: settings.partitions, settings.orders_topic: settings.partitions},
                      settings.replication_factor)
        notes: list[str] = []
        if ksql is not None:
            ksql.execute_all(demo_statements(settings))
            notes.append("ksqlDB: the five demo objects exist")
        rng = random.Random(options.seed)
        users = make_users(options.messages, rng)
        ids = [u.user_id for u in users]
        worker = group_active(bootstrap, settings.app_id)
        # Without ksqlDB, the same joins may run on Kafka Streams (streamapp ksql-equivalent), into ksqlDB's topics.
        streams = ksql is None and group_active(bootstrap, streams_application_id(settings))
        produce_users(bootstrap, settings.users_topic, users, options.partitioner, options.client_id, progress)
        waits = wait_for_tables(settings, ids, options.wait, FAUST) if worker else []
        if ksql is not None or streams:
            waits += wait_for_ksqldb_table(settings, ids, options.wait, KSQLDB if ksql is not None else KAFKA_STREAMS)
        notes += [wait.line() for wait in waits if not wait.complete]
        orders = make_orders(users, rng, int(time.time() * 1000))
        if ksql is not None:
            insert_orders(ksql, DemoObjects.from_settings(settings).orders_stream, orders, progress)
            orders_via = "ksqlDB /inserts-stream (murmur2)"
        else:
            produce_orders(bootstrap, settings.orders_topic, orders, options.client_id, progress)
            orders_via = "confluent-kafka partitioner=murmur2 (Java-compatible)"
        result = ProduceRun(options.partitioner, orders_via, endpoints, users, orders, worker, options.seed, streams,
                            waits=waits, notes=notes)
        orders_partitions = _only(key_partitions(wait_for_keys(bootstrap, settings.orders_topic, ids, options.wait)), ids)
        users_partitions = _only(key_partitions(read_topic(bootstrap, settings.users_topic)), ids)
        result.reports.append(("Direct", match_partitions(settings.users_topic, users_partitions,
                                                          settings.orders_topic, orders_partitions)))
        _report_worker(result, settings, ids, orders_partitions, options.wait)
        if ksql is not None:
            _report_ksqldb(result, settings, ksql, ids, orders, orders_partitions, options.wait)
        if streams:
            _report_streams(result, settings, ids, orders_partitions, options.wait)
        return result
    finally:
        if ksql is not None:
            ksql.close()


def _report_worker(result: ProduceRun, settings: Settings, ids: list[str], orders: dict[str, int], wait: float) -> None:
    bootstrap = settings.kafka
    if not result.worker_running:
        result.notes.append(
            f"No Faust worker is running (consumer group {settings.app_id!r} has no members): "
            f"the repartitioned users topic {settings.users_repartition_topic} and the Faust join results are not reported"
        )
        return
    repartitioned = _only(key_partitions(wait_for_keys(bootstrap, settings.users_repartition_topic, ids, 0)), ids)
    result.reports.append(("Repartitioned (Faust worker)", match_partitions(
        settings.users_repartition_topic, repartitioned, settings.orders_topic, orders)))
    for join, topic in (("direct", settings.merged_topic), ("repartitioned", settings.merged_repartition_topic)):
        result.joins.append((join_title(FAUST, join), join_results(topic, wait_for_keys(bootstrap, topic, ids, wait), ids)))


def _report_streams(result: ProduceRun, settings: Settings, ids: list[str], orders: dict[str, int], wait: float) -> None:
    """The Kafka Streams program's repartitioned users and joins, read from the topics ksqlDB would write."""
    bootstrap, topic = settings.kafka, settings.ksqldb_users_repartition_topic
    repartitioned = _only(key_partitions(wait_for_keys(bootstrap, topic, ids, 0)), ids)
    result.reports.append((f"Repartitioned ({KAFKA_STREAMS})", match_partitions(
        topic, repartitioned, settings.orders_topic, orders)))
    for join, topic in (("direct", settings.ksqldb_merged_topic),
                        ("repartitioned", settings.ksqldb_merged_repartition_topic)):
        result.joins.append((join_title(KAFKA_STREAMS, join),
                             join_results(topic, wait_for_keys(bootstrap, topic, ids, wait), ids)))


def _report_ksqldb(result: ProduceRun, settings: Settings, ksql: KsqlDBClient, ids: list[str],
                   orders: Sequence[Order], orders_partitions: dict[str, int], wait: float) -> None:
    objects = DemoObjects.from_settings(settings)
    topic = objects.users_repartition_topic
    repartitioned = _only(key_partitions(wait_for_keys(settings.kafka, topic, ids, wait)), ids)
    result.reports.append(("Repartitioned (ksqlDB)", match_partitions(topic, repartitioned,
                                                                      settings.orders_topic, orders_partitions)))
    since = min(o.ts for o in orders)
    wanted = set(ids)
    for title, stream in ((join_title(KSQLDB, "direct"), objects.merged_stream),
                          (join_title(KSQLDB, "repartitioned"), objects.merged_repartition_stream)):
        answer = ksql.query(f"SELECT * FROM {stream} WHERE TS >= {since} EMIT CHANGES LIMIT {len(orders)};", wait)
        rows = [row for row in answer.rows if str(dict(zip(answer.columns, row)).get("USER_ID")) in wanted]
        result.joins.append((title, join_rows_from_columns(f"push query on {stream}", answer.columns, rows, len(ids))))
