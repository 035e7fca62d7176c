"""The reconciliation on a real Spark standalone cluster: a master and two workers on loopback.

The cluster comes from PySpark's own install (``tests/sparkcluster.py``: ``spark-class``
Master and Worker, stopped by PID); the job is ``spark_batch/reconcile.py`` unchanged,
through ``spark-submit --master spark://127.0.0.1:PORT``, with both Kafka readers:
Spark's own Kafka source (its jars from ``make install`` given as ``--jars``) and the
Python DataSource, which runs in the executors' Python (``spark.pyspark.python``: the
package's environment).  On the same window of the session broker, the cluster's
``summary.json`` must be byte for byte the one of ``local[2]`` (the session's
SparkSession), and its detail rows the same rows.
"""
from __future__ import annotations

import difflib
import os
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

import reconcile_scenario as sc
from streamapp.kafka.admin import ensure_topics
from sparkcluster import SPARK_HOME, StandaloneCluster
from spark_batch.reconcile import main
from test_reconcile_kafka import _args  # the job's options for the scenario's topics

#: Few partitions, so few Kafka read tasks: the test is about where they run, not how many.
PARTITIONS = 2
#: Every mismatch is reported, none breaches: exit 0.
THRESHOLD = ("--max-mismatch-rate", "1")
#: Not an expectation on speed: how long one submission may run before the test fails.
SUBMIT_PATIENCE = 600


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="1g") as running:
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


def _detail(spark, day: Path) -> list[tuple]:
    return sorted(tuple(row) for row in spark.read.parquet(str(day / "detail")).collect())


@pytest.mark.parametrize("reader", ["spark", "python"])
def test_cluster_gives_local_results(spark, bootstrap, window, on_local, cluster, reader, tmp_path):
    output = tmp_path / "out"
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run(cluster.submit_command(_args(bootstrap, window, output, *THRESHOLD), reader), env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=SUBMIT_PATIENCE)
    assert done.returncode == 0, done.stderr[-3000:]
    day = output / f"dt={sc.DAY}"
    local, remote = (on_local / "summary.json").read_text(), (day / "summary.json").read_text()
    assert remote == local, "".join(difflib.unified_diff(local.splitlines(True), remote.splitlines(True), "local[2]", "cluster"))
    assert _detail(spark, day) == _detail(spark, on_local)
    assert len(_detail(spark, day)) == sum(1 for status, _ in sc.build(PARTITIONS).expected.values() if status != "match")

    # the work ran in the two workers' executors, not in the driver: each one's executor finished tasks
    # of this application (its id is the newest app-* directory under both workers)
    app = max(cluster.state()["completedapps"], key=lambda a: a["starttime"])
    assert app["name"] == "streamapp-reconcile" and app["state"] == "FINISHED"
    for worker, logs in cluster.executor_logs().items():
        ran = [log for log in logs if log.parent.parent.name == app["id"] and "Finished task" in log.read_text()]
        assert ran, f"{worker} ran no task of {app['id']}"
