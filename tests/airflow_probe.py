"""Run by Airflow's own virtualenv (``.venv-airflow``, see the Makefile), never by the product's: prints JSON.

Loads deploy/airflow/dags in a DagBag, renders the reconcile task for one ``ds`` and
builds the spark-submit command the Spark provider's hook would run; then runs the
task's ``execute`` through the real hook and the real ``spark-submit`` (the product's,
on PATH) with a stand-in application, ``airflow_exit_app.py``, that exits with a given
code (and for 1, writes the summary.json a breached run writes): how each exit code
ends, and what the failure alert says.

argv: DAGS_DIR DS OUTPUT_DIR STAND_IN_APP
"""
from __future__ import annotations

import json
import logging
import sys

from airflow.dag_processing.dagbag import DagBag
from airflow.sdk.exceptions import AirflowFailException

dags_dir, ds, output, stand_in = sys.argv[1:5]
bag = DagBag(dag_folder=dags_dir)  # examples off: AIRFLOW__CORE__LOAD_EXAMPLES=False
report: dict = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dag_ids": sorted(bag.dag_ids)}
dag = bag.dags["streamapp_reconcile_nightly"]  # get_dag would ask the metadata database
task = dag.get_task("reconcile")
params = {name: param.resolve() if hasattr(param, "resolve") else param for name, param in dag.params.items()}
params["output"] = output
report["retries"] = task.retries
report["schedule"] = repr(dag.timetable)


def rendered(application: str | None = None, args: list[str] | None = None) -> object:
    """A fresh copy of the task, rendered for ``ds`` (``application``/``args`` replace the job for the stand-in)."""
    copy = task.prepare_for_execution() if hasattr(task, "prepare_for_execution") else task
    if application is not None:  # the stand-in needs no Kafka source: no --packages (a download)
        copy.application, copy.application_args, copy.packages = application, args, None
    context = {"ds": ds, "params": params, "dag": dag, "task": copy}
    copy.render_template_fields(context)
    return copy, context


job, _ = rendered()
report["command"] = job._get_hook()._build_spark_submit_command(job.application)

module = sys.modules[type(task).__module__]
messages: list[str] = []
handler = logging.Handler()
handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
module.log.addHandler(handler)
outcomes = {}
for code in ("0", "1", "1-no-summary", "2", "3"):
    stand_in_task, context = rendered(stand_in, [code, output, ds])
    try:
        stand_in_task.execute(context)
        outcomes[code] = {"raised": None}
    except Exception as exc:  # noqa: BLE001 - what Airflow sees is the point
        messages.clear()
        module.alert({**context, "exception": exc})
        outcomes[code] = {"raised": type(exc).__name__, "retried": not isinstance(exc, AirflowFailException),
                          "message": str(exc), "alert": messages[-1] if messages else None}
report["outcomes"] = outcomes
print("PROBE " + json.dumps(report))
