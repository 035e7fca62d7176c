"""What the worker runs for a plan: its tables, the queries it runs, the topics it reads and writes.

Pure facts of the plan and the settings, defined here once: the worker builds its
Faust tables and agents from :class:`Topology`, the guard checks the pairs its joins
read, the web views show its tables, the reconciliation compares its outputs with
ksqlDB's.

Topics: a source declared over a topic (``CREATE STREAM ... WITH (KAFKA_TOPIC=...)``)
is read there; a query writes the topic ksqlDB would write (its ``KAFKA_TOPIC``, else
its name) prefixed by ``output_prefix``, so the worker and ksqlDB run side by side,
and a source written by one of the worker's queries is read from the worker's topic.

Without a ``statements`` setting the worker runs the seed (``seed.sql``): the demo's
five statements, whose topic names the seed topic settings (``users_topic``, ...)
rename, each renaming the topic that is its default.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from importlib import resources

from ..settings import Settings
from . import plan as p
from .engine import Row
from .expressions import compile_expression
from .formats import Codec
from .planner import PlanError, plan_file, plan_text
from .stream_join import ROWTIME, where_read

#: The settings that rename the seed's topics: each renames the topic that is its default value.
SEED_TOPIC_SETTINGS = ("users_topic", "orders_topic", "users_repartition_topic", "merged_topic",
                       "merged_repartition_topic", "ksqldb_users_repartition_topic", "ksqldb_merged_topic",
                       "ksqldb_merged_repartition_topic")


def seed_text() -> str:
    """The seed's statements, as shipped with streamapp."""
    return resources.files(__package__).joinpath("seed.sql").read_text(encoding="utf-8")


def load_plan(settings: Settings) -> p.Plan:
    """The plan of ``settings.statements``, else the seed's (PlanError: one line naming the file)."""
    if settings.statements:
        return plan_file(settings.statements)
    return plan_text(seed_text(), "the seed's statements (streamapp/sql/seed.sql)")


def seed_renames(settings: Settings) -> dict[str, str]:
    """Seed topic -> the topic a seed topic setting names instead (only without a ``statements`` file).  An output
    setting's default is the default ``output_prefix`` and the seed's topic: a name given replaces both."""
    if settings.statements:
        return {}
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    return {defaults[name]: getattr(settings, name) for name in SEED_TOPIC_SETTINGS
            if getattr(settings, name) != defaults[name]}


@dataclass(frozen=True)
class Table:
    """A table the worker keeps in RocksDB: the source it holds, the topic it loads it from, its Faust name."""

    source: p.Source
    topic: str
    #: Its rows keep their event time (:data:`ROWTIME`): a table-table join's output takes the later of two rows'.
    timestamped: bool = False

    @property
    def name(self) -> str:
        """The Faust table's name (its changelog is ``<app_id>-<name>-changelog``): the source's, lower-cased."""
        return self.source.name.lower()


@dataclass(frozen=True)
class Output:
    """One query the worker runs: what it reads, where it writes, and where ksqlDB writes the same query."""

    query: p.Query
    #: The topic the query reads its left (stream, or copied table) side from.
    source_topic: str
    #: The worker's output topic.
    output: str
    #: ksqlDB's output topic of the same query; None for the worker's internal copies (a re-keyed table's), which
    #: ksqlDB writes to an internal topic of its own.
    ksqldb_output: str | None


@dataclass(frozen=True)
class StreamTableJoin(Output):
    """A stream-table join: its stream's topic, and the table it looks rows up in."""

    table: Table
    #: For a join that re-keys its stream (a join on a non-key column): the worker's re-key of it (one of
    #: :attr:`Topology.rekeys`); ``source_topic`` is then its repartition topic.
    rekey: Rekey | None = None

    @property
    def rekeyed_from(self) -> str | None:
        """The stream's own topic, when the join re-keys it."""
        return None if self.rekey is None else self.rekey.stream

    @property
    def rekeyed(self) -> p.Source | None:
        """The re-keyed stream's source (:func:`rekeyed_source`), when the join re-keys it."""
        return None if self.rekey is None else self.rekey.source

    @property
    def pair(self) -> str:
        """The join's name in reports: its query's, lower-cased."""
        return self.query.name.lower()

    @property
    def stream(self) -> str:
        return self.source_topic

    @property
    def table_topic(self) -> str:
        return self.table.topic


