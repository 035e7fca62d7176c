"""The job's roles, read off the declared plan: its pairs of join outputs, the columns of their rows, the topics.

Each stream–table join query of the plan (``streamapp.sql.plan``) is a *pair*: the worker's output
(``output_prefix`` + ksqlDB's sink topic) against ksqlDB's (the sink topic), as
:class:`streamapp.sql.topology.Topology` names them for the worker.  A row of either output is
one record of the join's stream: its **identity** is the stream's columns the query projects
(key and value), and its event time (the ``TIMESTAMP=`` column when projected, else the output
record's timestamp, which both engines set to the stream record's).  The table's projected
columns decide whether the row was enriched, and whether the two engines agree on its values.

Inputs (the streams and the tables a join reads, by the source the table is copied from) and
outputs are *roles*, each with its topic: ``<source>`` (lower-cased) for an input,
``faust_<pair>`` and ``ksqldb_<pair>`` for the outputs.  A pair is named by its table's
placement, ``direct`` (the table as its producer wrote it) or ``repartition`` (a copy the plan
writes through the join's partitioner), when the plan has one join of each; otherwise by its
query's name, lower-cased.  A windowed stream-stream or a table-table join is a :class:`TwoSidedPair`
(its query's name), reconciled by :mod:`spark_batch.two_sided`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from streamapp.settings import Settings
from streamapp.sql import plan as p
from streamapp.sql.topology import Output, StreamTableJoin, Topology, stream_join_key, topology

__all__ = ["DIRECT", "REPARTITION", "Field", "Group", "Pair", "PlanShapeError", "Roles", "SIDES", "SPARK_TYPES",
           "TwoSidedPair", "pair_names", "spark_type"]

#: The two engines of a pair.
SIDES = ("faust", "ksqldb")
#: A pair's name by its table's placement (when the plan has one join of each).
DIRECT, REPARTITION = "direct", "repartition"
#: The identity column that stands for the output record's timestamp when the query projects no event time.
ROWTIME = "rowtime"

#: ksqlDB type -> Spark SQL type of the column's value; any other type (BYTES, DATE, TIME, TIMESTAMP, nested) is
#: compared as the JSON text of its value, as the codec reads it.
SPARK_TYPES = {"BOOLEAN": "boolean", "INT": "int", "BIGINT": "bigint", "DOUBLE": "double", "STRING": "string"}


def spark_type(ksql_type: str) -> str:
    """The Spark SQL type a column of ``ksql_type`` is read as (DECIMAL(p, s) as decimal(p,s))."""
    if ksql_type.startswith("DECIMAL"):
        return ksql_type.lower().replace(" ", "")
    return SPARK_TYPES.get(ksql_type, "string")


@dataclass(frozen=True)
class Field:
    """One column of a pair's rows: ``name`` in the job's frames (lower-cased), ``output`` the output's column,
    ``source`` the input source's column it comes from (None: the record's timestamp)."""

    name: str
    output: str
    type: str
    source: str | None

    @property
    def spark(self) -> str:
        return "bigint" if self.source is None else spark_type(self.type)

    @property
    def fixed(self) -> bool:
        """A fixed-width value (shuffled as it is; a string or binary value is compared through its hash)."""
        return self.spark not in ("string", "binary")


def _input_role(source: str) -> property:
    """A pair's property: the role of its input source in the field ``source``, the source's name lower-cased."""
    return property(lambda pair: getattr(pair, source).name.lower())


@dataclass(frozen=True)
class _Declared:
    """What every pair is: a name, the worker's join (its topics), the declared query that join runs."""

    name: str
    #: The worker's join (its topics); ``query`` is the declared one (a table re-keyed by the worker is the declared table).
    join: Output
    query: p.Query

    @property
    def sink(self) -> str:
        return self.query.sink


