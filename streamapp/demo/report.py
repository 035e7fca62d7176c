"""The demo's two reports: matched partitions between users and orders, and join results.

Both are pure functions of what was read back from the topics, so the numbers a
person sees are tested without a broker; ``render_*`` turn them into rich tables.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from ..kafka.reader import Record

MISSING = "???"
#: Rows a table shows people; --json has them all.
TABLE_ROWS = 25
#: The engines whose joins a run reports, in the order their tables stand side by side.
FAUST, KAFKA_STREAMS, KSQLDB = "Faust", "Kafka Streams", "ksqlDB"
ENGINES = (FAUST, KAFKA_STREAMS, KSQLDB)
#: The two joins each engine runs: the users as their producer placed them, and repartitioned.
JOINS = ("direct", "repartitioned")
#: The order's columns a side-by-side table shows once; each engine's NAME and AGE follow.
ORDER_COLUMNS = ("PRODUCT_ID", "CHANNEL")
USER_COLUMNS = ("NAME", "AGE")


def join_title(engine: str, join: str) -> str:
    """The title of one engine's join in a run's report (and its key in ``--json``)."""
    return f"{engine} join, {join}"


@dataclass(frozen=True)
class PartitionMismatch:
    user_id: str
    users_partition: int
    orders_partition: int | None


@dataclass(frozen=True)
class MatchReport:
    """Where each user's record sits in the users topic versus its order in the orders topic."""

    users_topic: str
    orders_topic: str
    total: int
    matched: int
    exceptions: list[PartitionMismatch] = field(default_factory=list)

    @property
    def matched_pct(self) -> float:
        return 100.0 * self.matched / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "users_topic": self.users_topic,
            "orders_topic": self.orders_topic,
            "total": self.total,
            "matched": self.matched,
            "matched_pct": round(self.matched_pct, 2),
            "exceptions": [asdict(e) for e in self.exceptions],
        }


def match_partitions(
    users_topic: str, users: Mapping[str, int], orders_topic: str, orders: Mapping[str, int]
) -> MatchReport:
    """Compare each user's partition with its order's (``None`` when the order is absent)."""
    exceptions = [
        PartitionMismatch(user_id, partition, orders.get(user_id))
        for user_id, partition in sorted(users.items())
        if orders.get(user_id) != partition
    ]
    return MatchReport(users_topic, orders_topic, len(users), len(users) - len(exceptions), exceptions)


@dataclass(frozen=True)
class JoinRow:
    user_id: str
    partition: int | None
    columns: dict[str, object]

    @property
    def hit(self) -> bool:
        return self.columns.get("NAME") is not None


@dataclass(frozen=True)
class JoinResults:
    """The output of one join for the orders of a run: which orders found their user."""

    source: str
    rows: list[JoinRow]
    expected: int
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
            "rows": [{"USER_ID": r.user_id, "partition": r.partition, **r.columns} for r in self.rows],
        }


def join_results(source: str, records: Iterable[Record], user_ids: Iterable[str]) -> JoinResults:
    """Join output records (ksqlDB's JSON shape, key = USER_ID) for the given users, latest per key."""
    wanted = set(user_ids)
    rows: dict[str, JoinRow] = {}
    undecodable = 0
    for record in records:
        user_id = (record.key or b"").decode("utf-8", "replace")
        if user_id not in wanted:
            continue
        try:
            value = json.loads(record.value or b"")
        except ValueError:
            undecodable += 1
            continue
        if not isinstance(value, dict):
            undecodable += 1
            continue
        rows[user_id] = JoinRow(user_id, record.partition, value)
    return JoinResults(source, [rows[k] for k in sorted(rows)], len(wanted), undecodable)


def join_rows_from_columns(source: str, names: list[str], rows: Iterable[list[object]], expected: int) -> JoinResults:
    """Join results from a ksqlDB push query's column names and rows (USER_ID among the columns)."""
    upper = [n.upper() for n in names]
    result = []
    for values in rows:
        data = dict(zip(upper, values))
        user_id = str(data.pop("USER_ID", ""))
        result.append(JoinRow(user_id, None, data))
    return JoinResults(source, result, expected)


def _more(console: Console, rows: int) -> None:
    if rows > TABLE_ROWS:
        console.print(f" ... {rows - TABLE_ROWS} more rows (--json lists them all)")


def render_match(console: Console, title: str, report: MatchReport) -> None:
    console.print(f"[bold]{title}[/bold]: {report.users_topic} vs {report.orders_topic} ({report.total} users)")
    console.print(f" - Matched partitions: {report.matched_pct:.2f}%")
    if not report.exceptions:
        return
    table = Table("USER_ID", f"{report.users_topic} partition", f"{report.orders_topic} partition",
                  title=f"{len(report.exceptions)} exceptions", title_justify="left")
    for e in report.exceptions[:TABLE_ROWS]:
        table.add_row(e.user_id, str(e.users_partition), MISSING if e.orders_partition is None else str(e.orders_partition))
    console.print(table)
    _more(console, len(report.exceptions))


def _joined_line(results: JoinResults) -> str:
    line = f"Joined: {results.hits} of {results.expected} orders, missed ({MISSING}): {results.misses}"
    if results.absent:
        line += f", no output yet: {results.absent}"
    if results.undecodable:
        line += f", undecodable: {results.undecodable}"
    return line


def render_join_pairs(console: Console, joins: Sequence[tuple[str, JoinResults]]) -> None:
    """Each join as the engines computed it, side by side: one table per join, ``???`` where an engine missed."""
    by_title = dict(joins)
    for join in JOINS:
        sides = [(engine, by_title[join_title(engine, join)]) for engine in ENGINES if join_title(engine, join) in by_title]
        if sides:
            render_side_by_side(console, join, sides)


def render_side_by_side(console: Console, join: str, sides: Sequence[tuple[str, JoinResults]]) -> None:
    """One row per order: its columns once, then each engine's NAME and AGE (``no output`` where it wrote none)."""
    rows = [{row.user_id: row for row in results.rows} for _, results in sides]
    user_ids = sorted(set().union(*rows))
    table = Table("USER_ID", *ORDER_COLUMNS, *(f"{engine} {c}" for engine, _ in sides for c in USER_COLUMNS),
                  title=f"The {join} join: " + ", ".join(f"{engine} ({r.source})" for engine, r in sides),
                  title_justify="left")
    for user_id in user_ids[:TABLE_ROWS]:
        found = [side.get(user_id) for side in rows]
        order = next(row for row in found if row is not None)
        cells = [str(order.columns[c]) for c in ORDER_COLUMNS]
        for row in found:
            cells += ["no output"] * len(USER_COLUMNS) if row is None else [
                MISSING if row.columns[c] is None else str(row.columns[c]) for c in USER_COLUMNS]
        table.add_row(user_id, *cells)
    console.print(table)
    _more(console, len(user_ids))
    for engine, results in sides:
        console.print(f" - {engine}: {_joined_line(results)}")
    if len(sides) > 1:
        same = sum(len({None if side.get(u) is None else tuple(side[u].columns[c] for c in USER_COLUMNS)
                        for side in rows}) == 1 for u in user_ids)
        console.print(f" - The engines agree on {same} of {len(user_ids)} orders")
