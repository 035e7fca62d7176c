"""Apache Kafka killed with SIGKILL under a running worker: restarted in time nothing is lost; gone for good the worker exits.

Each test has its own broker on a data directory in ``tmp_path`` (the session's broker must not be killed), the
real ``faust -A streamapp worker`` child and real librdkafka producers; the tests wait on what the worker reports
(``/stats``, ``/health``, its outputs, its exit status), never on log lines or sleeps.

- **Back within the limit**: SIGKILL at 30% joined, the broker restarted on the same data and port; the same
  worker reconnects and joins every order in both outputs (duplicates counted: at-least-once).
- **Gone beyond the limit**: ``/health`` 503 after ``kafka_unreachable_timeout``, one log line, exit 3 after
  ``kafka_unreachable_exit``.
- **Stopped while it is gone**: SIGTERM once ``/health`` is 503: one line, exit 3 at once.

The scenarios and their figures: docs/RELIABILITY.md.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
from confluent_kafka import Producer

from streamapp.kafka.broker import EmbeddedBroker
from streamapp.settings import Settings
from streamapp.worker.health import UNREACHABLE_EXIT_CODE
from streamapp.worker.process import WorkerProcess

from workerkit import (
    Dataset, TopicTail, assert_every_order_joined, isolated, loaded, make_dataset, orders_read, produce, stats,
    wait_for_outputs, wait_until,
    worker_settings,
)

pytestmark = pytest.mark.long

#: librdkafka keeps retrying an unacknowledged order this long: far beyond any outage here.
ORDER_DELIVERY_TIMEOUT_MS = 300_000


class KillableKafka:
    """This test's own Apache Kafka on a data directory in ``tmp_path``, so it can be killed and restarted."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.broker = EmbeddedBroker(data_dir=data_dir).start()
        self.bootstrap = self.broker.bootstrap

    def kill(self) -> None:
        self.broker.kill()

    def restart(self) -> None:
        """Same data directory, same port (the worker knows only this address)."""
        self.broker = EmbeddedBroker(data_dir=self.data_dir, port=self.broker.port).start()
        assert self.broker.bootstrap == self.bootstrap

    def stop(self) -> None:
        self.broker.stop()


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[KillableKafka]:
    own = KillableKafka(tmp_path / "kafka")
    try:
        yield own
    finally:
        own.stop()


def settings_for(kafka: KillableKafka, tmp_path: Path, **changes: Any) -> Settings:
    base = Settings(bootstrap_servers=kafka.bootstrap, app_id=f"restart-{uuid.uuid4().hex[:8]}",
                    broker_session_timeout=10.0, **changes)
    return worker_settings(isolated(base, "brk"), tmp_path, "w")


def get(worker: WorkerProcess, path: str) -> tuple[int, Any]:
    """One request to the worker's web server (it answers whether Kafka does or not)."""
    response = worker.get(path, timeout=20.0)
    return response.status_code, response.json()


def wait_for(worker: WorkerProcess, what: str, condition: Callable[[], Any], timeout: float) -> Any:
    return wait_until(condition, timeout, what, [worker])


def health_is(worker: WorkerProcess, wanted: int) -> dict[str, Any] | None:
    status, body = get(worker, "/health")
    assert status in (200, 503), (status, body)
    return body if status == wanted else None


