"""streamapp: see where each Kafka client puts a key, and keep stream–table joins co-partitioned.

``faust -A streamapp worker`` finds the Faust app as ``streamapp.app``; it is
imported lazily so that the CLI's pure commands (``streamapp partition``) start
without loading Faust.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "app":
        from .worker.app import app

        return app
    raise AttributeError(f"module 'streamapp' has no attribute {name!r}")
