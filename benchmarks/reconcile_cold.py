"""The reconciliation cold, as a nightly spark-submit runs it: the whole job against a bare Spark join, fresh JVMs.

For each join (``--joins``: ``seed``, the demo's users × orders; ``second``, customers × payments of
``second_join.sql``) it generates both engines' outputs at ``--orders`` rows per side (``reconcile.py``'s
generators), then runs, alternating, ``--rounds`` fresh ``spark-submit``s of the job (``spark_batch/reconcile.py
--source files``, the application the nightly DAG submits) and of a bare Spark full outer join of the same two
outputs + count by status (this file as the application). Each run is timed from spark-submit's start to its
exit; the figures are the median of each and their ratio. Both run with the shuffle settings a nightly run gets
(Spark's own: docs/how-to/schedule-nightly.md#shuffle-partitions); the job also with the JVM options the nightly DAG
gives it (its garbage collector), the bare join on Java's defaults, as a hand-written one; ``--conf`` adds any. ``--datacompy-rounds``
fresh runs of datacompy's ``SparkSQLCompare`` + ``report()`` on the seed's outputs (install it as
``reconcile.py`` says) give the job ÷ datacompy ratio. Each run also says where its seconds went: its Spark event
log (each step's jobs, as the job describes them, and their tasks' CPU), Janino's and the JIT's compile seconds
(``-XX:+CITime``); ``--variant`` runs the job with other settings too, in the same rounds, and ``--baseline DIR``
the job of another source tree (``git archive <commit> | tar -x -C DIR``: the commit before a change).

    .venv/bin/python benchmarks/reconcile_cold.py                       # 10 M per side, both joins, datacompy once
    .venv/bin/python benchmarks/reconcile_cold.py --orders 200000 --users 2000 --datacompy-rounds 0
"""
from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(ROOT))

import reconcile as warm  # noqa: E402  (benchmarks/reconcile.py: the generators, the bare join, datacompy)
from procfs import task_cpu  # noqa: E402

JOINS = ("seed", "second")
STATEMENTS = HERE / "second_join.sql"
TAG = "bench"


def spark_submit() -> Path:
    """PySpark's own spark-submit, beside this Python (the venv's)."""
    return Path(sys.executable).parent / "spark-submit"


def submit_env() -> dict[str, str]:
    """spark-submit finds Spark through the Python first on PATH: the venv's, as ``PATH=.venv/bin:$PATH`` gives it."""
    import pyspark

    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYSPARK_PYTHON=sys.executable,
               SPARK_HOME=str(Path(pyspark.__file__).resolve().parent))
    return env


#: The nightly DAG, whose spark-submit options a job's run gets (``nightly_java_options``).
DAG = ROOT / "deploy" / "airflow" / "dags" / "reconcile_nightly.py"


@functools.cache
def nightly_java_options(dag: Path = DAG) -> str:
    """The JVM options the nightly DAG gives the job's driver and executors (its ``JAVA_OPTIONS``), read from its
    source once: the DAG imports Airflow, which this venv has not."""
    for node in ast.parse(dag.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["JAVA_OPTIONS"]:
            return ast.literal_eval(node.value)
    raise RuntimeError(f"{dag} sets no JAVA_OPTIONS")


def settings(args: argparse.Namespace, kind: str, events: Path) -> list[str]:
    """``--conf`` (and for a job's runs the nightly DAG's JVM options, ``--job-conf``, and a ``--variant``'s own) as
    spark-submit options, with what every run is measured by: Spark's event log (its jobs and tasks) and the JIT's
    compile times (``-XX:+CITime``, printed at exit). The bare join and datacompy run on Spark's defaults, as a
    hand-written comparison would."""
    given = dict(c.split("=", 1) for c in args.conf)
    if kind not in ("bare", "datacompy"):
        given.setdefault(JAVA_OPTIONS, nightly_java_options())
        given.update(c.split("=", 1) for c in [*args.job_conf, *variants(args).get(kind, [])])
    java = given.pop(JAVA_OPTIONS, "")
    given.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
                  "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
                  JAVA_OPTIONS: f"{java} -XX:+CITime".strip()})
    return [x for key, value in given.items() for x in ("--conf", f"{key}={value}")]


