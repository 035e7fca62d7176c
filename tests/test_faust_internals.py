"""The private names of Faust the worker depends on still exist, and the batch path keeps Faust's commit rules.

Each name in ``streamapp.worker.faust_internals.PRIVATE_NAMES`` is checked on a
real object of its class (the app's own, or one built as the worker builds it), so
an upgrade of Faust that removes or renames one fails here, naming it, instead
of deep in a running worker.  The commit rules are checked against the session's
broker: a worker process, or a real app's consumer whose aiokafka consumer thread is
started with real partitions assigned (:func:`workerkit.consumer_on_broker`), its
commits read back from the group on the broker.
"""
from __future__ import annotations

import importlib
import inspect
import math
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from confluent_kafka import Producer

from streamapp.settings import Settings
from streamapp.worker import faust_internals
from streamapp.worker.app import create_app
from streamapp.worker.process import WorkerProcess
from workerkit import (committed_offsets, consumer_on_broker, fetch_once, fetched, group_committed, isolated,
                       write_records)

ORDERS = 300
COMMIT_EVERY = 50


def owner(path: str) -> type:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def real_object(path: str, app: Any) -> Any:
    """A real object of the class at ``path``: the app's own where it has one, else built (not started) as the
    worker builds it."""
    objects: dict[str, Callable[[], Any]] = {
        "faust.transport.consumer:Consumer": lambda: app.consumer,
        "faust.transport.consumer:ThreadDelegateConsumer": lambda: app.consumer,
        "faust.transport.drivers.aiokafka:AIOKafkaConsumerThread": lambda: app.consumer._thread,
        "faust.transport.drivers.aiokafka:Producer": lambda: app.producer,
        "faust.stores.rocksdb:Store": lambda: app.join_tables.by_name["demo_user"].data,
        "faust.tables.manager:TableManager": lambda: app.tables,
        "mode.worker:Worker": lambda: app.Worker(loglevel="WARNING"),  # as Faust's CLI builds it (app.conf.Worker)
        "aiokafka.consumer.consumer:AIOKafkaConsumer": aiokafka_consumer,
        "aiokafka.consumer.subscription_state:SubscriptionState": lambda: aiokafka_consumer()._subscription,
    }
    assert path in objects, f"no real object of {path} to check its private names on: add one here"
    return objects[path]()


@pytest.mark.parametrize("path, name", faust_internals.PRIVATE_NAMES, ids=[f"{p}.{n}" for p, n in faust_internals.PRIVATE_NAMES])
def test_each_private_name_is_still_there(path: str, name: str, tmp_path: Path) -> None:
    """Each on a real object of its class (hasattr, not a None check: some are None until used, as ``_commit_fut``
    with no commit under way)."""
    instance = real_object(path, create_app(Settings(data_dir=str(tmp_path / "data"))))
    assert isinstance(instance, owner(path))
    assert hasattr(instance, name), f"{path} has no {name} any more: update streamapp/worker/faust_internals.py"


def test_the_adapter_reaches_them_on_a_real_app(tmp_path: Path) -> None:
    """The functions work on real objects: a partition's RocksDB database, the consumer's offsets, the producer."""
    from faust.exceptions import NotReady
    from faust.types import TP

    app = create_app(Settings(data_dir=str(tmp_path / "data")))
    db = faust_internals.partition_db(app.join_tables.by_name["demo_user"], 2)
    db[b"u1"] = b'{"name": "A", "age": 1}'
    assert faust_internals.partition_db(app.join_tables.by_name["demo_user"], 2).get(b"u1") == b'{"name": "A", "age": 1}'
    assert faust_internals.partition_db(app.join_tables.by_name["demo_user"], 3).get(b"u1") is None
    assert app.consumer._read_offset[TP("t", 0)] is None  # what accept_all() starts from
    assert inspect.iscoroutinefunction(app.consumer._add_gap)
    assert faust_internals.metadata_partitions(app.consumer, "t") is None  # no consumer started: no metadata yet
    assert faust_internals.fetch_lag(app.consumer, TP("t", 0))[0] is None  # nor a position or an end
    with pytest.raises(NotReady):  # not started yet: the method is there and says so
        faust_internals.aiokafka_producer(app)


