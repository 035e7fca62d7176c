"""What the demo does with a plan: the table and the stream it writes, the joins it reports, their columns.

The demo runs any declared stream-table join the way it runs the seed's: it writes
one table and one stream (the plan's sources no query writes), and reports each
join of that stream with that table, or with a copy of it (``CREATE TABLE ... AS
SELECT``, the repartition through murmur2).  Everything here is a pure function of
the plan and the settings, so the demo's columns come from the statements, never
from this code.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..errors import StreamappError
from ..settings import Settings
from ..sql import plan as p
from ..sql.formats import Codec
from ..sql.topology import Topology, topology

#: A join against the table as its producer wrote it, and one against a copy the plan repartitions.
DIRECT, REPARTITIONED = "direct", "repartitioned"
#: Columns of each side a side-by-side table shows, so that it fits a terminal (``--json`` has them all).
SHOWN_COLUMNS = 2


class ShapeError(StreamappError):
    """The statements declare nothing the demo can produce and report; the message says what is missing."""


@dataclass(frozen=True)
class DemoJoin:
    """One join the demo reports: its label, its query, and the columns its report shows."""

    label: str
    query: p.Query
    #: The source the join looks rows up in: the produced table, or a copy of it.
    table: p.Source
    sink: p.Source
    #: The Faust worker's output topic and ksqlDB's (the Kafka Streams program writes ksqlDB's).
    worker_topic: str
    ksqldb_topic: str

    @property
    def key_column(self) -> str:
        """The output's key column (the join key), which names each row of the report."""
        return self.query.key[0].name if self.query.key else "ROWKEY"

    def _side(self, side: str) -> tuple[str, ...]:
        return tuple(projection.name for projection in self.query.value if _reads(projection.expression) == side)

    @property
    def table_columns(self) -> tuple[str, ...]:
        """Every output column taken from the table: all NULL when the join missed."""
        return self._side(p.RIGHT_SIDE)

    @property
    def stream_columns(self) -> tuple[str, ...]:
        return self._side(p.LEFT_SIDE)


def _reads(expression: p.Expression) -> str:
    while isinstance(expression, p.AsValue):
        expression = expression.argument
    return expression.side  # type: ignore[union-attr]


@dataclass(frozen=True)
class Copy:
    """A copy of the produced table (``CREATE TABLE ... AS SELECT``): where each engine writes it."""

    source: p.Source
    worker_topic: str
    ksqldb_topic: str


@dataclass(frozen=True)
class DemoShape:
    """The demo's view of a plan: the table and the stream it produces, the copies of the table, the joins."""

    plan: p.Plan
    table: p.Source
    stream: p.Source
    table_topic: str
    stream_topic: str
    copies: tuple[Copy, ...]
    joins: tuple[DemoJoin, ...]

    @cached_property
    def table_codec(self) -> Codec:
        return Codec(self.table)

    @cached_property
    def stream_codec(self) -> Codec:
        return Codec(self.stream)

    @property
    def join_column(self) -> str | None:
        """The stream's value column that holds the table's key, when the joins read one (else its key)."""
        keys = {_join_column(join.query) for join in self.joins}
        return next(iter(keys))

    @property
    def shown_stream_columns(self) -> tuple[str, ...]:
        """The stream's columns a join table shows once: its first and last value columns but the event time."""
        columns = [c for c in self.joins[0].stream_columns if c != self.stream.timestamp
                   and c not in {k.name for k in self.stream.key_columns} and c != self.join_column]
        return tuple(dict.fromkeys(columns[:1] + columns[-1:])) if len(columns) > SHOWN_COLUMNS else tuple(columns)

    @property
    def shown_table_columns(self) -> tuple[str, ...]:
        return self.joins[0].table_columns[:SHOWN_COLUMNS]

    @property
    def key_column(self) -> str:
        return self.joins[0].key_column


def _join_column(query: p.Query) -> str | None:
    """The stream's value column a join reads its key from; None when it joins on the stream's key."""
    key = query.left_key
    if not query.repartition or key is None:
        return None
    while isinstance(key, p.AsValue):
        key = key.argument
    return key.name if isinstance(key, p.ColumnOf) else None


def shape(settings: Settings, joins: Topology | None = None) -> DemoShape:
    """The demo's view of ``settings``' statements (the seed's by default); ShapeError when it has none."""
    joins = joins or topology(settings)
    plan = joins.declared
    written = {query.sink for query in plan.queries}
    origin = plan.origin or "the statements"

    def produced_table(name: str) -> str:
        """The table a join's table comes from: itself, or the table a copy of it reads."""
        writer = plan.writer_of(name)
        return name if writer is None else produced_table(writer.left) if writer.kind == p.SELECT else name

    candidates = [q for q in plan.joins if q.left not in written and q.right is not None
                  and produced_table(q.right) not in written]
    if not candidates:
        raise ShapeError(f"{origin}: no stream-table join of a stream and a table that a producer writes: "
                         f"the demo writes such a pair and reports its joins")
    first = candidates[0]
    table, stream = plan.source(produced_table(first.right)), plan.source(first.left)  # type: ignore[arg-type]
    queries = [q for q in candidates if q.left == stream.name and produced_table(q.right) == table.name]  # type: ignore[arg-type]
    if len({_join_column(q) for q in queries}) > 1:
        raise ShapeError(f"{origin}: the joins of {stream.name} with {table.name} read its key from different "
                         f"columns: the demo writes one stream for all of them")
    if not table.key_columns:
        raise ShapeError(f"{origin}: table {table.name} has no key column: the demo writes keyed rows")
    by_query = {join.query.name: join for join in joins.joins}
    labels = [DIRECT if q.right == table.name else REPARTITIONED for q in queries]
    if len(set(labels)) < len(labels):
        labels = [q.name.lower() for q in queries]
    demo_joins = tuple(
        DemoJoin(label, q, plan.source(q.right), plan.sink_of(q), by_query[q.name].output,  # type: ignore[arg-type]
                 joins.ksqldb_topics[q.sink])
        for label, q in zip(labels, queries))
    outputs = {copy.query.sink: copy for copy in joins.copies}
    copies = tuple(Copy(plan.source(q.sink), outputs[q.sink].output, joins.ksqldb_topics[q.sink])
                   for q in plan.queries if q.kind == p.SELECT and q.left == table.name and q.sink in outputs)
    return DemoShape(plan, table, stream, joins.ksqldb_topics[table.name], joins.ksqldb_topics[stream.name],
                     copies, demo_joins)
