"""The streamapp worker's Faust agents, installed on an app by :func:`install` (``create_app`` calls it)."""
from __future__ import annotations

from streamapp.worker.app import StreamappApp

from . import counters_log, orders, users, users_repartition
from .dead_lettering import DeadLettering


def install(app: StreamappApp) -> None:
    """Every agent and the timer, sharing one :class:`DeadLettering` (the record limits are read once)."""
    dead_letters = DeadLettering(app)
    users.install(app, dead_letters)
    users_repartition.install(app, dead_letters)
    orders.install(app, dead_letters)
    counters_log.install(app)
