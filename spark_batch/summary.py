"""The reconciliation's summary as typed, frozen values: read by attribute, written by ``to_dict()``.

``Summary.to_dict()`` is exactly what ``summary.json`` holds (schedulers and tests
read that file); the job, its console table and ``report.html`` read the values.
``partial`` is set when the window was not over: the counts are what was there up to ``as_of``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from .window import OffsetPlan, Partial, TimeWindow


def mismatch_rate(statuses: Mapping[str, int]) -> float:
    """Share of a pair's rows whose status is not ``match`` (0 for no rows)."""
    total = sum(statuses.values())
    return 0.0 if total == 0 else (total - statuses.get("match", 0)) / total


@dataclass(frozen=True)
class PairTotals:
    """One pair's rows (its stream's records), how many of them do not match, and that share."""

    orders: int
    mismatches: int
    mismatch_rate: float

    @classmethod
    def of(cls, statuses: Mapping[str, int]) -> "PairTotals":
        orders = sum(statuses.values())
        return cls(orders, orders - statuses["match"], mismatch_rate(statuses))


@dataclass(frozen=True)
class OutputRecords:
    """Records read from one join output, and how many of them carried no order identity."""

    rows: int
    undecodable: int


@dataclass(frozen=True)
class InputRecords:
    """Records read from an input (a stream, a table), and how the engines take them (``ksql_json``'s kinds).

    ``undecodable``: neither engine can use the record (a value or key ksqlDB cannot read, a stream
    record without a valid event time or without a value); ``null_key``: a stream record both engines
    join with NULL table columns, a table row both ignore; ``non_utf8_key``: the worker dead-letters the
    record, Kafka Streams reads it; ``tombstones``: table rows deleted.
    """

    rows: int
    undecodable: int
    null_key: int
    non_utf8_key: int
    tombstones: int


@dataclass(frozen=True)
class PartitionCell:
    """Mismatches of one pair whose stream record sat in ``order_partition`` and whose table row in ``user_partition``."""

    pair: str
    order_partition: int
    user_partition: int
    count: int


@dataclass(frozen=True)
class Threshold:
    """The limit on a pair's mismatch rate, and the pairs above it."""

    max_mismatch_rate: float
    breached_pairs: tuple[str, ...]

    @property
    def breached(self) -> bool:
        return bool(self.breached_pairs)

    def to_dict(self) -> dict[str, Any]:
        return {"max_mismatch_rate": self.max_mismatch_rate, "breached": self.breached,
                "breached_pairs": list(self.breached_pairs)}


@dataclass(frozen=True)
class Sample:
    """One non-matching row, as the report's examples show it: its join key and event time."""

    pair: str
    status: str
    cause: str
    key: str
    time: int
    cause_detail: str


@dataclass(frozen=True)
class Summary:
    """Counts by status (every order) and by cause and partition pair (the mismatches), and what was read."""

    window: TimeWindow
    source: str
    #: Role -> the topic (or export) read for it.
    topics: dict[str, str]
    #: Pair -> what it reconciles: the statements, its query, stream, table, identity and table columns.
    pairs: dict[str, dict[str, Any]]
    #: Stream role -> its topic's partition count.
    stream_partitions: dict[str, int]
    offsets: OffsetPlan | None
    #: Output role (``faust_<pair>``, ``ksqldb_<pair>``) -> what was read from it.
    output_records: dict[str, OutputRecords]
    #: Input role (a stream's or a table's source, lower-cased) -> what was read from it (streams: the window's).
    input_records: dict[str, InputRecords]
    #: Pair -> status -> rows.
    statuses: dict[str, dict[str, int]]
    totals: dict[str, PairTotals]
    #: Pair -> cause -> mismatching rows.
    causes: dict[str, dict[str, int]]
    by_partition_pair: tuple[PartitionCell, ...]
    threshold: Threshold
    detail: str
    versions: dict[str, str]
    #: Set when the window was read before it was over (``--allow-partial``): up to when, and when it closes.
    partial: Partial | None = None

    @property
    def date(self) -> str:
        return self.window.label

    def to_dict(self) -> dict[str, Any]:
        return {
            "date": self.date,
            "window": self.window.to_dict(),
            "partial": None if self.partial is None else self.partial.to_dict(),
            "source": self.source,
            "topics": dict(self.topics),
            "pairs": self.pairs,
            "stream_partitions": dict(self.stream_partitions),
            "offsets": None if self.offsets is None else self.offsets.to_dict(),
            "output_records": {role: asdict(records) for role, records in self.output_records.items()},
            "input_records": {role: asdict(records) for role, records in self.input_records.items()},
            "statuses": self.statuses,
            "totals": {pair: asdict(totals) for pair, totals in self.totals.items()},
            "causes": self.causes,
            "by_partition_pair": [asdict(cell) for cell in self.by_partition_pair],
            "threshold": self.threshold.to_dict(),
            "detail": self.detail,
            "versions": self.versions,
        }
