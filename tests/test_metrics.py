"""``GET /metrics``: the exposition from a counters snapshot (pure), then a real worker scraped with its token.

The pure tests build a :class:`~streamapp.worker.metrics.Scrape` by hand and read the text
format back with prometheus_client's own parser, so what is checked is what Prometheus reads.
The broker test runs ``faust -A streamapp worker`` on the session's broker: users written with
librdkafka's ``consistent`` (crc32) partitioner for some keys, orders with murmur2; its
``/metrics`` must agree with ``/stats`` and with the misplaced keys computed here.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import zlib
from collections import Counter as Tally
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Iterable, Sequence

import httpx
import pytest
from aiokafka.structs import ConsumerRecord
from confluent_kafka import Producer
from faust.types import TP
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from prometheus_client.exposition import generate_latest

from streamapp.kafka.broker import free_port
from streamapp.partitioners import get_partitioner
from streamapp.settings import Settings
from streamapp.model.records import RecordError
from streamapp.worker.counters import Counters
from streamapp.worker.tables import MISS_CAUSES, miss_cause
from streamapp.worker.metrics import (BATCH_BUCKETS, CommitSensor, Instruments, JoinFacts, Scrape, _Handlers,
                                      encoder_for, families, written)
from streamapp.worker.process import WorkerProcess
from streamapp.worker.transport import Handler
from streamapp.worker.web.security import is_public

from agents.dead_lettering import REASONS, OutputRefused, reason_kind
from workerkit import (
    background_scenario, fetched, isolated, murmur2_partition, produce, stats, wait_for_users, wait_until,
)

pytestmark = pytest.mark.long

DIRECT = JoinFacts("orders_merged", "out_merged", "orders", "users", "users", "LEFT")
COPIED = JoinFacts("orders_merged_repartition", "out_merged_rep", "orders", "users_repartition", "users_rep", "LEFT")
INNER = JoinFacts("payments_inner", "out_inner", "payments", "customers", "customers", "INNER")
REKEYED = JoinFacts("by_customer", "out_by_customer", "app-BY_CUSTOMER-Join-repartition", "customers", "customers",
                    "LEFT", rekeyed_from="payments_by_id", repartition="app-BY_CUSTOMER-Join-repartition")
#: Prometheus' metric name rule, and ours on top: every name is the app's.
NAME = re.compile(r"^streamapp_[a-z0-9_]+$")


def parsed(scrape: Scrape) -> dict[str, Any]:
    """The text format of ``scrape``, read back by prometheus_client's parser: family name -> family."""
    class Collector:
        def collect(self) -> Iterable[Any]:
            return families(scrape)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    return {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}


def samples(family: Any, suffix: str = "") -> dict[tuple[tuple[str, str], ...], float]:
    """A family's samples named ``family.name + suffix``, by their sorted labels."""
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples if s.name == family.name + suffix}


def counters() -> Counters:
    c = Counters()
    for _ in range(7):
        c.record_join("out_merged", 0, True)
    for _ in range(3):
        c.record_join("out_merged", 1, False)
    for _ in range(10):
        c.record_join("out_merged_rep", 0, True)
        c.record_read("orders", 0)
    c.record_join("out_inner", 2, False)
    c.record_join("out_inner", 2, True)
    c.record_miss("out_merged", 1, "copartition_violation")  # a miss whose cause the metrics measured
    c.record_miss("out_merged", 1, "null_key")
    for _ in range(4):
        c.record_read("payments_by_id", 3)
    c.record_row("users", 1, True)
    c.record_row("users", 1, True)
    c.record_row("users", 1, False)
    c.record_dead_letter("orders", 5, "undecodable")
    c.record_dead_letter("orders", 5, "too_large")
    c.record_dead_letter("orders", 4, "undecodable")
    return c


def guard_report() -> dict[str, Any]:
    return {"checks": [{"name": "partitions orders × users", "ok": True, "message": "6 and 6"},
                       {"name": "partitioner of users", "ok": False, "message": "crc32"},
                       {"name": "partitioner of orders", "ok": None, "message": "no keyed records yet"}]}


def doctor_report() -> dict[str, Any]:
    return {"pairs": [
        {"left": "orders", "right": "users", "joined_by": ["worker:orders_merged"], "status": "broken",
         "miss_rate": 0.8333, "partition_miss_rate": 0.8333},
        {"left": "orders", "right": "users_rep", "joined_by": ["worker:orders_merged_repartition"], "status": "sound",
         "miss_rate": 0.0, "partition_miss_rate": 0.0},
        {"left": "payments", "right": "customers", "joined_by": ["worker:payments_inner"], "status": "unknown",
         "miss_rate": None, "partition_miss_rate": None},
        {"left": "a", "right": "b", "joined_by": ["ksqldb:Q1"], "status": "broken", "miss_rate": 1.0,
         "partition_miss_rate": 1.0},
    ]}


def full_scrape(**changes: Any) -> Scrape:
    values: dict[str, Any] = dict(
        joins=[DIRECT, COPIED, INNER, REKEYED], counters=counters().snapshot(), app_id="app", partitioner="murmur2",
        guarantee="at_least_once", ready=True,
        health={"healthy": False, "kafka": {"reachable": False, "seconds_without_answer": 61.5}}, guard=guard_report(),
        doctor=doctor_report(), checks_run=2, checks_finished=1_700_000_000.5, rebalances=3,
        transactions={"committed": 5, "aborted": 1, "fenced": 6, "producer_fenced": 2}, revoke_commits_failed=0,
        lag={("orders", 0): 12}, restore={("app-users-changelog", 1, "active"): 40},
        table_rows={("users", 1): 1})
    values.update(changes)
    return Scrape(**values)


