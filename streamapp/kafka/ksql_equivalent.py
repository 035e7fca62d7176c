"""ksqlDB's joins executed by Kafka Streams, in a child JVM: the other engine beside Faust.

No ksqlDB runs on these machines, but ksqlDB compiles its statements into Kafka
Streams topologies, and Kafka Streams is on Maven Central.  The program in
``jvm/ksql-equivalent`` (``PlanStreams``) runs the declared plan (the seed's by
default), parsed here and handed over as JSON, one Kafka Streams application per
query as ksqlDB does, with ksqlDB's serialization, so its output topics hold what
ksqlDB would write.  It is not ksqlDB: no SQL parser of its own, no REST API.

This module starts and stops it as :mod:`streamapp.kafka.broker` does the broker: the
classpath from :mod:`streamapp.kafka.jvm`, the ``STREAMAPP_*`` settings in a properties
file, ready once Kafka Streams says RUNNING, SIGTERM then SIGKILL, and the JVM dies
with the process that started it.
"""
from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import StreamappError
from ..settings import Settings
from ..sql.plan import Plan
from ..sql.topology import load_plan, seed_renames
from .admin import TopicError, describe, ensure_topics
from .child import ChildProcess
from .jvm import JvmError, classpath, java
from .security import java_properties
from .streams_runner import MODULE

#: The program that runs a declared plan's queries, one Kafka Streams application each.
PLAN_MAIN_CLASS = "io.streamapp.ksql.PlanStreams"
#: The lines the Java program prints (PlanStreams.RUNNING and .FAILED).
RUNNING_MARK = "ksql-equivalent RUNNING"
FAILED_MARK = "ksql-equivalent FAILED: "
COPARTITION_MARK = "Topics not co-partitioned"
READY_TIMEOUT = 90.0


class KsqlEquivalentError(StreamappError):
    """The Kafka Streams program could not start or stopped by itself; the message says why."""


def application_id(settings: Settings) -> str:
    """The program's application id: each query's Kafka Streams application is ``<it>-<QUERY>``."""
    return f"{settings.app_id}-ksql-equivalent"


def query_application_id(settings: Settings, query: str) -> str:
    """The Kafka Streams application (consumer group, internal topics' prefix) that runs ``query``, as PlanStreams
    names it."""
    return f"{application_id(settings)}-{re.sub(r'[^A-Za-z0-9._-]', '_', query)}"


def check_inputs(settings: Settings, inputs: dict[str, str]) -> dict[str, int]:
    """Partition counts of the input topics (by what names them: a setting, a source); one line naming each
    one that does not exist."""
    try:
        found = describe(settings.kafka, inputs.values())
    except TopicError as exc:
        raise KsqlEquivalentError(str(exc)) from None
    missing = [f"{label}={name}" for label, name in inputs.items() if name not in found]
    if missing:
        raise KsqlEquivalentError(
            f"input topic missing: {', '.join(missing)} on {settings.bootstrap_servers}; "
            f"produce to it first (streamapp produce) or create it (streamapp topics create)"
        )
    return {name: info.partitions for name, info in found.items()}


def create_missing_topics(settings: Settings, wanted: dict[str, int]) -> list[str]:
    """Create the topics the program writes that do not exist, each with its partition count."""
    existing = describe(settings.kafka, wanted)
    missing = {name: count for name, count in wanted.items() if name not in existing}
    if missing:
        try:
            ensure_topics(settings.kafka, missing, settings.replication_factor)
        except TopicError as exc:
            raise KsqlEquivalentError(str(exc)) from None
    return sorted(missing)


def cluster_plan(settings: Settings) -> Plan:
    """The declared plan (``settings.statements``, else the seed's) with each source at its topic on the cluster:
    ksqlDB's topics, which this program reads and writes as ksqlDB would (the worker writes its own beside them)."""
    plan, renames = load_plan(settings), seed_renames(settings)
    return dataclasses.replace(plan, sources=tuple(
        dataclasses.replace(source, topic=renames.get(source.topic, source.topic)) for source in plan.sources))


def plan_topics(settings: Settings, plan: Plan) -> tuple[dict[str, str], dict[str, int]]:
    """A plan's input topics by source, and the topics its queries write with their partition counts."""
    written = {query.sink for query in plan.queries}
    read = {name for query in plan.queries for name in (query.left, query.right) if name}
    inputs = {s.name: s.topic for s in plan.sources if s.name in read and s.name not in written}
    outputs = {plan.source(name).topic: plan.source(name).partitions or settings.partitions for name in written}
    return inputs, outputs


