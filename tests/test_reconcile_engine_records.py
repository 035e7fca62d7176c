"""The reconciliation on records both real engines write: null columns, and the engines' legitimate differences.

The Faust worker and the Kafka Streams program (ksqlDB's joins, not ksqlDB, which cannot run
here) join the same orders: ordinary ones, ones whose columns are null or missing or read
through ksqlDB's coercions (upper-case names, ``"7"`` for a BIGINT), a null-key order (both
engines join it with NULL user columns, each in a partition its producer picks at random), one
whose key is not UTF-8 (Kafka Streams reads it with U+FFFD, the worker dead-letters it) and one
no engine can read.  The job, reading both engines' outputs from Kafka, must call none of their
records undecodable, match every order both wrote (null PRODUCT_ID and the null key included,
whatever partitions the null-key order went to), name the difference by its cause, and count the
input records it could not use.
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from streamapp.kafka.ksql_equivalent import KsqlEquivalent
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from workerkit import DAY_START_MS, make_users, produce

from test_reconcile_engines import (HOUR_MS, engines, load_users, nonzero, reconcile,  # noqa: F401 - fixtures
                                    settings, wait_outputs)

BAD_KEY = b"\xff\xfej-bad"


def test_null_columns_and_the_engines_legitimate_differences(
        spark: Any, settings: Settings, engines: tuple[WorkerProcess, KsqlEquivalent], tmp_path: Path) -> None:
    worker, _ = engines
    users = make_users(6, seed=31)
    load_users(settings, worker, users, "murmur2_random")  # co-partitioned: every join finds its user
    ids = list(users)
    rng = random.Random(31)
    ts = iter(range(DAY_START_MS + HOUR_MS, DAY_START_MS + 2 * HOUR_MS, 60_000))

    def value(**columns: Any) -> tuple[int, bytes]:
        t = next(ts)
        row = {"ts": t, "product_id": rng.randint(1, 10**6), "qty": 2, "unit_price": 9.5, "channel": "web", **columns}
        return t, json.dumps({k: v for k, v in row.items() if v != "missing"}).encode()

    joined = [(uid.encode(), *value()) for uid in ids]
    joined += [(ids[0].encode(), *value(product_id=None)),                        # a null PRODUCT_ID
               (ids[1].encode(), *value(qty="missing", channel=None, unit_price="NaN"))]
    t = next(ts)
    joined.append((ids[2].encode(), t, json.dumps({"TS": t, "PRODUCT_ID": "7", "Qty": 3.9}).encode()))  # coerced
    only_streams = [(None, *value()), (BAD_KEY, *value())]
    t = next(ts)
    unreadable = [(ids[3].encode(), b"not json", t)]
    produce(settings.bootstrap_servers, settings.orders_topic, [(k, v, t) for k, t, v in joined + only_streams] + unreadable)
    wait_outputs(settings, faust=len(joined) + 1, streams=len(joined) + len(only_streams))  # + the null key

    summary, detail = reconcile(spark, settings, tmp_path / "out")
    for role, read in summary["output_records"].items():
        wanted = len(joined) + (len(only_streams) if role.startswith("ksqldb") else 1)
        assert read == {"rows": wanted, "undecodable": 0}, role
    assert summary["input_records"]["demo_user_orders"] == {"rows": len(joined) + len(only_streams) + len(unreadable),
                                                  "undecodable": 1, "null_key": 1, "non_utf8_key": 1, "tombstones": 0}
    assert summary["input_records"]["demo_user"]["rows"] == len(users)
    assert nonzero(summary["statuses"]) == {pair: {"match": len(joined) + 1, "missing_in_faust": 1}
                                            for pair in ("direct", "repartition")}
    assert nonzero(summary["causes"]) == {pair: {"non_utf8_key": 1} for pair in ("direct", "repartition")}
    replaced = BAD_KEY.decode("utf-8", "replace")
    assert {(pair, status, user_id): cause for (pair, status, user_id, _), cause in detail.items()} == {
        (pair, "missing_in_faust", replaced): "non_utf8_key" for pair in ("direct", "repartition")}