@dataclass(frozen=True)
class TableTableJoin(Output):
    """A table-table join on the primary key: its two tables, each updated from its topic (``source_topic`` is the
    left's), and each update joined with the other side's row of the key in the same partition."""

    left: Table
    right: Table

    @property
    def pair(self) -> str:
        return self.query.name.lower()

    @property
    def sides(self) -> tuple[tuple[str, Table, Table], ...]:
        """(side, its table, the other side's table) for the left, then the right."""
        return ((p.LEFT_SIDE, self.left, self.right), (p.RIGHT_SIDE, self.right, self.left))


@dataclass(frozen=True)
class StreamStreamJoin(Output):
    """A windowed stream-stream join of two co-partitioned streams (``source_topic`` the left's): each record
    joined with the other side's records of its key and window in the same partition (``agents/stream_joins.py``)."""

    right_topic: str

    @property
    def pair(self) -> str:
        return self.query.name.lower()

    @property
    def stores(self) -> tuple[str, str, str]:
        """Its state's Faust tables (RocksDB, each with its changelog): the left's and the right's window stores,
        and the outer store of the unmatched records waiting for their window to close."""
        return f"{self.pair}-left-window", f"{self.pair}-right-window", f"{self.pair}-outer"


#: The key column of a re-keyed stream: the join key, in the format of the keys it meets (a name no column takes).
JOIN_KEY = "__streamapp_join_key"


def join_repartition(query: p.Query, side: str | None = None) -> str:
    """ksqlDB's name of the topic a join re-keys a stream through: ``<QUERY>-Join-repartition`` (a stream-table
    join's), ``<QUERY>-Join-left-repartition`` / ``-right-`` (a stream-stream join's side); the worker's topic is
    the app's ``<app_id>-<name>``, as a changelog is."""
    return f"{query.name}-Join-{side}-repartition" if side else f"{query.name}-Join-repartition"


def rekeyed_source(name: str, stream: p.Source, key: p.Column, topic: str, key_format: str,
                   carried: tuple[p.Column, ...] = ()) -> p.Source:
    """A stream re-keyed by a join key (of ``key``'s type), as the worker's repartition topic holds it.

    As ksqlDB's ``Join-repartition`` topics: the key is the join key in the format the other side's keys are
    stored in (so it lands in the partition the join's partitioner picks for them), and the value carries every
    column of the stream record, its own key columns and the pseudo columns its join reads included, and its
    event time (:data:`ROWTIME`).
    """
    return p.Source(
        name=name, kind=p.STREAM, topic=topic, key_columns=(p.Column(JOIN_KEY, key.type),),
        value_columns=(*stream.value_columns, *stream.key_columns, *carried, p.Column(ROWTIME, "BIGINT")),
        key_format=key_format, value_format="JSON")


@dataclass(frozen=True)
class Rekey:
    """A stream the worker re-keys by one side's join key into the join's repartition topic."""

    query: p.Query
    side: str
    #: The stream's own topic, as the worker reads it.
    stream: str
    #: The re-keyed stream (:func:`rekeyed_source`); its topic is the join's repartition topic.
    source: p.Source
    #: The stream as declared (its records are read as its columns: streams over one topic may differ).
    declared: p.Source

    @property
    def topic(self) -> str:
        return self.source.topic


