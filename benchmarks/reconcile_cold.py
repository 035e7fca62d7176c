"""The reconciliation cold, as a nightly spark-submit runs it: the whole job against a bare Spark join, fresh JVMs.

For each join (``--joins``: ``seed``, the demo's users × orders; ``second``, customers × payments of
``second_join.sql``) it generates both engines' outputs at ``--orders`` rows per side (``reconcile.py``'s
generators), then runs, alternating, ``--rounds`` fresh ``spark-submit``s of the job (``spark_batch/reconcile.py
--source files``, the application the nightly DAG submits) and of a bare Spark full outer join of the same two
outputs + count by status (this file as the application). Each run is timed from spark-submit's start to its
exit; the figures are the median of each and their ratio. Both run with the shuffle settings a nightly run gets
(Spark's own: docs/how-to/schedule-nightly.md#shuffle-partitions); ``--conf`` adds any. ``--datacompy-rounds``
fresh runs of datacompy's ``SparkSQLCompare`` + ``report()`` on the seed's outputs (install it as
``reconcile.py`` says) give the job ÷ datacompy ratio.

    .venv/bin/python benchmarks/reconcile_cold.py                       # 10 M per side, both joins, datacompy once
    .venv/bin/python benchmarks/reconcile_cold.py --orders 200000 --users 2000 --datacompy-rounds 0
"""
from __future__ import annotations

import argparse
import json
import os
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


def submit_command(args: argparse.Namespace, application: Path, app_args: list[str]) -> list[str]:
    """spark-submit as the nightly DAG gives it: the master, the driver's heap, the Python; ``--conf`` on top."""
    confs = [x for conf in args.conf for x in ("--conf", conf)]
    return [str(spark_submit()), "--master", args.master, "--driver-memory", args.driver_memory,
            "--conf", f"spark.pyspark.python={sys.executable}", *confs, str(application), *app_args]


def timed_run(command: list[str], log: Path) -> dict[str, float]:
    """Wall seconds from the process's start to its exit, the CPU seconds of it and its reaped descendants."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with log.open("wb") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
                              env=submit_env()).returncode
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in (0, 1):  # the job's 1 is a breached threshold (not with --max-mismatch-rate 1)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"the run of {log.stem} exited {code}; the end of {log}:\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": seconds, "cpu": cpu, "load": os.getloadavg()[0]}


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
    """``--rounds`` alternating fresh runs of the bare join and the job (and datacompy for the seed)."""
    data, shape = prepare(join, base, args.orders, args.users)
    child = ["--child", join, str(data), "--statements-dir", str(base), "--datacompy-path", args.datacompy_path]
    runs: dict[str, list[dict[str, float]]] = {"bare": [], "job": [], "datacompy": []}
    for round_ in range(1, args.rounds + 1):
        for kind in ("bare", "job"):
            if kind == "bare":
                command = submit_command(args, Path(__file__).resolve(), [*child, "--what", "bare"])
            else:
                command = submit_command(args, ROOT / "spark_batch" / "reconcile.py",
                                         job_args(data, shape, work / f"out-{join}"))
            record = timed_run(command, work / f"{join}-{kind}-{round_}.log")
            runs[kind].append(record)
            print(f"{join:<7} {kind:<10} #{round_}  {record['seconds']:7.1f} s   CPU {record['cpu']:7.1f} s   "
                  f"load {record['load']:.1f}", flush=True)
            shutil.rmtree(work / f"out-{join}", ignore_errors=True)
    if join == "seed":
        for round_ in range(1, args.datacompy_rounds + 1):
            command = submit_command(args, Path(__file__).resolve(), [*child, "--what", "datacompy"])
            record = timed_run(command, work / f"{join}-datacompy-{round_}.log")
            runs["datacompy"].append(record)
            print(f"{join:<7} {'datacompy':<10} #{round_}  {record['seconds']:7.1f} s   CPU {record['cpu']:7.1f} s   "
                  f"load {record['load']:.1f}", flush=True)
    return {"join": join, "orders": args.orders, "runs": runs}


def medians(result: dict) -> dict[str, float]:
    """Median wall seconds of each kind that ran."""
    return {kind: statistics.median(r["seconds"] for r in runs) for kind, runs in result["runs"].items() if runs}


def print_table(results: list[dict], confs: list[str]) -> None:
    print(f"\nfresh spark-submit per run; median of each; conf: {', '.join(confs) or 'Spark defaults'}")
    print(f"{'join':<8}{'rows/side':>12}{'bare s':>9}{'job s':>9}{'job÷bare':>10}{'CPU÷':>7}{'datacompy s':>13}"
          f"{'job÷dc':>8}{'load':>11}")
    for r in results:
        m = medians(r)
        cpu = {k: statistics.median(x["cpu"] for x in runs) for k, runs in r["runs"].items() if runs}
        loads = [x["load"] for runs in r["runs"].values() for x in runs]
        dc = m.get("datacompy")
        dc_cols = f"{dc:13.1f}{m['job'] / dc:8.3f}" if dc else f"{'':>13}{'':>8}"
        print(f"{r['join']:<8}{r['orders']:>12,}{m['bare']:9.1f}{m['job']:9.1f}{m['job'] / m['bare']:9.2f}×"
              f"{cpu['job'] / cpu['bare']:6.2f}×{dc_cols}{min(loads):6.1f}-{max(loads):.1f}")
        each = ", ".join(f"{k} " + " / ".join(f"{x['seconds']:.1f}" for x in runs) for k, runs in r["runs"].items() if runs)
        print(f"        each run (s): {each}")


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
    problems += [f"--conf={c!r}: expected KEY=VALUE" for c in args.conf if "=" not in c]
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
        print_table(results, args.conf)
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
