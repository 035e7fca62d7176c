"""A topic the worker cannot write is a state it reports, and it stops for a supervisor to restart it (issue 32, case 2).

The decisions (:class:`~streamapp.worker.health.OutputWatch`) are pure and take the clock as numbers. The probe and
the batch sender's wait run on the session's Apache Kafka broker. The whole path is the real
``faust -A streamapp worker`` under both guarantees: an output deleted mid-stream turns ``/health`` 503 naming it,
SIGTERM then stops the worker at once, and left alone it exits with status 4 after ``output_failure_exit``; each
restart re-creates the output, and every order reaches both outputs (exactly_once: once, read committed).
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import pytest
from aiokafka import AIOKafkaProducer

from streamapp.kafka.admin import delete_topic, describe, ensure_topics
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.kafka.reader import TopicReader
from streamapp.partitioners import get_partitioner
from streamapp.settings import Settings, SettingsError
from streamapp.worker.app import create_app
from streamapp.worker.batch_sender import BatchSender, Deliveries, refusal
from streamapp.worker.health import (
    OUTPUT_FAILURE_EXIT_CODE, REFUSED, STALL_AFTER, STOP_TIMEOUT_EXIT_CODE, KafkaMonitor, OutputWatch, Reachability,
    health_status,
)
from streamapp.worker.process import WorkerProcess

from workerkit import (
    Dataset, Identity, Order, check_output, isolated, make_dataset, output_identity, produce, wait_for_users,
    wait_until, worker_settings,
)

pytestmark = pytest.mark.long

GONE = "UnknownTopicOrPartitionError (the cluster does not have it (deleted?))"


# -- the decisions ------------------------------------------------------------------------------------------------

def test_a_failing_topic_is_one_line_past_the_grace_then_once_a_minute_then_the_exit() -> None:
    watch = OutputWatch(exit_after=180.0)
    watch.unwritable("out", GONE, 1000.0, "probe")
    assert watch.healthy(1004.9) and watch.line(1004.9) is None
    for second in range(1, 5):
        watch.unwritable("out", GONE, 1000.0 + second, "probe")  # each probe finds it again: counted, not logged
    assert watch.line(1005.0) == (
        f"The worker cannot write topic out for 5 s: {GONE} (seen 5 times); /health answers 503; the worker exits "
        "at 180 s (output_failure_exit) so that a supervisor restarts it and it re-creates its topics")
    assert not watch.healthy(1005.0)
    assert [watch.line(1005.0 + t) for t in (1, 30, 59.9)] == [None, None, None]
    assert (watch.line(1065.0) or "").startswith("The worker cannot write topic out for 65 s")
    assert not watch.must_exit(1179.9) and watch.must_exit(1180.0)


def test_each_source_heals_what_it_said() -> None:
    watch = OutputWatch(exit_after=0.0)
    watch.unwritable("out", GONE, 0.0)  # a send finds the producer does not know it
    watch.unwritable("out", GONE, 1.0, "probe")
    assert "the worker waits for it (output_failure_exit=0)" in (watch.line(10.0) or "")
    assert watch.writable("out", 11.0, "probe") is None  # the batches still say it cannot be written
    assert not watch.healthy(11.0) and not watch.must_exit(10**9)
    assert watch.writable("out", 12.0) == "Topic out can be written again after 12 s; /health answers 200"
    assert watch.healthy(12.0) and watch.failing == {} and watch.writable("out", 13.0) is None


def test_a_moment_says_nothing() -> None:
    watch = OutputWatch(exit_after=180.0)
    watch.unwritable("out", GONE, 0.0)
    assert watch.line(4.0) is None
    assert watch.writable("out", 4.5) is None and watch.healthy(5.0)


def test_a_refused_batch_holds_the_commits_until_the_worker_exits() -> None:
    """Its records were acked: a commit would skip them, so none is made, and only a restart reads them again."""
    watch = OutputWatch(exit_after=180.0)
    watch.unwritable("out", "a batch refused, TopicAuthorizationFailedError (not authorized)", 0.0, REFUSED)
    assert watch.commits_held()
    assert watch.writable("out", 1.0) is None and watch.writable("out", 2.0, "probe") is None  # later batches went
    assert watch.commits_held() and not watch.healthy(5.0)
    assert (watch.line(5.0) or "").endswith(
        "(seen once); no offset is committed any more; /health answers 503; the worker exits at 180 s "
        "(output_failure_exit) so that a supervisor restarts it and it re-creates its topics")
    assert watch.must_exit(180.0)


def test_a_batch_without_an_answer_for_30_s_fails_its_topic_while_kafka_answers() -> None:
    """A passing refusal aiokafka retries (NOT_ENOUGH_REPLICAS, a leader moving) leaves only this sign."""
    monitor = KafkaMonitor(Settings())
    monitor.stalled({"out": STALL_AFTER + 1, "in": 2.0})
    assert [(key, f.reason) for key, f in monitor.outputs.failing.items()] == [
        (("out", "stalled"), "its batches get no answer from the broker (the oldest for 31 s)")]
    monitor.stalled({"in": 2.0})
    assert monitor.outputs.failing == {}


def test_health_names_every_reason() -> None:
    reach = Reachability(timeout=60.0, exit_after=300.0, last_answer=0.0)
    watch = OutputWatch(exit_after=180.0)
    expected = reach.status(1.0)
    expected["kafka"]["reachable"] = True
    assert health_status(reach, watch, 1.0) == {**expected, "outputs": watch.status(1.0)}
    watch.unwritable("a", GONE, 0.0, "probe")
    watch.unwritable("b", GONE, 2.0, "probe")
    status = health_status(reach, watch, 10.0)
    assert status["healthy"] is False
    assert status["reason"] == f"the worker cannot write topic a for 10 s: {GONE} (seen once) (and 1 more: b)"
    assert [(f["topic"], f["seconds"]) for f in status["outputs"]["failing"]] == [("a", 10.0), ("b", 8.0)]
    assert status["kafka"]["reachable"] is True
    reach.failed(61.0, "KafkaConnectionError: refused")
    assert health_status(reach, watch, 61.0)["kafka"]["reachable"] is False
    assert health_status(reach, watch, 61.0)["reason"].startswith(
        "Kafka unreachable for 61 s (KafkaConnectionError: refused); the worker cannot write topic a")


@pytest.mark.parametrize("changes, fragment", [
    ({"output_failure_exit": -1.0}, r"output_failure_exit=-1.0: must be 0 \(never\)"),
    ({"output_failure_exit": float("nan")}, "output_failure_exit=nan"),
    ({"stop_timeout": 0.0}, "stop_timeout=0.0: must be above 0"),
    ({"stop_timeout": float("inf")}, "stop_timeout=inf"),
])
def test_bad_limits_name_the_setting(changes: dict[str, float], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        Settings(**changes)


# -- the probe and the batches, on the broker ---------------------------------------------------------------------

class Heard:
    """What the batch senders tell their listeners (the worker's monitor is one)."""

    def __init__(self) -> None:
        self.unknown: list[tuple[str, str]] = []
        self.refusals: list[tuple[str, str]] = []
        self.written: list[str] = []

    def unwritable(self, topic: str, reason: str) -> None:
        self.unknown.append((topic, reason))

    def refused(self, topic: str, reason: str) -> None:
        self.refusals.append((topic, reason))

    def written_to(self, topic: str) -> None:
        self.written.append(topic)


async def test_the_probe_finds_a_deleted_topic_and_finds_it_again_once_re_created(bootstrap: str, new_topic) -> None:
    topic = new_topic("probed", partitions=2)
    monitor = KafkaMonitor(Settings(bootstrap_servers=bootstrap, kafka_unreachable_timeout=2.0), written=lambda: [topic])
    try:
        await monitor.probe_once()
        assert monitor.outputs.failing == {} and monitor.state.failures == 0
        delete_topic(bootstrap, topic)
        deadline = time.monotonic() + 30
        while not monitor.outputs.failing and time.monotonic() < deadline:
            await monitor.probe_once()
        assert [(key, f.reason) for key, f in monitor.outputs.failing.items()] == [((topic, "probe"), GONE)]
        assert topic not in describe(bootstrap, [topic])  # asked about, never created by the probe
        ensure_topics(bootstrap, {topic: 2})
        while monitor.outputs.failing and time.monotonic() < deadline + 30:
            await monitor.probe_once()
        assert monitor.outputs.failing == {} and monitor.state.failures == 0
    finally:
        await monitor.close()


async def test_a_send_to_a_deleted_topic_waits_says_so_and_goes_once_it_is_back(bootstrap: str, new_topic) -> None:
    """aiokafka alone would wait inside ``send_batch`` for its request timeout, then raise (Faust's: 20 minutes)."""
    topic = new_topic("waited", partitions=2)
    heard, deliveries = Heard(), Deliveries()
    deliveries.listen(heard)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        sender = BatchSender(producer, get_partitioner("murmur2"), {topic: 2}, deliveries=deliveries)
        sender.add(topic, b"before", b"v", 1_700_000_000_000)
        await sender.send()
        await asyncio.wait_for(producer.flush(), 30)
        assert heard.written == [topic] and heard.unknown == []
        delete_topic(bootstrap, topic)
        deadline = time.monotonic() + 30
        while producer.client.cluster.partitions_for_topic(topic) is not None and time.monotonic() < deadline:
            await producer.client.force_metadata_update()
        sender.add(topic, b"after", b"v", 1_700_000_000_000)
        sending = asyncio.ensure_future(sender.send())
        while not heard.unknown and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert heard.unknown[0] == (topic, GONE) and not sending.done()
        ensure_topics(bootstrap, {topic: 2})
        await asyncio.wait_for(sending, 30)
        await asyncio.wait_for(producer.flush(), 30)
        assert heard.written == [topic, topic] and heard.refusals == []
    finally:
        deliveries.unlisten(heard)
        await producer.stop()
    with TopicReader(bootstrap, topic, range(2)) as reader:
        assert [record.key for record in reader.read_to_end()] == [b"after"]


def wait_until_the_broker_stopped(broker: EmbeddedBroker, topic: str, partition: int) -> None:
    """Until the broker has stopped its replica of a deleted topic's partition (its log directory renamed for
    deletion). DeleteTopics answers once the controller has recorded the deletion; the broker applies it a moment
    later, and until then a produce to the partition is still written."""
    log = broker.log_dir / f"{topic}-{partition}"
    deadline = time.monotonic() + 30
    while log.exists():
        assert time.monotonic() < deadline, f"the broker still holds {log.name} 30 s after its topic was deleted"
        time.sleep(0.05)


async def test_a_batch_the_cluster_refuses_is_told_to_the_listeners_and_to_on_failure(
        broker: EmbeddedBroker, bootstrap: str, new_topic) -> None:
    """The topic deleted after the producer last read its metadata: the batch is queued, then refused when it expires
    without a leader (a producer whose requests time out in 2 s)."""
    topic = new_topic("refusing", partitions=2)
    heard, failed, deliveries = Heard(), [], Deliveries()
    deliveries.listen(heard)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=2_000)
    await producer.start()
    try:
        sender = BatchSender(producer, get_partitioner("murmur2"), {topic: 2},
                             on_failure=lambda *refused: failed.append(refused), deliveries=deliveries)
        sender.add_to(topic, 1, b"k", b"before", 1_700_000_000_000, source="order 6")
        await sender.send()
        await asyncio.wait_for(producer.flush(), 30)
        delete_topic(bootstrap, topic)  # the producer's metadata still lists it
        wait_until_the_broker_stopped(broker, topic, 1)
        queued = time.monotonic()
        sender.add_to(topic, 1, b"k", b"after", 1_700_000_000_000, source="order 7")
        await sender.send()
        now = time.monotonic()
        assert 0 <= deliveries.waiting(now)[topic] <= now - queued  # queued since, waiting for the broker's answer
        await asyncio.wait_for(producer.flush(), 30)
        assert topic not in deliveries.waiting(time.monotonic())
        await asyncio.sleep(0)  # the delivery callbacks
    finally:
        deliveries.unlisten(heard)
        await producer.stop()
    assert heard.written == [topic] and [t for t, _ in heard.refusals] == [topic], heard.refusals
    assert [(t, p, sources) for t, p, sources, _ in failed] == [(topic, 1, ["order 7"])]
    assert heard.refusals[0][1] == refusal(failed[0][3])  # the error the broker's answer or the expiry gave


