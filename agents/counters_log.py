"""Log the counters once a second when they changed: the worker's progress, for people."""
from __future__ import annotations

import logging

from streamapp.worker.app import StreamappApp
from streamapp.worker.counters import summary_line

logger = logging.getLogger(__name__)


def install(app: StreamappApp) -> None:
    last = [""]

    @app.timer(interval=1.0, name="agents.counters_log.log_counters")
    async def log_counters() -> None:
        line = summary_line(app.counters.snapshot())
        if line != last[0]:
            last[0] = line
            logger.info(line)
