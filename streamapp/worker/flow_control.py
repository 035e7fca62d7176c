"""The app's flow control: Faust's, except that a resume while flow is already on keeps the standby changelog events.

Faust's ``app.flow_control`` gates every queue between the consumer and the
agents and tables, and clears those queues on each ``resume()``: what was
fetched before a rebalance is stale.  Its recovery resumes twice after a
rebalance: once when it starts reading the standby changelog partitions, then
again after ``perform_seek`` (under exactly-once that seek waits for the
orders partitions' fence).  The second resume cleared the changelog queue too,
dropping the standby rows fetched in between, while the consumer had already
moved past them and Faust remembers only a standby's highest offset: the rows
were never read again, and a standby that later became active lacked them
(seen in ``tests/test_worker_group.py``; upstream faust-streaming/faust#212).

So a resume while flow is on clears every queue but the changelog queue.
Nothing in it is stale then: a rebalance suspends flow and clears every queue
first, and only partitions read since are feeding it.  The stream queues are
still cleared there, as Faust does: the seek just moved their partitions back
to the committed offsets, so what they hold is fetched again.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable
from weakref import WeakSet

from mode.utils.queues import FlowControlEvent


class FlowControl(FlowControlEvent):
    """Faust's :class:`~mode.utils.queues.FlowControlEvent` whose resume while flowing keeps one queue.

    ``kept``: the queue a resume while flowing leaves as it is (the table manager's
    changelog queue), asked at each resume (Faust builds it lazily).
    """

    def __init__(self, *, kept: Callable[[], Any], loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(loop=loop)
        self._kept = kept
        self._managed: WeakSet[Any] = WeakSet()  # the queues cleared on resume, as Faust's own set holds them

    def manage_queue(self, queue: Any) -> None:
        super().manage_queue(queue)
        self._managed.add(queue)

    def resume(self) -> None:
        """Resume flow; if it was suspended, clear every managed queue (Faust's resume), else all but ``kept``."""
        if not self.is_active():
            super().resume()
            return
        kept = self._kept()
        for queue in list(self._managed):
            if queue is not kept:
                queue.clear()