async def test_the_worker_commits_nothing_once_a_batch_was_refused(tmp_path: Path) -> None:
    from faust.types import TP

    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    app.kafka_monitor.outputs.unwritable("out", "a batch refused, NotEnoughReplicasError", 0.0, REFUSED)
    assert await app.consumer._commit({TP("demo_user_orders", 0): 10}) is False  # the group is not even asked


# -- the worker -------------------------------------------------------------------------------------------------------

USERS, PHASE = 40, 150
#: Small here, so the test sees the exit; the default is minutes.
EXIT_AFTER = 12.0
STOP_TIMEOUT = 20.0


def held(settings: Settings, topic: str) -> list[Any]:
    """Every record of ``topic`` written so far, read committed."""
    with TopicReader(settings.bootstrap_servers, topic, range(settings.partitions)) as reader:
        return reader.read_to_end()


def holds(settings: Settings, topic: str, orders: Sequence[Order]) -> bool:
    return {o.identity for o in orders} <= {output_identity(r) for r in held(settings, topic)}


def refused_on_health(worker: WorkerProcess, topic: str) -> dict[str, Any] | None:
    """``/health``'s body once it answers 503 naming ``topic``, else None."""
    response = worker.get("/health")
    body = response.json()
    failing = {f["topic"] for f in body.get("outputs", {}).get("failing", [])}
    return body if response.status_code == 503 and topic in failing else None


