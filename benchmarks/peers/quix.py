"""The orders join as a Python team would write it with Quix Streams: the peer in ``benchmarks/worker.py``.

Quix Streams' own stream–table join, ``join_asof(how="left")``, with its RocksDB
state (and its changelog topics), twice: the orders against the users as their
producer placed them, and against the users re-keyed into a repartition topic
(murmur2, as the worker's partitioner), writing the same two outputs in the same
format as the worker (ksqlDB's columns, compact JSON, explicit nulls on a miss).
Quix Streams pins its own confluent-kafka, so it runs under its own interpreter:

    python3 -m venv /tmp/quix && /tmp/quix/bin/pip install quixstreams==3.28.1
    .venv/bin/python benchmarks/worker.py --quix-python /tmp/quix/bin/python

This file is run by that interpreter, on its own (no streamapp import); it sits in
``benchmarks/peers/`` so that ``run_all.py`` does not take it for a benchmark.
"""
from __future__ import annotations

import argparse
import json
from typing import Any


def joined(order: dict[str, Any], user: dict[str, Any] | None) -> bytes:
    """ksqlDB's LEFT JOIN value: NAME, AGE, then the order's columns, compact JSON."""
    return json.dumps({"NAME": user["name"] if user else None, "AGE": user["age"] if user else None,
                       "PRODUCT_ID": order["product_id"], "QTY": order["qty"], "UNIT_PRICE": order["unit_price"],
                       "CHANNEL": order["channel"], "TS": order["ts"]},
                      separators=(",", ":"), ensure_ascii=False).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--bootstrap", "--group", "--state-dir", "--users", "--orders", "--repartition", "--merged",
                 "--merged-repartition"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()

    from quixstreams import Application

    app = Application(broker_address=args.bootstrap, consumer_group=args.group, auto_offset_reset="earliest",
                      state_dir=args.state_dir, producer_extra_config={"partitioner": "murmur2_random"})
    users_topic = app.topic(args.users, key_deserializer="bytes", value_deserializer="json")
    repartition_topic = app.topic(args.repartition, key_serializer="bytes", value_serializer="json",
                                  key_deserializer="bytes", value_deserializer="json")
    orders_topic = app.topic(args.orders, key_deserializer="bytes", value_deserializer="json")
    outputs = [app.topic(name, key_serializer="bytes", value_serializer="bytes")
               for name in (args.merged, args.merged_repartition)]

    users = app.dataframe(users_topic)
    users.to_topic(repartition_topic)
    repartitioned = app.dataframe(repartition_topic)
    orders = app.dataframe(orders_topic)
    for table, output, name in ((users, outputs[0], "users"), (repartitioned, outputs[1], "users_repartition")):
        orders.join_asof(table, how="left", on_merge=joined, name=name).to_topic(output)
    app.run()


if __name__ == "__main__":
    main()
