"""``streamapp broker``: run Apache Kafka (one KRaft node) in the foreground until Ctrl-C or SIGTERM."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..kafka.broker import BrokerError, EmbeddedBroker
from ..kafka.child import run_until, stop_on_signals
from ..settings import Settings, add_arguments


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "broker", help="run Apache Kafka on loopback: one KRaft node, broker and controller, in a child JVM"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9092, help="client port; 0 picks a free one (default 9092)")
    parser.add_argument(
        "--data-dir", type=Path, default=None, dest="broker_data_dir",
        help="keep the log here across restarts (default: a temporary directory, removed on stop)",
    )
    parser.add_argument(
        "--secured", action="store_true",
        help="a SASL_SSL listener: SCRAM-SHA-512 users made at format time, a certificate from a throw-away CA "
        "(openssl, PEM, in the data dir); prints the client settings, the CA file and password file included; "
        "more listeners on their own ports: SASL_PLAINTEXT, SSL, MTLS (client certificate required), WRONG_HOST",
    )
    add_arguments(parser, only=("broker_heap",))
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stop = stop_on_signals()
    broker = EmbeddedBroker.from_settings(settings, host=args.host, port=args.port, data_dir=args.broker_data_dir,
                                          secured=args.secured)
    with broker:
        kept = f"data in {broker.data_dir}" if args.broker_data_dir else "data in a temporary directory, removed on stop"
        print(f"Apache Kafka ready on {broker.bootstrap} (pid {broker.pid}, {kept})", flush=True)
        print("Point streamapp at it with:", flush=True)
        for name, value in broker.env().items():
            print(f"  export {name}={value}", flush=True)
        for line in broker.other_listeners():
            print(line, flush=True)
        run_until(broker, stop, lambda status: BrokerError(
            f"Apache Kafka on {broker.bootstrap} exited by itself (status {status}); see its log above"))
        print("Stopping Apache Kafka" + ("; its data is kept." if args.broker_data_dir else "; its data is removed."), flush=True)
    return 0