class OrderStream(threading.Thread):
    """All orders through one idempotent librdkafka producer, paced, holding at given counts until released.

    The producer is what a careful client runs: ``enable.idempotence`` (acks=all,
    retries until ``message.timeout.ms``, no duplicates from its own retries), so
    orders produced while the broker is down wait in its queue and are delivered
    after the restart.  Every delivery report is kept: the test asserts each
    order was acknowledged, and then reads the orders topic to check.
    """

    def __init__(self, bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes, int]],
                 chunk: int, pause: float, holds: Sequence[int]) -> None:
        super().__init__(daemon=True)
        self.topic, self.records, self.chunk, self.pause = topic, records, chunk, pause
        self.holds = {at: threading.Event() for at in holds}
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "partitioner": "murmur2", "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": ORDER_DELIVERY_TIMEOUT_MS,
            "logger": logging.getLogger("order-producer"),  # its connection errors in the test's captured log
        })
        self.queued = 0
        self.acked = 0
        self.failures: list[str] = []
        self.error: BaseException | None = None

    def _report(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked += 1
        else:
            self.failures.append(str(err))

    def run(self) -> None:
        try:
            for start in range(0, len(self.records), self.chunk):
                for at, released in self.holds.items():
                    if self.queued >= at:
                        released.wait(600)
                for key, value, ts in self.records[start:start + self.chunk]:
                    while True:
                        try:
                            self.producer.produce(self.topic, key=key, value=value, timestamp=ts, on_delivery=self._report)
                            break
                        except BufferError:
                            self.producer.poll(0.1)
                    self.queued += 1
                self.producer.poll(0)
                time.sleep(self.pause)
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def release(self, at: int) -> None:
        self.holds[at].set()

    def finish(self, timeout: float) -> None:
        """Release every hold, wait until every order is queued and acknowledged (or failed)."""
        for released in self.holds.values():
            released.set()
        self.join(timeout)
        assert not self.is_alive() and self.error is None, (self.queued, self.error)
        remaining = self.producer.flush(timeout)
        assert remaining == 0 and not self.failures, f"{remaining} unacknowledged, failures {self.failures[:3]}"
        assert self.acked == len(self.records), (self.acked, len(self.records))


def order_counts(settings: Settings, dataset: Dataset) -> Counter[tuple[bytes | None, bytes | None]]:
    """How often each produced order is in the orders topic (read back after the outage)."""
    tail = TopicTail(settings.bootstrap_servers, settings.orders_topic, settings.partitions)
    try:
        tail.drain()
        return Counter((r.key, r.value) for r in tail.records)
    finally:
        tail.close()


def broker_restart_mid_stream(kafka: KillableKafka, tmp_path: Path, dataset: Dataset, chunk: int, rate: float,
                              timeout: float) -> dict[str, Any]:
    """The scenario; returns its figures.  The stream holds at 60% until the kill and at 80% until the restart,
    so orders are certainly produced before, during and after the outage, however fast the machine is."""
    started = time.monotonic()
    settings = settings_for(kafka, tmp_path, kafka_unreachable_timeout=3.0, kafka_unreachable_exit=600.0)
    n, total = settings.partitions, len(dataset.orders)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    tails: list[TopicTail] = []
    try:
        pid = worker.proc.pid if worker.proc else None
        produce(kafka.bootstrap, settings.users_topic, dataset.user_records())
        users = len(dataset.users)
        wait_for(worker, f"{users} users in both tables", lambda: loaded(stats(worker), settings) == (users, users),
                 timeout)
        hold_kill, hold_restart = int(total * 0.6), int(total * 0.8)
        stream = OrderStream(kafka.bootstrap, settings.orders_topic, dataset.order_records(), chunk, chunk / rate,
                             holds=(hold_kill, hold_restart))
        stream.start()
        joined_at_kill = wait_for(worker, "30% of the orders joined",
                                  lambda: (o := orders_read(stats(worker), settings)) >= total * 0.3 and o, timeout)
        queued_at_kill = stream.queued
        kafka.kill()
        killed = time.monotonic()
        stream.release(hold_kill)
        unhealthy = wait_for(worker, "/health 503 after the broker's death", lambda: health_is(worker, 503), timeout)
        status, group = get(worker, "/stats")
        assert status == 200 and group["health"]["healthy"] is False, group
        wait_for(worker, "the stream to reach its second hold, queued in the producer",
                 lambda: stream.queued >= hold_restart, timeout)
        kafka.restart()
        outage = time.monotonic() - killed
        stream.release(hold_restart)
        wait_for(worker, "/health 200 after the restart", lambda: health_is(worker, 200), timeout)
        stream.finish(timeout)
        tails = [TopicTail(kafka.bootstrap, topic, n) for topic in (settings.merged_topic, settings.merged_repartition_topic)]
        wait_for_outputs(tails, dataset, [worker], timeout)
        assert worker.proc is not None and worker.proc.pid == pid and worker.proc.poll() is None, "not the same worker"
        log = worker.log()
        assert worker.stop() == 0, worker.tail()
        for tail in tails:
            tail.drain()
        outputs = assert_every_order_joined(dataset, tails, n)
        inputs = order_counts(settings, dataset)
        assert len(inputs) == total and set(inputs.values()) == {1}, "the idempotent producer wrote each order once"
        assert len(re.findall(r"Kafka unreachable for \d+ s", log)) >= 1
        assert len(re.findall(r"Kafka reachable again after \d+ s", log)) == 1
        return {
            "orders": total, "users": users, "joined_at_kill": joined_at_kill, "queued_at_kill": queued_at_kill,
            "queued_during_outage": hold_restart - queued_at_kill, "outage_seconds": round(outage, 1),
            "health_at_503": unhealthy["kafka"],
            "outputs": outputs,
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        for tail in tails:
            tail.close()
        worker.stop()


def test_broker_kill9_mid_stream_restart_same_worker_loses_nothing(kafka: KillableKafka, tmp_path: Path) -> None:
    dataset = make_dataset(users=500, orders=5_000, seed=12)
    figures = broker_restart_mid_stream(kafka, tmp_path, dataset, chunk=250, rate=500, timeout=300)
    print(f"broker kill -9 and restart: {json.dumps(figures)}")


def test_broker_gone_worker_says_so_once_and_exits_3(kafka: KillableKafka, tmp_path: Path) -> None:
    """503 after the timeout, one line instead of a flood, exit status 3 after the exit limit."""
    settings = settings_for(kafka, tmp_path, kafka_unreachable_timeout=2.0, kafka_unreachable_exit=15.0)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        assert wait_for(worker, "/health 200", lambda: health_is(worker, 200), 60)["healthy"] is True
        before = len(worker.log().splitlines())
        kafka.kill()
        killed = time.monotonic()
        unhealthy = wait_for(worker, "/health 503", lambda: health_is(worker, 503), 120)
        assert unhealthy["healthy"] is False and unhealthy["kafka"]["failed_probes"] > 0, unhealthy
        assert worker.proc is not None
        code = worker.proc.wait(120)
        seconds = time.monotonic() - killed
        assert code == UNREACHABLE_EXIT_CODE, worker.tail()
        lines = worker.log().splitlines()[before:]
        text = "\n".join(lines)
        assert len(re.findall(r"\[ERROR\] Kafka unreachable for \d+ s: no broker of ", text)) == 1, text
        assert len(re.findall(r"\[CRITICAL\] Kafka unreachable for \d+ s, the kafka_unreachable_exit limit: "
                              r"exiting with status 3", text)) == 1, text
        assert "Traceback" not in text, text
        # Each form of aiokafka message at most once a minute: well under one line per form and second here.
        forms = Counter(re.sub(r"\d+", "N", line.split("] ", 3)[-1]) for line in lines)
        assert max(forms.values()) == 1 and len(lines) <= 30, text
        print(f"broker gone: exit {code} after {seconds:.1f} s, {len(lines)} log lines since the kill, "
              f"/health at 503: {json.dumps(unhealthy['kafka'])}")
    finally:
        worker.stop()


def test_a_stop_while_kafka_is_unreachable_leaves_at_once_with_status_3(kafka: KillableKafka, tmp_path: Path) -> None:
    """SIGTERM once /health says Kafka is unreachable, its exit limit far off: one line says why, and the worker
    leaves with status 3 as at that limit, instead of committing and flushing to brokers that are gone (each
    request waiting out its timeout, longer than a supervisor's grace period before SIGKILL)."""
    settings = settings_for(kafka, tmp_path, kafka_unreachable_timeout=2.0, kafka_unreachable_exit=600.0)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        wait_for(worker, "/health 200", lambda: health_is(worker, 200), 60)
        before = len(worker.log().splitlines())
        kafka.kill()
        wait_for(worker, "/health 503", lambda: health_is(worker, 503), 120)
        stopping = time.monotonic()
        code = worker.stop(timeout=120)  # SIGTERM; SIGKILL (-9) only after 120 s
        seconds = time.monotonic() - stopping
        text = "\n".join(worker.log().splitlines()[before:])
        assert code == UNREACHABLE_EXIT_CODE, text
        assert len(re.findall(r"\[CRITICAL\] Stopping while Kafka has been unreachable for \d+ s: leaving at once "
                              r"with status 3", text)) == 1, text
        assert "Traceback" not in text, text
        print(f"stop without Kafka: exit {code} {seconds:.1f} s after SIGTERM")
    finally:
        worker.stop()
