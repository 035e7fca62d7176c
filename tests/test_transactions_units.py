"""The exactly-once pieces that need no broker: the setting, the transactional ids, when a transaction commits,
and which fetched orders a transaction may still take (the end-to-end proof is tests/test_exactly_once.py)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from streamapp.cli import main as cli_main
from streamapp.settings import Settings, SettingsError
from streamapp.worker.transactions import COMMIT_INTERVAL, MAX_ORDERS, OpenTransaction, is_due, transactional_id


def test_the_setting_takes_two_values_from_the_environment_and_refuses_others_in_one_line() -> None:
    assert Settings().processing_guarantee == "at_least_once"
    assert Settings.from_env({"STREAMAPP_PROCESSING_GUARANTEE": "exactly_once"}).processing_guarantee == "exactly_once"
    with pytest.raises(SettingsError, match=r"^processing_guarantee='exactly-once': expected one of at_least_once, "
                                            r"exactly_once$"):
        Settings(processing_guarantee="exactly-once")


def test_the_demo_flag_is_one_line_when_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["demo", "--processing-guarantee", "exactly-once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["streamapp demo: processing_guarantee='exactly-once': expected one of at_least_once, exactly_once"]


def test_one_transactional_id_per_stream_partition_shared_by_every_worker_of_the_app() -> None:
    assert [transactional_id("app", "orders", p) for p in range(3)] == ["app-orders-0", "app-orders-1", "app-orders-2"]
    assert transactional_id("app", "payments", 0) != transactional_id("app", "orders", 0)


def test_a_transaction_commits_when_old_enough_or_full_and_never_empty() -> None:
    assert not is_due(COMMIT_INTERVAL * 10, 0)
    assert not is_due(COMMIT_INTERVAL / 2, 1)
    assert is_due(COMMIT_INTERVAL, 1)
    assert is_due(0.0, MAX_ORDERS)


@dataclass
class Msg:
    offset: int


def test_a_transaction_takes_no_order_below_where_it_stands() -> None:
    """A batch fetched before the fence's seek (older offsets) or fetched again after it is not processed twice."""
    txn = OpenTransaction(0, producer=None, base_offsets={"orders": 100, "shipments": 7})
    assert [m.offset for m in txn.unprocessed("orders", [Msg(o) for o in range(95, 103)])] == [100, 101, 102]
    txn.processed("orders", 103, 3)
    assert [m.offset for m in txn.unprocessed("orders", [Msg(o) for o in range(100, 106)])] == [103, 104, 105]
    batch = [Msg(o) for o in range(103, 106)]
    assert txn.unprocessed("orders", batch) is batch  # the usual case costs no copy
    assert OpenTransaction(1, producer=None).unprocessed("orders", batch) is batch  # no base known: all
    # a co-partitioned topic sharing the transaction (a stream-stream join's other side) stands where it stands
    assert [m.offset for m in txn.unprocessed("shipments", [Msg(o) for o in range(5, 9)])] == [7, 8]


def test_a_fence_error_left_on_a_future_nobody_awaits_is_not_logged_as_a_traceback(caplog) -> None:
    """aiokafka sets a fenced sender's error on each queued batch's drain waiter, which nobody awaits: those are
    one debug line; any other unretrieved error still reaches asyncio's handler (seen in the zombie scenario)."""
    import asyncio
    import gc
    import logging

    from aiokafka.errors import ProducerFenced

    from streamapp.worker.transactions import quiet_fenced_futures

    async def leave_errors() -> None:
        quiet_fenced_futures(asyncio.get_running_loop())
        quiet_fenced_futures(asyncio.get_running_loop())  # once is enough: not wrapped twice
        for error in (ProducerFenced(), ValueError("not a fence")):
            future = asyncio.get_running_loop().create_future()
            future.set_exception(error)
            del future
            gc.collect()

    with caplog.at_level(logging.DEBUG):
        asyncio.run(leave_errors())
    unretrieved = [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert [type(r.exc_info[1]).__name__ for r in unretrieved if r.exc_info] == ["ValueError"]
    assert any("fenced producer's error" in r.getMessage() for r in caplog.records)
