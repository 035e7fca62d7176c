"""The app's flow control: Faust's, except that a resume while flow is already on keeps the standby changelog events.

Faust clears every queue on each ``resume()``, and its recovery resumes twice after a rebalance:
the second resume dropped the standby rows fetched in between, and nothing read them again
(faust-streaming/faust#212). See docs/explanation/worker-internals.md#flow-control.
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