def properties_text(values: dict[str, str]) -> str:
    """A Java properties file (read as UTF-8 by the program): backslashes and line breaks escaped."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "".join(f"{escape(k)}={escape(v)}\n" for k, v in values.items())


@dataclass
class KsqlEquivalent(ChildProcess):
    """Run the Kafka Streams program; use as a context manager or call start()/stop().

    Kafka Streams keeps its tables (RocksDB) in ``state_dir``, by default ``ksql-equivalent/``
    under STREAMAPP_DATA_DIR, beside the worker's.  ``on_line`` gets each line the program
    prints (the processing log's skipped records, Kafka's warnings).
    """

    settings: Settings
    state_dir: Path | None = None
    heap: str = "384m"
    on_line: Callable[[str], None] | None = None
    #: The plan to run, its topics the cluster's; None: :func:`cluster_plan` (``settings.statements``, else the seed's).
    plan: Plan | None = None
    #: Kafka Streams properties over the program's own (a benchmark's diagnosis: ``max.task.idle.ms``...).
    streams_properties: dict[str, str] = field(default_factory=dict)
    created_topics: list[str] = field(default_factory=list, init=False)
    _ready: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _workdir: Path | None = field(default=None, init=False, repr=False)

    @property
    def application_id(self) -> str:
        return application_id(self.settings)

    def start(self, timeout: float = READY_TIMEOUT) -> "KsqlEquivalent":
        try:
            java_bin, cp = java(), classpath(MODULE)
        except JvmError as exc:
            raise KsqlEquivalentError(str(exc)) from None
        self._workdir = Path(tempfile.mkdtemp(prefix="streamapp-ksql-equivalent-"))
        config = self._workdir / "streams.properties"
        config.touch(mode=0o600)  # it may hold the SASL password; removed once the program runs
        if self.plan is None:
            self.plan = cluster_plan(self.settings)
        inputs, outputs = plan_topics(self.settings, self.plan)
        check_inputs(self.settings, inputs)
        self.created_topics = create_missing_topics(self.settings, outputs)
        plan_file = self._workdir / "plan.json"
        plan_file.write_text(self.plan.to_json(), encoding="utf-8")
        config.write_text(properties_text({**self._base_config(), "streamapp.plan": str(plan_file)}), encoding="utf-8")
        self._ready.clear()
        self._spawn([java_bin, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                     "-cp", cp, PLAN_MAIN_CLASS, str(config)])
        try:
            self._wait_ready(timeout)
        finally:
            self._remove_workdir()  # the program has read its properties by the time it runs or fails
        return self

    def _remove_workdir(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def _base_config(self) -> dict[str, str]:
        state_dir = self.state_dir or self.settings.data_path / "ksql-equivalent"
        return {
            **java_properties(self.settings.kafka),  # bootstrap.servers and the security
            "application.id": self.application_id,
            "state.dir": str(Path(state_dir).resolve()),
            "replication.factor": str(self.settings.replication_factor),
            "commit.interval.ms": "1000",
            **self.streams_properties,
        }

    def _on_line(self, line: str) -> None:
        if self.on_line is not None:
            self.on_line(line)
        if RUNNING_MARK in line:
            self._ready.set()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.1):
            if self._exited():
                message = self.failure_message()
                self.stop()
                raise KsqlEquivalentError(message)
            if time.monotonic() > deadline:
                self.stop()
                raise KsqlEquivalentError(
                    f"Kafka Streams did not reach RUNNING on {self.settings.bootstrap_servers} within {timeout:.0f}s"
                )

    def failure_message(self) -> str:
        """One line from the program's output: its FAILED line, worded for the co-partitioning failure."""
        failed = [line.split(FAILED_MARK, 1)[1] for line in self.log_lines if FAILED_MARK in line]
        if not failed:
            tail = [line for line in self.log_lines if " ERROR " in line or "Exception" in line] or list(self.log_lines)
            return f"the Kafka Streams program exited at start: {(tail[-1:] or ['no output'])[0][:300]}"
        reason = failed[-1]
        if COPARTITION_MARK in reason:
            return (
                f"Kafka Streams refused to start: {reason[reason.index(COPARTITION_MARK):]}: a stream-table "
                f"join needs equal partition counts (ksqlDB refuses it too); recreate or repartition one side"
            )
        return f"Kafka Streams stopped: {reason}"

    def _after_stop(self) -> None:
        self._remove_workdir()
