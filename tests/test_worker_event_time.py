"""Table updates before orders by event time, among the records of one fetch (issue 16).

Users and their orders are produced before the worker starts, so its first
fetch holds both topics' records at once.  Kafka Streams (and so ksqlDB) takes a
task's buffered records in timestamp order, the table's and the stream's alike:
an order whose ``ts`` is at or after its user's record timestamp finds the user,
and one stamped before it does not.  The worker must do the same; before it
ordered them, the orders of a fetch were joined before that fetch's users reached
the table (this test failed with every ``later`` order unenriched).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from faust.types import TP

from streamapp.kafka.admin import ensure_topics
from streamapp.sql.topology import topology
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from streamapp.worker.transport import Handler, event_time_runs, rounds

from workerkit import orders_read, isolated, produce, read_all, stats, wait_until

PAIRS = 60


def runs(users: list[int], orders: list[int]) -> list[tuple[str, list[int]]]:
    """The runs for one partition's users and orders given as their event times."""
    return event_time_runs([("users", users), ("orders", orders)], lambda _k, t: t, lambda k: k == "users")


def test_records_go_in_event_time_order_each_topic_in_its_own_order() -> None:
    assert runs([1, 2, 5], [3, 4, 6]) == [("users", [1, 2]), ("orders", [3, 4]), ("users", [5]), ("orders", [6])]
    assert runs([5], [1, 2]) == [("orders", [1, 2]), ("users", [5])]
    # a late record is not reordered within its own partition: the heads decide, as in Kafka Streams
    assert runs([1, 9, 2], [3]) == [("users", [1]), ("orders", [3]), ("users", [9, 2])]
    assert runs([], [3, 1]) == [("orders", [3, 1])]


def test_on_a_tie_the_table_goes_first() -> None:
    assert runs([4, 4], [4, 4]) == [("users", [4, 4]), ("orders", [4, 4])]
    assert event_time_runs([("orders", [4]), ("users", [4])], lambda _k, t: t, lambda k: k == "users") \
        == [("users", [4]), ("orders", [4])]


def test_any_queues_merge_as_the_heads_minimum_says() -> None:
    """Against the rule itself, stated as a loop over the heads: random queues, times out of order within a queue,
    ties, three queues, one of them a table."""
    import random

    def by_heads(queues: list[tuple[str, list[int]]]) -> list[tuple[str, list[int]]]:
        heads = [[key, items, 0, order] for order, (key, items) in enumerate(queues) if items]
        runs: list[tuple[str, list[int]]] = []
        while heads:
            head = min(heads, key=lambda h: (h[1][h[2]], 0 if h[0] == "t" else 1, h[3]))
            if not runs or runs[-1][0] != head[0]:
                runs.append((head[0], []))
            runs[-1][1].append(head[1][head[2]])
            head[2] += 1
            if head[2] == len(head[1]):
                heads.remove(head)
        return runs

    rng = random.Random(7)
    for _ in range(500):
        queues = [(key, [rng.randrange(8) for _ in range(rng.randrange(6))]) for key in ("s1", "t", "s2")]
        assert event_time_runs(queues, lambda _k, t: t, lambda k: k == "t") == by_heads(queues), queues


class Msg:
    def __init__(self, ts_ms: int) -> None:
        self.timestamp = ts_ms / 1000


async def nothing(_batches: object) -> None:
    return None


def test_a_fetch_becomes_rounds_of_handler_calls_tables_first() -> None:
    handlers = {"u": Handler(nothing, table=True), "o": Handler(nothing)}
    u0, u1, o0, o1 = [Msg(t) for t in (10, 30, 20, 5)]
    fetched = {TP("o", 0): [o0], TP("u", 0): [u0, u1], TP("o", 1): [o1]}
    assert rounds(fetched, handlers) == [  # type: ignore[arg-type]
        [("u", {TP("u", 0): [u0]}), ("o", {TP("o", 1): [o1]})],
        [("o", {TP("o", 0): [o0]})],
        [("u", {TP("u", 0): [u1]})],
    ]


def test_a_fetch_of_tables_only_is_one_round_without_event_time() -> None:
    """The users and the repartition topic while the tables load: no order to put them before, so no merge."""
    def no_time(_record: object) -> int:
        raise AssertionError("asked for an event time")

    handlers = {"u": Handler(nothing, table=True, event_time=no_time), "r": Handler(nothing, table=True,
                                                                                      event_time=no_time)}
    u0, u1, r0 = [Msg(t) for t in (30, 40, 10)]
    fetched = {TP("r", 0): [r0], TP("u", 0): [u0, u1], TP("u", 1): [u1]}
    assert rounds(fetched, handlers) == [  # type: ignore[arg-type]
        [("r", {TP("r", 0): [r0]}), ("u", {TP("u", 0): [u0, u1], TP("u", 1): [u1]})],
    ]


def order_value(ts: int, sequence: int) -> bytes:
    return json.dumps({"ts": ts, "product_id": sequence, "qty": 1, "unit_price": 2.5, "channel": "web"}).encode()


def test_a_user_and_its_order_in_one_fetch_join_by_event_time(broker_settings: Settings, tmp_path: Path) -> None:
    settings = isolated(broker_settings, partitions=3)
    ensure_topics(settings.bootstrap_servers, topology(settings).owned_topics())
    user_ms = int(time.time() * 1000) - 60_000
    later = {f"later-{i}" for i in range(PAIRS)}  # order ts after the user's record: enriched
    earlier = {f"earlier-{i}" for i in range(PAIRS)}  # order ts before it: a miss, as in Kafka Streams
    tie = {f"tie-{i}" for i in range(PAIRS)}  # the same millisecond: the table goes first (see transport)
    users = sorted(later | earlier | tie)
    produce(settings.bootstrap_servers, settings.users_topic,
            [(u.encode(), json.dumps({"name": f"name of {u}", "age": 30}).encode(), user_ms) for u in users])
    order_ts = {u: user_ms + 1_000 if u in later else user_ms - 1_000 if u in earlier else user_ms for u in users}
    produce(settings.bootstrap_servers, settings.orders_topic,
            [(u.encode(), order_value(order_ts[u], i), order_ts[u]) for i, u in enumerate(users)])

    with WorkerProcess(settings, tmp_path / "worker.log").start() as worker:
        wait_until(lambda: orders_read(stats(worker), worker.settings) == len(users), 90, "every order joined", [worker])
        for output in (settings.merged_topic, settings.merged_repartition_topic):
            names = {r.key.decode(): json.loads(r.value)["NAME"]
                     for r in read_all(settings.bootstrap_servers, output, settings.partitions, len(users))}
            assert set(names) == set(users), output
            if output == settings.merged_repartition_topic:
                continue  # its table is loaded from the repartition topic: one fetch later (see the README)
            assert {u for u in later if names[u] is None} == set(), output
            assert {u for u in tie if names[u] is None} == set(), output
            assert {u for u in earlier if names[u] is not None} == set(), output


def test_a_large_run_is_handed_over_in_pieces_in_order() -> None:
    """Between two calls the event loop runs; no message is lost, duplicated or reordered."""
    from streamapp.worker.transport import pieces

    by_partition = {TP("u", 0): list(range(5)), TP("u", 1): list(range(10, 13))}
    assert list(pieces(by_partition, 3)) == [
        {TP("u", 0): [0, 1, 2]}, {TP("u", 0): [3, 4], TP("u", 1): [10]}, {TP("u", 1): [11, 12]}]
    assert list(pieces(by_partition, 100)) == [by_partition]
