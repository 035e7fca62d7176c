"""Convert ksqlDB's own QTT stream-table, table-table and stream-stream join cases into ksql-test-runner files.

Usage::

    python tests/qtt/convert.py PATH [--rev REV] [--out DIR]

``PATH`` is a bare git directory of ``confluentinc/ksql`` or a checkout of it; ``--out`` defaults to this
script's directory.  Each selected case becomes ``<out>/<slug>/`` with ``statements.sql``, ``input.json``,
``output.json`` and ``case.json``; which cases, and how they are written: docs/reference/qtt-conversion.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QTT_DIR = "ksqldb-functional-tests/src/test/resources/query-validation-tests"


@dataclass(frozen=True)
class Selected:
    """One case to convert: a test node (by file and index) and, for a node with a
    ``format`` array, the format expanded."""

    file: str
    index: int
    name: str
    format: str | None
    ring: str
    features: tuple[str, ...]


# Ring R0 and R0+ (reference, Appendix "case -> ring"). Features: what the case needs
# beyond a plain stream-table join on the key with KAFKA/JSON keys and JSON values.
POSITIVE: tuple[Selected, ...] = (
    Selected("join-with-custom-timestamp.json", 2, "stream table join with ts extractor both sides",
             "JSON", "R0",
             ("timestamp= column", "timestamp= on sink", "value-column alias",
              "out-of-order timestamps")),
    Selected("joins.json", 60, "stream table left join", "JSON", "R0",
             ("LEFT join", "source aliases", "table update emits nothing")),
    Selected("joins.json", 62, "stream table inner join", "JSON", "R0",
             ("source aliases", "table update emits nothing")),
    Selected("joins.json", 68, "stream to table wrapped single field value schema on inputs", None, "R0",
             ("null value field", "table tombstone", "value-column alias")),
    Selected("joins.json", 117, "non-KAFKA key format", None, "R0",
             ("JSON key", "FORMAT= (key and value)", "SELECT *")),
    Selected("as_value.json", 5, "join", None, "R0+",
             ("AS_VALUE in ON", "SELECT *", "rekey-stream-on-expression", "no timestamps")),
    Selected("joins.json", 69, "stream to table unwrapped single field value schema on inputs", None, "R0+",
             ("wrap_single_value=false", "null value on stream", "table tombstone",
              "value-column alias")),
    Selected("joins.json", 70, "stream to table unwrapped single field value schema on inputs and output",
             None, "R0+",
             ("wrap_single_value=false", "wrap_single_value=false on sink", "null value on stream",
              "table tombstone", "value-column alias")),
    Selected("joins.json", 97, "on non-STRING value column", None, "R0+",
             ("rekey-stream-on-value-column", "ROWTIME in select", "SELECT *", "STRING stream key")),
    Selected("joins.json", 116, "streams with no key columns (stream->table)", None, "R0+",
             ("keyless-stream", "rekey-stream-on-value-column", "SELECT *", "input key ignored")),
    Selected("joins.json", 125, "stream-table key-to-key - key format mismatch", None, "R0+",
             ("DELIMITED key", "key format mismatch", "rekey-table-to-stream-key-format",
              "case-insensitive value field", "no timestamps")),
    Selected("joins.json", 126, "stream-table value-to-key - key format mismatch", None, "R0+",
             ("DELIMITED key", "key format mismatch", "rekey-stream-on-value-column", "LEFT join",
              "case-insensitive value field", "no timestamps")),
    Selected("joins.json", 127, "stream-table val-to-key - keyless", None, "R0+",
             ("NONE key", "keyless-stream", "rekey-stream-on-value-column", "LEFT join",
              "input key absent", "case-insensitive value field", "string for INT field",
              "no timestamps")),
    Selected("none.json", 9, "inherited in CSAS - JOIN with repartition", None, "R0+",
             ("NONE key", "keyless-stream", "rekey-stream-on-value-column", "input key null",
              "case-insensitive value field", "no timestamps")),
    Selected("quoted-identifiers.json", 6, "joins using fields that require quotes", None, "R0+",
             ("quoted identifiers", "rekey-stream-on-value-column", "LEFT join", "SELECT *",
              "STRING keys", "no timestamps")),
)

# Ring R2 (reference, Appendix "case -> ring"): the 14 positive table-table joins on the primary key.
TABLE_TABLE: tuple[Selected, ...] = (
    Selected("join-with-custom-timestamp.json", 3, "table table inner join with ts", "JSON", "R2",
             ("timestamp= column", "timestamp= on sink", "value-column alias")),
    Selected("join-with-custom-timestamp.json", 4, "table table inner join with ts extractor both sides", "JSON",
             "R2", ("timestamp= column on both sides", "timestamp= on sink", "value-column alias")),
    Selected("joins.json", 6, "unaliased synthetic join key", None, "R2",
             ("FULL OUTER join", "synthetic ROWKEY key", "both key columns in the value")),
    Selected("joins.json", 52, "table table left join", "JSON", "R2", ("LEFT join", "source aliases")),
    Selected("joins.json", 54, "table table right join", "JSON", "R2", ("RIGHT join", "source aliases")),
    Selected("joins.json", 56, "table table right join all fields", None, "R2",
             ("RIGHT join", "DELIMITED values", "SELECT *")),
    Selected("joins.json", 57, "table table inner join", "JSON", "R2", ("source aliases",)),
    Selected("joins.json", 58, "table table outer join", "JSON", "R2",
             ("FULL OUTER join", "synthetic ROWKEY key aliased")),
    Selected("joins.json", 64, "table table join with where clause", None, "R2",
             ("WHERE", "right tombstone")),
    Selected("joins.json", 71, "table to table wrapped single field value schema on inputs", None, "R2",
             ("null value field", "tombstones on both sides", "value-column alias")),
    Selected("joins.json", 72, "table to table unwrapped single field value schema on inputs", None, "R2",
             ("wrap_single_value=false", "tombstones on both sides", "value-column alias")),
    Selected("joins.json", 73, "table to table unwrapped single field value schema on inputs and output", None,
             "R2", ("wrap_single_value=false", "wrap_single_value=false on sink", "tombstones on both sides")),
    Selected("joins.json", 82, "with generated column name clashes", None, "R2",
             ("FULL OUTER join", "synthetic key ROWKEY_6 (name clashes)")),
    Selected("joins.json", 128, "table-table key-to-key - key format mismatch", None, "R2",
             ("DELIMITED key", "key format mismatch", "rekey-table-to-left-key-format", "SELECT *",
              "no timestamps")),
)

def _r1(file: str, index: int, name: str, fmt: str | None = None) -> Selected:
    return Selected(file, index, name, fmt, "R1", ())


# Ring R1 (reference, Appendix "case -> ring"): the 75 positive stream-stream joins that need no schema registry.
# Their features are read from the case itself (:func:`stream_features`).
STREAM_STREAM: tuple[Selected, ...] = (
    _r1("elements.json", 67, "join qualified select star left"),
    _r1("elements.json", 68, "join qualified select star right"),
    _r1("elements.json", 69, "join unqualified select star"),
    _r1("identifiers.json", 2, "aliased join source"),
    _r1("identifiers.json", 3, "aliased join source with AS"),
    _r1("identifiers.json", 4, "aliased left unaliased right"),
    _r1("identifiers.json", 5, "unaliased left aliased right"),
    _r1("join-with-custom-timestamp.json", 0, "stream stream inner join with ts", "JSON"),
    _r1("join-with-custom-timestamp.json", 1, "stream stream inner join with ts extractor both sides", "JSON"),
    _r1("joins.json", 0, "matching columns in both sides = select *"),
    _r1("joins.json", 1, "matching columns in both sides = select left.* and right.*"),
    _r1("joins.json", 2, "matching columns in both sides = select left.* and right.* with WHERE"),
    _r1("joins.json", 3, "aliased join condition"),
    _r1("joins.json", 4, "aliased join key"),
    _r1("joins.json", 5, "aliased synthetic join key"),
    _r1("joins.json", 7, "inner join - with both join column in projection"),
    _r1("joins.json", 8, "inner join - with left join column in projection"),
    _r1("joins.json", 9, "inner join - with right join column in projection"),
    _r1("joins.json", 10, "inner join - with only right join column in projection"),
    _r1("joins.json", 13, "left join - with both join column in projection"),
    _r1("joins.json", 14, "left join - with left join column in projection"),
    _r1("joins.json", 15, "left join - with right join column in projection"),
    _r1("joins.json", 16, "left join - with synthetic join column in projection"),
    _r1("joins.json", 20, "full join - with both join column in projection"),
    _r1("joins.json", 24, "stream stream left join", "JSON"),
    _r1("joins.json", 27, "stream stream left join with key in projection - rekey", "JSON"),
    _r1("joins.json", 29, "stream stream left join - rekey", "JSON"),
    _r1("joins.json", 31, "stream stream right join", "JSON"),
    _r1("joins.json", 32, "stream stream right join all fields"),
    _r1("joins.json", 35, "stream stream right join with key in projection - rekey", "JSON"),
    _r1("joins.json", 37, "stream stream right join - rekey", "JSON"),
    _r1("joins.json", 39, "stream stream inner join", "JSON"),
    _r1("joins.json", 40, "stream stream inner join all left fields some right", "JSON"),
    _r1("joins.json", 41, "stream stream inner join all right fields some left", "JSON"),
    _r1("joins.json", 42, "stream stream inner join with stars and duplicates"),
    _r1("joins.json", 43, "stream stream inner join all fields", "JSON"),
    _r1("joins.json", 44, "stream stream inner join with different before and after windows", "JSON"),
    _r1("joins.json", 45, "stream stream inner join with out of order messages", "JSON"),
    _r1("joins.json", 46, "stream stream inner join with out of order and custom grace period", "JSON"),
    _r1("joins.json", 47, "stream stream left join with out of order and custom grace period", "JSON"),
    _r1("joins.json", 48, "stream stream right join with out of order and custom grace period", "JSON"),
    _r1("joins.json", 49, "stream stream full outer join with out of order and custom grace period", "JSON"),
    _r1("joins.json", 50, "stream stream outer join", "JSON"),
    _r1("joins.json", 65, "stream to stream wrapped single field value schema on inputs"),
    _r1("joins.json", 66, "stream to stream unwrapped single field value schema on inputs"),
    _r1("joins.json", 67, "stream to stream unwrapped single field value schema on inputs and output"),
    _r1("joins.json", 78, "stream stream join - contains function"),
    _r1("joins.json", 79, "stream stream join - contains CAST"),
    _r1("joins.json", 80, "stream stream join - contains CAST double to int"),
    _r1("joins.json", 81, "stream stream join on expression where schema contains ROWKEY_xx column names"),
    _r1("joins.json", 83, "stream stream join - contains subscript"),
    _r1("joins.json", 84, "stream stream join - contains arithmetic binary expression"),
    _r1("joins.json", 85, "stream stream join - contains arithmetic unary expression"),
    _r1("joins.json", 86, "stream stream join - contains CASE expression"),
    _r1("joins.json", 87, "stream stream join - contains arithmetic unary expression flipped sides"),
    _r1("joins.json", 96, "unqualified join criteria"),
    _r1("joins.json", 98, "on INT column - KAFKA", "JSON"),
    _r1("joins.json", 99, "on BIGINT column - KAFKA", "JSON"),
    _r1("joins.json", 100, "on DOUBLE column = KAFKA", "JSON"),
    _r1("joins.json", 101, "on STRING column - KAFKA", "JSON"),
    _r1("joins.json", 102, "on ARRAY column", "JSON"),
    _r1("joins.json", 103, "on STRUCT column", "JSON"),
    _r1("joins.json", 113, "on struct field"),
    _r1("joins.json", 114, "with where"),
    _r1("joins.json", 115, "streams with no key columns (stream->stream)"),
    _r1("joins.json", 118, "stream-stream key-to-key - key format mismatch"),
    _r1("joins.json", 119, "stream-stream key-to-key - key format and default feature mismatch"),
    _r1("joins.json", 122, "stream-stream value-to-key - key format mismatch"),
    _r1("joins.json", 123, "stream-stream key-to-value - key format mismatch"),
    _r1("joins.json", 124, "stream-stream value-to-value - keyless"),
    _r1("multi-col-keys.json", 13, "join with repartition on single key"),
    _r1("multi-col-keys.json", 14, "join with repartition on single value"),
    _r1("row-offset-and-partition.json", 8, "join on ROWPARTITION"),
    _r1("row-offset-and-partition.json", 9, "join on ROWOFFSET"),
    _r1("select-struct-all.json", 5, "joins and struct all on projection"),
)

#: The R1 cases streamapp does not pass yet, with why: not converted (the suite holds only cases that pass).
STREAM_STREAM_NOT_YET: dict[tuple[str, int], str] = {}

# Ring RN: the negative single stream-table / table-stream join cases at the commit read.
NEGATIVE: tuple[Selected, ...] = (
    Selected("stream-table-join.json", 0, "Should fail on outer-join", None, "RN",
             ("FULL OUTER stream-table",)),
    Selected("stream-table-join.json", 1, "Should fail on incorrect join order for inner-join", None, "RN",
             ("table-stream order",)),
    Selected("stream-table-join.json", 2, "Should fail on incorrect join order for left-join", None, "RN",
             ("table-stream order", "LEFT join")),
    Selected("stream-table-join.json", 3, "Should fail on table-side non-key join attribute for inner-join",
             None, "RN", ("join on table value column",)),
    Selected("stream-table-join.json", 4, "Should fail on table-side non-key join attribute for left-join",
             None, "RN", ("join on table value column", "LEFT join", "AVRO format")),
    Selected("group-by.json", 133, "windowed join with window bounds", None, "RN",
             ("GROUP BY over join", "WINDOW TUMBLING", "WINDOWSTART in select", "keyless-stream")),
    Selected("multi-col-keys.json", 18, "join to multi-column table", None, "RN",
             ("multi-column table key",)),
)

# Ring RN: the negative single table-table joins on the primary key (the reference's table-table PK
# rejections; fk-join.json's are ring R3's).
TABLE_TABLE_NEGATIVE: tuple[Selected, ...] = (
    *(Selected("table-table-join.json", i, f"Should fail on right non-key attribute for {kind}", None, "RN",
               ("join on right table value column",) + extra)
      for i, kind, extra in (
          (0, "inner-join", ()),
          (1, "inner-join -- revers join condition order", ("reversed ON",)),
          (2, "left-join", ("LEFT join",)),
          (3, "left-join -- revers join condition order", ("LEFT join", "reversed ON")),
          (4, "outer-join", ("FULL OUTER join",)),
          (5, "outer-join -- reverse join condition order", ("FULL OUTER join", "reversed ON")),
          (6, "inner-join with qualifiers", ("qualified ON",)),
          (7, "inner-join with qualifiers -- reverse join condition order", ("qualified ON", "reversed ON")),
          (8, "inner-join with alias", ("source aliases",)),
          (9, "inner-join with alias -- reverse join condition order", ("source aliases", "reversed ON")))),
    Selected("joins.json", 92, "Should fail on ambiguous join attribute", None, "RN", ("ambiguous ON column",)),
    Selected("joins.json", 93, "Should fail on unknown qualifier -- left join attribute", None, "RN",
             ("unknown qualifier in ON",)),
    Selected("joins.json", 94, "Should fail on unknown qualifier -- right join attribute", None, "RN",
             ("unknown qualifier in ON",)),
    Selected("joins.json", 139, "table-table key-to-key - SR-enabled key format - incompatible schemas", None, "RN",
             ("key type mismatch", "AVRO key format")),
)


def _rn(file: str, index: int, name: str) -> Selected:
    return Selected(file, index, name, None, "RN", ())


# Ring RN: the stream-stream joins ksqlDB rejects (found by ``find_stream_stream_negatives``; features read from the
# case, as R1's); #142 declares a JSON_SR key but is rejected before any registry is needed.
STREAM_STREAM_NEGATIVE: tuple[Selected, ...] = (
    _rn("comparison-expression.json", 2, "invalid where predicate - type mismatch join"),
    _rn("comparison-expression.json", 8, "invalid having predicate - type mismatch join"),
    _rn("elements.json", 60, "join should reject ROWTIME in projection"),
    _rn("elements.json", 61, "join should reject WINDOWSTART in projection"),
    _rn("elements.json", 62, "join should reject WINDOWEND in projection"),
    _rn("elements.json", 70, "join unknown qualified select star"),
    _rn("elements.json", 72, "join unknown field"),
    _rn("elements.json", 73, "join unknown field source"),
    _rn("elements.json", 74, "join ambiguous field"),
    _rn("insert-into.json", 18, "join mismatch (fewer columns than expected)"),
    _rn("insert-into.json", 19, "join mismatch (more columns than expected)"),
    *(_rn("joins.json", i, name) for i, name in (
        (11, "inner join - missing join columns in projection"),
        (12, "inner join - missing synthetic join column in projection"),
        (17, "left join - missing join columns in projection"),
        (18, "left join - missing join columns in projection - with star"),
        (19, "left join - missing synthetic join column in projection"),
        (21, "full join - missing synthetic join column in projection"),
        (22, "missing join columns in projection - with value column of same name"),
        (23, "key in projection more than once"),
        (26, "stream stream left join - KAFKA"),
        (34, "stream stream right join - KAFKA"),
        (74, "stream stream left join - invalid join field - contains literal"),
        (75, "stream stream left join - invalid join field on lhs- contains literal"),
        (76, "stream stream right join - invalid join field - contains literal"),
        (77, "stream stream right join - invalid join field on lhs- contains literal"),
        (88, "stream stream left join - invalid left join expression - field does not exist"),
        (89, "stream stream left join - invalid right join expression - field does not exist"),
        (90, "stream stream right join - invalid left join expression - field does not exist"),
        (91, "stream stream right join - invalid right join expression - field does not exist"),
        (95, "should not allow complex join conditions"),
        (104, "on MAP column"),
        (105, "on nested MAP column"),
        (106, "self join"),
        (108, "matching time-windowed join with different windows fails"),
        (109, "session - timed windowed"),
        (110, "windowed - non-windowed - INT"),
        (111, "windowed - non-windowed - STRING"),
        (112, "join requiring repartition of windowed source"),
        (142, "matching time-windowed - SR-enabled key format - fails if join on non-key"))),
    _rn("multi-col-keys.json", 17, "join on multi-column key"),
    _rn("null.json", 22, "null join expression"),
)

#: The stream-stream rejections streamapp does not match yet, with why: not converted.
STREAM_STREAM_NEGATIVE_NOT_YET: dict[tuple[str, int], str] = {}


def stream_features(node: dict[str, Any], fmt: str | None) -> tuple[str, ...]:
    """What a stream-stream case needs beyond an INNER join on the key, read from its statements and records."""
    text = " ".join(statements_sql(node["statements"], fmt).split()).upper()
    found = [label for label, pattern in (
        ("LEFT join", r"\bLEFT\s+(OUTER\s+)?JOIN\b"), ("RIGHT join", r"\bRIGHT\s+(OUTER\s+)?JOIN\b"),
        ("FULL OUTER join", r"\bFULL\s+(OUTER\s+)?JOIN\b"), ("WITHIN (before, after)", r"\bWITHIN\s*\("),
        ("GRACE PERIOD", r"\bGRACE\s+PERIOD\b"), ("no WITHIN", r"^(?!.*\bWITHIN\b).*\bJOIN\b"),
        ("SELECT *", r"SELECT\s+\*"), ("qualified x.*", r"\w\.\*"), ("WHERE", r"\bWHERE\b"),
        ("TIMESTAMP= column", r"TIMESTAMP\s*=\s*'"), ("wrap_single_value=false", r"WRAP_SINGLE_VALUE\s*=\s*FALSE"),
        ("DELIMITED", r"DELIMITED"), ("NONE key", r"KEY_FORMAT\s*=\s*'NONE'"), ("ROWTIME", r"ROWTIME"))
        if re.search(pattern, text)]
    inputs = node.get("inputs", [])
    times = [r.get("timestamp", 0) for r in inputs]
    if any(b < a for a, b in zip(times, times[1:])):
        found.append("out-of-order timestamps")
    if any(r.get("value") is None for r in inputs):
        found.append("null value")
    if any(isinstance(r.get("key"), dict) for r in inputs):
        found.append("multi-column JSON key")
    return tuple(found)


# --------------------------------------------------------------------------- reading


class Source:
    """The ksql repository, as a bare git directory or a checkout."""

    def __init__(self, path: Path, rev: str) -> None:
        self.path = path
        self.rev = rev
        self.checkout = (path / QTT_DIR).is_dir()
        if not self.checkout and not (path / "HEAD").is_file():
            raise SystemExit(f"{path}: neither a checkout of confluentinc/ksql nor a git directory")

    def _git(self, *args: str) -> str:
        flag = ["-C", str(self.path)] if self.checkout else ["--git-dir", str(self.path)]
        done = subprocess.run(["git", *flag, *args], capture_output=True, text=True, encoding="utf-8")
        if done.returncode != 0:
            raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def commit(self) -> str | None:
        try:
            if self.checkout:
                top = Path(self._git("rev-parse", "--show-toplevel").strip())
                if top.resolve() != self.path.resolve():
                    return None  # a plain copy, perhaps inside some other repository
            return self._git("rev-parse", self.rev).strip()
        except (SystemExit, OSError):
            return None  # a plain copy without .git

    def qtt_files(self) -> list[str]:
        if self.checkout:
            names = [p.name for p in (self.path / QTT_DIR).iterdir() if p.is_file()]
        else:
            names = [line.rsplit("/", 1)[-1]
                     for line in self._git("ls-tree", "--name-only", f"{self.rev}:{QTT_DIR}").splitlines()]
        return sorted(n for n in names if n.endswith(".json"))

    def read(self, name: str) -> str:
        if self.checkout:
            return (self.path / QTT_DIR / name).read_text(encoding="utf-8")
        return self._git("show", f"{self.rev}:{QTT_DIR}/{name}")


def strip_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments (Jackson ALLOW_COMMENTS) outside JSON strings."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


class RawNumber(str):
    """A JSON floating-point literal kept as its source text (e.g. ``1.50`` stays ``1.50``)."""


def parse(text: str) -> Any:
    return json.loads(strip_comments(text), parse_float=RawNumber)


# --------------------------------------------------------------------------- writing

_RAW = "\u0001RAWNUM\u0001"


def _mark(value: Any) -> Any:
    if isinstance(value, RawNumber):
        return _RAW + str(value) + _RAW
    if isinstance(value, dict):
        return {k: _mark(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """``json.dumps(indent=2)`` in source key order, with raw float literals restored."""
    text = json.dumps(_mark(value), indent=2, ensure_ascii=False, sort_keys=False)
    marker = json.dumps(_RAW, ensure_ascii=False)[1:-1]
    return re.sub('"' + re.escape(marker) + "(.*?)" + re.escape(marker) + '"', r"\1", text) + "\n"


def slug(file: str, index: int, name: str, fmt: str | None) -> str:
    stem = file[:-len(".json")] if file.endswith(".json") else file
    snake = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    parts = [stem, f"{index:03d}", snake] + ([fmt.lower()] if fmt else [])
    return "-".join(parts)


def statements_sql(statements: list[str], fmt: str | None) -> str:
    lines = []
    for stmt in statements:
        if fmt is not None:
            stmt = stmt.replace("{FORMAT}", fmt)
        stmt = stmt.strip()
        if "\n" in stmt or "\r" in stmt:
            raise SystemExit(f"statement spans several lines, cannot write one per line: {stmt!r}")
        if not stmt.endswith(";"):
            stmt += ";"
        lines.append(stmt)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- selection

_CREATE = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:SOURCE\s+)?(STREAM|TABLE)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(`[^`]+`|\"[^\"]+\"|\w+)", re.IGNORECASE)
_JOIN = re.compile(r"\bJOIN\b", re.IGNORECASE)
_IDENT = r"(`[^`]+`|\w+)"
_FROM_JOIN = re.compile(
    r"\bFROM\s+" + _IDENT
    + r"(?:\s+(?:AS\s+)?(?!(?:JOIN|LEFT|RIGHT|FULL|INNER|OUTER)\b)\w+)?"
    + r"\s+(?:(?:LEFT|RIGHT|FULL|INNER)\s+)?(?:OUTER\s+)?JOIN\s+" + _IDENT, re.IGNORECASE)


def _norm(ident: str) -> str:
    return ident[1:-1] if ident[0] in "`\"" else ident.upper()


def join_sides(statements: list[str]) -> list[tuple[str, str, int]]:
    """For each statement with a JOIN: (left kind, right kind, number of joins)."""
    kinds: dict[str, str] = {}
    found = []
    for stmt in statements:
        m = _CREATE.match(stmt)
        if m:
            kinds[_norm(m.group(2))] = m.group(1).upper()
        joins = len(_JOIN.findall(stmt))
        if joins:
            fj = _FROM_JOIN.search(stmt)
            if fj:
                found.append((kinds.get(_norm(fj.group(1)), "?"), kinds.get(_norm(fj.group(2)), "?"), joins))
            else:
                found.append(("?", "?", joins))
    return found


def find_stream_table_negatives(files: dict[str, Any]) -> list[tuple[str, int, str]]:
    """Every negative case whose only join is between one STREAM and one TABLE."""
    hits = []
    for file, doc in files.items():
        for index, node in enumerate(doc.get("tests", [])):
            if "expectedException" not in node:
                continue
            sides = join_sides(node.get("statements", []))
            if len(sides) == 1 and sides[0][2] == 1 and {sides[0][0], sides[0][1]} == {"STREAM", "TABLE"}:
                hits.append((file, index, node["name"]))
    return hits


def find_table_table_negatives(files: dict[str, Any]) -> list[tuple[str, int, str]]:
    """Every negative case whose only join is between two TABLEs, but fk-join.json's (foreign keys: ring R3)."""
    hits = []
    for file, doc in files.items():
        if file == "fk-join.json":
            continue
        for index, node in enumerate(doc.get("tests", [])):
            sides = join_sides(node.get("statements", []))
            if ("expectedException" in node and len(sides) == 1 and sides[0][2] == 1
                    and sides[0][:2] == ("TABLE", "TABLE")):
                hits.append((file, index, node["name"]))
    return hits


