"""The demo producer: users with librdkafka's partitioner, orders the way ksqlDB would write them.

Users go through confluent-kafka with ``partitioner=<name>``, so the partition is
librdkafka's own choice, not ours.  Orders go through ksqlDB (``INSERT INTO``) when
it is reachable, otherwise through confluent-kafka with ``partitioner=murmur2``,
which is bit-for-bit the Java producer's keyed partitioner.  The reports then
read every topic back to its end and compare, scoped to this run's users so an
earlier run left in the topics cannot blur the numbers.
"""
from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from ..errors import StreamappError
from ..kafka.admin import TopicError, describe, ensure_topics, wait_listed
from ..kafka.reader import Record, TopicReader, key_partitions, read_topic
from ..model.records import Order, User
from ..settings import Settings
from .data import key, make_orders, make_users, order_fields, order_value, user_value
from .endpoints import Endpoint, check_http, check_kafka, validate_http_url
from .ksqldb import DemoObjects, KsqlDBClient, demo_statements
from .report import JoinResults, MatchReport, join_results, join_rows_from_columns, match_partitions

logger = logging.getLogger(__name__)
Progress = Callable[[int], None]
JAVA_COMPATIBLE = "murmur2"
ACTIVE_GROUP_STATES = ("STABLE", "PREPARING_REBALANCING", "COMPLETING_REBALANCING")


class ProduceError(StreamappError):
    """Records could not be delivered, or the cluster is unreachable; the message says which."""


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
            "reports": {title: r.to_dict() for title, r in self.reports},
            "joins": {title: j.to_dict() for title, j in self.joins},
            "notes": self.notes,
        }


def _deliver(producer: Producer, topic: str, records: Iterable[tuple[bytes, bytes, int | None]],
             progress: Progress | None) -> dict[str, int]:
    delivered: dict[str, int] = {}
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(f"{msg.key()!r}: {err}")  # type: ignore[attr-defined]
        else:
            delivered[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]
            logger.debug("Message key %r delivered to topic %r, partition #%d, offset #%d",
                         msg.key(), msg.topic(), msg.partition(), msg.offset())  # type: ignore[attr-defined]
        if progress:
            progress(1)

    for record_key, value, ts in records:
        while True:
            try:
                producer.produce(topic, key=record_key, value=value, timestamp=ts or 0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(30)
    if failures or left:
        raise ProduceError(f"{len(failures) + left} records to {topic} were not delivered: {'; '.join(failures[:3])}")
    return delivered


def _producer(bootstrap: str, client_id: str, partitioner: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "partitioner": partitioner,
                     "linger.ms": 5})


def produce_users(bootstrap: str, topic: str, users: Sequence[User], partitioner: str, client_id: str,
                  progress: Progress | None = None) -> dict[str, int]:
    """Produce with librdkafka's own ``partitioner``; return user_id -> partition from the delivery reports."""
    records = ((key(u), user_value(u), None) for u in users)
    return _deliver(_producer(bootstrap, client_id, partitioner), topic, records, progress)


def produce_orders(bootstrap: str, topic: str, orders: Sequence[Order], client_id: str,
                   progress: Progress | None = None) -> dict[str, int]:
    """Produce as a Java client would (murmur2 over all partitions), record timestamp = ``ts``."""
    records = ((key(o), order_value(o), o.ts) for o in orders)
    return _deliver(_producer(bootstrap, client_id, JAVA_COMPATIBLE), topic, records, progress)


def insert_orders(client: KsqlDBClient, stream: str, orders: Sequence[Order], progress: Progress | None = None) -> None:
    """Every order into ksqlDB's stream in one ``/inserts-stream`` request: ksqlDB partitions them (murmur2)."""
    client.insert_rows(stream, [{"user_id": order.user_id, **order_fields(order)} for order in orders])
    if progress:
        progress(len(orders))


def group_active(bootstrap: str, group_id: str) -> bool:
    """True when the consumer group has a live member (a running worker)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    try:
        described = admin.describe_consumer_groups([group_id])[group_id].result(10)
    except Exception:
        return False
    return bool(described.members) or described.state.name in ACTIVE_GROUP_STATES


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
            if wanted <= {(r.key or b"").decode("utf-8", "replace") for r in records}:
                return records
            left = deadline - time.monotonic()
            if left <= 0:
                return records
            records += reader.read(min(left, 1.0))


def table_changelogs(settings: Settings) -> list[str]:
    """Changelogs of the worker's two tables (named ``users`` and ``users_repartition`` in streamapp/tables.py).

    A key in a changelog means the table holds it, which is what a join needs
    before the order arrives.
    """
    return [f"{settings.app_id}-users-changelog", f"{settings.app_id}-users_repartition-changelog"]


def wait_for_tables(settings: Settings, ids: Sequence[str], timeout: float) -> None:
    """Wait until the worker has loaded this run's users into both tables (or ``timeout`` passes)."""
    deadline = time.monotonic() + timeout
    for topic in (settings.users_repartition_topic, *table_changelogs(settings)):
        left = max(deadline - time.monotonic(), 0)
        if describe(settings.bootstrap_servers, [topic]):
            wait_for_keys(settings.bootstrap_servers, topic, ids, left)


