"""Log the counters once a second when they changed: the worker's progress, for people."""
from __future__ import annotations

import logging

from streamapp.worker.app import app
from streamapp.worker.counters import counters, summary_line

logger = logging.getLogger(__name__)

_last: list[str] = [""]


@app.timer(interval=1.0)
async def log_counters() -> None:
    line = summary_line(counters.snapshot())
    if line != _last[0]:
        _last[0] = line
        logger.info(line)
