"""The demo's two reports: matched partitions between the table and the stream, and join results.

Both are pure functions of what was read back from the topics, so the numbers a
person sees are tested without a broker; ``render_*`` turn them into rich tables.
The columns come from the plan (:class:`Columns`): nothing here names a column.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Iterable, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from ..kafka.reader import Record
from ..model.records import RecordError
from ..sql.formats import Codec

MISSING = "???"
#: Rows a table shows people; --json has them all.
TABLE_ROWS = 25
#: The engines whose joins a run reports, in the order their tables stand side by side.
FAUST, KAFKA_STREAMS, KSQLDB = "Faust", "Kafka Streams", "ksqlDB"
ENGINES = (FAUST, KAFKA_STREAMS, KSQLDB)


@dataclass(frozen=True)
class Columns:
    """A join's columns as its report shows them: the key that names a row, the stream's shown once, the
    table's under each engine, and every table column (all NULL: the join missed)."""

    key: str
    stream: tuple[str, ...]
    table: tuple[str, ...]
    hit: tuple[str, ...]


def join_title(engine: str, join: str) -> str:
    """The title of one engine's join in a run's report (and its key in ``--json``)."""
    return f"{engine} join, {join}"


@dataclass(frozen=True)
class PartitionMismatch:
    key: str
    table_partition: int
    stream_partition: int | None


@dataclass(frozen=True)
class MatchReport:
    """Where each key's table record sits in the table's topic versus its stream record in the stream's."""

    table_topic: str
    stream_topic: str
    total: int
    matched: int
    exceptions: list[PartitionMismatch] = field(default_factory=list)

    @property
    def matched_pct(self) -> float:
        return 100.0 * self.matched / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "table_topic": self.table_topic,
            "stream_topic": self.stream_topic,
            "total": self.total,
            "matched": self.matched,
            "matched_pct": round(self.matched_pct, 2),
            "exceptions": [asdict(e) for e in self.exceptions],
        }


def match_partitions(
    table_topic: str, table: Mapping[str, int], stream_topic: str, stream: Mapping[str, int]
) -> MatchReport:
    """Compare each key's table partition with its stream record's (``None`` when the record is absent)."""
    exceptions = [
        PartitionMismatch(key, partition, stream.get(key))
        for key, partition in sorted(table.items())
        if stream.get(key) != partition
    ]
    return MatchReport(table_topic, stream_topic, len(table), len(table) - len(exceptions), exceptions)


@dataclass(frozen=True)
class JoinRow:
    key: str
    partition: int | None
    columns: dict[str, object]
    #: Some table column is set: the join found the table's row.
    hit: bool


@dataclass(frozen=True)
class JoinResults:
    """The output of one join for the stream records of a run: which found their table row."""

    source: str
    rows: list[JoinRow]
    expected: int
    columns: Columns
    undecodable: int = 0

    @property
    def hits(self) -> int:
        return sum(row.hit for row in self.rows)

    @property
    def misses(self) -> int:
        return len(self.rows) - self.hits

    @property
    def absent(self) -> int:
        return max(self.expected - len(self.rows), 0)

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "expected": self.expected,
            "received": len(self.rows),
            "hits": self.hits,
            "misses": self.misses,
            "absent": self.absent,
            "undecodable": self.undecodable,
            "rows": [{self.columns.key: r.key, "partition": r.partition, **_plain(r.columns)} for r in self.rows],
        }


def _plain(columns: Mapping[str, object]) -> dict[str, object]:
    """The columns as JSON takes them: a DECIMAL as its exact text."""
    return {name: str(value) if isinstance(value, Decimal) else value for name, value in columns.items()}


def _row(key: str, partition: int | None, values: Mapping[str, object], columns: Columns) -> JoinRow:
    return JoinRow(key, partition, dict(values), any(values.get(c) is not None for c in columns.hit))