def test_lookups_are_labelled_by_join_output_partition_and_result() -> None:
    lookups = samples(parsed(full_scrape())["streamapp_join_lookups"], "_total")
    assert lookups == {  # a result never seen in a partition looked up in is 0, not absent
        (("join", "orders_merged"), ("output", "out_merged"), ("partition", "0"), ("result", "hit")): 7,
        (("join", "orders_merged"), ("output", "out_merged"), ("partition", "0"), ("result", "miss")): 0,
        (("join", "orders_merged"), ("output", "out_merged"), ("partition", "1"), ("result", "hit")): 0,
        (("join", "orders_merged"), ("output", "out_merged"), ("partition", "1"), ("result", "miss")): 5,
        (("join", "orders_merged_repartition"), ("output", "out_merged_rep"), ("partition", "0"),
         ("result", "hit")): 10,
        (("join", "orders_merged_repartition"), ("output", "out_merged_rep"), ("partition", "0"),
         ("result", "miss")): 0,
        (("join", "payments_inner"), ("output", "out_inner"), ("partition", "2"), ("result", "hit")): 1,
        (("join", "payments_inner"), ("output", "out_inner"), ("partition", "2"), ("result", "miss")): 1,
    }


def test_inputs_outputs_and_dead_letters() -> None:
    metrics = parsed(full_scrape())
    read = samples(metrics["streamapp_records_read"], "_total")
    assert read == {(("partition", "0"), ("topic", "orders")): 10, (("partition", "3"), ("topic", "payments_by_id")): 4,
                    (("partition", "1"), ("topic", "users")): 3}
    updates = samples(metrics["streamapp_table_updates"], "_total")
    assert updates == {(("kind", "upsert"), ("partition", "1"), ("topic", "users")): 2,
                       (("kind", "delete"), ("partition", "1"), ("topic", "users")): 1}
    out = samples(metrics["streamapp_records_written"], "_total")
    assert out == {
        (("join", "orders_merged"), ("output", "out_merged")): 12,  # a LEFT join writes its misses too
        (("join", "orders_merged_repartition"), ("output", "out_merged_rep")): 10,
        (("join", "payments_inner"), ("output", "out_inner")): 1,  # an INNER join writes its hits only
        (("join", "by_customer"), ("output", "out_by_customer")): 0,
        (("join", "by_customer"), ("output", "app-BY_CUSTOMER-Join-repartition")): 4,  # every record re-keyed
    }
    assert samples(metrics["streamapp_dead_letters"], "_total") == {(("partition", "4"), ("topic", "orders")): 1,
                                                                   (("partition", "5"), ("topic", "orders")): 2}
    assert samples(metrics["streamapp_dead_letters_by_reason"], "_total") == {
        (("reason", "too_large"), ("topic", "orders")): 1, (("reason", "undecodable"), ("topic", "orders")): 2}


def test_misses_by_cause_are_labelled_by_join_and_add_up_with_the_unmeasured() -> None:
    metrics = parsed(full_scrape())
    causes = samples(metrics["streamapp_join_misses"], "_total")
    assert causes == {(("cause", "copartition_violation"), ("join", "orders_merged"), ("output", "out_merged")): 1,
                      (("cause", "null_key"), ("join", "orders_merged"), ("output", "out_merged")): 1}
    # misses counted without a cause (record_join) are in the lookups, not here: only measured causes are exposed
    lookups = samples(metrics["streamapp_join_lookups"], "_total")
    assert sum(v for k, v in lookups.items() if ("result", "miss") in k and ("output", "out_merged") in k) == 5


def test_a_miss_cause_is_what_the_key_and_the_other_partitions_say() -> None:
    assert miss_cause(None, lambda key: True) == "null_key"
    assert miss_cause(b"u1", lambda key: key == b"u1") == "copartition_violation"
    assert miss_cause(b"u2", lambda key: key == b"u1") == "no_row"
    assert {miss_cause(k, lambda key: key == b"u1") for k in (None, b"u1", b"u2")} < set(MISS_CAUSES)


def test_a_dead_letters_reason_is_one_of_a_few_labels() -> None:
    assert reason_kind(RecordError("value is not valid JSON", "value")) == "undecodable"
    assert reason_kind(OutputRefused("too large", "value", "too_large")) == "too_large"
    assert reason_kind(TypeError("boom")) == "processing_error"
    assert {reason_kind(e) for e in (RecordError("x"), TypeError("y"))} <= set(REASONS)


def test_written_is_what_the_counters_say_each_join_queued() -> None:
    assert written(full_scrape())[("out_merged", "orders_merged")] == 12
    assert written(full_scrape(joins=[INNER]))[("out_inner", "payments_inner")] == 1


def test_state_gauges() -> None:
    metrics = parsed(full_scrape())
    assert samples(metrics["streamapp_ready"]) == {(): 1}
    assert samples(metrics["streamapp_kafka_reachable"]) == {(): 0}
    assert samples(metrics["streamapp_kafka_seconds_without_answer"]) == {(): 61.5}
    assert samples(metrics["streamapp_consumer_lag_records"]) == {(("partition", "0"), ("topic", "orders")): 12}
    assert samples(metrics["streamapp_restore_remaining_records"]) == {
        (("partition", "1"), ("replica", "active"), ("topic", "app-users-changelog")): 40}
    assert samples(metrics["streamapp_table_estimated_rows"]) == {(("partition", "1"), ("table", "users")): 1}
    assert samples(metrics["streamapp_info"]) == {(("app_id", "app"), ("partitioner", "murmur2"),
                                                   ("processing_guarantee", "at_least_once"), ("version", "0.1.0")): 1}
    assert len(samples(metrics["streamapp_join_info"])) == 4


