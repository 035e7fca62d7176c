"""The app's flow control keeps the standby changelog rows a recovery fetches between its two resumes.

Deterministic, no broker: a real app, not started, and the queues Faust itself
builds (the table manager's changelog queue; a stream's queue), driven in the
order Faust's recovery drives them after a rebalance: suspend and clear, resume
when the standby partitions are read, then resume again after ``perform_seek``.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from streamapp.settings import Settings
from streamapp.worker.app import create_app


def drained(queue: asyncio.Queue) -> list[str]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def test_a_resume_while_flowing_keeps_the_standby_rows_and_still_clears_the_streams(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[str], list[str], list[str], list[str], bool]:
        app = create_app(Settings(data_dir=str(tmp_path / "data")))
        flow, changelog = app.flow_control, app.tables.changelog_queue
        stream = app.FlowControlQueue(maxsize=app.conf.stream_buffer_maxsize, clear_on_resume=True)
        flow.resume()
        changelog.put_nowait("row fetched before the rebalance")
        stream.put_nowait("order fetched before the rebalance")
        flow.suspend()  # the rebalance (Faust also clears here; the first resume must clear all the same)
        flow.resume()  # recovery reads the standby partitions
        after_first = (drained(changelog), drained(stream))
        changelog.put_nowait("standby row 56")  # fetched while perform_seek (and the fence) ran
        stream.put_nowait("order fetched before the seek moved its partition back")
        flow.resume()  # recovery's resume after perform_seek, flow already on
        return (*after_first, drained(changelog), drained(stream), flow.is_active())

    first_changelog, first_stream, changelog, stream, active = asyncio.run(scenario())
    assert (first_changelog, first_stream) == ([], []), "the first resume after a rebalance drops what is stale"
    assert changelog == ["standby row 56"], "a standby row fetched between the resumes reaches the table"
    assert stream == [], "a stream's queue is cleared as Faust clears it: the seek fetches its records again"
    assert active
