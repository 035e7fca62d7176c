"""The cold reconciliation benchmark (benchmarks/reconcile_cold.py) runs: fresh spark-submits of the job and of the
bare join on tiny generated outputs, and a bad option is one line, exit 2. No figure is asserted."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "reconcile_cold.py"


def cold(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_bad_options_are_one_line_exit_2() -> None:
    for args, named in ((["--joins", "third"], "--joins"), (["--orders", "0"], "--orders"),
                        (["--conf", "spark.sql.shuffle.partitions"], "--conf"),
                        (["--datacompy-path", "/nonexistent", "--joins", "seed"], "--datacompy-path"),
                        (["--variant", "c1"], "--variant"), (["--job-conf", "x"], "--job-conf"),
                        (["--baseline", "/nonexistent"], "--baseline")):
        done = cold(*args, timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("reconcile_cold: error: ") and named in done.stderr


#: Settings for two short fresh runs on shared cores (as the demo's spark-submit has them): C1 only, no UI, two
#: shuffle partitions instead of 200 for 3,000 rows. Given with --conf, which every run then gets.
SHORT_RUN = ("spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1", "spark.ui.enabled=false",
             "spark.sql.shuffle.partitions=2")


def test_the_second_join_runs_cold_against_the_bare_join(tmp_path: Path) -> None:
    """One fresh spark-submit of each on customers x payments: both finish, and the figures are written."""
    figures = tmp_path / "figures.json"
    done = cold("--orders", "3000", "--users", "40", "--joins", "second", "--rounds", "1", "--datacompy-rounds", "0",
                "--data", str(tmp_path / "data"), "--json", str(figures), *[x for c in SHORT_RUN for x in ("--conf", c)])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [result] = json.loads(figures.read_text())
    assert result["join"] == "second" and result["orders"] == 3000
    assert [len(result["runs"][kind]) for kind in ("bare", "job", "datacompy")] == [1, 1, 0]
    assert "job÷bare" in done.stdout and "\nsecond " in done.stdout
    assert f"conf: {', '.join(SHORT_RUN)}" in done.stdout  # the figures say what they were measured with
    assert (tmp_path / "data" / "second-3000-40" / ".generated").exists()  # kept for the next run
    # where the seconds went: the job's steps are its Spark jobs' descriptions, the bare join's jobs have none
    [job], [bare] = result["runs"]["job"], result["runs"]["bare"]
    steps = job["steps"]
    assert {"Read and classified the join outputs", "Explained the mismatches from the input topics",
            "Summarised"} <= set(steps), steps
    assert all(step["jobs"] >= 1 and step["tasks"] >= 1 for step in steps.values())
    printed = [steps[what]["wall_s"] for what in ("Read and classified the join outputs",
                                                  "Explained the mismatches from the input topics", "Summarised")]
    assert min(printed) >= 0 and sum(printed) <= job["seconds"]  # the job's own seconds for its steps, within its run
    assert list(bare["steps"]) == ["(no step)"]
    for run in (job, bare):
        assert 0 < run["timeline"]["to_app_start"] < run["timeline"]["to_first_job"] < run["seconds"]
        assert run["codegen"]["classes"] > 0 and run["jit"]["c1_s"] > 0  # Janino's log lines, -XX:+CITime's
    assert "where the seconds went" in done.stdout and "→ first Spark job" in done.stdout


def test_the_job_runs_with_the_nightly_dags_jvm_options_the_bare_join_with_javas(tmp_path: Path) -> None:
    """The job's spark-submit gets what the DAG gives it (its JAVA_OPTIONS); the bare join, a hand-written
    comparison, Java's defaults; a --conf of the JVM options wins for every run."""
    import argparse
    import importlib.util

    spec = importlib.util.spec_from_file_location("reconcile_cold", SCRIPT)
    assert spec is not None and spec.loader is not None
    cold_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cold_module)
    dag_text = (ROOT / "deploy" / "airflow" / "dags" / "reconcile_nightly.py").read_text()
    assert 'JAVA_OPTIONS = "-XX:+UseParallelGC"' in dag_text and cold_module.nightly_java_options() == "-XX:+UseParallelGC"
    args = argparse.Namespace(conf=[], job_conf=[], variant=[])

    def java(kind: str, given: argparse.Namespace) -> str:
        confs = cold_module.settings(given, kind, tmp_path / "events")
        return next(c for c in confs if c.startswith("spark.driver.extraJavaOptions="))

    assert java("job", args) == "spark.driver.extraJavaOptions=-XX:+UseParallelGC -XX:+CITime"
    assert java("baseline", args) == java("job", args)
    assert java("bare", args) == "spark.driver.extraJavaOptions=-XX:+CITime"
    mine = argparse.Namespace(conf=["spark.driver.extraJavaOptions=-Xss4m"], job_conf=[], variant=[])
    assert java("job", mine) == java("bare", mine) == "spark.driver.extraJavaOptions=-Xss4m -XX:+CITime"
    missing = tmp_path / "dag.py"
    missing.write_text("X = 1\n")
    try:
        cold_module.nightly_java_options(missing)
    except RuntimeError as exc:
        assert "sets no JAVA_OPTIONS" in str(exc)
    else:
        raise AssertionError("a DAG without JAVA_OPTIONS was read")