def test_an_unknown_part_is_left_out_not_made_up() -> None:
    metrics = parsed(full_scrape(ready=None, health=None, rebalances=None, transactions=None, guard=None, doctor=None,
                                 checks_finished=None))
    for name in ("streamapp_ready", "streamapp_kafka_reachable", "streamapp_rebalances", "streamapp_transactions",
                 "streamapp_copartition_check_last_run_timestamp_seconds"):
        assert name not in metrics
    assert samples(metrics["streamapp_guard_check_ok"]) == {}
    assert samples(metrics["streamapp_commits"], "_total") == {}


def test_guard_per_check_and_doctor_per_joined_pair() -> None:
    metrics = parsed(full_scrape())
    assert samples(metrics["streamapp_guard_check_ok"]) == {
        (("check", "partitions orders × users"),): 1, (("check", "partitioner of users"),): 0}  # skipped: no sample
    assert samples(metrics["streamapp_doctor_pair_ok"]) == {
        (("join", "orders_merged"), ("stream", "orders"), ("table_topic", "users")): 0,
        (("join", "orders_merged_repartition"), ("stream", "orders"), ("table_topic", "users_rep")): 1,
    }  # undecided pairs and pairs no join of this worker reads have none
    assert samples(metrics["streamapp_doctor_predicted_miss_ratio"]) == {
        (("join", "orders_merged"),): 0.8333, (("join", "orders_merged_repartition"),): 0.0}
    assert samples(metrics["streamapp_doctor_keys_apart_ratio"])[(("join", "orders_merged"),)] == 0.8333
    assert samples(metrics["streamapp_copartition_check_runs"], "_total") == {(): 2}


def test_rebalances_transactions_and_commits() -> None:
    instruments = Instruments((), lambda keys, n: [0] * len(keys), dict)
    instruments.commits = 9
    instruments.commit_seconds.observe(0.01)
    observe = instruments.time_transactions()
    observe(0.05)
    observe(0.2)
    metrics = parsed(full_scrape(instruments=instruments))
    assert samples(metrics["streamapp_commit_latency_seconds"], "_count") == {(("kind", "offsets"),): 1,
                                                                             (("kind", "transaction"),): 2}
    assert samples(metrics["streamapp_rebalances"], "_total") == {(): 3}
    assert samples(metrics["streamapp_transactions"], "_total") == {(("result", "committed"),): 5,
                                                                   (("result", "aborted"),): 1}
    assert samples(metrics["streamapp_commits"], "_total") == {(("kind", "offsets"),): 9, (("kind", "transaction"),): 5}
    assert samples(metrics["streamapp_transaction_partitions_fenced"], "_total") == {(): 6}
    assert samples(metrics["streamapp_transaction_producer_fenced"], "_total") == {(): 2}
    assert samples(metrics["streamapp_revoke_commits_failed"], "_total") == {(("kind", "offsets"),): 0,
                                                                            (("kind", "transaction"),): 0}
    failed = parsed(full_scrape(revoke_commits_failed=2, transactions={"revoke_failed": 1}))
    assert samples(failed["streamapp_revoke_commits_failed"], "_total") == {(("kind", "offsets"),): 2,
                                                                           (("kind", "transaction"),): 1}


def test_names_follow_the_naming_guide_and_no_label_is_a_key() -> None:
    instruments = Instruments(("orders",), lambda keys, n: [0] * len(keys), dict)
    metrics = parsed(full_scrape(instruments=instruments))
    for family in metrics.values():
        assert NAME.match(family.name), family.name
        for sample in family.samples:
            assert NAME.match(sample.name), sample.name
            assert "key" not in sample.labels
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        assert not family.name.endswith(("_ms", "_milliseconds", "_percent")), family.name


def test_histogram_buckets_are_the_declared_ones_and_inclusive() -> None:
    instruments = Instruments((), lambda keys, n: [0] * len(keys), dict)
    for value in (BATCH_BUCKETS[0], BATCH_BUCKETS[1], 0.3, 60.0):
        instruments.batch_seconds.labels("orders").observe(value)
    family = parsed(full_scrape(instruments=instruments))["streamapp_batch_processing_seconds"]
    buckets = {float(s.labels["le"]): s.value for s in family.samples if s.name.endswith("_bucket")}
    assert list(buckets) == [*BATCH_BUCKETS, float("inf")]
    assert (buckets[BATCH_BUCKETS[0]], buckets[BATCH_BUCKETS[1]], buckets[0.5], buckets[float("inf")]) == (1, 2, 3, 4)
    assert samples(family, "_sum")[(("topic", "orders"),)] == pytest.approx(BATCH_BUCKETS[0] + BATCH_BUCKETS[1] + 60.3)


def counted(histogram: Any, *labels: str) -> float:
    """How many values ``histogram`` (or its child of ``labels``) observed, as a scrape reads it."""
    return next(s.value for f in histogram.collect() for s in f.samples
                if s.name.endswith("_count") and tuple(s.labels.values()) == labels)


def record(topic: str, partition: int, key: bytes | None) -> ConsumerRecord:
    return ConsumerRecord(topic, partition, 0, 0, 0, key, b"{}", None, len(key or b""), 2, [])


