"""Bad input never stops the worker and is never lost: malformed records go to the dead-letter topic with the reason.

A null user value is not bad input: it is a tombstone that deletes the user, as in a ksqlDB table.  Nor is an
order with a null key: ksqlDB joins it (Kafka Streams 3.7+, KIP-962) with NULL user columns and writes it with a
null key, in the partition the Java producer's sticky partitioner picks; so does the worker, under both
processing guarantees.  A user with a null key is no table row (Kafka Streams' KTableSource skips it): a dead letter.

Real worker process, real Apache Kafka broker, records produced by librdkafka.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from streamapp.model.dead_letters import from_record
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess

from workerkit import isolated, make_order, make_users, produce, read_all, stats, to_json, wait_for_users, wait_until

BAD_USERS: list[tuple[bytes | None, bytes | None, str]] = [
    (b"bad-user-1", b'{"name": "x", "age": true}', "'AGE' is True (a JSON boolean), expected a BIGINT"),
    (b"bad-user-2", b'{"name": "x", "age": "old"}', "'AGE' is 'old' (a string), expected a BIGINT"),
    (b"bad-user-3", b"{broken", "not valid JSON"),
    (None, b'{"name": "nobody", "age": 1}', "key is null"),
    (None, None, "key is null"),  # neither key nor value: its dead letter is written all the same
    (b"bad-user-5", b'{"name": "x", "age": NaN}', "NaN is not a JSON number"),  # a missing field is NULL, an empty key ""
]
BAD_ORDERS: list[tuple[bytes | None, bytes | None, str]] = [
    (b"bad-order-1", b"not json at all", "not valid JSON"),
    (b"bad-order-2", b'{"product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}', "'TS' is missing"),
    (b"bad-order-3", b'{"ts": 5, "product_id": 1, "qty": "two", "unit_price": 1.0, "channel": "web"}',
     "'QTY' is 'two' (a string), expected a BIGINT"),
    (b"bad-order-4", None, "value is null"),
    (b"bad-order-5", b"[1,2,3]", "JSON list, expected an object"),
    (None, b'{"ts": 5, "qty": 1', "not valid JSON"),  # a null-key order is read, its value is still checked
    (None, None, "value is null"),  # neither key nor value (ksqlDB ignores a null order): a dead letter still
    (b"\xff\xfe\xfd", b'{"ts": 5, "product_id": 1, "qty": 1, "unit_price": 1.0, "channel": "web"}', "not UTF-8"),
]


def miss_value(order: dict[str, object]) -> bytes:
    """ksqlDB's output value for an order that found no user: compact JSON, NAME and AGE null, in select order."""
    columns = {"NAME": None, "AGE": None, "PRODUCT_ID": order["product_id"], "QTY": order["qty"],
               "UNIT_PRICE": order["unit_price"], "CHANNEL": order["channel"], "TS": order["ts"]}
    return json.dumps(columns, separators=(",", ":")).encode()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_malformed_records_are_dead_lettered_and_valid_orders_joined(
    broker_settings: Settings, tmp_path: Path, guarantee: str
) -> None:
    settings = isolated(broker_settings, processing_guarantee=guarantee)
    n = settings.partitions
    users = make_users(40, seed=3)
    rng = random.Random(5)
    orders = {user_id: make_order(user_id, rng) for user_id in users}
    null_key_orders = [make_order("", rng) for _ in range(3)]  # ts drawn at random: not in key order
    good_users = [(uid.encode(), to_json(row)) for uid, row in users.items()]
    good_orders = [(uid.encode(), to_json(order)) for uid, order in orders.items()]
    mixed_users = good_users[:20] + [(k, v) for k, v, _ in BAD_USERS] + good_users[20:]
    mixed_orders = (good_orders[:20] + [(k, v) for k, v, _ in BAD_ORDERS] + [(None, to_json(o)) for o in null_key_orders]
                    + good_orders[20:])

    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        produce(settings.bootstrap_servers, settings.users_topic, mixed_users, "murmur2")
        wait_for_users([worker], len(users))
        deleted = next(iter(users))
        produce(settings.bootstrap_servers, settings.users_topic, [(deleted.encode(), None)], "murmur2")
        wait_until(lambda: (lambda s: (s["deleted"].get(settings.users_topic), s["deleted"].get(
                       settings.users_repartition_topic)) == (1, 1))(stats(worker)),
                   60, "the tombstone to delete the user from both tables", [worker])
        produce(settings.bootstrap_servers, settings.orders_topic, mixed_orders, "murmur2")

        for topic in (settings.merged_topic, settings.merged_repartition_topic):
            records = read_all(settings.bootstrap_servers, topic, n, len(orders) + len(null_key_orders))
            assert len(records) == len(orders) + len(null_key_orders), topic
            # null-key orders: as ksqlDB writes them (key null, the bytes of a miss, timestamp ts), each once, all in
            # one partition (the Java producer's sticky partitioner: 3 small records stay in the partition it drew)
            null_keyed = [rec for rec in records if rec.key is None]
            assert sorted((rec.value, rec.timestamp) for rec in null_keyed) == sorted(
                (miss_value(o), o["ts"]) for o in null_key_orders), (topic, null_keyed)
            assert len({rec.partition for rec in null_keyed}) == 1 and null_keyed[0].partition in range(n), null_keyed
            for rec in records:
                if rec.key is None:
                    continue
                user_id = rec.key.decode()
                value = json.loads(rec.value)
                user = (None, None) if user_id == deleted else (users[user_id]["name"], users[user_id]["age"])
                assert (value["NAME"], value["AGE"]) == user, "a tombstone deletes the user from both tables"
                assert value["TS"] == orders[user_id]["ts"]

        expected = len(BAD_USERS) + len(BAD_ORDERS)
        letters = [from_record(r.key, r.value, r.headers)
                   for r in read_all(settings.bootstrap_servers, settings.dead_letter_topic, n, expected)]
        assert len(letters) == expected
        for source, bad in ((settings.users_topic, BAD_USERS), (settings.orders_topic, BAD_ORDERS)):
            got = sorted(((d.key, d.value, d.reason) for d in letters if d.source_topic == source),
                         key=repr)
            assert len(got) == len(bad), got
            for key, value, words in bad:
                match = [g for g in got if g[0] == key and g[1] == value]
                assert len(match) == 1, (key, value, got)
                assert words in match[0][2], (words, match[0][2])
        assert all(d.source_partition in range(n) and d.source_offset >= 0 for d in letters)
        assert worker.proc is not None and worker.proc.poll() is None, worker.tail()
        assert "Dead letter from" in worker.log()
        assert "Traceback" not in worker.log()
    finally:
        assert worker.stop() == 0, worker.tail()