def test_the_batch_path_commits_every_broker_commit_every_acks(broker_settings: Settings, tmp_path: Path) -> None:
    """Faust's fetch loop commits once ``broker_commit_every`` messages are acked; the batch path must too.

    The commit interval is set far beyond the test, so only the count can make the worker commit.
    """
    settings = isolated(broker_settings)
    env = {"BROKER_COMMIT_EVERY": str(COMMIT_EVERY), "BROKER_COMMIT_INTERVAL": "3600"}
    with WorkerProcess(settings, tmp_path / "worker.log", extra_env=env) as worker:
        producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "partitioner": "murmur2"})
        for i in range(ORDERS):
            value = b'{"ts": %d, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}' % (1_700_000_000_000 + i)
            producer.produce(settings.orders_topic, key=b"user-%d" % (i % 37), value=value)
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 90
        done = 0
        while done < ORDERS - COMMIT_EVERY + 1:
            assert time.monotonic() < deadline, f"committed {done} of {ORDERS} orders: {worker.tail()}"
            done = sum(max(offset, 0) for offset in committed_offsets(settings, settings.orders_topic).values())
            time.sleep(0.3)


def test_accept_all_keeps_the_offsets_as_fausts_fetch_loop_does(tmp_path: Path) -> None:
    """Per partition, what Faust's ``_drain_messages`` does per message: records below the read offset (a re-fetch
    after a seek) are dropped, each gap since it and between the records is recorded when the topic's acks are on
    (none when off), and the last record becomes the read offset. A real app's consumer, not started."""
    import asyncio

    from faust.types import TP

    consumer = create_app(Settings(data_dir=str(tmp_path / "data"))).consumer
    acking = {"acked"}
    consumer.app.topics.acks_enabled_for = lambda topic: topic in acking
    sought, fresh, off = TP("acked", 0), TP("acked", 1), TP("not-acked", 0)
    consumer._read_offset[sought] = 10

    async def scenario() -> list[list[int]]:
        return [[r.offset for r in await faust_internals.accept_all(consumer, tp, fetched(tp.topic, tp.partition, *o))]
                for tp, o in ((sought, (8, 9, 10, 11, 14, 15)), (fresh, (0, 1, 3)), (off, (4, 9)))]

    assert asyncio.run(scenario()) == [[10, 11, 14, 15], [0, 1, 3], [4, 9]]
    assert {tp: consumer._read_offset[tp] for tp in (sought, fresh, off)} == {sought: 15, fresh: 3, off: 9}
    assert sorted((i.begin, i.end) for i in consumer._gap[sought]) == [(12, 15)]  # as Faust records it: up to the record after the gap
    assert sorted((i.begin, i.end) for i in consumer._gap[fresh]) == [(2, 4)]
    assert not consumer._gap[off]


def test_ack_all_acks_as_fausts_ack_does_for_each_record(tmp_path: Path) -> None:
    """Each offset at or above the committed one, not acked before, is acked once and counted for ``commit_every``;
    a topic whose acks are off (exactly_once's orders) acks nothing. A real app's consumer, not started."""
    from faust.types import TP

    consumer = create_app(Settings(data_dir=str(tmp_path / "data"))).consumer
    consumer.app.topics.acks_enabled_for = lambda topic: topic == "acked"
    tp, off = TP("acked", 2), TP("not-acked", 2)
    consumer._committed_offset[tp] = 5
    faust_internals.ack_all(consumer, tp, fetched("acked", 2, 4, 5, 6))
    faust_internals.ack_all(consumer, tp, fetched("acked", 2, 6, 7))  # 6 again: a re-fetch
    faust_internals.ack_all(consumer, off, fetched("not-acked", 2, 7, 8))
    assert (consumer._acked[tp], consumer._acked_index[tp], consumer._n_acked) == ([5, 6, 7], {5, 6, 7}, 3)
    assert not consumer._acked[off]


