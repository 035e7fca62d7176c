"""Two workers in one group: one killed with kill -9 mid-stream, or both restarted one after the other.

Real worker processes with their own RocksDB directories on Apache Kafka.

- **Kill**: the survivor notices the death after the session timeout (10 s, from the
  ``broker_settings`` fixture), rebalances, restores the dead worker's table partitions
  from their changelogs and reprocesses what was not committed: at-least-once, so an
  order may appear twice, never zero times.
- **Rolling restart** (issue 35, "rebalances are visible"): each worker in turn stops
  cleanly and starts again on its own state while the other runs, the restarted one joining
  while orders stream in. A clean rebalance commits on revoke, so nothing is lost and
  nothing repeated, and the metrics show it: the survivor's rebalance and commit counters
  move, no revoke commit fails, and the lookups and records written that every worker
  lifetime counted add up to the orders produced.  A lifetime's counters end with its
  process, so each is read (``GET /metrics``) when it has nothing left to do: the stream
  is held and the group has committed everything before a worker stops.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from test_metrics import total
from workerkit import (
    orders_read, BackgroundProducer, TopicTail, check_output, committed_offsets, group_progress, holds_at_least, isolated,
    output_tails, make_dataset, produce, stats, wait_for_outputs, wait_for_users, wait_until, worker_settings,
)

pytestmark = pytest.mark.long

#: Seconds between two chunks of 20 orders while a restarted worker joins: slow enough that they still stream
#: when it is ready, however long its start takes; the rest of that third then goes at once.
JOINING_PAUSE = 0.4


def local_orders_by_partition(worker: WorkerProcess) -> dict[str, int]:
    response = worker.get("/stats?scope=local")
    assert response.status_code == 200, response.text
    return response.json()["counters"]["records"].get(worker.settings.orders_topic, {})


def run(settings: Settings, tmp_path: Path, users: int, orders: int, rate: float, timeout: float,
        chunk: int = 250) -> None:
    """Orders arrive in chunks (one producer each) at ``rate`` orders/s; the kill lands at 40% joined."""
    n = settings.partitions
    dataset = make_dataset(users, orders, seed=orders + 1)
    started = time.monotonic()
    survivor, victim = (WorkerProcess(worker_settings(settings, tmp_path, name), tmp_path / f"{name}.log")
                        for name in ("survivor", "victim"))
    tails = output_tails(settings)
    try:
        survivor.start(timeout=120)
        victim.start(timeout=120)
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users([survivor, victim], len(dataset.users), timeout=120)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, dataset.order_records(),
                                    chunk=chunk, pause=chunk / rate, hold_at=int(len(dataset.orders) * 0.6))
        stream.start()
        deadline = time.monotonic() + timeout
        while len(tails[1].records) < len(dataset.orders) * 0.4:
            assert time.monotonic() < deadline, survivor.tail()
            tails[1].poll(0.2)
        # the survivor takes over from what the group committed, not from the beginning
        wait_until(lambda: max(committed_offsets(settings, settings.orders_topic).values()) > 0, 60,
                   "the group's first commit of orders", [survivor, victim])
        before = local_orders_by_partition(survivor)
        victim_orders = orders_read(stats(victim), victim.settings)
        victim.kill()
        produced_at_kill = stream.produced
        stream.finish(timeout)
        assert produced_at_kill < len(dataset.orders), "the stream ended before the kill"
        assert victim_orders > 0 and len(before) < n, f"the victim processed no partition: {before}"
        wait_for_outputs(tails, dataset, [survivor], timeout)
        after = local_orders_by_partition(survivor)
        assert sorted(after) == [str(p) for p in range(n)], f"survivor did not take over every partition: {after}"
        for tail in tails:
            tail.drain()
        checks = {tail.topic: check_output(dataset, tail.records, n) for tail in tails}
        for topic, check in checks.items():
            assert check.missing == [] and check.wrong == [] and check.distinct == len(dataset.orders), (topic, check)
        assert "Traceback" not in survivor.log(), survivor.tail(40)
        figures = {"orders": orders, "victim_partitions_before": n - len(before), "victim_orders": victim_orders,
                   "duplicates": {t: c.duplicates for t, c in checks.items()},
                   "seconds": round(time.monotonic() - started, 1)}
        print(f"takeover: {json.dumps(figures)}")
    finally:
        for tail in tails:
            tail.close()
        victim.kill()
        code = survivor.stop()
    assert code == 0, survivor.tail()


def test_survivor_takes_over_at_volume(broker_settings: Settings, tmp_path: Path) -> None:
    """The full rate: chunks of 2,000 at 5,000 orders/s, 20,000 orders; the only takeover run (one of 5,000 orders at
    500/s asserted nothing more)."""
    run(isolated(broker_settings, "takeover"), tmp_path, users=5_000, orders=20_000, rate=5_000, timeout=1_800,
        chunk=2_000)


def scrape(worker: WorkerProcess) -> str:
    response = worker.get("/metrics")
    assert response.status_code == 200, response.text
    return response.text


def rebalanced_since(before: str, now: str) -> bool:
    """Whether a worker scraped ``before`` and ``now`` has started a rebalance since and finished it (ready again)."""
    return (total(now, "streamapp_rebalances_total") > total(before, "streamapp_rebalances_total")
            and total(now, "streamapp_ready") == 1)


def settle(settings: Settings, tails: list[TopicTail], count: int, workers: list[WorkerProcess]) -> None:
    """Until every output holds ``count`` records and the group has committed every order produced."""
    wait_until(lambda: all(holds_at_least(tail, count) for tail in tails), 300, f"{count} orders in each output",
               workers)
    wait_until(lambda: group_progress(settings.bootstrap_servers, settings.app_id, settings.orders_topic,
                                      settings.partitions)[0], 120, "the group's commit of every order", workers)


def test_a_rolling_restart_shows_in_the_metrics_and_loses_and_repeats_nothing(broker_settings: Settings,
                                                                              tmp_path: Path) -> None:
    settings = isolated(broker_settings, "rolling")
    n = settings.partitions
    dataset = make_dataset(users=200, orders=2_400, seed=35)
    records, third = dataset.order_records(), len(dataset.orders) // 3
    own = {name: worker_settings(settings, tmp_path, name) for name in ("a", "b")}
    a, b = (WorkerProcess(own[name], tmp_path / f"{name}.log") for name in ("a", "b"))
    started, tails, lifetimes = time.monotonic(), output_tails(settings), []  # lifetimes: each one's last scrape
    live: list[WorkerProcess] = []
    try:
        live += [a.start(timeout=120), b.start(timeout=120)]
        produce(settings.bootstrap_servers, settings.users_topic, dataset.user_records())
        wait_for_users(live, len(dataset.users), timeout=120)
        stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, records[:2 * third],
                                    chunk=20, pause=0, hold_at=third)  # the first third at once, to both workers
        stream.start()
        wait_until(lambda: stream.produced >= third, 300, "the first third produced", live)
        survivors = []  # (name, before, after) scrapes of the worker that stays while the other restarts
        for name, leaving, staying, rest in (("a", a, b, None), ("b", b, None, records[2 * third:])):
            staying = staying or live[-1]
            settle(settings, tails, len(records[:third]) if rest is None else 2 * third, live)
            before = scrape(staying)
            lifetimes.append(scrape(leaving))
            assert leaving.stop() == 0, leaving.tail()
            live.remove(leaving)
            # the leave's rebalance ends before the restart: a worker that joined while the group was still
            # rebalancing would make one rebalance of the two, as the coordinator may
            wait_until(lambda: rebalanced_since(before, scrape(staying)), 60, f"{name}'s leave rebalanced", live)
            if rest is None:
                stream.pause = JOINING_PAUSE
                stream.resume()  # the next third streams while the restarted worker joins
            else:
                stream = BackgroundProducer(settings.bootstrap_servers, settings.orders_topic, rest, chunk=20,
                                            pause=JOINING_PAUSE)
                stream.start()
            produced_at_join = stream.produced
            live.append(WorkerProcess(own[name], tmp_path / f"{name}.log").start(timeout=120))  # same state, port
            joined_at = stream.produced
            stream.pause = 0  # joined: the rest of the third at once
            assert joined_at > produced_at_join, f"no order was produced while {name} restarted: not under a stream"
            stream.finish(300)
            settle(settings, tails, 2 * third if rest is None else len(records), live)
            survivors.append((name, before, scrape(staying), produced_at_join, joined_at))
        lifetimes += [scrape(worker) for worker in live]
    finally:
        for worker in (a, b, *live):
            worker.stop()
        for tail in tails:
            tail.drain()
            tail.close()

    checks = {tail.topic: check_output(dataset, tail.records, n) for tail in tails}
    for topic, check in checks.items():  # a clean rebalance commits on revoke: nothing read twice, nothing lost
        assert check.missing == [] and check.wrong == [] and check.duplicates == 0, (topic, check)
    for name, before, after, _, _ in survivors:  # the other worker left and came back: two rebalances, commits
        assert total(after, "streamapp_rebalances_total") >= total(before, "streamapp_rebalances_total") + 2, name
        assert total(after, "streamapp_commits_total", kind="offsets") > total(before, "streamapp_commits_total",
                                                                            kind="offsets"), name
    for output in (settings.merged_topic, settings.merged_repartition_topic):  # four lifetimes, every order once
        assert sum(total(text, "streamapp_join_lookups_total", output=output) for text in lifetimes) == len(records)
        assert sum(total(text, "streamapp_join_lookups_total", output=output, result="hit")
                   for text in lifetimes) == len(records)  # every user was loaded before its orders
        assert sum(total(text, "streamapp_records_written_total", output=output) for text in lifetimes) == len(records)
    assert sum(total(text, "streamapp_records_read_total", topic=settings.orders_topic)
               for text in lifetimes) == len(records)
    assert [total(text, "streamapp_revoke_commits_failed_total") for text in lifetimes] == [0, 0, 0, 0]
    print("rolling restart: " + json.dumps({
        "orders": len(records), "seconds": round(time.monotonic() - started, 1),
        "produced while each restarted worker joined": [(s[3], s[4]) for s in survivors],
        "survivor rebalances": [(total(s[1], "streamapp_rebalances_total"), total(s[2], "streamapp_rebalances_total"))
                                for s in survivors]}))
