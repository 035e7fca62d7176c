"""ksqlDB's demo joins executed by Kafka Streams, in a child JVM: the other engine beside Faust.

No ksqlDB runs on these machines, but ksqlDB compiles the demo's five statements
into a Kafka Streams topology, and Kafka Streams is on Maven Central.  The program
in ``jvm/ksql-equivalent`` runs that topology with ksqlDB's JSON serialization, so
its output topics hold what ksqlDB would write.  It is not ksqlDB: no SQL, no REST API.

This module starts and stops it as :mod:`streamapp.broker` does the broker: the
classpath from :mod:`streamapp.jvm`, the ``STREAMAPP_*`` settings in a properties
file, ready once Kafka Streams says RUNNING, SIGTERM then SIGKILL, and the JVM dies
with the process that started it.
"""
from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import StreamappError
from ..kafka.admin import TopicError, describe, ensure_topics
from ..kafka.child import ChildProcess
from ..kafka.jvm import JvmError, classpath, java
from ..kafka.security import java_properties
from ..settings import Settings
from ..sql.plan import Plan
from ..sql.topology import topology

MODULE = "ksql-equivalent"
MAIN_CLASS = "io.streamapp.ksql.KsqlEquivalent"
#: The program that runs a declared plan's queries, one Kafka Streams application each (``--statements``).
PLAN_MAIN_CLASS = "io.streamapp.ksql.PlanStreams"
#: The lines the Java program prints (KsqlEquivalent.RUNNING and .FAILED).
RUNNING_MARK = "ksql-equivalent RUNNING"
FAILED_MARK = "ksql-equivalent FAILED: "
COPARTITION_MARK = "Topics not co-partitioned"
READY_TIMEOUT = 90.0


class KsqlEquivalentError(StreamappError):
    """The Kafka Streams program could not start or stopped by itself; the message says why."""


@dataclass(frozen=True)
class Topics:
    """The five statements' topics: two inputs, the repartitioned users, two join outputs."""

    users: str
    orders: str
    users_repartition: str
    merged: str
    merged_repartition: str

    @classmethod
    def from_settings(cls, settings: Settings) -> "Topics":
        return cls(
            users=settings.users_topic,
            orders=settings.orders_topic,
            users_repartition=settings.ksqldb_users_repartition_topic,
            merged=settings.ksqldb_merged_topic,
            merged_repartition=settings.ksqldb_merged_repartition_topic,
        )

    @property
    def inputs(self) -> dict[str, str]:
        return {"users_topic": self.users, "orders_topic": self.orders}

    @property
    def owned(self) -> tuple[str, str, str]:
        """The topics the program writes, created with the configured count when missing."""
        return (self.users_repartition, self.merged, self.merged_repartition)


def application_id(settings: Settings) -> str:
    """Kafka Streams' application id (its consumer group and internal topics' prefix)."""
    return f"{settings.app_id}-ksql-equivalent"


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
    joins = topology(settings)
    return dataclasses.replace(joins.declared, sources=tuple(
        dataclasses.replace(source, topic=joins.ksqldb_topics[source.name]) for source in joins.declared.sources))


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
    #: A declared plan to run (its topics the cluster's: :func:`cluster_plan`) instead of the demo's five statements.
    plan: Plan | None = None
    created_topics: list[str] = field(default_factory=list, init=False)
    _ready: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _workdir: Path | None = field(default=None, init=False, repr=False)

    @property
    def topics(self) -> Topics:
        return Topics.from_settings(self.settings)

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
            topics = self.topics
            check_inputs(self.settings, topics.inputs)
            owned = dict.fromkeys(topics.owned, self.settings.partitions)
            self.created_topics = create_missing_topics(self.settings, owned)
            values, main = self._config(topics), MAIN_CLASS
        else:
            inputs, outputs = plan_topics(self.settings, self.plan)
            check_inputs(self.settings, inputs)
            self.created_topics = create_missing_topics(self.settings, outputs)
            plan_file = self._workdir / "plan.json"
            plan_file.write_text(self.plan.to_json(), encoding="utf-8")
            values, main = {**self._base_config(), "streamapp.plan": str(plan_file)}, PLAN_MAIN_CLASS
        config.write_text(properties_text(values), encoding="utf-8")
        self._ready.clear()
        self._spawn([java_bin, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                     "-cp", cp, main, str(config)])
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
        }

    def _config(self, topics: Topics) -> dict[str, str]:
        return {
            **self._base_config(),
            "streamapp.topic.users": topics.users,
            "streamapp.topic.orders": topics.orders,
            "streamapp.topic.users_repartition": topics.users_repartition,
            "streamapp.topic.merged": topics.merged,
            "streamapp.topic.merged_repartition": topics.merged_repartition,
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