def break_output(worker: WorkerProcess, topic: str, orders: Sequence[Order], dataset: Dataset) -> dict[str, Any]:
    """Delete ``topic`` under the running worker, produce ``orders``, and return ``/health`` once it names it."""
    settings = worker.settings
    delete_topic(settings.kafka, topic)
    produce(settings.bootstrap_servers, settings.orders_topic, [(o.user_id.encode(), o.value(), o.ts) for o in orders])
    body = wait_until(lambda: refused_on_health(worker, topic), 60, f"/health 503 naming {topic}", [worker])
    assert body["reason"].startswith(f"the worker cannot write topic {topic} for "), body
    assert GONE in body["reason"] and body["healthy"] is False and body["ready"] is True, body
    return body


def restart(settings: Settings, log: Path, deleted: str, wanted: dict[str, Sequence[Order]]) -> WorkerProcess:
    """A new worker on the same settings: it re-creates ``deleted`` and writes every order of ``wanted`` (by topic)."""
    worker = WorkerProcess(settings, log).start(timeout=120)
    assert describe(settings.kafka, [deleted])[deleted].partitions == settings.partitions
    for topic, orders in wanted.items():
        wait_until(lambda: holds(settings, topic, orders), 120, f"{len(orders)} orders in {topic}", [worker])
    return worker