def wait_for_ksqldb_table(settings: Settings, ids: Sequence[str], timeout: float) -> None:
    """Wait until ksqlDB has written this run's users to its repartitioned table's topic (its table is loaded)."""
    topic = DemoObjects.from_settings(settings).users_repartition_topic
    if describe(settings.bootstrap_servers, [topic]):
        wait_for_keys(settings.bootstrap_servers, topic, ids, timeout)


def _only(partitions: dict[str, int], keys: Iterable[str]) -> dict[str, int]:
    return {k: partitions[k] for k in keys if k in partitions}


def check_endpoints(settings: Settings, options: ProduceOptions) -> tuple[list[Endpoint], KsqlDBClient | None]:
    """Kafka must answer; Control Center and ksqlDB are optional and reported."""
    c3 = validate_http_url("c3_endpoint", options.c3_endpoint) if options.c3_endpoint else ""
    ksqldb = validate_http_url("ksqldb_endpoint", settings.ksqldb_endpoint) if settings.ksqldb_endpoint else ""
    endpoints = [check_kafka(settings.bootstrap_servers)]
    if not endpoints[0].reachable:
        raise ProduceError(f"bootstrap_server={settings.bootstrap_servers!r} is unreachable: no Metadata answer")
    if c3:
        endpoints.append(check_http("Control Center", c3))
    client = None
    if ksqldb:
        endpoint = check_http("ksqlDB", ksqldb, "/info")
        endpoints.append(endpoint)
        client = KsqlDBClient(ksqldb) if endpoint.reachable else None
    return endpoints, client


def run(settings: Settings, options: ProduceOptions, progress: Progress | None = None) -> ProduceRun:
    """Steps 1-5 of the demo: endpoints, topics (+ ksqlDB objects), produce, wait for the joins, report."""
    endpoints, ksql = check_endpoints(settings, options)
    bootstrap = settings.bootstrap_servers
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
    produce_users(bootstrap, settings.users_topic, users, options.partitioner, options.client_id, progress)
    if worker:
        wait_for_tables(settings, ids, options.wait)
    if ksql is not None:
        wait_for_ksqldb_table(settings, ids, options.wait)
    orders = make_orders(users, rng, int(time.time() * 1000))
    if ksql is not None:
        insert_orders(ksql, DemoObjects.from_settings(settings).orders_stream, orders, progress)
        orders_via = "ksqlDB /inserts-stream (murmur2)"
    else:
        produce_orders(bootstrap, settings.orders_topic, orders, options.client_id, progress)
        orders_via = "confluent-kafka partitioner=murmur2 (Java-compatible)"
    result = ProduceRun(options.partitioner, orders_via, endpoints, users, orders, worker, options.seed, notes=notes)
    orders_partitions = _only(key_partitions(wait_for_keys(bootstrap, settings.orders_topic, ids, options.wait)), ids)
    users_partitions = _only(key_partitions(read_topic(bootstrap, settings.users_topic)), ids)
    result.reports.append(("Direct", match_partitions(settings.users_topic, users_partitions,
                                                      settings.orders_topic, orders_partitions)))
    _report_worker(result, settings, ids, orders_partitions, options.wait)
    if ksql is not None:
        _report_ksqldb(result, settings, ksql, ids, orders, orders_partitions, options.wait)
    return result


def _report_worker(result: ProduceRun, settings: Settings, ids: list[str], orders: dict[str, int], wait: float) -> None:
    bootstrap = settings.bootstrap_servers
    if not result.worker_running:
        result.notes.append(
            f"No Faust worker is running (consumer group {settings.app_id!r} has no members): "
            f"the repartitioned users topic {settings.users_repartition_topic} and the Faust join results are not reported"
        )
        return
    repartitioned = _only(key_partitions(wait_for_keys(bootstrap, settings.users_repartition_topic, ids, 0)), ids)
    result.reports.append(("Repartitioned (Faust worker)", match_partitions(
        settings.users_repartition_topic, repartitioned, settings.orders_topic, orders)))
    for title, topic in (("Faust join, direct", settings.merged_topic),
                         ("Faust join, repartitioned", settings.merged_repartition_topic)):
        result.joins.append((title, join_results(topic, wait_for_keys(bootstrap, topic, ids, wait), ids)))


def _report_ksqldb(result: ProduceRun, settings: Settings, ksql: KsqlDBClient, ids: list[str],
                   orders: Sequence[Order], orders_partitions: dict[str, int], wait: float) -> None:
    objects = DemoObjects.from_settings(settings)
    topic = objects.users_repartition_topic
    repartitioned = _only(key_partitions(wait_for_keys(settings.bootstrap_servers, topic, ids, wait)), ids)
    result.reports.append(("Repartitioned (ksqlDB)", match_partitions(topic, repartitioned,
                                                                      settings.orders_topic, orders_partitions)))
    since = min(o.ts for o in orders)
    wanted = set(ids)
    for title, stream in (("ksqlDB join, direct", objects.merged_stream),
                          ("ksqlDB join, repartitioned", objects.merged_repartition_stream)):
        answer = ksql.query(f"SELECT * FROM {stream} WHERE TS >= {since} EMIT CHANGES LIMIT {len(orders)};", wait)
        rows = [row for row in answer.rows if str(dict(zip(answer.columns, row)).get("USER_ID")) in wanted]
        result.joins.append((title, join_rows_from_columns(f"push query on {stream}", answer.columns, rows, len(ids))))