def variants(args: argparse.Namespace) -> dict[str, list[str]]:
    """``--variant NAME;KEY=VALUE;...``: {name: its settings}, each a job kind of its own."""
    return {name: conf for name, *conf in (v.split(";") for v in args.variant)}


def submit_command(args: argparse.Namespace, application: Path, app_args: list[str], confs: list[str]) -> list[str]:
    """spark-submit as the nightly DAG gives it: the master, the driver's heap, the Python; ``confs`` on top."""
    return [str(spark_submit()), "--master", args.master, "--driver-memory", args.driver_memory,
            "--conf", f"spark.pyspark.python={sys.executable}", *confs, str(application), *app_args]


def timed_run(command: list[str], log: Path, events: Path) -> dict:
    """Wall seconds from the process's start to its exit, the CPU seconds of it and its reaped descendants, and
    where the seconds went (``where_it_went``)."""
    events.mkdir(parents=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started, epoch = time.perf_counter(), time.time()
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                                   env=submit_env())
        threads = thread_cpu(process)
    code = process.returncode
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in (0, 1):  # the job's 1 is a breached threshold (not with --max-mismatch-rate 1)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"the run of {log.stem} exited {code}; the end of {log}:\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": seconds, "cpu": cpu, "load": os.getloadavg()[0], "threads": threads,
            **where_it_went(log.read_text(errors="replace"), events, epoch, epoch + seconds)}


#: The JVM's threads by what they do (``/proc``'s thread names, 15 characters at most); the rest are the
#: driver's (Py4J calls, the scheduler, shuffle clients), and the Python driver is a process of its own.
THREAD_KINDS = (("JIT C2", "C2 CompilerThre"), ("JIT C1", "C1 CompilerThre"), ("tasks", "Executor task"),
                ("GC", ("GC Thread", "G1 ", "VM Thread")))


