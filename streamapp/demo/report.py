"""The demo's two reports: matched partitions between users and orders, and join results.

Both are pure functions of what was read back from the topics, so the numbers a
person sees are tested without a broker; ``render_*`` turn them into rich tables.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Iterable, Mapping

from rich.console import Console
from rich.table import Table

from ..kafka.reader import Record
from ..model.join import COLUMNS

MISSING = "???"
#: Rows a table shows people; --json has them all.
TABLE_ROWS = 25


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
        rows[user_id] = JoinRow(user_id, record.partition, {c: value.get(c) for c in COLUMNS})
    return JoinResults(source, [rows[k] for k in sorted(rows)], len(wanted), undecodable)


def join_rows_from_columns(source: str, names: list[str], rows: Iterable[list[object]], expected: int) -> JoinResults:
    """Join results from a ksqlDB push query's column names and rows (USER_ID among the columns)."""
    upper = [n.upper() for n in names]
    result = []
    for values in rows:
        data = dict(zip(upper, values))
        user_id = str(data.pop("USER_ID", ""))
        result.append(JoinRow(user_id, None, {c: data.get(c) for c in COLUMNS}))
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


def render_joins(console: Console, title: str, results: JoinResults) -> None:
    table = Table("USER_ID", *COLUMNS[:-1], title=f"{title}: {results.source}", title_justify="left")
    for row in results.rows[:TABLE_ROWS]:
        table.add_row(row.user_id, *(MISSING if row.columns[c] is None else str(row.columns[c]) for c in COLUMNS[:-1]))
    console.print(table)
    _more(console, len(results.rows))
    line = f" - Joined: {results.hits} of {results.expected} orders, missed ({MISSING}): {results.misses}"
    if results.absent:
        line += f", no output yet: {results.absent}"
    if results.undecodable:
        line += f", undecodable: {results.undecodable}"
    console.print(line)