@dataclass(frozen=True)
class Pair(_Declared):
    """One stream-table join query: its outputs' topics, its stream and table, and the fields of its rows."""

    join: StreamTableJoin
    stream: p.Source
    table: p.Source
    #: The declared source the table's rows come from (the table itself, or what a CTAS copies).
    table_input: p.Source
    #: The table is a copy the worker places with its partitioner (a CTAS, or a re-key into the stream's key format).
    repartitioned: bool
    identity: tuple[Field, ...]
    joined: tuple[Field, ...]
    #: The identity field that holds the stream's join key.
    join_key: Field
    #: The identity field that is the event time.
    time: Field

    stream_role = _input_role("stream")
    table_role = _input_role("table_input")

    @property
    def rekeys_stream(self) -> bool:
        """The engines re-key the stream by its join key: its own topic's partitions say nothing of co-partitioning."""
        return self.query.repartition


@dataclass(frozen=True)
class Group:
    """Pairs whose rows have the same identity (the same stream and projected stream columns): classified together."""

    pairs: tuple[Pair, ...]

    @property
    def stream_role(self) -> str:
        return self.pairs[0].stream_role

    @property
    def stream(self) -> p.Source:
        return self.pairs[0].stream

    @property
    def identity(self) -> tuple[Field, ...]:
        return self.pairs[0].identity

    @property
    def time(self) -> Field:
        return self.pairs[0].time

    @property
    def join_key(self) -> Field:
        return self.pairs[0].join_key

    @cached_property
    def joined(self) -> tuple[Field, ...]:
        """Every pair's table fields, each output column once (the same name is the same column in each pair)."""
        return tuple({f.name: f for pair in self.pairs for f in pair.joined}.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(pair.name for pair in self.pairs)

    @property
    def table_roles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(pair.table_role for pair in self.pairs))


def _field(projection: p.Projection, side: str) -> tuple[str, str | None] | None:
    """(side, source column; None for ROWTIME) that an output column copies, or None when it computes something else."""
    expression = projection.expression
    while isinstance(expression, p.AsValue):
        expression = expression.argument
    if isinstance(expression, p.ColumnOf) and expression.side == side:
        return side, expression.name
    if isinstance(expression, p.RowTime) and expression.side == side:
        return side, None
    return None


def _table_input(plan: p.Plan, table: str) -> tuple[p.Source, bool]:
    """The declared source a table's rows come from, and whether a query of the plan copies them into it."""
    source, copied = plan.source(table), False
    writer = plan.writer_of(source.name)
    while writer is not None and writer.kind == p.SELECT:
        source, copied = plan.source(writer.left), True
        writer = plan.writer_of(source.name)
    return source, copied


@dataclass(frozen=True)
class TwoSidedPair(_Declared):
    """A windowed stream-stream or a table-table join query: its outputs' topics, its two sources, the fields of its rows.

    A stream-stream row's **identity** is the pair of records it joins: both sides' projected columns and the
    output's timestamp (the later of the two); an outer row, one side NULL, is its own.  A table-table row's is
    its key: the output is the join's changelog, and each key's last record of the window is compared.
    """

    left: p.Source
    right: p.Source
    #: The projected columns each side's record gives, the join key (``JoinKey``, a key projection of a table
    #: join) and what the projection computes (compared, not identity).
    left_fields: tuple[Field, ...]
    right_fields: tuple[Field, ...]
    key_fields: tuple[Field, ...]
    computed: tuple[Field, ...]
    #: The output record's timestamp.
    time: Field
    #: The fields that hold the row's join key, in order of preference (the first one not null is it).
    row_keys: tuple[Field, ...]

    #: The join key as a side the join re-keys is placed (column, key format): a stream-stream join's repartition
    #: topics', a table-table join's copy of its right table.
    join_key_format: tuple[p.Column, str] | None = None

    left_role = _input_role("left")
    right_role = _input_role("right")

    @property
    def windowed(self) -> bool:
        return self.query.kind == p.STREAM_STREAM_JOIN

    @property
    def identity(self) -> tuple[Field, ...]:
        if self.windowed:
            return (*self.left_fields, *self.right_fields, *self.key_fields, self.time)
        return self.key_fields

    @property
    def joined(self) -> tuple[Field, ...]:
        """The compared columns (a table join's time last: decoded, kept in the detail, not compared)."""
        if self.windowed:
            return self.computed
        return (*self.left_fields, *self.right_fields, *self.computed, self.time)

    @property
    def compared(self) -> tuple[Field, ...]:
        return tuple(f for f in self.joined if f is not self.time)

    # what ``decode.output_columns`` reads of a group: this pair is a group of one
    @property
    def pairs(self) -> tuple["TwoSidedPair", ...]:
        return (self,)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,)


