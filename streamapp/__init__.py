"""streamapp: see where each Kafka client puts a key, and keep stream–table joins co-partitioned.

``faust -A streamapp worker`` finds the Faust app as ``streamapp.app``.  It is
built on first access, from the ``STREAMAPP_*`` environment, and only there:
importing streamapp does nothing, so the CLI's pure commands (``streamapp
partition``) start without loading Faust, and tests build apps of their own
with :func:`streamapp.worker.app.create_app`.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(f"module 'streamapp' has no attribute {name!r}")
    import sys

    from .errors import StreamappError
    from .settings import Settings
    from .worker.app import create_app
    from .worker.health import REFUSED_EXIT_CODE

    try:
        app = create_app(Settings.from_env())
    except StreamappError as exc:  # a bad setting or plan: one line, not a traceback; not started, as the checks say
        print(f"streamapp worker: {exc}", file=sys.stderr)
        raise SystemExit(REFUSED_EXIT_CODE) from None
    globals()["app"] = app  # the process's one app: later lookups do not come here
    return app
