"""Shared fixtures: one Apache Kafka broker and one SparkSession for the whole test session.

Nothing here mocks Kafka: every Kafka test talks to a real Apache Kafka node
(KRaft, from Maven Central) on a loopback port, started once per session by the
same code as ``streamapp broker``.

``make test`` runs the suite in two processes (pytest-xdist): most of a broker scenario's time is spent
waiting (a worker's start, a rebalance, a session timeout), so two at once fill the two cores. Each
process has its own broker and SparkSession; a test module runs whole in one process, the security
modules all in one (:class:`ModuleScheduling`), and the modules marked ``long`` start first so that
both processes end together.
"""
from __future__ import annotations

import itertools
import os
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest
import hypothesis
from xdist.scheduler import LoadScopeScheduling

from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker
from streamapp.settings import Settings


# No property-based example is timed (Hypothesis' default fails one over 200 ms): the suite's two processes share
# two cores with brokers and JVMs, where a collection or a scheduling pause is not a failure of the code.
hypothesis.settings.register_profile("streamapp", deadline=None)
hypothesis.settings.load_profile("streamapp")

#: Modules that share the secured broker (:func:`secured_broker`, ~40 s to start): one test process runs them all.
SECURED_MODULES = "tests/test_security_"


class ModuleScheduling(LoadScopeScheduling):
    """xdist's ``loadfile`` scheduling (a module's tests in one process, so that its module fixtures start
    once), the security modules one unit; the units are handed out in collection order."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def work_unit(nodeid: str) -> str:
    """A test's unit of work: its module, or :data:`SECURED_MODULES` for them all."""
    module = nodeid.split("::", 1)[0]
    return SECURED_MODULES if module.startswith(SECURED_MODULES) else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling | None:
    return ModuleScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``long`` modules' tests first (stable: each module's tests keep their order)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(heap="1g") as running:
        yield running


@pytest.fixture(scope="session")
def secured_broker() -> Iterator[EmbeddedBroker]:
    """A second Apache Kafka node, secured only (a throw-away CA made with openssl in its temporary data dir), for
    the security tests (issue 20); started on first use, so only when they run.  Its listeners: SASL_SSL (advertised
    first, ``.access``: SCRAM-SHA-512), and through ``.listener_access``: SCRAM-SHA-256 and PLAIN on it too,
    SASL_PLAINTEXT, SSL, MTLS (client certificate required) and WRONG_HOST (a certificate for another name)."""
    with EmbeddedBroker(heap="384m", secured=True) as running:
        yield running


@pytest.fixture(scope="session")
def bootstrap(broker: EmbeddedBroker) -> str:
    return broker.bootstrap


_counter = itertools.count()


@pytest.fixture
def new_topic(bootstrap: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a uniquely named topic with an explicit partition count and return its name."""

    def create(prefix: str = "t", partitions: int = 6) -> str:
        test = request.node.name.split("[")[0][-30:]
        name = f"{prefix}_{test}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
        ensure_topics(bootstrap, {name: partitions})
        return name

    return create


def _broker_settings(broker: EmbeddedBroker, tmp: Path) -> Settings:
    return broker.settings(Settings()).replace(
        data_dir=str(tmp / "data"), app_id=f"streamapp-test-{uuid.uuid4().hex[:8]}",
        broker_session_timeout=10.0,
    )


@pytest.fixture
def broker_settings(broker: EmbeddedBroker, tmp_path: Path) -> Settings:
    """Settings pointing at the session broker, with a private data dir and unique app id.

    Consumer sessions are 10 s (Faust's default is 60 s) so that a killed worker's
    partitions move within the tests' patience.
    """
    return _broker_settings(broker, tmp_path)


@pytest.fixture(scope="module")
def module_broker_settings(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """``broker_settings`` once per test module: for a worker that tests of a module share, or a scenario a
    module-scoped fixture starts in the background while other tests run."""
    return _broker_settings(broker, tmp_path_factory.mktemp("module"))


@pytest.fixture(scope="session")
def spark():
    """One real local SparkSession for the run (Spark start-up costs seconds), with Spark's own Kafka
    source on its classpath (``make install``'s jvm/lib/spark-kafka) so both Kafka readers run.

    Sized as the demo's (streamapp/cli/demo.py): the tests' data is tiny, so AQE's re-planning, whole-stage code
    generation (Janino compiles each stage), the locality wait and C2 compilation cost more than they save
    (tests/test_reconcile_kafka.py without its known answers: 425 s instead of 736 s at load 13-18)."""
    from pyspark.sql import SparkSession

    from spark_batch.kafka_source import connector_jars
    from spark_batch.reconcile import SESSION_SETTINGS

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("streamapp-tests")
        .config("spark.jars", ",".join(map(str, connector_jars(required=True))))
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.locality.wait", "0")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .config(map=SESSION_SETTINGS)  # the job's own session's
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def java_build_dir(tmp_path_factory: pytest.TempPathFactory):
    """Where test-time Java oracles are compiled (see tests/javatools.py)."""
    return tmp_path_factory.mktemp("java")