def _two_sided(plan: p.Plan, join: Output) -> TwoSidedPair:
    query = _declared(plan, join)
    assert query.right is not None
    left, right = plan.source(query.left), plan.source(query.right)
    fields: dict[str, list[Field]] = {p.LEFT_SIDE: [], p.RIGHT_SIDE: [], "key": [], "computed": []}
    windowed = query.kind == p.STREAM_STREAM_JOIN
    for projection in query.projection:
        name, output, kind = projection.name.lower(), projection.name, projection.type
        expression = projection.expression
        while isinstance(expression, p.AsValue):
            expression = expression.argument
        if isinstance(expression, p.ColumnOf) and not (projection.key and not windowed):
            fields[expression.side].append(Field(name, output, kind, expression.name))
        elif isinstance(expression, (p.JoinKey, p.ColumnOf)):
            source = expression.name if isinstance(expression, p.ColumnOf) else (
                left.key_columns[0].name if left.key_columns else output)
            fields["key"].append(Field(name, output, kind, source))
        else:  # computed (a ROWTIME too: a field read from the value, never the record's timestamp)
            fields["computed"].append(Field(name, output, kind, output))
    time = Field(ROWTIME, ROWTIME.upper(), "BIGINT", None)

    def keyed(side: str, key: p.Expression | None) -> list[Field]:
        if isinstance(key, p.ColumnOf):
            return [f for f in fields[side] if f.source == key.name]
        return []

    right_key = query.right_key if windowed else p.ColumnOf(p.RIGHT_SIDE, right.key_columns[0].name) \
        if right.key_columns else None
    row_keys = (*fields["key"], *keyed(p.LEFT_SIDE, query.left_key), *keyed(p.RIGHT_SIDE, right_key))
    placed = None
    if windowed and (query.repartition or query.repartition_right):
        placed = stream_join_key(plan, query)
    elif query.repartition_right and right.key_columns:  # the right table copied in the left's key format
        placed = (right.key_columns[0], left.key_format)
    return TwoSidedPair(query.name.lower(), join, query, left, right, tuple(fields[p.LEFT_SIDE]),
                        tuple(fields[p.RIGHT_SIDE]), tuple(fields["key"]), tuple(fields["computed"]), time, row_keys,
                        placed)


class PlanShapeError(ValueError):
    """A join whose output the reconciliation cannot identify rows of; one line naming the query."""


def _declared(plan: p.Plan, join: StreamTableJoin) -> p.Query:
    """The declared query the worker's join runs (the worker may join a re-keyed copy of its table)."""
    return next(q for q in plan.queries if q.name == join.query.name)


def _pair(plan: p.Plan, join: StreamTableJoin, name: str) -> Pair:
    query = _declared(plan, join)
    assert query.right is not None
    stream, table = plan.source(query.left), plan.source(query.right)
    table_input, copied = _table_input(plan, table.name)
    identity: list[Field] = []
    joined: list[Field] = []
    for projection in query.projection:
        left, right = _field(projection, p.LEFT_SIDE), _field(projection, p.RIGHT_SIDE)
        if left is not None:
            identity.append(Field(projection.name.lower(), projection.name, projection.type, left[1]))
        elif right is not None and right[1] is not None:
            joined.append(Field(projection.name.lower(), projection.name, projection.type, right[1]))
    time_column = stream.timestamp
    time = next((f for f in identity if f.source is None or (time_column is not None and f.source == time_column)), None)
    if time is None:  # the output's record timestamp: the stream record's event time in both engines
        time = Field(ROWTIME, ROWTIME.upper(), "BIGINT", None)
        identity.append(time)
    key = query.left_key
    key_name = key.name if isinstance(key, p.ColumnOf) else None
    join_key = next((f for f in identity if f.source is not None and f.source == key_name), None)
    if join_key is None:
        raise PlanShapeError(f"{plan.origin}: query {query.name} (line {query.line}) does not project its stream's join "
                             f"key {key_name or key}: the reconciliation cannot tell which table row a record needs")
    return Pair(name, join, query, stream, table, table_input, copied or query.repartition_right,
                tuple(identity), tuple(joined), join_key, time)


