"""ksqlDB's test-runner files through Kafka Streams: the plan's topologies under ``TopologyTestDriver``, in one JVM.

The other engine beside the pure one (:mod:`streamapp.sql.engine`).  The JVM program
(``io.streamapp.ksql.TopologyTestRunner`` in ``jvm/ksql-equivalent``) builds, from the
plan Python made, the Kafka Streams topology ksqlDB builds for each query, and runs it
under Kafka Streams' own test driver as ksqlDB's QTT executor does, without a broker.

Inputs are serialised here with each source's :class:`~streamapp.sql.formats.Codec`
and outputs read back with the sink's, exactly as :func:`streamapp.sql.runner.run`
does, so the two engines see the same bytes and :func:`~streamapp.sql.runner.compare`
judges both.  One JVM serves many cases (its start is the slow part): a
:class:`TopologyTestRunner` is started once and fed case after case over a pipe.
"""
from __future__ import annotations

import base64
import json
import select
import subprocess
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..errors import StreamappError
from ..sql import plan as p
from ..sql.engine import Record
from ..sql.formats import Codec
from ..sql.planner import plan_file
from ..sql.runner import Result, TestRecord, compare, encode_inputs, read_back, read_records
from .child import die_with_parent
from .jvm import classpath, java

#: The Maven module of the Kafka Streams program (jvm/ksql-equivalent): its classpath.
MODULE = "ksql-equivalent"
MAIN_CLASS = "io.streamapp.ksql.TopologyTestRunner"
#: The query kinds the Kafka Streams program builds (``PlanTopology.build``); it refuses a plan with another in one
#: line. The one list the tests and the docs' ``--engine kafka-streams`` column select cases by.
KINDS = (p.SELECT, p.STREAM_TABLE_JOIN, p.TABLE_TABLE_JOIN, p.STREAM_STREAM_JOIN)
#: How long one case may take before the JVM is taken for hung (a first case also warms the JVM up).
CASE_TIMEOUT = 120.0
STDERR_LINES = 200


class StreamsRunnerError(StreamappError):
    """The Kafka Streams runner refused a case or stopped; the message is one line saying why."""


@dataclass(frozen=True)
class Wiring:
    """A query's topology: its state stores and repartition topics, named as in ksqlDB's recorded topology."""

    stores: tuple[str, ...]
    repartitions: tuple[str, ...]


@dataclass
class StreamsResult(Result):
    """A :class:`~streamapp.sql.runner.Result` with each query's wiring, to hold against ksqlDB's."""

    topologies: dict[str, Wiring] = field(default_factory=dict)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


class TopologyTestRunner:
    """One JVM that runs case after case: :meth:`start` once, :meth:`run` per case, :meth:`close` (or ``with``)."""

    def __init__(self, heap: str = "256m") -> None:
        self.heap = heap
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._sent = 0

    def start(self) -> "TopologyTestRunner":
        # Fast start over peak speed: a case is a few records; C1 alone and the serial GC suit that.
        cmd = [java(), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
               "-cp", classpath(MODULE), MAIN_CLASS]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True, preexec_fn=die_with_parent)
        threading.Thread(target=self._drain, args=(self._proc.stderr,), daemon=True).start()
        self._write(b"[\n")
        return self

    def _drain(self, stream: IO[bytes]) -> None:
        for raw in stream:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    def _write(self, data: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise StreamsRunnerError(self._exited()) from None

    def _exited(self) -> str:
        assert self._proc is not None
        status = self._proc.wait(10)
        lines = [line for line in self._stderr if "Exception" in line or "Error" in line] or list(self._stderr)
        return (f"the Kafka Streams runner exited with status {status}: {(lines[-1:] or ['no output'])[0][:300]} "
                f"(`make install` rebuilds jvm/lib when its sources changed)")

    def run(self, plan: p.Plan, inputs: list[TestRecord], origin: str = "input") -> StreamsResult:
        """``inputs`` through every query of ``plan`` under Kafka Streams; what each output topic received."""
        if self._proc is None:
            self.start()
        assert self._proc is not None and self._proc.stdout is not None
        records = encode_inputs(plan, inputs, origin)
        case = {"plan": plan.to_dict(),
                "inputs": [{"topic": r.topic, "key_b64": _b64(r.key), "value_b64": _b64(r.value),
                            "timestamp": r.timestamp} for r in records]}
        self._write((b",\n" if self._sent else b"") + json.dumps(case).encode("utf-8") + b"\n")
        self._sent += 1
        ready, _, _ = select.select([self._proc.stdout], [], [], CASE_TIMEOUT)
        line = self._proc.stdout.readline() if ready else None
        if line is None:
            self.close()
            raise StreamsRunnerError(f"{origin}: the Kafka Streams runner gave no answer within {CASE_TIMEOUT:.0f}s")
        if not line:
            raise StreamsRunnerError(self._exited())
        answer = json.loads(line)
        if "error" in answer:
            raise StreamsRunnerError(f"{origin}: Kafka Streams: {answer['error']}")
        return self._result(plan, answer)

    @staticmethod
    def _result(plan: p.Plan, answer: dict[str, Any]) -> StreamsResult:
        sinks = {plan.source(q.sink).topic: Codec(plan.source(q.sink)) for q in plan.queries}
        actual: dict[str, list[TestRecord]] = {}
        for out in answer["outputs"]:
            topic = out["topic"]
            written = actual.setdefault(topic, [])
            record = Record(topic, _bytes(out["key_b64"]), _bytes(out["value_b64"]), out["timestamp"])
            written.append(read_back(sinks[topic], record, len(written)))
        topologies = {name: Wiring(tuple(w["stores"]), tuple(w["repartitions"]))
                      for name, w in answer["topologies"].items()}
        return StreamsResult(actual, skipped=list(answer["skipped"]), topologies=topologies)

    def close(self) -> None:
        """End the list of cases; the JVM then exits by itself (killed if it does not within 10 s)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"]\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def __enter__(self) -> "TopologyTestRunner":
        return self.start() if self._proc is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def run(plan: p.Plan, inputs: list[TestRecord], origin: str = "input",
        runner: TopologyTestRunner | None = None) -> StreamsResult:
    """As :func:`streamapp.sql.runner.run`, through Kafka Streams: in ``runner``, else in a JVM of its own."""
    if runner is not None:
        return runner.run(plan, inputs, origin)
    with TopologyTestRunner() as own:
        return own.run(plan, inputs, origin)


def run_files(statements: str | Path, inputs: str | Path, outputs: str | Path | None,
              runner: TopologyTestRunner | None = None,
              properties: dict[str, str] | None = None) -> tuple[p.Plan, StreamsResult]:
    """As :func:`streamapp.sql.runner.run_files` (``properties``: ksqlDB's, as a QTT case sets them), through
    Kafka Streams."""
    plan = plan_file(statements, properties)
    result = run(plan, read_records(inputs, "inputs"), str(inputs), runner)
    if outputs is not None:
        result.differences = compare(read_records(outputs, "outputs"), result)
    return plan, result
