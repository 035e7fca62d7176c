"""The reconciliation on a real Spark standalone cluster: a master and two workers on loopback.

The cluster comes from PySpark's own install (``tests/sparkcluster.py``: ``spark-class``
Master and Worker, stopped by PID); the job is ``spark_batch/reconcile.py`` unchanged,
through ``spark-submit --master spark://127.0.0.1:PORT``, with both Kafka readers:
Spark's own Kafka source (its jars from ``make install`` given as ``--jars``) and the
Python DataSource, which runs in the executors' Python (``spark.pyspark.python``: the
package's environment).  On the same window of the session broker, the cluster's
``summary.json`` must be byte for byte the one of ``local[2]`` (the session's
SparkSession), and its detail rows the same rows.  The two submissions run side by side,
as two jobs share a cluster (each worker gives each one core), while ``local[2]`` runs.
"""
from __future__ import annotations

import difflib
import os
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

import reconcile_scenario as sc
from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import free_port
from sparkcluster import SPARK_HOME, StandaloneCluster
from spark_batch.reconcile import main
from test_reconcile_kafka import _args  # the job's options for the scenario's topics
from workerkit import end_process

pytestmark = pytest.mark.long

#: Few partitions, so few Kafka read tasks: the test is about where they run, not how many.
PARTITIONS = 2
#: Every mismatch is reported, none breaches: exit 0.
THRESHOLD = ("--max-mismatch-rate", "1")
#: Not an expectation on speed: how long one submission may run before the test fails.
SUBMIT_PATIENCE = 600
READERS = ("spark", "python")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """Two workers of two cores: one for each of the two submissions, which run side by side."""
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=2, memory="1g") as running:
        yield running


@pytest.fixture(scope="module")
def window(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The scenario's six topics on the session broker, written once for the module."""
    suffix = uuid.uuid4().hex[:8]
    topics = {role: f"{role[:12]}_cluster_{suffix}" for role in sc.ROLES}
    ensure_topics(bootstrap, {name: PARTITIONS for name in topics.values()})
    sc.produce(bootstrap, topics, sc.build(PARTITIONS))
    return topics


@pytest.fixture(scope="module")
def on_local(spark, bootstrap: str, window: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The job's output directory for the day on ``local[2]`` (the session's SparkSession)."""
    output = tmp_path_factory.mktemp("local") / "out"
    assert main([*_args(bootstrap, window, output, *THRESHOLD), "--kafka-reader", "spark"]) == 0
    return output / f"dt={sc.DAY}"


@dataclass
class Submission:
    """One reader's spark-submit of the job, running; its driver listens on ``driver_port``, which each of its
    executors' logs names (``--driver-url``): so the test tells the two applications' executors apart."""

    proc: subprocess.Popen
    output: Path
    stderr: Path
    driver_port: int

    def wait(self) -> int:
        return self.proc.wait(timeout=SUBMIT_PATIENCE)


@pytest.fixture(scope="module")
def submissions(bootstrap: str, window: dict[str, str], cluster: StandaloneCluster,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Submission]]:
    """Both readers' submissions of the unchanged job, started together; ended at the end if still running."""
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    running: dict[str, Submission] = {}
    try:
        for reader in READERS:
            work = tmp_path_factory.mktemp(f"submit-{reader}")
            port = free_port()
            command = cluster.submit_command(_args(bootstrap, window, work / "out", *THRESHOLD), reader)
            command[1:1] = ["--conf", f"spark.driver.port={port}"]
            with (work / "stderr").open("wb") as err:
                proc = subprocess.Popen(command, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=err,
                                        stdin=subprocess.DEVNULL)
            running[reader] = Submission(proc, work / "out", work / "stderr", port)
        yield running
    finally:
        for submission in running.values():
            end_process(submission.proc)  # still running only when a test failed


def _detail(spark, day: Path) -> list[tuple]:
    return sorted(tuple(row) for row in spark.read.parquet(str(day / "detail")).collect())


@pytest.mark.parametrize("reader", READERS)
def test_cluster_gives_local_results(spark, submissions, on_local, cluster, reader):
    submission = submissions[reader]  # started before local[2]'s run (on_local), which goes on beside it
    assert submission.wait() == 0, submission.stderr.read_text(errors="replace")[-3000:]
    day = submission.output / f"dt={sc.DAY}"
    local, remote = (on_local / "summary.json").read_text(), (day / "summary.json").read_text()
    assert remote == local, "".join(difflib.unified_diff(local.splitlines(True), remote.splitlines(True), "local[2]", "cluster"))
    assert _detail(spark, day) == _detail(spark, on_local)
    assert len(_detail(spark, day)) == sum(1 for status, _ in sc.build(PARTITIONS).expected.values() if status != "match")

    # the work ran in the two workers' executors, not in the driver: each one's executor of this application
    # (the one whose log names this submission's driver) finished tasks, and the application finished
    driver = re.compile(rf"CoarseGrainedScheduler@[^:\s\"]+:{submission.driver_port}\b")  # its --driver-url
    apps = {app["id"]: app for app in cluster.state()["completedapps"]}
    for worker, logs in cluster.executor_logs().items():
        ran = [log for log in logs if driver.search(text := log.read_text(errors="replace")) and "Finished task" in text]
        assert ran, f"{worker} ran no task of the {reader} reader's application (driver port {submission.driver_port})"
        app = apps[ran[0].parent.parent.name]
        assert app["name"] == "streamapp-reconcile" and app["state"] == "FINISHED"