def pair_names(plan: p.Plan, joins: tuple[StreamTableJoin, ...]) -> dict[str, str]:
    """Query name -> pair name (see the module)."""
    declared = [_declared(plan, j) for j in joins]
    placed = {q.name: REPARTITION if _table_input(plan, q.right or "")[1] or q.repartition_right else DIRECT
              for q in declared}
    if len(set(placed.values())) == len(placed):
        return placed
    return {j.query.name: j.query.name.lower() for j in joins}


class Roles:
    """The reconciliation's view of a plan under settings: its pairs, grouped, and every role's topic."""

    def __init__(self, topology: Topology) -> None:
        plan = topology.declared
        names = pair_names(plan, topology.joins)
        self.topology = topology
        self.pairs: tuple[Pair, ...] = tuple(_pair(plan, j, names[j.query.name]) for j in topology.joins)
        groups: dict[tuple[object, ...], list[Pair]] = {}
        for pair in self.pairs:
            groups.setdefault((pair.stream.name, pair.identity, pair.join_key), []).append(pair)
        self.groups: tuple[Group, ...] = tuple(Group(tuple(pairs)) for pairs in groups.values())
        #: The windowed stream-stream joins, then the table-table joins.
        self.two_sided: tuple[TwoSidedPair, ...] = tuple(
            _two_sided(plan, j) for j in (*topology.stream_joins, *topology.table_joins))

    @classmethod
    def of(cls, settings: Settings) -> "Roles":
        return cls(topology(settings))

    @cached_property
    def inputs(self) -> dict[str, p.Source]:
        """Input role -> its source: the tables' inputs, then the streams."""
        found = {pair.table_role: pair.table_input for pair in self.pairs}
        found.update({pair.stream_role: pair.stream for pair in self.pairs})
        return found

    @cached_property
    def streams(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(pair.stream_role for pair in self.pairs))

    @cached_property
    def outputs(self) -> dict[str, tuple[str, str]]:
        """Output role -> (pair, side): ``faust_<pair>``, ``ksqldb_<pair>`` for each stream-table pair."""
        return {f"{side}_{pair.name}": (pair.name, side) for pair in self.pairs for side in SIDES}

    @cached_property
    def two_sided_inputs(self) -> dict[str, p.Source]:
        """Input role -> its source, of the two-sided pairs (a self-join's one stream once)."""
        return {role: source for pair in self.two_sided
                for role, source in ((pair.left_role, pair.left), (pair.right_role, pair.right))}

    @cached_property
    def two_sided_outputs(self) -> dict[str, tuple[str, str]]:
        """Output role -> (pair, side) of the two-sided pairs."""
        return {f"{side}_{pair.name}": (pair.name, side) for pair in self.two_sided for side in SIDES}

    @cached_property
    def all_outputs(self) -> dict[str, tuple[str, str]]:
        return {**self.outputs, **self.two_sided_outputs}

    @cached_property
    def timed(self) -> tuple[str, ...]:
        """Roles whose records are cut to the window; tables are read whole (a row may predate the day)."""
        streams = [role for role, source in self.two_sided_inputs.items() if source.kind == p.STREAM]
        return tuple(dict.fromkeys((*self.streams, *self.outputs, *streams, *self.two_sided_outputs)))

    def two_sided_pair(self, name: str) -> TwoSidedPair:
        return next(pair for pair in self.two_sided if pair.name == name)

    def pair(self, name: str) -> Pair:
        return next(pair for pair in self.pairs if pair.name == name)

    def topics(self) -> dict[str, str]:
        """Every role's topic: the inputs as ksqlDB reads them, each join's two outputs."""
        topics = {role: self.topology.ksqldb_topics[source.name] for role, source in self.inputs.items()}
        for pair in self.pairs:
            topics[f"faust_{pair.name}"] = pair.join.output
            topics[f"ksqldb_{pair.name}"] = pair.join.ksqldb_output
        for role, source in self.two_sided_inputs.items():
            topics[role] = self.topology.ksqldb_topics[source.name]
        for two in self.two_sided:
            assert two.join.ksqldb_output is not None
            topics[f"faust_{two.name}"] = two.join.output
            topics[f"ksqldb_{two.name}"] = two.join.ksqldb_output
        return topics