async def test_handlers_are_timed_and_the_joined_topics_keys_checked() -> None:
    """Misplaced: keyed records of a watched topic that the declared partitioner puts in another partition."""
    n = 6
    murmur2 = get_partitioner("murmur2")
    keys = [f"user-{i}".encode() for i in range(60)]
    crc32 = {key: (zlib.crc32(key) & 0xFFFFFFFF) % n for key in keys}
    handled: list[Any] = []

    async def handle(batches: Any) -> None:
        handled.append(batches)

    instruments = Instruments({"users", "orders"}, murmur2.partition_batch, lambda: {"users": n, "orders": n})
    handlers = _Handlers(instruments, {"users": Handler(handle, table=True)})
    handlers["orders"] = Handler(handle)  # registered after the instruments: wrapped too
    handlers["other"] = Handler(handle)
    assert handlers["users"].table and handlers["users"].handle is not handle
    assert instruments.wrap("users", handlers["users"]) is handlers["users"]  # never twice

    by_partition: dict[TP, list[ConsumerRecord]] = {}
    for key in keys:
        by_partition.setdefault(TP("users", crc32[key]), []).append(record("users", crc32[key], key))
    by_partition.setdefault(TP("users", 0), []).append(record("users", 0, None))  # a null key is not judged
    await handlers["users"](by_partition)
    orders = {TP("orders", 2): [record("orders", 2, k) for k in keys if murmur2(k, n) == 2]}
    await handlers["orders"](orders)
    await handlers["other"]({TP("other", 0): [record("other", 0, k) for k in keys]})

    assert len(handled) == 3
    misplaced = Tally({p: 0 for p in set(crc32.values())})
    for key, partition in crc32.items():
        misplaced[partition] += murmur2(key, n) != partition
    placement = instruments.placement
    assert dict(placement.misplaced["users"]) == dict(misplaced) and sum(misplaced.values()) > 0
    assert sum(placement.checked["users"].values()) == len(keys)
    assert dict(placement.misplaced["orders"]) == {2: 0}
    assert placement.checked["orders"][2] == len(orders[TP("orders", 2)])
    assert "other" not in placement.checked  # no join reads it by partition
    assert [counted(instruments.batch_seconds, t) for t in ("users", "orders", "other")] == [1, 1, 1]

    metrics = parsed(full_scrape(instruments=instruments))
    assert sum(samples(metrics["streamapp_misplaced_keys"], "_total").values()) == sum(misplaced.values())
    batch = samples(metrics["streamapp_batch_processing_seconds"], "_count")
    assert batch == {(("topic", "orders"),): 1, (("topic", "other"),): 1, (("topic", "users"),): 1}


def test_the_commit_sensor_counts_commits_that_moved_an_offset() -> None:
    class Monitor:
        tp_committed_offsets: dict[TP, int] = {}

    class App:
        monitor = Monitor()

    instruments = Instruments((), lambda keys, n: [], dict)
    sensor = CommitSensor(App(), instruments)
    for offsets in ({}, {TP("t", 0): 5}, {TP("t", 0): 5}, {TP("t", 0): 9}):
        Monitor.tp_committed_offsets = offsets
        sensor.on_commit_completed(None, sensor.on_commit_initiated(None))
    assert instruments.commits == 2 and counted(instruments.commit_latency, "offsets") == 2
    sensor.on_rebalance_end(None, sensor.on_rebalance_start(None))
    assert counted(instruments.rebalance_seconds) == 1


def test_a_revoke_commit_failed_when_acked_offsets_stay_uncommitted(tmp_path: Path) -> None:
    """What the consumer counts as a failed commit on revoke (streamapp.worker.transport): acked offsets that no commit
    covered, as Faust's own filter of what to commit sees them. A real app's consumer, not started."""
    from streamapp.worker import faust_internals
    from streamapp.worker.app import create_app

    consumer = create_app(Settings(data_dir=str(tmp_path / "data"))).consumer
    consumer.app.topics.acks_enabled_for = lambda topic: topic == "orders"
    done, pending = TP("orders", 0), TP("orders", 1)
    for tp in (done, pending):
        faust_internals.ack_all(consumer, tp, fetched("orders", tp.partition, 0, 1, 2))
    consumer._committed_offset[done] = 3  # what Faust records once a commit covered them
    assert faust_internals.uncommitted(consumer, [done, pending]) == {pending: 3}
    assert faust_internals.uncommitted(consumer, [done]) == {}


def test_metrics_is_not_a_public_path() -> None:
    assert not is_public("/metrics")


def test_metrics_off_serves_no_route_and_installs_nothing(tmp_path: Path) -> None:
    """``metrics=false`` (what the benchmark's "off" runs): no /metrics, no wrapped handlers, no commit sensor."""
    from streamapp.worker.app import create_app

    on = create_app(Settings(data_dir=str(tmp_path / "on")))
    off = create_app(Settings(data_dir=str(tmp_path / "off"), metrics=False))
    assert "/metrics" in on.web.views and isinstance(on.batch_handlers, _Handlers)
    assert any(isinstance(sensor, CommitSensor) for sensor in on.sensors)
    assert "/metrics" not in off.web.views and "/stats" in off.web.views
    assert not isinstance(off.batch_handlers, _Handlers) and getattr(off, "streamapp_instruments", None) is None
    assert not any(isinstance(sensor, CommitSensor) for sensor in off.sensors)
    # exactly_once: each stream topic's transactions tell the instruments how long each commit took
    eos = create_app(Settings(data_dir=str(tmp_path / "eos"), processing_guarantee="exactly_once"))
    assert eos.transactions and on.streamapp_instruments.transaction_seconds is None  # type: ignore[attr-defined]
    timed = eos.streamapp_instruments.commit_latency  # type: ignore[attr-defined]
    assert counted(timed, "transaction") == 0  # its series is there before the first commit
    for transactions in eos.transactions.values():
        transactions.on_committed(0.02)
    assert counted(timed, "transaction") == len(eos.transactions)


