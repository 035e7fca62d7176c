"""A joint batch handler (a windowed join's two sides, issue 37) gets a fetch's records of all its topics in one
call, each partition's merged in event-time order, as Kafka Streams' task takes them: not a call per run of one
topic, each of which waited a broker round trip for its outputs.  No broker: :func:`rounds` and :func:`pieces`."""
from __future__ import annotations

from faust.types import TP

from streamapp.worker.transport import Handler, InOrder, pieces, rounds


class Msg:
    def __init__(self, topic: str, ts: int) -> None:
        self.topic, self.timestamp = topic, ts

    def __repr__(self) -> str:
        return f"{self.topic}@{self.timestamp}"


async def nothing(_batches: object) -> None:
    return None


def test_a_joint_handlers_topics_are_one_call_each_partition_in_event_time_order() -> None:
    handlers = {"a": Handler(nothing, joint="ab"), "b": Handler(nothing, joint="ab"), "o": Handler(nothing)}
    a0 = [Msg("a", t) for t in (1, 3, 4, 9)]
    b0 = [Msg("b", t) for t in (2, 5)]
    a1, o1 = [Msg("a", 7)], [Msg("o", 1)]
    fetched = {TP("a", 0): a0, TP("b", 0): b0, TP("a", 1): a1, TP("o", 1): o1}
    assert rounds(fetched, handlers) == [  # type: ignore[arg-type]
        [("o", {TP("o", 1): o1}),
         ("a", InOrder([(TP("a", 0), a0[:1]), (TP("b", 0), b0[:1]), (TP("a", 0), a0[1:3]), (TP("b", 0), b0[1:]),
                        (TP("a", 0), a0[3:]), (TP("a", 1), a1)]))],
    ]


def test_a_joint_call_is_cut_in_its_order() -> None:
    a, b = TP("a", 0), TP("b", 0)
    call = InOrder([(a, [1, 2, 3]), (b, [4]), (a, [5, 6])])
    assert list(pieces(call, size=2)) == [InOrder([(a, [1, 2])]), InOrder([(a, [3]), (b, [4])]),  # type: ignore[arg-type]
                                          InOrder([(a, [5, 6])])]
    assert list(pieces({a: [1, 2, 3], b: [4]}, size=2)) == [{a: [1, 2]}, {a: [3], b: [4]}]
