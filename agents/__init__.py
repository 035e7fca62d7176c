"""The streamapp worker's Faust agents, installed on an app by :func:`install` (``create_app`` calls it)."""
from __future__ import annotations

from streamapp.worker.app import StreamappApp

from . import counters_log, stream_joins, streams, tables
from .dead_lettering import DeadLettering


def install(app: StreamappApp) -> None:
    """An agent per table topic, per joined stream and per stream-stream join side, and the timer, sharing one
    :class:`DeadLettering` (the record limits are read once)."""
    dead_letters = DeadLettering(app)
    tables.install(app, dead_letters)
    streams.install(app, dead_letters)
    stream_joins.install(app, dead_letters)
    counters_log.install(app)
