"""Airflow DAG: the nightly reconciliation (``spark_batch/reconcile.py``) through the Spark provider's spark-submit.

Put this folder on Airflow's ``dags_folder``.  It needs ``apache-airflow`` and
``apache-airflow-providers-apache-spark``, ``spark-submit`` on the worker's PATH, and this package where
the driver and executors run; where Spark runs is the ``spark_default`` connection.  The ``statements``
param (``STREAMAPP_STATEMENTS``, else the packaged seed) is passed as ``--statements``.  Each run covers one
UTC day (``{{ ds }}``) at 02:00 UTC the next day.  Exit 1 (the threshold breached, confirmed by this
attempt's ``summary.json``) is a data-quality failure, not retried; 2 is a task error, retried; anything
else a task error, not retried.  See docs/how-to/schedule-nightly.md#airflow.
"""
from __future__ import annotations

import json
import logging
import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Param
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.timetables.interval import CronDataIntervalTimetable

log = logging.getLogger(__name__)

#: The job's exit codes (spark_batch/reconcile.py).
WITHIN, BREACHED, ERROR = 0, 1, 2
#: The JVMs' garbage collector for the nightly batch: the throughput collector (Parallel GC), not Java's default G1,
#: whose write barriers and concurrent threads share the cores with the tasks. The job allocates more a row than a bare
#: join (its window over each output, its observations, the explain step): 10 M payments cold on 2 cores took 36.6 s
#: against 39.2 s with G1 (docs/how-to/schedule-nightly.md#jvm; benchmarks/README.md, "Reconciliation").
JAVA_OPTIONS = "-XX:+UseParallelGC"
#: Where the job lives on the Airflow worker (the repository's root), unless the params say otherwise.
STREAMAPP_HOME = os.environ.get("STREAMAPP_HOME", "/opt/streamapp")


class DataQualityFailure(AirflowFailException):
    """The reconciliation ran and a pair's mismatch rate is over the threshold: not retried."""


class TaskError(AirflowException):
    """The reconciliation did not run to its end (exit 2): retried."""


def outcome(returncode: int, summary: Path, started: float) -> str:
    """``"ok"``, ``"data-quality"``, ``"retry"`` or ``"task-error"`` for a spark-submit exit code.

    Exit 1 is a breach only when this attempt wrote ``summary.json`` saying so.
    """
    if returncode == WITHIN:
        return "ok"
    if returncode == ERROR:
        return "retry"
    if returncode == BREACHED and _breached(summary, started):
        return "data-quality"
    return "task-error"


def _breached(summary: Path, started: float) -> bool:
    try:
        return summary.stat().st_mtime >= started and json.loads(summary.read_text())["threshold"]["breached"] is True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def breach_message(summary: Path) -> str:
    """Which pairs are over the threshold, from the run's summary.json."""
    data = json.loads(summary.read_text())
    limit = data["threshold"]["max_mismatch_rate"]
    pairs = ", ".join(f"{pair} {data['totals'][pair]['mismatch_rate']:.2%} of {data['totals'][pair]['orders']} orders"
                      for pair in data["threshold"]["breached_pairs"])
    return f"reconciliation {data['date']}: mismatch rate over {limit:.2%}: {pairs} ({summary.parent})"


class ReconcileSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that tells a breached threshold (exit 1) from a failed job (exit 2)."""

    def execute(self, context: Any) -> None:
        started = time.time()
        try:
            super().execute(context)
        except AirflowException as exc:
            process = getattr(self._hook, "_submit_sp", None)
            code = process.returncode if process is not None else None
            summary = Path(context["params"]["output"]) / f"dt={context['ds']}" / "summary.json"
            kind = outcome(code, summary, started) if code is not None else "task-error"
            if kind == "data-quality":
                raise DataQualityFailure(breach_message(summary)) from exc
            if kind == "retry":
                raise TaskError(f"reconciliation {context['ds']}: the job failed (exit 2), see its last line above") from exc
            raise AirflowFailException(f"reconciliation {context['ds']}: spark-submit exited {code}: {exc}") from exc


def alert(context: Any) -> None:
    """The failure alert, one kind per cause: a data-quality breach is news about the data, a task error about
    the pipeline.  Logged here; send it on with the notifier you use (e.g. the smtp or slack provider's)."""
    error = context.get("exception")
    kind = "DATA QUALITY" if isinstance(error, DataQualityFailure) else "TASK ERROR"
    log.error("[%s] %s: %s", kind, context["ti"].task_id if context.get("ti") else "reconcile", error)


with DAG(
    dag_id="streamapp_reconcile_nightly",
    description="Faust join vs ksqlDB join, one UTC day, statuses and root causes (spark_batch/reconcile.py)",
    # ds is the data interval's start: the day reconciled, run at 02:00 UTC the day after
    schedule=CronDataIntervalTimetable("0 2 * * *", timezone="UTC"),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    params={
        "job": Param(f"{STREAMAPP_HOME}/spark_batch/reconcile.py", type="string"),
        "bootstrap_servers": Param(os.environ.get("STREAMAPP_BOOTSTRAP_SERVERS", "localhost:9092"), type="string"),
        "output": Param(os.environ.get("STREAMAPP_RECONCILE_OUTPUT", f"{STREAMAPP_HOME}/reconcile-output"), type="string"),
        "max_mismatch_rate": Param(0.01, type="number"),
        "kafka_reader": Param("spark", enum=["auto", "spark", "python"]),
        # the ksqlDB statements the worker runs (its `statements` setting): the joins reconciled
        "statements": Param(os.environ.get("STREAMAPP_STATEMENTS") or f"{STREAMAPP_HOME}/streamapp/sql/seed.sql",
                            type="string"),
        # the driver's and executors' Python: an environment with this package installed
        "python": Param(os.environ.get("STREAMAPP_PYTHON", f"{STREAMAPP_HOME}/.venv/bin/python"), type="string"),
    },
    default_args={"retries": 2, "retry_delay": timedelta(minutes=10), "on_failure_callback": alert},
    tags=["streamapp", "reconciliation"],
) as dag:
    ReconcileSubmitOperator(
        task_id="reconcile",
        name="streamapp-reconcile-{{ ds }}",
        application="{{ params.job }}",
        application_args=[
            "--date", "{{ ds }}",
            "--bootstrap-server", "{{ params.bootstrap_servers }}",
            "--output", "{{ params.output }}",
            "--max-mismatch-rate", "{{ params.max_mismatch_rate }}",
            "--kafka-reader", "{{ params.kafka_reader }}",
            "--statements", "{{ params.statements }}",
        ],
        # Spark's Kafka source for the running Spark (or give jars=... of jvm/lib/spark-kafka, as make install builds)
        packages="org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
        # no spark.sql.shuffle.partitions: the job takes 8 per core Spark has, at most 200, and AQE coalesces them
        # (spark_batch/reconcile.py shuffle_settings; docs/how-to/schedule-nightly.md#shuffle-partitions); one set here wins
        conf={"spark.pyspark.python": "{{ params.python }}", "spark.driver.extraJavaOptions": JAVA_OPTIONS,
              "spark.executor.extraJavaOptions": JAVA_OPTIONS},
        conn_id="spark_default",
    )
