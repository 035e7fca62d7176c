"""The nightly DAG (deploy/airflow/dags/reconcile_nightly.py) in real Airflow, in its own virtualenv.

Airflow's pins must never touch the product's .venv, so the Makefile builds
``.venv-airflow`` (deploy/airflow/requirements.txt) and this test drives that venv's
Python as a subprocess (tests/airflow_probe.py): a DagBag loads the folder, the task is
rendered for one ``ds`` and the Spark provider's hook builds its spark-submit command;
then the task's ``execute`` runs the real hook and the real spark-submit (this venv's)
on a stand-in application (tests/airflow_exit_app.py) exiting 0, 1, 2 or 3, to see how
Airflow ends each: retried or not, and which alert.  The real job's own exit codes are
tested on the real job (tests/test_reconcile_kafka.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark

from spark_batch.options import parse

ROOT = Path(__file__).resolve().parent.parent
AIRFLOW_PYTHON = ROOT / ".venv-airflow" / "bin" / "python"
DS = "2026-11-20"
#: The master comes from Airflow's spark_default connection; a client-mode stand-in never contacts it.
MASTER = "spark://spark-master.invalid:7077"
#: Not an expectation on speed: how long the probe may run before the test fails.
PATIENCE = 600


def test_dag_loads_renders_and_tells_a_breach_from_an_error(tmp_path):
    assert AIRFLOW_PYTHON.exists(), f"{AIRFLOW_PYTHON} is missing: `make test` builds it (deploy/airflow/requirements.txt)"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "AIRFLOW"))}
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow"), AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": MASTER.split(":7077")[0], "port": 7077}),
        STREAMAPP_HOME=str(ROOT), STREAMAPP_BOOTSTRAP_SERVERS="kafka-1:9092,kafka-2:9092",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # the product's spark-submit
        SPARK_HOME=str(Path(pyspark.__file__).parent),
    )
    output = tmp_path / "out"
    done = subprocess.run([str(AIRFLOW_PYTHON), str(ROOT / "tests" / "airflow_probe.py"), str(ROOT / "deploy" / "airflow" / "dags"),
                           DS, str(output), str(ROOT / "tests" / "airflow_exit_app.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=PATIENCE)
    probe = next((json.loads(line[len("PROBE "):]) for line in done.stdout.splitlines() if line.startswith("PROBE ")), None)
    assert done.returncode == 0 and probe, done.stderr[-3000:]

    assert probe["import_errors"] == {} and probe["dag_ids"] == ["streamapp_reconcile_nightly"]
    assert "CronDataIntervalTimetable" in probe["schedule"]  # ds is the day reconciled, the run comes after it
    job_args = [
        "--date", DS, "--bootstrap-server", "kafka-1:9092,kafka-2:9092", "--output", str(output),
        "--max-mismatch-rate", "0.01", "--kafka-reader", "spark", "--statements", f"{ROOT}/streamapp/sql/seed.sql",
    ]
    assert probe["command"] == [
        "spark-submit", "--master", MASTER, "--conf", f"spark.pyspark.python={ROOT}/.venv/bin/python",
        "--conf", "spark.driver.extraJavaOptions=-XX:+UseParallelGC",
        "--conf", "spark.executor.extraJavaOptions=-XX:+UseParallelGC",
        "--packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}",
        "--name", f"streamapp-reconcile-{DS}", f"{ROOT}/spark_batch/reconcile.py", *job_args,
    ]
    options = parse(job_args)  # the job's own parser takes what the DAG renders
    assert options.window.label == DS and options.kafka_reader == "spark" and options.max_mismatch_rate == 0.01
    # the packaged seed's file, passed by the DAG, is the plan the job reads without it
    assert [p.name for p in options.roles.pairs] == ["direct", "repartition"]
    assert options.topics == parse(job_args[:-2]).topics

    assert probe["retries"] == 2
    outcomes = probe["outcomes"]
    assert outcomes["0"] == {"raised": None}
    breach = outcomes["1"]  # the threshold breached: a data-quality failure, never retried
    assert (breach["raised"], breach["retried"]) == ("DataQualityFailure", False)
    assert breach["alert"].startswith("[DATA QUALITY]") and "direct 39.68% of 63 orders" in breach["alert"]
    error = outcomes["2"]  # the job failed: a task error, retried
    assert (error["raised"], error["retried"]) == ("TaskError", True) and error["alert"].startswith("[TASK ERROR]")
    for code in ("1-no-summary", "3"):  # spark-submit's own exit 1 (no summary written by this attempt), a crash
        other = outcomes[code]
        assert (other["raised"], other["retried"]) == ("AirflowFailException", False), code
        assert other["alert"].startswith("[TASK ERROR]"), code