def descendants(pid: int) -> list[int]:
    """``pid`` and every process under it (``/proc``'s children of each of their threads)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(c) for c in children.read_text().split()]
            except OSError:
                continue
    return found


def thread_cpu(process: subprocess.Popen, every: float = 0.5) -> dict[str, float]:
    """Until ``process`` exits: CPU seconds of its JVM's threads by kind (``THREAD_KINDS``, else "driver JVM")
    and of its Python processes ("Python"), read from ``/proc`` every ``every`` s (a thread's last reading)."""
    last: dict[tuple[int, int], tuple[str, float]] = {}
    while process.poll() is None:
        for pid in descendants(process.pid):
            for tid, (name, cpu) in task_cpu(pid).items():
                kind = "Python" if pid != process.pid else next(
                    (k for k, prefix in THREAD_KINDS if name.startswith(prefix)), "driver JVM")
                last[(pid, tid)] = (kind, cpu)
        time.sleep(every)
    by_kind: dict[str, float] = {}
    for kind, cpu in last.values():
        by_kind[kind] = by_kind.get(kind, 0.0) + cpu
    return by_kind


#: The job's step lines (``spark_batch.reconcile._step``), Janino's compile of each generated class, the JIT's
#: compile seconds (``-XX:+CITime``'s lines per compiler: standard and on-stack-replacement seconds).
STEP = re.compile(r"^([A-Z][^\n]*?) in (\d+\.\d) s$", re.M)
CODEGEN = re.compile(r"CodeGenerator: Code generated in (\d+(?:\.\d+)?) ms")
JIT = re.compile(r"^\s+(C1|C2) \{speed:[^;]*; standard:\s+([\d.]+) s,[^;]*; osr:\s+([\d.]+) s", re.M)
JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: The Spark jobs of no step: before the first step (the inputs' schemas) or outside the job (the bare join).
NO_STEP = "(no step)"


def spark_steps(events: Path) -> dict:
    """From a run's Spark event log: the application's start and end (epoch ms) and, per step (its jobs'
    description), its Spark jobs: how many, the first one's submission and the last one's end, their tasks,
    and the tasks' run, CPU and GC seconds."""
    app: dict[str, int] = {}
    steps: dict[str, dict] = {}
    step_of_job: dict[int, str] = {}
    step_of_stage: dict[int, str] = {}
    for path in sorted(p for p in events.rglob("*") if p.is_file()):
        for line in path.read_text(errors="replace").splitlines():
            event = json.loads(line)
            kind = event["Event"]
            if kind in ("SparkListenerApplicationStart", "SparkListenerApplicationEnd"):
                app["start" if kind.endswith("Start") else "end"] = event["Timestamp"]
            elif kind == "SparkListenerJobStart":
                name = (event.get("Properties") or {}).get("spark.job.description") or NO_STEP
                step = steps.setdefault(name, {"jobs": 0, "first_ms": event["Submission Time"], "last_ms": 0,
                                               "tasks": 0, "task_s": 0.0, "cpu_s": 0.0, "gc_s": 0.0})
                step["jobs"] += 1
                step_of_job[event["Job ID"]] = name
                step_of_stage.update(dict.fromkeys(event["Stage IDs"], name))
            elif kind == "SparkListenerJobEnd":
                step = steps[step_of_job[event["Job ID"]]]
                step["last_ms"] = max(step["last_ms"], event["Completion Time"])
            elif kind == "SparkListenerTaskEnd" and event.get("Task Metrics"):
                step, metrics = steps[step_of_stage[event["Stage ID"]]], event["Task Metrics"]
                step["tasks"] += 1
                step["task_s"] += metrics["Executor Run Time"] / 1e3
                step["cpu_s"] += metrics["Executor CPU Time"] / 1e9
                step["gc_s"] += metrics["JVM GC Time"] / 1e3
    return {"app": app, "steps": steps}


def where_it_went(log: str, events: Path, started: float, ended: float) -> dict:
    """A run's timeline (seconds from spark-submit's start to Spark's application start, to its first Spark job;
    from its last job's end to the process's exit), each step's seconds as the job printed them and its Spark
    jobs (``spark_steps``), Janino's generated classes and seconds, and the JIT's compile seconds."""
    spark = spark_steps(events)
    steps = spark["steps"]
    for what, wall in STEP.findall(log):
        if what in steps:
            steps[what]["wall_s"] = float(wall)
    first = min((s["first_ms"] for s in steps.values()), default=None)
    last = max((s["last_ms"] for s in steps.values()), default=None)
    timeline = {"to_app_start": spark["app"].get("start", started * 1e3) / 1e3 - started,
                "to_first_job": (first / 1e3 - started) if first else None,
                "after_last_job": (ended - last / 1e3) if last else None}
    generated = [float(ms) for ms in CODEGEN.findall(log)]
    jit = {f"{compiler.lower()}_s": float(standard) + float(osr) for compiler, standard, osr in JIT.findall(log)}
    return {"timeline": timeline, "steps": steps, "codegen": {"classes": len(generated), "s": sum(generated) / 1e3},
            "jit": jit}


def prepare(join: str, base: Path, orders: int, users: int) -> tuple[Path, warm.Shape]:
    """The join's generated exports (kept under ``base`` and reused when complete) and its shape."""
    data = base / f"{join}-{orders}-{users}"
    statements = base / "second_join.sql"
    if join == "second":
        statements.write_text(STATEMENTS.read_text(encoding="utf-8").replace("{tag}", TAG), encoding="utf-8")
    if not (data / ".generated").exists():
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        started = time.perf_counter()
        if join == "seed":
            warm.generate(data, orders, users)
        else:
            warm.generate_second(data, statements, orders, users)
        (data / ".generated").touch()
        print(f"Generated {join}: {orders:,} rows per side, {users:,} table rows in {time.perf_counter() - started:.1f} s",
              flush=True)
    return data, warm.SEED if join == "seed" else warm.second_shape(statements)


def job_args(data: Path, shape: warm.Shape, output: Path) -> list[str]:
    return ["--source", "files", "--input", str(data), "--output", str(output), "--date", warm.DAY,
            "--max-mismatch-rate", "1", "--partitions", str(warm.PARTITIONS), *shape.argv]


def run_join(args: argparse.Namespace, join: str, base: Path, work: Path) -> dict:
    """``--rounds`` alternating fresh runs of the bare join and the job (and each ``--variant`` of it; datacompy
    after them for the seed)."""
    data, shape = prepare(join, base, args.orders, args.users)
    child = ["--child", join, str(data), "--statements-dir", str(base), "--datacompy-path", args.datacompy_path]
    jobs = ["job", *variants(args), *(["baseline"] if args.baseline else [])]
    runs: dict[str, list[dict]] = {"bare": [], **{kind: [] for kind in jobs}, "datacompy": []}
    order = [(kind, round_) for round_ in range(1, args.rounds + 1) for kind in ("bare", *jobs)]
    order += [("datacompy", round_) for round_ in range(1, args.datacompy_rounds + 1)] if join == "seed" else []
    for kind, round_ in order:
        if kind in jobs:
            tree = Path(args.baseline) if kind == "baseline" else ROOT
            command = submit_command(args, tree / "spark_batch" / "reconcile.py",
                                     job_args(data, shape, work / f"out-{join}"),
                                     settings(args, kind, work / "events" / f"{join}-{kind}-{round_}"))
        else:
            command = submit_command(args, Path(__file__).resolve(), [*child, "--what", kind],
                                     settings(args, kind, work / "events" / f"{join}-{kind}-{round_}"))
        record = timed_run(command, work / f"{join}-{kind}-{round_}.log", work / "events" / f"{join}-{kind}-{round_}")
        runs[kind].append(record)
        print(f"{join:<7} {kind:<10} #{round_}  {record['seconds']:7.1f} s   CPU {record['cpu']:7.1f} s   "
              f"load {record['load']:.1f}   {brief(record)}", flush=True)
        shutil.rmtree(work / f"out-{join}", ignore_errors=True)
    return {"join": join, "orders": args.orders, "runs": runs}


def brief(record: dict) -> str:
    """Where a run's seconds went, on one line: to the first Spark job, each step, after the last job, Janino, JIT."""
    line = record["timeline"]
    parts = [f"first job at {line['to_first_job']:.1f}" if line["to_first_job"] is not None else "no job"]
    parts += [f"{name[:24]} {step.get('wall_s', (step['last_ms'] - step['first_ms']) / 1e3):.1f}"
              for name, step in record["steps"].items()]
    parts.append(f"exit +{line['after_last_job']:.1f}" if line["after_last_job"] is not None else "")
    parts.append(f"codegen {record['codegen']['classes']} classes {record['codegen']['s']:.1f}")
    parts.append("JIT " + " ".join(f"{k[:2].upper()} {v:.1f}" for k, v in record["jit"].items()))
    parts.append("CPU " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(record["threads"].items())))
    return " | ".join(p for p in parts if p)


def medians(result: dict) -> dict[str, float]:
    """Median wall seconds of each kind that ran."""
    return {kind: statistics.median(r["seconds"] for r in runs) for kind, runs in result["runs"].items() if runs}


def print_table(results: list[dict], args: argparse.Namespace) -> None:
    confs = ", ".join(args.conf) or "Spark defaults"
    print(f"\nfresh spark-submit per run; median of each; conf: {confs}"
          + f"; the job's runs also: the DAG's {nightly_java_options()}"
          + (f", {', '.join(args.job_conf)}" if args.job_conf else "")
          + "".join(f"; {name}: {', '.join(conf)}" for name, conf in variants(args).items())
          + (f"; baseline: the job of {args.baseline}" if args.baseline else ""))
    print(f"{'join':<8}{'rows/side':>12}{'bare s':>9}{'job s':>9}{'job÷bare':>10}{'CPU÷':>7}{'datacompy s':>13}"
          f"{'job÷dc':>8}{'load':>11}")
    for r in results:
        m = medians(r)
        cpu = {k: statistics.median(x["cpu"] for x in runs) for k, runs in r["runs"].items() if runs}
        loads = [x["load"] for runs in r["runs"].values() for x in runs]
        dc = m.get("datacompy")
        for kind in [k for k in r["runs"] if k not in ("bare", "datacompy") and r["runs"][k]]:
            dc_cols = f"{dc:13.1f}{m[kind] / dc:8.3f}" if dc and kind == "job" else f"{'':>13}{'':>8}"
            name = r["join"] if kind == "job" else f"{r['join']}:{kind}"
            print(f"{name:<8}{r['orders']:>12,}{m['bare']:9.1f}{m[kind]:9.1f}{m[kind] / m['bare']:9.2f}×"
                  f"{cpu[kind] / cpu['bare']:6.2f}×{dc_cols}{min(loads):6.1f}-{max(loads):.1f}")
        each = ", ".join(f"{k} " + " / ".join(f"{x['seconds']:.1f}" for x in runs) for k, runs in r["runs"].items() if runs)
        print(f"        each run (s): {each}")
        each = ", ".join(f"{k} " + " / ".join(f"{x['cpu']:.1f}" for x in runs) for k, runs in r["runs"].items() if runs)
        print(f"        each run's CPU (s): {each}")
        if r["runs"].get("baseline"):
            rounds = " / ".join(f"{j['seconds'] / b['seconds']:.3f}" for j, b in zip(r["runs"]["job"], r["runs"]["baseline"]))
            print(f"        job ÷ baseline: {m['job'] / m['baseline']:.3f}× wall, {cpu['job'] / cpu['baseline']:.3f}× CPU "
                  f"(medians); per round {rounds}")
    for r in results:
        print_where(r)


def print_where(result: dict) -> None:
    """Where the seconds went, median of each kind's runs: the start, each step (its wall as the job printed it,
    its Spark jobs' span and task CPU seconds), the end, Janino's and the JIT's compile seconds."""
    runs = {kind: x for kind, x in result["runs"].items() if x and kind != "datacompy"}
    med = lambda values: statistics.median(values) if values else float("nan")  # noqa: E731
    rows: list[tuple[str, dict[str, str]]] = []
    for label, key in (("spark-submit → Spark app start", "to_app_start"), ("→ first Spark job", "to_first_job"),
                       ("last Spark job → exit", "after_last_job")):
        rows.append((label, {k: f"{med([x['timeline'][key] for x in v if x['timeline'][key] is not None]):.1f}"
                             for k, v in runs.items()}))
    names = list(dict.fromkeys(name for v in runs.values() for x in v for name in x["steps"]))
    for name in names:
        cells = {}
        for kind, v in runs.items():
            steps = [x["steps"][name] for x in v if name in x["steps"]]
            if steps:
                wall = med([s["wall_s"] for s in steps if "wall_s" in s])
                span = med([(s["last_ms"] - s["first_ms"]) / 1e3 for s in steps])
                cells[kind] = (f"{wall:.1f} wall, " if wall == wall else "") + (
                    f"{span:.1f} in {med([s['jobs'] for s in steps]):.0f} jobs, "
                    f"{med([s['tasks'] for s in steps]):.0f} tasks, CPU {med([s['cpu_s'] for s in steps]):.1f}")
        rows.append((name[:40], cells))
    rows.append(("Janino: classes, s", {k: f"{med([x['codegen']['classes'] for x in v]):.0f}, "
                                            f"{med([x['codegen']['s'] for x in v]):.1f}" for k, v in runs.items()}))
    for kind in sorted({k for v in runs.values() for x in v for k in x["threads"]}):
        rows.append((f"CPU s: {kind}", {k: f"{med([x['threads'].get(kind, 0.0) for x in v]):.1f}"
                                        for k, v in runs.items()}))
    rows.append(("JIT compile s (C1, C2)", {k: ", ".join(f"{med([x['jit'].get(c, 0.0) for x in v]):.1f}"
                                                         for c in ("c1_s", "c2_s")) for k, v in runs.items()}))
    print(f"\n{result['join']}: where the seconds went (median of each kind's runs; s)")
    print(f"{'':<42}" + "".join(f"{kind:<46}" for kind in runs))  # noqa: E501
    for label, cells in rows:
        print(f"{label:<42}" + "".join(f"{cells.get(kind, ''):<46}" for kind in runs))


def child(args: argparse.Namespace) -> int:
    """Inside a fresh spark-submit: the bare join or datacompy, in a session set as the job sets its own."""
    from pyspark.sql import SparkSession

    from spark_batch.reconcile import SESSION_SETTINGS

    join, data = args.child[0], Path(args.child[1])
    shape = warm.SEED if join == "seed" else warm.second_shape(Path(args.statements_dir) / "second_join.sql")
    spark = SparkSession.builder.appName(f"reconcile-cold-{args.what}").config(map=SESSION_SETTINGS).getOrCreate()
    if args.what == "bare":
        print("RESULT " + json.dumps(warm.bare_spark(spark, data, shape=shape)), flush=True)
    else:
        sys.path.append(args.datacompy_path)  # last: .venv's pandas and numpy stay the ones imported
        report = Path(tempfile.mkdtemp(prefix="reconcile-cold-dc-")) / "report.txt"
        print("RESULT " + json.dumps(warm.datacompy_compare(spark, data, report, shape)), flush=True)
        shutil.rmtree(report.parent, ignore_errors=True)
    spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=10_000_000, help="rows per side (default: %(default)s)")
    parser.add_argument("--users", type=int, default=200_000, help="table rows (default: %(default)s)")
    parser.add_argument("--joins", default=",".join(JOINS), help="seed and/or second, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="fresh runs of the job and of the bare join, alternating")
    parser.add_argument("--datacompy-rounds", type=int, default=1, help="fresh runs of datacompy on the seed (0: none)")
    parser.add_argument("--datacompy-path", default="/tmp/datacompy-lib", help="where datacompy was installed")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for every run (e.g. spark.sql.shuffle.partitions=16)")
    parser.add_argument("--job-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the job's runs only (what the DAG would give it)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME;KEY=VALUE;...",
                        help="the job with these settings too, in the same rounds (its own row, against the same bare runs)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also the job of this source tree (a clean archive of another commit), in the same rounds "
                        "with the same settings: its own row, and the job ÷ baseline ratio")
    parser.add_argument("--data", help="keep the generated data under this directory and reuse it on the next run")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--child", nargs=2, metavar=("JOIN", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--what", choices=("bare", "datacompy"), help=argparse.SUPPRESS)
    parser.add_argument("--statements-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    joins = [j for j in args.joins.split(",") if j]
    problems = [f"--joins: unknown join {j!r} (expected {' or '.join(JOINS)})" for j in joins if j not in JOINS]
    problems += [f"--{name.replace('_', '-')}={getattr(args, name)}: must be at least {low}"
                 for name, low in (("orders", 1), ("users", 1), ("rounds", 1), ("datacompy_rounds", 0))
                 if getattr(args, name) < low]
    problems += [f"--{name}={c!r}: expected KEY=VALUE" for name, given in (("conf", args.conf), ("job-conf", args.job_conf))
                 for c in given if "=" not in c]
    problems += [f"--variant={v!r}: expected NAME;KEY=VALUE;..." for v in args.variant
                 if len(v.split(";")) < 2 or v.split(";")[0] in ("bare", "job", "datacompy", "baseline")
                 or not all("=" in c for c in v.split(";")[1:])]
    if args.baseline and not (Path(args.baseline) / "spark_batch" / "reconcile.py").is_file():
        problems.append(f"--baseline={args.baseline}: no spark_batch/reconcile.py there (a source tree: git archive)")
    if args.datacompy_rounds and "seed" in joins and not (Path(args.datacompy_path) / "datacompy").is_dir():
        problems.append(f"--datacompy-path={args.datacompy_path}: no datacompy there: {warm.DATACOMPY_INSTALL}")
    if problems:
        print(f"reconcile_cold: error: {problems[0]}", file=sys.stderr)
        return 2
    base = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="reconcile-cold-data-"))
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="reconcile-cold-"))
    results: list[dict] = []
    try:
        for join in joins:
            print(f"\n=== {join}: {args.orders:,} rows per side, {args.rounds} fresh runs each "
                  f"(load {os.getloadavg()[0]:.1f}) ===", flush=True)
            results.append(run_join(args, join, base, work))
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
        print_table(results, args)
        shutil.rmtree(work, ignore_errors=True)  # kept after a failure: its logs
        return 0
    except RuntimeError as exc:
        print(f"reconcile_cold: error: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.data:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