def join_results(source: str, records: Iterable[Record], wanted: Mapping[bytes, str], codec: Codec,
                 columns: Columns) -> JoinResults:
    """A join's output records for this run's keys (``wanted``: key bytes -> the key as shown), read by the
    output's codec; the latest per key."""
    rows: dict[str, JoinRow] = {}
    undecodable = 0
    for record in records:
        key = wanted.get(record.key)  # type: ignore[arg-type]
        if key is None:
            continue
        try:
            value = codec.decode_value(record.value)
        except RecordError:
            undecodable += 1
            continue
        if value is None:
            undecodable += 1
            continue
        rows[key] = _row(key, record.partition, value, columns)
    return JoinResults(source, [rows[k] for k in sorted(rows)], len(wanted), columns, undecodable)


def join_rows_from_columns(source: str, names: list[str], rows: Iterable[list[object]], expected: int,
                           columns: Columns) -> JoinResults:
    """Join results from a ksqlDB push query's column names and rows (the key column among them)."""
    upper = [n.upper() for n in names]
    result = []
    for values in rows:
        data = dict(zip(upper, values))
        result.append(_row(str(data.pop(columns.key.upper(), "")), None, data, columns))
    return JoinResults(source, result, expected, columns)


def _more(console: Console, rows: int) -> None:
    if rows > TABLE_ROWS:
        console.print(f" ... {rows - TABLE_ROWS} more rows (--json lists them all)")


def render_match(console: Console, title: str, report: MatchReport, key: str = "KEY") -> None:
    console.print(f"[bold]{title}[/bold]: {report.table_topic} vs {report.stream_topic} ({report.total} keys)")
    console.print(f" - Matched partitions: {report.matched_pct:.2f}%")
    if not report.exceptions:
        return
    table = Table(key, f"{report.table_topic} partition", f"{report.stream_topic} partition",
                  title=f"{len(report.exceptions)} exceptions", title_justify="left")
    for e in report.exceptions[:TABLE_ROWS]:
        table.add_row(e.key, str(e.table_partition), MISSING if e.stream_partition is None else str(e.stream_partition))
    console.print(table)
    _more(console, len(report.exceptions))


def _joined_line(results: JoinResults) -> str:
    line = f"Joined: {results.hits} of {results.expected} records, missed ({MISSING}): {results.misses}"
    if results.absent:
        line += f", no output yet: {results.absent}"
    if results.undecodable:
        line += f", undecodable: {results.undecodable}"
    return line


def render_join_pairs(console: Console, joins: Sequence[tuple[str, JoinResults]], labels: Sequence[str]) -> None:
    """Each join (by label) as the engines computed it, side by side: one table per join, ``???`` where an
    engine missed."""
    by_title = dict(joins)
    for join in labels:
        sides = [(engine, by_title[join_title(engine, join)]) for engine in ENGINES if join_title(engine, join) in by_title]
        if sides:
            render_side_by_side(console, join, sides)


def render_side_by_side(console: Console, join: str, sides: Sequence[tuple[str, JoinResults]]) -> None:
    """One row per stream record: its key and columns once, then each engine's table columns (``no output``
    where it wrote none)."""
    columns = sides[0][1].columns
    rows = [{row.key: row for row in results.rows} for _, results in sides]
    keys = sorted(set().union(*rows))
    table = Table(columns.key, *columns.stream, *(f"{engine} {c}" for engine, _ in sides for c in columns.table),
                  title=f"The {join} join: " + ", ".join(f"{engine} ({r.source})" for engine, r in sides),
                  title_justify="left")
    for key in keys[:TABLE_ROWS]:
        found = [side.get(key) for side in rows]
        first = next(row for row in found if row is not None)
        cells = [str(first.columns.get(c)) for c in columns.stream]
        for row in found:
            cells += ["no output"] * len(columns.table) if row is None else [
                MISSING if row.columns.get(c) is None else str(row.columns[c]) for c in columns.table]
        table.add_row(key, *cells)
    console.print(table)
    _more(console, len(keys))
    for engine, results in sides:
        console.print(f" - {engine}: {_joined_line(results)}")
    if len(sides) > 1:
        same = sum(len({None if side.get(k) is None else tuple(side[k].columns.get(c) for c in columns.hit)
                        for side in rows}) == 1 for k in keys)
        console.print(f" - The engines agree on {same} of {len(keys)} records")