class Rekeyer:
    """What :class:`Rekey` writes for one row of its stream: the join key's bytes, the value carrying the row.

    Pure: the worker's stream agent (``agents/streams.py``) writes them, in the partition its partitioner picks.
    """

    def __init__(self, rekey: Rekey) -> None:
        self.topic = rekey.topic
        self.codec = Codec(rekey.source)
        expression = rekey.query.left_key if rekey.side == p.LEFT_SIDE else rekey.query.right_key
        assert expression is not None
        key = compile_expression(expression)
        self._key = (lambda row: key(None, row, None)) if rekey.side == p.LEFT_SIDE else (
            lambda row: key(None, None, row))
        self._where = [c.name for c in rekey.source.value_columns if c in p.WHERE_READ]
        self._declared, self._key_names = Codec(rekey.declared), [c.name for c in rekey.declared.key_columns]
        #: Whether a null value goes on to the join (:meth:`null_value`): its time is the record's, not a column's.
        self.forwards_null = rekey.declared.timestamp is None

    def null_value(self, key: bytes | None) -> bytes | None:
        """The key of the re-keyed record of a null value (RecordError: its key bytes cannot be read).

        ksqlDB re-keys it too, its new key computed from the key columns alone (null when the join key reads
        the value), and Kafka Streams' join moves stream time by it before dropping it (``KStreamKStreamJoin``);
        with a ``TIMESTAMP`` column its time cannot be read, and it is dropped at the source (see
        :attr:`forwards_null`).
        """
        decoded = self._declared.decode_key(key) if self._key_names else None
        columns = dict(decoded) if len(self._key_names) > 1 and decoded is not None else (
            {self._key_names[0]: decoded} if self._key_names else {})
        return self.codec.encode_key(self._key((columns, 0)))

    def rekey(self, row: Row, partition: int, offset: int) -> tuple[bytes | None, bytes]:
        """(key, value) of the re-keyed record of ``row``, read at ``offset`` of ``partition`` of the stream."""
        columns = row[0]
        if self._where:  # its join reads where it was read: here, not the repartition topic
            where = zip(p.WHERE_READ, (partition, offset))
            columns = {**columns, **{c.name: at for c, at in where if c.name in self._where}}
        value = self.codec.encode_value({**columns, ROWTIME: row[1]})
        assert value is not None
        return self.codec.encode_key(self._key((columns, row[1]))), value


#: What names the copy a join re-keys its table into, as ksqlDB's ``RightSourceKeyed-SelectKey-repartition`` topic.
RIGHT_REKEYED = "RightSourceKeyed"


def rekey_tables(plan: p.Plan, app_id: str) -> p.Plan:
    """The plan the worker runs: a join that re-keys its table (``repartition_right``) joins a copy of it.

    A key-to-key join of two key formats (a stream-table or a table-table join): ksqlDB re-writes the right
    table with its keys in the left side's key format, through ``<query>-RightSourceKeyed-SelectKey-repartition``
    (partitioned as the left side's keys are), and joins that.  Here the copy is one more ``CREATE TABLE ... AS
    SELECT`` the worker runs, into the app's ``<app_id>-<QUERY>-RightSourceKeyed-SelectKey-repartition`` topic,
    as a stream re-key's.
    """
    sources, queries = list(plan.sources), []
    for query in plan.queries:
        if query.kind not in (p.STREAM_TABLE_JOIN, p.TABLE_TABLE_JOIN) or not query.repartition_right:
            queries.append(query)
            continue
        assert query.right is not None
        table, stream = plan.source(query.right), plan.source(query.left)
        copy = dataclasses.replace(
            table, name=f"{query.name}-{RIGHT_REKEYED}", key_format=stream.key_format,
            topic=f"{app_id}-{query.name}-{RIGHT_REKEYED}-SelectKey-repartition", line=query.line)
        sources.append(copy)
        queries.append(p.Query(
            name=copy.name, kind=p.SELECT, sink=copy.name, left=table.name, line=query.line,
            projection=tuple(p.Projection(c.name, c.type, p.ColumnOf(p.LEFT_SIDE, c.name), key)
                             for key, columns in ((True, table.key_columns), (False, table.value_columns))
                             for c in columns)))
        queries.append(dataclasses.replace(query, right=copy.name, repartition_right=False))
    return dataclasses.replace(plan, sources=tuple(sources), queries=tuple(queries))


