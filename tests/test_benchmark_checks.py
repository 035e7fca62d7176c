"""The orders benchmark's completeness check (benchmarks/worker.py): a round counts only when every order is in each
output exactly once, with its own user, so that its clock, stopped at an offset count, counted orders."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from worker import check_outputs, orders_records, users_by_key, users_records  # noqa: E402

USERS = users_records(5, seed=1)
ORDERS = orders_records([k for k, _ in USERS], 20, seed=2)
BY_KEY = users_by_key(USERS)


def joined(key: bytes, order: bytes, user: dict | None) -> tuple[bytes, bytes]:
    columns = {k.upper(): v for k, v in json.loads(order).items()}
    return key, json.dumps({"NAME": user and user["name"], "AGE": user and user["age"], **columns}).encode()


def test_the_joined_orders_pass_and_what_is_missing_extra_or_someone_elses_fails() -> None:
    good = [joined(k, v, BY_KEY[k]) for k, v in ORDERS]
    assert check_outputs(ORDERS, BY_KEY, list(reversed(good))) is None  # any order of records
    assert check_outputs(ORDERS, BY_KEY, good[1:]) == "1 orders missing, 0 extra or duplicated (of 20)"
    assert check_outputs(ORDERS, BY_KEY, good + good[:2]) == "0 orders missing, 2 extra or duplicated (of 20)"
    missed = [joined(ORDERS[0][0], ORDERS[0][1], None), *good[1:]]
    assert "carries None, None, not its user's" in (check_outputs(ORDERS, BY_KEY, missed) or "")
    other = next(u for k, u in BY_KEY.items() if k != ORDERS[0][0])
    assert "not its user's" in (check_outputs(ORDERS, BY_KEY, [joined(ORDERS[0][0], ORDERS[0][1], other), *good[1:]])
                                or "")


def test_the_pipe_must_copy_every_order_once() -> None:
    assert check_outputs(ORDERS, None, list(ORDERS)) is None
    assert check_outputs(ORDERS, None, ORDERS + ORDERS[:1]) == "0 orders missing, 1 extra or duplicated (of 20)"