def find_stream_stream_negatives(files: dict[str, Any]) -> list[tuple[str, int, str]]:
    """Every negative case whose only join is between two STREAMs."""
    hits = []
    for file, doc in files.items():
        for index, node in enumerate(doc.get("tests", [])):
            sides = join_sides(node.get("statements", []))
            if ("expectedException" in node and len(sides) == 1 and sides[0][2] == 1
                    and sides[0][:2] == ("STREAM", "STREAM")):
                hits.append((file, index, node["name"]))
    return hits


def resolve(doc: Any, sel: Selected) -> tuple[int, dict[str, Any]]:
    tests = doc["tests"]
    if sel.index < len(tests) and tests[sel.index].get("name") == sel.name:
        return sel.index, tests[sel.index]
    matches = [i for i, t in enumerate(tests) if t.get("name") == sel.name]
    if len(matches) != 1:
        raise SystemExit(f"{sel.file}: no unique test named {sel.name!r} (index {sel.index} expected)")
    print(f"warning: {sel.file} #{sel.index} is not {sel.name!r}; using #{matches[0]} by name", file=sys.stderr)
    return matches[0], tests[matches[0]]


# --------------------------------------------------------------------------- main


def write_case(out: Path, sel: Selected, index: int, node: dict[str, Any], commit: str | None) -> str:
    if sel.format is not None and sel.format not in node.get("format", []):
        raise SystemExit(f"{sel.file} #{index}: format {sel.format} not in {node.get('format')}")
    if sel.format is None and node.get("format"):
        raise SystemExit(f"{sel.file} #{index}: node has a format array {node['format']}; pick one")
    if node.get("config"):
        raise SystemExit(f"{sel.file} #{index}: 'config' expansion is not supported")
    name = slug(sel.file, index, sel.name, sel.format)
    case_dir = out / name
    case_dir.mkdir(parents=True)
    expected = node.get("expectedException")
    (case_dir / "statements.sql").write_text(statements_sql(node["statements"], sel.format), encoding="utf-8")
    (case_dir / "input.json").write_text(dumps({"inputs": node.get("inputs", [])}), encoding="utf-8")
    (case_dir / "output.json").write_text(
        dumps({"outputs": [] if expected else node.get("outputs", [])}), encoding="utf-8")
    meta = {
        "file": sel.file,
        "index": index,
        "name": node["name"],
        "format": sel.format,
        "ring": sel.ring,
        "ksql_commit": commit,
        "expected_exception": expected,
        "post": node.get("post"),
        "properties": node.get("properties"),
        "topics": node.get("topics"),
        "features": list(sel.features),
    }
    (case_dir / "case.json").write_text(dumps(meta), encoding="utf-8")
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("ksql", type=Path, help="bare git directory or checkout of confluentinc/ksql")
    parser.add_argument("--rev", default="HEAD", help="revision to read from a git directory (default HEAD)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)

    source = Source(args.ksql, args.rev)
    commit = source.commit()
    docs = {name: parse(source.read(name)) for name in source.qtt_files()}

    known = {(s.file, s.index) for s in NEGATIVE}
    negatives = list(NEGATIVE)
    for file, index, name in find_stream_table_negatives(docs):
        if (file, index) not in known and not any(s.file == file and s.name == name for s in NEGATIVE):
            print(f"note: new negative stream-table case {file} #{index} {name!r}", file=sys.stderr)
            negatives.append(Selected(file, index, name, None, "RN", ("unclassified",)))

    known_tt = {(s.file, s.index) for s in TABLE_TABLE_NEGATIVE}
    for file, index, name in find_table_table_negatives(docs):
        if (file, index) not in known_tt:
            print(f"note: new negative table-table case {file} #{index} {name!r}", file=sys.stderr)
            negatives.append(Selected(file, index, name, None, "RN", ("unclassified",)))

    known_ss = {(s.file, s.index) for s in STREAM_STREAM_NEGATIVE}
    for file, index, name in find_stream_stream_negatives(docs):
        if (file, index) not in known_ss:
            print(f"note: new negative stream-stream case {file} #{index} {name!r} (not converted)", file=sys.stderr)

    for old in sorted(args.out.iterdir()):
        if old.is_dir() and (old / "case.json").is_file():
            shutil.rmtree(old)

    streams = [s for s in (*STREAM_STREAM, *STREAM_STREAM_NEGATIVE)
               if (s.file, s.index) not in {**STREAM_STREAM_NOT_YET, **STREAM_STREAM_NEGATIVE_NOT_YET}]
    for sel in (*POSITIVE, *TABLE_TABLE, *negatives, *TABLE_TABLE_NEGATIVE, *streams):
        index, node = resolve(docs[sel.file], sel)
        if sel.ring in ("R1", "RN") and not sel.features and sel in streams:
            sel = dataclasses.replace(sel, features=stream_features(node, sel.format))
        expect_negative = sel.ring == "RN"
        if expect_negative != ("expectedException" in node):
            raise SystemExit(f"{sel.file} #{index}: ring {sel.ring} but expectedException is "
                             f"{'present' if 'expectedException' in node else 'absent'}")
        print(write_case(args.out, sel, index, node, commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