def aiokafka_consumer() -> object:
    """An aiokafka consumer, built (not started) on a loop as aiokafka requires: its per-object attributes exist."""
    import asyncio

    from aiokafka import AIOKafkaConsumer

    async def build() -> AIOKafkaConsumer:
        return AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1")

    return asyncio.run(build())


def test_exactly_once_consumer_reads_committed_and_seeks_through_the_fence(tmp_path: Path) -> None:
    """Under exactly_once the consumer thread builds a read_committed aiokafka consumer, and the consumer's
    ``seek_to_committed`` is streamapp's (the fence's hook); under at_least_once the isolation stays Faust's.  Either
    way the consumer's fetches wait FETCH_WAIT_MS on the broker, not Faust's 1,500 ms."""
    from streamapp.worker.transport import Consumer

    eos = create_app(Settings(data_dir=str(tmp_path / "eos"), processing_guarantee="exactly_once"))
    assert isinstance(eos.consumer._thread, faust_internals.ReadCommittedConsumerThread)
    assert type(eos.consumer).seek_to_committed is Consumer.seek_to_committed
    assert {topic: t.topic for topic, t in eos.transactions.items()} == {eos.settings.orders_topic: eos.settings.orders_topic}
    built = faust_internals.read_committed(aiokafka_consumer())
    assert built._isolation_level == "read_committed"
    plain = create_app(Settings(data_dir=str(tmp_path / "alo")))
    assert type(plain.consumer._thread) is faust_internals.WorkerConsumerThread
    assert plain.transactions == {}
    import asyncio

    async def made(app: Any) -> tuple[str, int]:  # aiokafka builds its consumer on a running loop
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        return consumer._isolation_level, consumer._fetch_max_wait_ms

    for app, isolation in ((eos, "read_committed"), (plain, "read_uncommitted")):
        assert asyncio.run(made(app)) == (isolation, faust_internals.FETCH_WAIT_MS)
    assert faust_internals.FETCH_WAIT_MS < 1500


