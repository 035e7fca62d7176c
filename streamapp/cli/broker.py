"""``streamapp broker``: run the embedded broker in the foreground until Ctrl-C or SIGTERM."""
from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from ..broker import EmbeddedBroker
from ..settings import Settings


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("broker", help="run the embedded Kafka-protocol broker (Tansu, in memory)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9092, help="port to listen on; 0 picks a free one (default 9092)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with EmbeddedBroker(host=args.host, port=args.port) as broker:
        print(f"Embedded broker (Tansu, in memory) ready on {broker.bootstrap}", flush=True)
        print("Point streamapp at it with:", flush=True)
        for name, value in broker.env().items():
            print(f"  export {name}={value}", flush=True)
        stop.wait()
        print("Stopping the embedded broker; its data is gone.", flush=True)
    return 0
