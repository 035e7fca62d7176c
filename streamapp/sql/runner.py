"""The test runner: ksqlDB's ``ksql-test-runner`` files run through the pure engine, without a broker.

Files as ksqlDB's runner reads them (``docs/how-to-guides/test-an-app.md`` in the ksql
repository): the statements, ``{"inputs": [...]}`` and ``{"outputs": [...]}``, each
record ``{topic, key, value, timestamp}`` in its logical JSON form.

Fed as ksqlDB's QTT executor feeds a query (``TestExecutor``): one record at a time in
file order, never re-sorted by timestamp (a missing timestamp is 0).  A record goes to
every query that reads its topic, in statement order, and what a query writes goes at
once to the queries that read it: a copied table (``CREATE TABLE ... AS SELECT``) holds
a row as soon as its source record is read, as the worker's does once it has loaded it.
(ksqlDB's executor pipes a query's derived topics after all its direct inputs instead;
no stream-table case of its tests chains two queries, so the two agree on all of them.)
Inputs are serialised with their source's formats and outputs
read back with their sink's, so the bytes go through the same codecs as the worker's.

Compared as ``ExpectedRecordComparator`` compares: per topic, in order, the same count;
a value object's fields by exact name, else upper-cased, and no field more; integers
exact, doubles within 1e-6; the timestamp only where one is expected.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping

from ..errors import StreamappError
from ..model.records import RecordError
from . import plan as p
from .engine import Query, Record
from .stream_join import StreamJoin
from .table_join import TableJoin
from .formats import Codec, json_text, reader
from .planner import plan_file

DOUBLE_TOLERANCE = 1e-6


class RunnerError(StreamappError):
    """A test file that cannot be read or used: the message names the file and the record."""


@dataclass(frozen=True)
class TestRecord:
    """One record of an input or output file, as written there."""

    __test__ = False  # not a pytest test class, whatever its name

    topic: str
    key: Any
    value: Any
    timestamp: int | None
    index: int

    def shown(self) -> str:
        stamp = "" if self.timestamp is None else f", timestamp {self.timestamp}"
        return f"key {_show(self.key)}, value {_show(self.value)}{stamp}"


@dataclass
class Result:
    """What a run produced, the differences from what was expected, and the records it could not read."""

    actual: dict[str, list[TestRecord]]
    differences: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.differences


def _show(value: Any) -> str:
    return json_text(value) if not isinstance(value, bytes) else repr(value)


def read_records(path: str | Path, part: str) -> list[TestRecord]:
    """The ``inputs`` or ``outputs`` of a file; a malformed file is a RunnerError naming it and the record."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"), parse_float=Decimal)
    except OSError as exc:
        raise RunnerError(f"{path}: cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise RunnerError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(part), list):
        raise RunnerError(f"{path}: expected an object with a list {part!r}")
    records = []
    for index, raw in enumerate(data[part]):
        if not isinstance(raw, dict) or not isinstance(raw.get("topic"), str) or "value" not in raw:
            raise RunnerError(f"{path}: {part}[{index}] needs a 'topic' (text) and a 'value'")
        timestamp = raw.get("timestamp")
        if timestamp is not None and (not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0):
            raise RunnerError(f"{path}: {part}[{index}].timestamp is {timestamp!r}, expected epoch milliseconds >= 0")
        for unsupported in ("window", "headers"):
            if raw.get(unsupported):
                raise RunnerError(f"{path}: {part}[{index}] has {unsupported!r}: not supported by streamapp yet")
        records.append(TestRecord(raw["topic"], raw.get("key"), raw["value"], timestamp, index))
    return records


# ---- inputs: logical JSON -> bytes ------------------------------------------------------------------------------------

def _input_key(codec: Codec, key: Any, where: str) -> bytes | None:
    if key is None:
        return None
    if len(codec.source.key_columns) > 1 and codec.key_format == "JSON":  # ksqlDB's STRUCT key: an object
        if not isinstance(key, dict):
            raise RunnerError(f"{where}: key {_show(key)} is not an object of the key columns "
                              f"{', '.join(c.name for c in codec.source.key_columns)}")
        try:
            return codec.encode_key(codec.decode_key(json_text(key).encode("utf-8")))
        except RecordError as exc:
            raise RunnerError(f"{where}: key {_show(key)} is not a key of {codec.source.name} ({exc})") from None
    if codec.key_column is None or codec.key_format in ("NONE", "DELIMITED"):
        # ksqlDB's runner writes these keys as text: a keyless source's is ignored, a DELIMITED one is its text
        return str(key).encode("utf-8")
    try:
        value = reader(codec.key_column.type)(key, codec.key_column.name)
        return codec.encode_key(value)
    except (RecordError, TypeError, ValueError, OverflowError) as exc:
        raise RunnerError(f"{where}: key {_show(key)} is not a {codec.key_column.type} ({exc})") from None


def _input_value(codec: Codec, value: Any) -> bytes | None:
    if value is None:
        return None
    if codec.value_format == "DELIMITED" and isinstance(value, str):
        return value.encode("utf-8")
    return json_text(value).encode("utf-8")


# ---- the run ----------------------------------------------------------------------------------------------------------

def engine_for(plan: p.Plan, query: p.Query) -> Query | TableJoin | StreamJoin:
    """The engine that runs ``query``: a table-table or stream-stream join's, else :class:`Query` (a copy or a
    stream-table join)."""
    if query.kind == p.STREAM_STREAM_JOIN:
        return StreamJoin(plan, query)
    return TableJoin(plan, query) if query.kind == p.TABLE_TABLE_JOIN else Query(plan, query)


def encode_inputs(plan: p.Plan, inputs: list[TestRecord], origin: str) -> list[Record]:
    """The inputs as bytes, through their sources' codecs (one RunnerError line for a record it cannot use)."""
    codecs = {s.topic: Codec(s) for s in plan.sources if plan.writer_of(s.name) is None}
    declared = {s.topic for s in plan.sources}
    for record in inputs:
        if record.topic not in declared:
            raise RunnerError(f"{origin}: inputs[{record.index}] is for topic {record.topic!r}, which no statement "
                              "declares")
    offsets: dict[str, int] = {}
    encoded = []
    for r in inputs:
        if r.topic in codecs:
            offsets[r.topic] = offset = offsets.get(r.topic, -1) + 1  # each topic's records in file order
            encoded.append(Record(r.topic, _input_key(codecs[r.topic], r.key, f"{origin}: inputs[{r.index}]"),
                                  _input_value(codecs[r.topic], r.value), r.timestamp or 0, 0, offset))
    return encoded


def run(plan: p.Plan, inputs: list[TestRecord], origin: str = "input") -> Result:
    """Feed ``inputs`` through every query of ``plan``; the records each output topic received."""
    engines = [engine_for(plan, query) for query in plan.queries]
    written: dict[str, list[Record]] = {}
    skipped: list[str] = []

    def feed(record: Record) -> None:
        for engine in engines:
            if record.topic not in engine.topics:
                continue
            try:
                outputs = engine.process(record)
            except RecordError as exc:  # ksqlDB logs the record to its processing log and goes on
                skipped.append(f"{engine.query.name}: a {record.topic} record was skipped: {exc.reason}")
                continue
            for output in outputs:
                written.setdefault(output.record.topic, []).append(output.record)
                feed(output.record)  # a query reading this one's output sees it at once

    for record in encode_inputs(plan, inputs, origin):
        feed(record)
    for engine in engines:  # a windowed join's records too late to keep: Kafka Streams' dropped-records count
        late = getattr(engine, "late", 0)
        if late:
            skipped.append(f"{engine.query.name}: {late} record{'s' if late > 1 else ''} came later than the window "
                           "and its grace: kept for no later join (Kafka Streams counts them as dropped)")
    sinks = {plan.source(q.sink).topic: Codec(plan.source(q.sink)) for q in plan.queries}
    actual = {topic: [read_back(sinks[topic], record, i) for i, record in enumerate(records)]
              for topic, records in written.items()}
    return Result(actual, skipped=skipped)


def read_back(codec: Codec, record: Record, index: int) -> TestRecord:
    """An output record in its logical JSON form, as the file of expected outputs writes it."""
    text_key = codec.key_format == "DELIMITED" and record.key is not None
    key = record.key.decode("utf-8", "replace") if text_key else codec.decode_key(record.key)  # type: ignore[union-attr]
    if codec.value_format == "DELIMITED" and record.value is not None:
        # ksqlDB's runner reads a DELIMITED value back as its text, the form its expected outputs take
        return TestRecord(record.topic, key, record.value.decode("utf-8", "replace"), record.timestamp, index)
    value = codec.decode_value(record.value)
    if value is not None and codec.source.wrap_single_value is False:
        value = next(iter(value.values()))
    return TestRecord(record.topic, key, value, record.timestamp, index)


# ---- comparison -------------------------------------------------------------------------------------------------------

def _same(expected: Any, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or len(expected) != len(actual):
            return False
        for name, value in expected.items():
            found = name if name in actual else name.upper()
            if found not in actual or not _same(value, actual[found]):
                return False
        return True
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(map(_same, expected, actual))
    if isinstance(expected, (int, Decimal, float)) and isinstance(actual, (int, Decimal, float)):
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        if isinstance(actual, float) or isinstance(expected, float):
            return math.isclose(float(expected), float(actual), rel_tol=0, abs_tol=DOUBLE_TOLERANCE) or (
                math.isnan(float(expected)) and math.isnan(float(actual)))
        return Decimal(expected) == Decimal(actual)
    if isinstance(expected, str) and isinstance(actual, (bytes, bytearray)):
        return expected.encode("utf-8") == actual
    return bool(expected == actual)


def compare(expected: list[TestRecord], result: Result) -> list[str]:
    """Each difference between the expected outputs and what the run wrote, record by record."""
    differences = []
    by_topic: dict[str, list[TestRecord]] = {}
    for record in expected:
        by_topic.setdefault(record.topic, []).append(record)
    for topic, wanted in by_topic.items():
        got = result.actual.get(topic, [])
        for i in range(max(len(wanted), len(got))):
            want = wanted[i] if i < len(wanted) else None
            have = got[i] if i < len(got) else None
            if want is None:
                differences.append(f"{topic} record {i + 1}: not expected, got {have.shown()}")  # type: ignore[union-attr]
            elif have is None:
                differences.append(f"{topic} record {i + 1}: expected {want.shown()}, got nothing")
            elif not (_same(want.key, have.key) and _same(want.value, have.value)
                      and (want.timestamp is None or want.timestamp == have.timestamp)):
                differences.append(f"{topic} record {i + 1}: expected {want.shown()}, got {have.shown()}")
        if len(wanted) != len(got):
            differences.append(f"{topic}: expected {len(wanted)} records, got {len(got)}")
    return differences


def run_files(statements: str | Path, inputs: str | Path, outputs: str | Path | None,
              properties: Mapping[str, Any] | None = None) -> tuple[p.Plan, Result]:
    """Plan the statements (under ksqlDB's ``properties``, as a QTT case gives them), run the inputs, compare with
    the outputs (when given)."""
    plan = plan_file(statements, properties)
    result = run(plan, read_records(inputs, "inputs"), str(inputs))
    if outputs is not None:
        result.differences = compare(read_records(outputs, "outputs"), result)
    return plan, result