def stream_join_key(plan: p.Plan, query: p.Query) -> tuple[p.Column, str]:
    """A stream-stream join's key as its repartition topics hold it: (its column, its key format).

    A side the join does not re-key keeps its key column and format (the re-keyed side's records must land where
    its keys are); with both sides re-keyed, the sink's key (ksqlDB's join key format, unless the statement sets
    another: both sides meet either way).
    """
    kept = [name for _, name, rekeyed in _sides(query) if not rekeyed]
    side = plan.source(kept[0]) if kept else plan.sink_of(query)
    return side.key_columns[0], side.key_format


def _sides(query: p.Query) -> tuple[tuple[str, str, bool], ...]:
    """(side: ``left`` or ``right``, as ksqlDB's topic names it; source; whether the plan re-keys it) of a join."""
    return ((p.LEFT_SIDE, query.left, query.repartition), (p.RIGHT_SIDE, query.right or "", query.repartition_right))


def stream_agent_topics(plan: p.Plan) -> set[str]:
    """The stream topics the stream agent reads (``agents/streams.py``): stream-table joins' and re-keyed sides'."""
    return ({plan.source(q.left).topic for q in plan.queries if q.kind == p.STREAM_TABLE_JOIN}
            | {plan.source(name).topic for q in plan.queries if q.kind == p.STREAM_STREAM_JOIN
               for _, name, rekeyed in _sides(q) if rekeyed})


def rekey_streams(plan: p.Plan, app_id: str) -> p.Plan:
    """The plan the worker runs: each side a stream-stream join re-keys (``repartition``, ``repartition_right``: a
    join on a value column, a keyless stream, a key format mismatch) is read from the join's repartition topic.

    As ksqlDB's ``<query>-Join-left-repartition`` / ``-Join-right-repartition``: here the app's
    ``<app_id>-<QUERY>-Join-left-repartition``, whose records :class:`Rekeyer` writes (:func:`rekeyed_source`,
    keyed by :func:`stream_join_key`); the join reads the re-keyed source in place of the declared one.  A side
    joined on its key goes that way too when the stream agent reads its topic anyway (a stream in a stream-table
    join too, or re-keyed by another join, or the other side of a self-join): one agent reads a topic.
    """
    sources, queries = list(plan.sources), []
    shared = stream_agent_topics(plan)
    for query in plan.queries:
        rekeyed = {side: name for side, name, rekey in _sides(query) if query.kind == p.STREAM_STREAM_JOIN
                   and (rekey or plan.source(name).topic in shared)}
        if not rekeyed:
            queries.append(query)
            continue
        key, key_format = stream_join_key(plan, query)
        carried = tuple(c for c in p.WHERE_READ if c.name in where_read(query))
        names: dict[str, str] = {}
        for side, name in rekeyed.items():
            repartition = join_repartition(query, side)
            source = rekeyed_source(repartition, plan.source(name), key, f"{app_id}-{repartition}", key_format, carried)
            sources.append(dataclasses.replace(source, timestamp=ROWTIME))  # the join reads its event time there
            names[side] = repartition
        queries.append(dataclasses.replace(query, left=names.get(p.LEFT_SIDE, query.left),
                                           right=names.get(p.RIGHT_SIDE, query.right),
                                           repartition=False, repartition_right=False))
    return dataclasses.replace(plan, sources=tuple(sources), queries=tuple(queries))


