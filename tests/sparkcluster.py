"""A real Spark standalone cluster on loopback, from PySpark's own install: a master and N workers.

No download: ``spark-class`` of the PySpark in this venv (its ``SPARK_HOME`` is the
package's directory) starts ``org.apache.spark.deploy.master.Master`` and
``...worker.Worker`` as child processes, which :class:`StandaloneCluster` stops by PID.
Readiness is what the master says about itself (its web UI's ``/json``: ALIVE, N
workers alive), never a sleep.

The daemons get an environment without this venv (no ``PYSPARK_PYTHON``, ``VIRTUAL_ENV``,
``PYTHONPATH``, nor the venv on ``PATH``): the executors' Python is the one the
submission names (``spark.pyspark.python``), as on a cluster whose nodes know nothing
of the job.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Sequence

import pyspark

from streamapp.kafka.broker import free_port
from spark_batch.kafka_source import connector_jars
from workerkit import end_process

SPARK_HOME = Path(pyspark.__file__).resolve().parent
ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "spark_batch" / "reconcile.py"
#: Not an expectation on speed: how long a cluster may take to come up before the start fails.
PATIENCE = 180.0
#: Kept out of the daemons' environment: what would let an executor find this venv by inheritance.
#: JVM options for short runs on two shared cores: the C1 JIT only (C2 costs CPU seconds a short run never repays).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_VENV_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH", "PYSPARK_GATEWAY_PORT")


def daemon_environment() -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in _VENV_VARIABLES}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
               SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
               # the REST submission server would take the fixed port 6066: client-mode submissions do not use it
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    return env


class StandaloneCluster:
    """``with StandaloneCluster(work_dir, workers=2) as cluster:`` then ``cluster.url`` is ``spark://127.0.0.1:PORT``.

    Each worker offers ``cores`` and ``memory``; its executors' logs are under
    ``work_dir/worker-N/app-*/*/stderr``.
    """

    def __init__(self, work_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.work_dir, self.workers, self.cores, self.memory = work_dir, workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> None:
        log = (self.work_dir / f"{name}.log").open("wb")
        self.processes.append(subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args], cwd=self.work_dir, env=daemon_environment(),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        log.close()

    def state(self) -> dict:
        """The master's own view (its web UI's ``/json``): status, workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as response:
            return json.load(response)

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + PATIENCE
        while True:
            for process, name in zip(self.processes, ["master", *self.worker_names()]):
                if process.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited ({process.returncode}): see {self.work_dir / name}.log")
            try:
                state = self.state()
                if state.get("status") == "ALIVE" and state.get("aliveworkers") == self.workers:
                    return
            except (OSError, ValueError):  # ValueError: not JSON yet
                pass  # its web UI is not up yet: seen answering /json/ with an HTML page the second it started
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark cluster was not ready after {PATIENCE:.0f}s: see {self.work_dir}/*.log")
            time.sleep(0.5)

    def worker_names(self) -> list[str]:
        return [f"worker-{n}" for n in range(1, self.workers + 1)]

    def __enter__(self) -> "StandaloneCluster":
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.ui_port))
            for name in self.worker_names():
                (self.work_dir / name).mkdir(exist_ok=True)
                self._start(name, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                            "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                            "--work-dir", str(self.work_dir / name), self.url)
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Workers first (each stops its executors), then the master: each by its PID."""
        for process in reversed(self.processes):
            if process.poll() is None:
                end_process(process)
        self.processes.clear()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def executor_logs(self) -> dict[str, list[Path]]:
        """Each worker's executors' stderr files, by worker name."""
        return {name: sorted((self.work_dir / name).glob("app-*/*/stderr")) for name in self.worker_names()}

    def submit_command(self, job_args: Sequence[str], kafka_reader: str) -> list[str]:
        """spark-submit of the unchanged job on this cluster, with what a user gives a standalone cluster.

        ``spark.pyspark.python``: the driver's and the executors' Python, an environment with the
        package installed (the decoders, the Python Kafka reader and confluent-kafka run in the
        executors); ``--jars``: Spark's Kafka source from ``make install`` (``--packages`` would
        download the same); the resources: one core and 512 MiB per executor, one per worker. The
        JVM options and four shuffle partitions only make a short run on two shared cores cheaper.
        """
        jars = ["--jars", ",".join(map(str, connector_jars(required=True)))] if kafka_reader == "spark" else []
        return [
            str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.url,
            "--conf", f"spark.pyspark.python={sys.executable}",
            "--executor-memory", "512m", "--executor-cores", "1", "--total-executor-cores", str(self.workers),
            # start once every executor is there, so the work is spread over both workers
            "--conf", "spark.scheduler.minRegisteredResourcesRatio=1",
            "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.enabled=false",
            "--driver-java-options", QUICK_JVM, "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}",
            *jars, str(JOB), *job_args, "--kafka-reader", kafka_reader,
        ]