def assert_output(dataset: Dataset, records: list[Any], orders: Sequence[Order], partitions: int,
                  exactly_once: bool) -> None:
    """Every one of ``orders`` in ``records``, each exact; exactly_once: once each and nothing else."""
    if exactly_once:
        check = check_output(Dataset(dataset.users, list(orders)), records, partitions)
        assert (check.missing, check.wrong, check.duplicates) == ([], [], 0), check
        assert check.records == len(orders)
    else:  # at least once: a restart may write again what its last run had not committed
        check = check_output(dataset, records, partitions)
        wanted: set[Identity] = {o.identity for o in orders}
        assert check.wrong == [] and wanted.isdisjoint(check.missing), check


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_deleted_output_is_reported_the_worker_stops_and_a_restart_loses_nothing(
    broker_settings: Settings, tmp_path: Path, guarantee: str,
) -> None:
    """Deleted once, then SIGTERM: the worker leaves at once; deleted again: it exits by itself after the limit.

    Each restart re-creates the output and writes the orders produced meanwhile; the other output
    holds every order (exactly_once: once). What the deleted topic held before is gone with it.
    """
    settings = worker_settings(isolated(broker_settings, "outfail", processing_guarantee=guarantee,
                                        output_failure_exit=EXIT_AFTER, stop_timeout=STOP_TIMEOUT), tmp_path, "w")
    exactly_once = guarantee == "exactly_once"
    dataset = make_dataset(USERS, 3 * PHASE, seed=32)
    phases = [dataset.orders[i * PHASE:(i + 1) * PHASE] for i in range(3)]
    kept, deleted = settings.merged_topic, settings.merged_repartition_topic
    workers: list[WorkerProcess] = []
    try:
        first = WorkerProcess(settings, tmp_path / "first.log").start(timeout=120)
        workers.append(first)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([first], USERS)
        produce(settings.bootstrap_servers, settings.orders_topic,
                [(o.user_id.encode(), o.value(), o.ts) for o in phases[0]])
        for topic in (kept, deleted):
            wait_until(lambda: holds(settings, topic, phases[0]), 120, f"the first orders in {topic}", [first])

        break_output(first, deleted, phases[1], dataset)
        code = first.stop(timeout=STOP_TIMEOUT)  # SIGTERM, then SIGKILL (-9) past the stop timeout
        assert code == OUTPUT_FAILURE_EXIT_CODE, first.tail()
        assert "Stopping while the worker cannot write topic" in first.log()

        second = restart(settings, tmp_path / "second.log", deleted, {deleted: phases[1], kept: phases[0] + phases[1]})
        workers.append(second)
        break_output(second, deleted, phases[2], dataset)
        code = second.wait_exit(EXIT_AFTER + 120)
        assert code == OUTPUT_FAILURE_EXIT_CODE, second.tail()
        lines = [line for line in second.log().splitlines() if f"cannot write topic {deleted}" in line]
        assert len(lines) == 2 and "the output_failure_exit limit: exiting with status 4" in lines[-1], lines
        flood = [line for line in second.log().splitlines() if deleted in line]
        assert len(flood) < 20, flood  # aiokafka's retries, hundreds a second, summarised

        third = restart(settings, tmp_path / "third.log", deleted, {deleted: phases[2], kept: dataset.orders})
        workers.append(third)
        assert_output(dataset, held(settings, kept), dataset.orders, settings.partitions, exactly_once)
        assert_output(dataset, held(settings, deleted), phases[2], settings.partitions, exactly_once)
        assert third.stop(timeout=STOP_TIMEOUT) == 0, third.tail()
    finally:
        for worker in workers:
            worker.stop()


def test_a_stop_that_outlasts_stop_timeout_leaves_with_status_5(tmp_path: Path) -> None:
    """Whatever holds a stop up (a flush waiting on a batch nobody can deliver), the worker is gone at stop_timeout.

    The monitor's own stop hook in a child process that then hangs, as a stuck stop would.
    """
    script = tmp_path / "stuck_stop.py"
    script.write_text(
        "import time\n"
        "from streamapp.settings import Settings\n"
        "from streamapp.worker.health import KafkaMonitor\n"
        "monitor = KafkaMonitor(Settings(stop_timeout=0.5))\n"
        "monitor.before_stop()  # Kafka answers, no topic fails: the stop goes on, under the watch\n"
        "time.sleep(120)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == STOP_TIMEOUT_EXIT_CODE, done.stderr
    assert "The stop has taken stop_timeout=0.5 s: leaving at once with status 5" in done.stderr