def worker_refusal(plan: p.Plan) -> str | None:
    """Why the worker cannot run ``plan`` (one line naming the statement), or None: it runs every other plan.

    Asked by the worker's start only (``create_app``): the guard, the doctor and the Kafka Streams program
    take every plan the planner makes.  The worker runs every stream-stream join, either side re-keyed
    (:func:`rekey_streams`), a self-join or a stream in two joins too; a side of several key columns joined as it
    is (which the planner never plans) would run in the pure engine and Kafka Streams only.
    """
    for query in plan.queries:  # a side of several key columns is joined on one: it is re-keyed, read as an object
        if query.kind == p.STREAM_STREAM_JOIN and any(len(plan.source(name).key_columns) > 1 and not rekeyed
                                                      for _, name, rekeyed in _sides(query)):
            return (f"{plan.origin}: line {query.line} (CREATE STREAM {query.name} AS SELECT ... JOIN): not supported "
                    "by the worker yet: stream-stream joins of multi-column keys; `streamapp test-runner` runs them")
    return None


class Topology:
    """The worker's view of a plan under ``settings`` (see the module)."""

    def __init__(self, plan: p.Plan, settings: Settings) -> None:
        #: The plan as declared (what ksqlDB and the Kafka Streams program run).
        self.declared = plan
        #: The plan the worker runs: the declared one, with each table a join re-keys copied (:func:`rekey_tables`)
        #: and each stream a stream-stream join re-keys read from its repartition topic (:func:`rekey_streams`).
        self.plan = plan = rekey_streams(rekey_tables(plan, settings.app_id), settings.app_id)
        self.settings = settings
        renames = seed_renames(settings)
        declared = {s.name for s in self.declared.sources}
        written = {q.sink for q in plan.queries}
        #: Each declared source's topic as ksqlDB reads and writes it (the seed's renamed by its settings).
        self.ksqldb_topics = {s.name: renames.get(s.topic, s.topic) for s in self.declared.sources}
        #: Each source's topic as the worker reads it: its own output for a source its queries write; the
        #: app's internal topic (as it is) for a table it re-keys.
        self.topics = {
            s.name: s.topic if s.name not in declared else
            renames.get(Settings.output_prefix + s.topic,  # a worker topic setting names it whole
                        renames.get(settings.output_prefix + s.topic, settings.output_prefix + s.topic))
            if s.name in written else self.ksqldb_topics[s.name]
            for s in plan.sources}
        tables: dict[str, Table] = {}
        timestamped = {name for q in plan.queries if q.kind == p.TABLE_TABLE_JOIN for name in (q.left, q.right)}

        def table_of(name: str) -> Table:
            return tables.setdefault(name, Table(plan.source(name), self.topics[name], name in timestamped))

        joins, copies, table_joins, stream_joins, rekeys = [], [], [], [], []
        declared_queries = {q.name: q for q in self.declared.queries}
        for query in plan.queries:
            left = self.topics[query.left]
            output, ksqldb = self.topics[query.sink], self.ksqldb_topics.get(query.sink)  # None: an internal copy
            if query.kind == p.TABLE_TABLE_JOIN:
                assert query.right is not None
                table_joins.append(TableTableJoin(query, left, output, ksqldb, table_of(query.left),
                                                  table_of(query.right)))
            elif query.kind == p.STREAM_STREAM_JOIN:
                assert query.right is not None
                stream_joins.append(StreamStreamJoin(query, left, output, ksqldb, self.topics[query.right]))
                first = declared_queries[query.name]
                rekeys += [Rekey(first, side, self.topics[name], plan.source(read), plan.source(name))
                           for (side, name, _), read in zip(_sides(first), (query.left, query.right or ""))
                           if read not in declared]
            elif query.kind == p.STREAM_TABLE_JOIN:
                assert query.right is not None and ksqldb is not None
                table = table_of(query.right)
                if query.repartition and not query.repartition_right:
                    name = join_repartition(query)
                    rekeyed = rekeyed_source(name, plan.source(query.left), table.source.key_columns[0],
                                             f"{settings.app_id}-{name}", table.source.key_format)
                    rekey = Rekey(query, p.LEFT_SIDE, left, rekeyed, plan.source(query.left))
                    joins.append(StreamTableJoin(query, rekey.topic, output, ksqldb, table, rekey))
                    rekeys.append(rekey)
                else:
                    joins.append(StreamTableJoin(query, left, output, ksqldb, table))
            else:
                copies.append(Output(query, left, output, ksqldb))
        #: The tables, one per source a join looks up, in the order the joins name them.
        self.tables: tuple[Table, ...] = tuple(tables.values())
        self.joins: tuple[StreamTableJoin, ...] = tuple(joins)
        #: The table-table joins, each of two of :attr:`tables` (both timestamped).
        self.table_joins: tuple[TableTableJoin, ...] = tuple(table_joins)
        #: The queries that copy a source to another topic (``CREATE TABLE ... AS SELECT``).
        self.copies: tuple[Output, ...] = tuple(copies)
        #: The windowed stream-stream joins.
        self.stream_joins: tuple[StreamStreamJoin, ...] = tuple(stream_joins)
        #: The streams the worker re-keys into a join's repartition topic (stream-table and stream-stream joins').
        self.rekeys: tuple[Rekey, ...] = tuple(rekeys)

    @cached_property
    def stream_join_topics(self) -> tuple[str, ...]:
        """The topics of the stream-stream joins' sides, each once."""
        return tuple(dict.fromkeys(t for j in self.stream_joins for t in (j.source_topic, j.right_topic)))

    @cached_property
    def stream_topics(self) -> tuple[str, ...]:
        """The topics of the joined streams, each once."""
        return tuple(dict.fromkeys(join.stream for join in self.joins))

    @cached_property
    def table_topics(self) -> tuple[str, ...]:
        """The topics the worker reads as tables (loaded, or copied elsewhere), each once."""
        return tuple(dict.fromkeys([t.topic for t in self.tables] + [c.source_topic for c in self.copies]))

    @property
    def outputs(self) -> tuple[str, ...]:
        """The topics the worker's queries write: copies, joins and the repartition topics of re-keyed streams."""
        rekeyed = tuple(r.topic for r in self.rekeys)
        return tuple(o.output for o in (*self.copies, *self.joins, *self.table_joins, *self.stream_joins)) + rekeyed

    @cached_property
    def rekeyed_topics(self) -> tuple[str, ...]:
        """The streams' topics the worker re-keys (into a join's repartition topic), each once."""
        return tuple(dict.fromkeys(r.stream for r in self.rekeys))

    def source_at(self, topic: str) -> p.Source:
        """The source the worker reads from ``topic``."""
        return self.plan.source(next(name for name, t in self.topics.items() if t == topic))

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)

    def owned_topics(self) -> dict[str, int]:
        """The topics the worker reads or writes, each with the partition count it creates it with."""
        names = (*self.table_topics, *self.rekeyed_topics, *self.stream_topics, *self.stream_join_topics, *self.outputs,
                 self.settings.dead_letter_topic)
        return {name: self.settings.partitions for name in dict.fromkeys(names)}

    def changelog_topic(self, table: str) -> str:
        """The changelog topic Faust names and creates for ``table`` of the app ``settings.app_id``."""
        return f"{self.settings.app_id}-{table}-changelog"


def topology(settings: Settings) -> Topology:
    """The worker's topology for ``settings`` (PlanError when its statements cannot be planned)."""
    return Topology(load_plan(settings), settings)


__all__ = ["PlanError", "Topology", "StreamTableJoin", "TableTableJoin", "StreamStreamJoin", "Table", "Output", "Rekey",
           "Rekeyer", "topology", "load_plan", "seed_renames", "rekey_tables", "rekey_streams", "join_repartition", "seed_text",
           "worker_refusal"]