def test_commit_now_commits_after_the_commit_under_way_where_fausts_own_commit_does_not(
        broker_settings: Settings, new_topic: Callable[..., str]) -> None:
    """Faust's ``commit`` only waits for a commit under way (``_commit_fut``) and returns False: what was acked
    after that one took its offsets stays uncommitted. ``commit_now`` waits for it, then commits (the revoke's and
    the stop's commit in ``streamapp.worker.transport.Consumer``).

    Against the session's broker: a real app's consumer, its aiokafka consumer thread started with a real partition
    assigned (:func:`workerkit.consumer_on_broker`); its batch handler acks the real records it is handed, and
    Faust's commits go to the group on the broker, where the test reads the committed offset back.  The first
    commit is held on its way to the consumer thread (Faust's ``AIOKafkaConsumerThread.commit`` wrapped: it answers
    once a gate opens), which opens once Faust's own commit waits for it."""
    import asyncio

    from faust.types import TP

    from streamapp.worker.transport import Handler

    topic = new_topic("acked", partitions=1)
    tp = TP(topic, 0)
    bootstrap = broker_settings.bootstrap_servers
    write_records(bootstrap, topic, 0, 5)

    async def scenario() -> tuple[Any, ...]:
        consumer: Any = None

        async def ack(batches: Any) -> None:  # as the agents ack once the records' outputs are queued
            for part, records in batches.items():
                faust_internals.ack_all(consumer, part, records)

        async with consumer_on_broker(broker_settings, [tp], {topic: Handler(ack)}) as consumer:
            thread = consumer._thread
            faust_thread_commit, faust_wait = thread.commit, consumer.maybe_wait_for_commit_to_finish
            commits: list[dict[Any, int]] = []
            under_way, answer, fausts_waiting = asyncio.Event(), asyncio.Event(), asyncio.Event()

            async def thread_commit(offsets: Any) -> bool:
                commits.append(dict(offsets))
                if len(commits) == 1:  # the first commit, on its way to the broker
                    under_way.set()
                    await answer.wait()
                return await faust_thread_commit(offsets)

            async def wait_for_commit() -> bool:
                if consumer._commit_fut is not None:
                    fausts_waiting.set()
                return await faust_wait()

            thread.commit = thread_commit
            consumer.maybe_wait_for_commit_to_finish = wait_for_commit
            await fetch_once(consumer)  # 0-4, acked
            first = asyncio.ensure_future(consumer.commit())
            await under_way.wait()  # it took offset 5
            await asyncio.to_thread(write_records, bootstrap, topic, 0, 5)
            await fetch_once(consumer)  # 5-9, acked while it is under way
            ours = asyncio.ensure_future(faust_internals.commit_now(consumer))
            fausts = asyncio.ensure_future(consumer.commit())
            await fausts_waiting.wait()
            waiting = not ours.done(), list(commits)
            answer.set()  # the commit under way ends
            return waiting, await first, await fausts, await ours, commits

    waiting, first, fausts, ours, commits = asyncio.run(scenario())
    assert waiting == (True, [{tp: 5}])  # commit_now waits: nothing else committed while the first is under way
    assert (first, fausts, ours) == (True, False, True)
    assert commits == [{tp: 5}, {tp: 10}]
    assert group_committed(broker_settings, [tp]) == {tp: 10}


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_fetch_lag_is_the_records_a_real_consumer_has_still_to_fetch(bootstrap: str, new_topic: Callable[..., str],
                                                                     isolation: str) -> None:
    """``fetch_lag`` over a real aiokafka consumer (behind Faust's thread, as the worker's): unknown before the
    partition's first fetch, the records left after a partial read, 0 at the end and for a partition not assigned;
    read_committed (exactly_once's) counts to the last stable offset, which aiokafka must still give.  The end is the
    one told with the last records until the next fetch answers: records written after them read as lag 0, told no
    later than when the records were drained (what HeldBack must not trust), and the next answer tells them."""
    import asyncio
    from types import SimpleNamespace

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTP
    from faust.types import TP

    topic = new_topic("lag", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap})

    def write(count: int) -> None:
        for i in range(count):
            producer.produce(topic, key=b"k", value=b"v%d" % i)
        assert producer.flush(30) == 0

    write(5)

    async def read() -> tuple[list[int | None], list[bool]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                                    isolation_level=isolation)
        await consumer.start()
        try:
            delegate = SimpleNamespace(_thread=SimpleNamespace(_consumer=consumer))

            def lag(tp: TP = TP(topic, 0)) -> tuple[int | None, float]:
                return faust_internals.fetch_lag(delegate, tp)

            consumer.assign([AioTP(topic, 0)])
            lags = [lag()[0]]
            read = 0
            while read < 2:
                read += sum(len(r) for r in (await consumer.getmany(timeout_ms=5000, max_records=2 - read)).values())
            brought = lag()
            lags.append(brought[0])
            # three more written while the other three wait in the consumer: it does not fetch the partition again
            await asyncio.get_running_loop().run_in_executor(None, write, 3)
            while read < 5:
                read += sum(len(r) for r in (await consumer.getmany(timeout_ms=5000, max_records=5 - read)).values())
            drained = lag()  # before anything else runs: the end told with the first five
            lags += [drained[0], lag(TP("x", 0))[0]]
            while read < 8:
                read += sum(len(r) for r in (await consumer.getmany(timeout_ms=5000)).values())
            return lags + [lag()[0]], [drained[1] == brought[1], lag()[1] > drained[1],
                                       lag(TP("x", 0))[1] == math.inf]
        finally:
            await consumer.stop()

    assert asyncio.run(read()) == ([None, 3, 0, 0, 0], [True, True, True])