# -- on the real broker ------------------------------------------------------------------------------------------

TOKEN = "metrics-test-token"
USERS, ORDERS = 60, 300


def scrape(worker: WorkerProcess, token: str | None = TOKEN, accept: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if accept:
        headers["Accept"] = accept
    return httpx.get(worker.url + "/metrics", headers=headers, timeout=10)


def values(text: str, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples called ``name`` whose labels include ``labels``."""
    return {tuple(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name and labels.items() <= s.labels.items()}


def total(text: str, name: str, **labels: str) -> float:
    return sum(values(text, name, **labels).values())


def test_a_real_worker_exposes_its_joins_placement_and_state_behind_its_token(
        broker_settings: Settings, tmp_path: Path, prometheus_alerts: Future[None]) -> None:
    """(``prometheus_alerts``: that scenario starts here, so that its scaled half hour runs beside this test.)"""
    import random

    settings = isolated(broker_settings, "metrics", web_token=TOKEN, partitions=6)
    n = settings.partitions
    rng = random.Random(35)
    ids = [f"{rng.getrandbits(64):016x}".encode() for _ in range(USERS)]
    crc32_users, murmur_users = ids[: USERS // 2], ids[USERS // 2:]
    misplaced = {k for k in crc32_users if (zlib.crc32(k) & 0xFFFFFFFF) % n != murmur2_partition(k, n)}
    orders = [(rng.choice(ids), b'{"ts": 1, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}')
              for _ in range(ORDERS)]
    expected_misses = sum(1 for key, _ in orders if key in misplaced)

    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        assert scrape(worker, token=None).status_code == 401
        assert scrape(worker, token="wrong").status_code == 401
        user = b'{"name": "u", "age": 30}'
        produce(settings.bootstrap_servers, settings.users_topic, [(k, user) for k in crc32_users], "consistent")
        produce(settings.bootstrap_servers, settings.users_topic, [(k, user) for k in murmur_users], "murmur2")
        wait_for_users([worker], USERS)
        produce(settings.bootstrap_servers, settings.orders_topic, [(ids[-1], b"{oops")], "murmur2")  # a dead letter
        produce(settings.bootstrap_servers, settings.orders_topic, orders, "murmur2")
        wait_until(lambda: stats(worker)["records"].get(settings.orders_topic) == ORDERS
                   and stats(worker)["dead_lettered"] == 1, 90, "every order read, the bad one dead-lettered", [worker])
        counts = stats(worker)
        direct, copied = settings.merged_topic, settings.merged_repartition_topic
        response = scrape(worker)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.text

        # joins: every order looked up once per join, the misses exactly those of misplaced users
        by_output = {dict(k)["output"]: dict(k)["join"] for k in values(text, "streamapp_join_info")}
        assert set(by_output) == {direct, copied}, by_output
        for output in by_output:
            assert total(text, "streamapp_join_lookups_total", output=output) == ORDERS
            assert total(text, "streamapp_records_written_total", output=output) == ORDERS
            assert total(text, "streamapp_join_lookups_total", output=output, result="hit") == counts["joined"][output]
        assert total(text, "streamapp_join_lookups_total", output=direct, result="miss") == expected_misses > 0
        assert total(text, "streamapp_join_lookups_total", output=copied, result="miss") == 0
        # each miss by its cause: the user is in another partition of the table (this worker holds all six)
        assert values(text, "streamapp_join_misses_total", output=direct) == {
            (("cause", "copartition_violation"), ("join", by_output[direct]), ("output", direct)): expected_misses}
        assert total(text, "streamapp_join_misses_total", output=copied) == 0
        # misplaced keys: the users crc32 put elsewhere, none among the orders or the worker's own copy
        assert total(text, "streamapp_misplaced_keys_total", topic=settings.users_topic) == len(misplaced)
        assert total(text, "streamapp_keyed_records_checked_total", topic=settings.users_topic) == USERS
        assert total(text, "streamapp_misplaced_keys_total", topic=settings.orders_topic) == 0
        assert total(text, "streamapp_keyed_records_checked_total", topic=settings.orders_topic) == ORDERS + 1
        assert total(text, "streamapp_misplaced_keys_total", topic=settings.users_repartition_topic) == 0
        # inputs, state
        assert total(text, "streamapp_records_read_total", topic=settings.orders_topic) == ORDERS
        assert total(text, "streamapp_records_read_total", topic=settings.users_topic) == USERS
        assert total(text, "streamapp_dead_letters_total", topic=settings.orders_topic) == 1
        assert values(text, "streamapp_dead_letters_by_reason_total") == {
            (("reason", "undecodable"), ("topic", settings.orders_topic)): 1}
        assert values(text, "streamapp_revoke_commits_failed_total") == {(("kind", "offsets"),): 0}
        assert total(text, "streamapp_ready") == 1 and total(text, "streamapp_kafka_reachable") == 1
        assert total(text, "streamapp_batch_processing_seconds_count", topic=settings.orders_topic) >= 1
        assert total(text, "streamapp_rebalances_total") >= 1
        rows = values(text, "streamapp_table_estimated_rows")
        assert {dict(k)["table"] for k in rows} == {"demo_user", "demo_user_repartition"}
        # RocksDB's estimate counts each overwrite of Faust's offset key until a compaction: close, not exact
        assert USERS <= total(text, "streamapp_table_estimated_rows", table="demo_user_repartition") <= USERS * 1.5

        # commits, and the lag they bring to zero; the guard and the doctor judge the users topic
        def settled() -> str | None:
            text = scrape(worker).text
            lag = values(text, "streamapp_consumer_lag_records", topic=settings.orders_topic)
            done = (total(text, "streamapp_commits_total", kind="offsets") >= 1 and len(lag) == n
                    and sum(lag.values()) == 0
                    and values(text, "streamapp_guard_check_ok", check=f"partitioner of {settings.users_topic}")
                    and values(text, "streamapp_doctor_pair_ok", join=by_output[direct]))
            return text if done else None

        text = wait_until(settled, 90, "commits, zero lag and the guard's and doctor's verdicts", [worker])
        assert total(text, "streamapp_guard_check_ok", check=f"partitioner of {settings.users_topic}") == 0
        assert total(text, "streamapp_doctor_pair_ok", join=by_output[direct]) == 0
        assert total(text, "streamapp_doctor_pair_ok", join=by_output[copied]) == 1
        assert total(text, "streamapp_commit_latency_seconds_count") >= 1

        openmetrics = scrape(worker, accept="application/openmetrics-text; version=1.0.0")
        assert openmetrics.headers["Content-Type"].startswith("application/openmetrics-text")
        assert openmetrics.text.rstrip().endswith("# EOF")
    finally:
        assert worker.stop() == 0, worker.tail()



# -- the shipped alerts, in Prometheus itself --------------------------------------------------------------------

DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "prometheus"
#: Debian's `prometheus` package brings both (`apt-get install -y prometheus`).
PROMTOOL, PROMETHEUS = shutil.which("promtool"), shutil.which("prometheus")


@pytest.fixture
def prometheus_installed() -> None:
    """Prometheus is a real component of these tests: missing, they fail (never a skip counted as a pass)."""
    assert PROMTOOL is not None and PROMETHEUS is not None, \
        "promtool and prometheus are missing: run `make test-deps` (apt-get install prometheus)"


needs_promtool = needs_prometheus = pytest.mark.usefixtures("prometheus_installed")
ALERTS = {"StreamappJoinMissRatioJump", "StreamappMisplacedKeys", "StreamappNotCommitting", "StreamappGuardVerdictBad",
          "StreamappDoctorPairBroken", "StreamappRevokeCommitFailed"}


def promtool(*args: str) -> str:
    done = subprocess.run([str(PROMTOOL), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@needs_promtool
def test_the_shipped_rules_are_valid_and_each_alert_passes_its_unit_test() -> None:
    assert "SUCCESS: 8 rules found" in promtool("check", "rules", str(DEPLOY / "alerts.yml"))
    promtool("check", "config", "--syntax-only", str(DEPLOY / "prometheus.yml"))
    assert "SUCCESS" in promtool("test", "rules", str(DEPLOY / "alerts_test.yml"))
    alerts = set(re.findall(r"^\s+- alert: (\w+)$", (DEPLOY / "alerts.yml").read_text(), re.M))
    unit_tested = set(re.findall(r"alertname: (\w+)", (DEPLOY / "alerts_test.yml").read_text()))
    assert alerts == unit_tested == ALERTS


@needs_promtool
def test_a_rule_that_no_longer_fires_fails_its_unit_test(tmp_path: Path) -> None:
    """The unit tests can fail: with the miss-ratio threshold raised past any ratio, its test does."""
    rules = (DEPLOY / "alerts.yml").read_text().replace("baseline1h + 0.05", "baseline1h + 1.5")
    (tmp_path / "alerts.yml").write_text(rules)
    shutil.copy(DEPLOY / "alerts_test.yml", tmp_path)
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(tmp_path / "alerts_test.yml")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "StreamappJoinMissRatioJump" in done.stdout + done.stderr


def scaled_rules(text: str, seconds_per_minute: int = 2) -> str:
    """The shipped rules with every duration (windows, offsets, ``for``) shrunk: a minute becomes two seconds.

    The expressions are the shipped ones; only their time scale changes, so Prometheus can show them firing in a test.
    """
    def scale(match: re.Match[str]) -> str:
        minutes = int(match.group(1)) * (60 if match.group(2) == "h" else 1)
        return f"{minutes * seconds_per_minute}s"

    return "\n".join(line if line.lstrip().startswith("#") else re.sub(r"\b(\d+)([mh])\b", scale, line)
                     for line in text.splitlines())


def test_scaled_rules_shrink_only_durations() -> None:
    scaled = scaled_rules((DEPLOY / "alerts.yml").read_text())
    assert "[10s]" in scaled and "[120s] offset 30s" in scaled and "for: 4s" in scaled and "for: 10s" in scaled
    assert not re.search(r"\[\d+[mh]\]|for: \d+m", scaled)
    assert "+ 0.05" in scaled and ">= 20" in scaled


def dashboard_queries(job: str = "streamapp") -> list[str]:
    """Every PromQL query of the shipped Grafana dashboard, its ``$job`` variable set."""
    dashboard = json.loads((DEPLOY.parent / "grafana" / "streamapp.json").read_text())
    return [target["expr"].replace("$job", job) for panel in dashboard["panels"] for target in panel["targets"]]


def test_the_dashboard_reads_only_metrics_the_worker_exposes_or_the_rules_record() -> None:
    instruments = Instruments(("orders",), lambda keys, n: [0] * len(keys), dict)
    exposed = {s.name for f in parsed(full_scrape(instruments=instruments)).values() for s in f.samples}
    exposed |= {f.name + suffix for f in parsed(full_scrape(instruments=instruments)).values()
                for suffix in ("", "_total", "_bucket", "_count", "_sum")}
    recorded = set(re.findall(r"record: (\S+)", (DEPLOY / "alerts.yml").read_text()))
    used = {name for query in dashboard_queries() for name in re.findall(r"\b(streamapp[:_][a-z0-9_:]+)\b", query)}
    assert used and used <= exposed | recorded, used - exposed - recorded
    assert {"streamapp_join_lookups_total", "streamapp_misplaced_keys_total", "streamapp_consumer_lag_records",
            "streamapp:join_miss_ratio:rate5m", "streamapp_commits_total", "streamapp_join_misses_total",
            "streamapp_dead_letters_by_reason_total", "streamapp_revoke_commits_failed_total"} <= used


def test_the_monitoring_page_lists_every_metric_and_every_alert() -> None:
    """docs/how-to/monitor.md: every family the worker exposes, every shipped alert (and nothing that is not)."""
    page = (DEPLOY.parent.parent / "docs" / "how-to" / "monitor.md").read_text()
    instruments = Instruments(("orders",), lambda keys, n: [0] * len(keys), dict)
    exposed = {f.name + ("_total" if f.type == "counter" else "") for f in parsed(full_scrape(
        instruments=instruments)).values()}
    listed = set(re.findall(r"`(streamapp_[a-z0-9_]+)`", page))
    assert exposed == listed, (exposed - listed, listed - exposed)
    assert set(re.findall(r"^\| `(Streamapp\w+)` \|", page, re.M)) == ALERTS


#: The real Prometheus' time scale: a minute of the shipped rules is a second (5 m windows: 5 scrapes).
PROMETHEUS_SECONDS_PER_MINUTE = 1


class Prometheus:
    """A real Prometheus (Debian's) scraping one worker every second, with the shipped rules time-scaled."""

    def __init__(self, tmp: Path, target: str, token: str) -> None:
        self.port = free_port()
        (tmp / "token").write_text(token)
        (tmp / "alerts.yml").write_text(scaled_rules((DEPLOY / "alerts.yml").read_text(), PROMETHEUS_SECONDS_PER_MINUTE))
        (tmp / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp / "alerts.yml")],
            "scrape_configs": [{"job_name": "streamapp", "metrics_path": "/metrics",
                                "authorization": {"type": "Bearer", "credentials_file": str(tmp / "token")},
                                "static_configs": [{"targets": [target]}]}],
        }))
        self.log = (tmp / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        wait_until(self.ready, 60, "Prometheus ready")

    def ready(self) -> bool:
        assert self.proc.poll() is None, f"prometheus exited with {self.proc.returncode}"
        try:
            return httpx.get(self.url + "/-/ready", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        body = httpx.get(self.url + "/api/v1/query", params={"query": promql}, timeout=10).json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def targets(self) -> list[tuple[str, str]]:
        """Each scrape target's health and last error, for a failure's message."""
        body = httpx.get(self.url + "/api/v1/targets", timeout=10).json()
        return [(t["health"], t["lastError"]) for t in body["data"]["activeTargets"]]

    def alerts(self) -> dict[tuple[str, str], str]:
        """Active alerts: (alert name, its join or topic) -> pending or firing."""
        body = httpx.get(self.url + "/api/v1/alerts", timeout=10).json()
        return {(a["labels"]["alertname"], a["labels"].get("join") or a["labels"].get("topic", "")): a["state"]
                for a in body["data"]["alerts"]}

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


class OrderStream(threading.Thread):
    """Orders at a steady pace (murmur2, as the Java client writes them) for the users it is pointed at."""

    def __init__(self, bootstrap: str, topic: str, users: Sequence[bytes], per_second: int = 40,
                 limit_seconds: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2", "linger.ms": 5})
        self.topic, self.users, self.per_second, self.limit = topic, list(users), per_second, limit_seconds
        self.stopped = threading.Event()
        self.produced: Tally[bytes] = Tally()
        self.failed: list[str] = []

    def run(self) -> None:
        import random

        rng, deadline = random.Random(35), time.monotonic() + self.limit
        while not self.stopped.is_set() and time.monotonic() < deadline:
            for _ in range(self.per_second // 10):
                key = rng.choice(self.users)
                self.producer.produce(self.topic, key=key, value=b'{"ts": 1, "product_id": 1, "qty": 1, '
                                      b'"unit_price": 1.0, "channel": "web"}', on_delivery=self.report)
                self.produced[key] += 1
            self.producer.poll(0)
            time.sleep(0.1)
        assert self.producer.flush(30) == 0
        self.producer = None  # its threads go now, not when the session's broker is gone

    def report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append(str(err))

    def finish(self) -> int:
        self.stopped.set()
        self.join(60)
        assert not self.is_alive() and not self.failed, self.failed[:3]
        return sum(self.produced.values())


@needs_prometheus
def test_prometheus_itself_fires_the_alerts_when_a_producer_switches_partitioner_and_not_before(
        prometheus_alerts: Future[None]) -> None:
    """A real Prometheus scrapes a real worker: quiet while every producer uses murmur2; the miss-ratio and
    misplaced-key alerts fire within a bounded time once the users producer switches to librdkafka's crc32.

    (Its scenario runs in the background from the first test that asks for it: 25 scaled minutes of quiet, then
    the alerts' windows, mostly waiting.)"""
    prometheus_alerts.result()


def prometheus_scenario(broker_settings: Settings, tmp_path: Path) -> None:
    import random

    settings = isolated(broker_settings, "prom", web_token=TOKEN, partitions=6)
    n, bootstrap = settings.partitions, settings.bootstrap_servers
    rng = random.Random(350)
    good = [f"good-{rng.getrandbits(64):016x}".encode() for _ in range(40)]
    switched = [f"new-{rng.getrandbits(64):016x}".encode() for _ in range(60)]
    misplaced = {k for k in switched if (zlib.crc32(k) & 0xFFFFFFFF) % n != murmur2_partition(k, n)}
    user = b'{"name": "u", "age": 30}'
    watched = {"StreamappJoinMissRatioJump", "StreamappMisplacedKeys"}

    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    prometheus: Prometheus | None = None
    orders: OrderStream | None = None
    try:
        produce(bootstrap, settings.users_topic, [(k, user) for k in good], "murmur2")
        wait_for_users([worker], len(good))
        prometheus = Prometheus(tmp_path, f"127.0.0.1:{settings.web_port}", TOKEN)
        orders = OrderStream(bootstrap, settings.orders_topic, good)
        orders.start()
        # The right partitioner: 25 scaled minutes, 10 past the baseline's 15-minute offset (so the jump alert has its
        # baseline), and never a watched alert, not even pending.
        quiet_until = time.monotonic() + 25 * PROMETHEUS_SECONDS_PER_MINUTE
        while time.monotonic() < quiet_until:
            active = {key: state for key, state in prometheus.alerts().items() if key[0] in watched}
            assert not active, active
            time.sleep(1)
        assert prometheus.query('streamapp:join_miss_ratio:rate5m{join="demo_user_orders_merged"}'), \
            f"no miss ratio recorded in the good phase: {prometheus.targets()}"

        # The users producer switches to librdkafka's default partitioner; new orders are for its users.
        produce(bootstrap, settings.users_topic, [(k, user) for k in switched], "consistent")
        # loaded before their orders come: else an order read before its user is one more (honest) miss than the
        # misplaced keys make, as ksqlDB's lookup at processing time would make it too
        wait_for_users([worker], len(good) + len(switched))
        orders.users = switched

        def both_firing() -> dict[tuple[str, str], str] | None:
            alerts = prometheus.alerts() if prometheus else {}
            firing = {key for key, state in alerts.items() if state == "firing"}
            wanted = {("StreamappJoinMissRatioJump", "demo_user_orders_merged"),
                      ("StreamappMisplacedKeys", settings.users_topic)}
            return alerts if wanted <= firing else None

        alerts = wait_until(both_firing, 90, lambda: f"both alerts firing: {prometheus.alerts() if prometheus else {}}",
                            [worker])
        assert ("StreamappJoinMissRatioJump", "demo_user_orders_merged_repartition") not in alerts  # the right join
        assert ("StreamappMisplacedKeys", settings.orders_topic) not in alerts

        # Prometheus' own query API holds the join counters (every order looked up by both joins) and the lag.
        produced = orders.finish()
        wait_until(lambda: stats(worker)["records"].get(settings.orders_topic) == produced, 60, "every order read",
                   [worker])

        def scraped_all() -> list[dict[str, Any]] | None:
            result = prometheus.query("sum by (join) (streamapp_join_lookups_total)") if prometheus else []
            return result if len(result) == 2 and all(float(r["value"][1]) == produced for r in result) else None

        wait_until(scraped_all, 30, "Prometheus' lookups equal to the orders produced", [worker])
        misses = prometheus.query('sum(streamapp_join_lookups_total{join="demo_user_orders_merged",result="miss"})')
        expected = sum(count for key, count in orders.produced.items() if key in misplaced)
        assert float(misses[0]["value"][1]) == expected > 0
        causes = prometheus.query('sum by (cause) (streamapp_join_misses_total{join="demo_user_orders_merged"})')
        assert {r["metric"]["cause"]: float(r["value"][1]) for r in causes} == {"copartition_violation": expected}
        misplaced_seen = prometheus.query(f'sum(streamapp_misplaced_keys_total{{topic="{settings.users_topic}"}})')
        assert float(misplaced_seen[0]["value"][1]) == len(misplaced)
        lag = prometheus.query(f'streamapp_consumer_lag_records{{topic="{settings.orders_topic}"}}')
        assert len(lag) == n, lag
        # every query of the shipped dashboard runs on it, and its main panels have data
        answers = {query: prometheus.query(query) for query in dashboard_queries()}
        empty = [q for q, result in answers.items() if not result and ("lookups" in q or "misplaced" in q
                                                                          or "records_read" in q or "lag" in q)]
        assert not empty, empty
    finally:
        if orders is not None and orders.is_alive():
            orders.stopped.set()
            orders.join(60)
        if prometheus is not None:
            prometheus.stop()
        assert worker.stop() == 0, worker.tail()


prometheus_alerts = background_scenario("prometheus_alerts", prometheus_scenario)


@pytest.mark.parametrize("accept", ["application/openmetrics-text; version=abc", "application/openmetrics-text; "
                                    "version=1.x", "text/plain; version=abc"])
def test_an_accept_header_prometheus_client_cannot_read_gets_the_text_format(accept: str) -> None:
    """It was a 500: prometheus_client compared the version's text with a number."""
    encode, content_type = encoder_for(accept)
    assert content_type.startswith("text/plain") and encode is encoder_for("")[0]
    assert encoder_for("application/openmetrics-text; version=1.0.0")[1].startswith("application/openmetrics-text")
