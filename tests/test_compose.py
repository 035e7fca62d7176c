"""docker-compose.yml and the Dockerfile agree with streamapp's settings and CLIs.

No Docker engine runs here, so the stack is checked statically: the file parses,
every STREAMAPP_* variable is a real setting, ports and addresses line up, every
``service_healthy`` dependency has a healthcheck, and the producer's and the
reconciliation's commands are accepted by the real argument parsers.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
from dataclasses import fields
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from streamapp.cli import build_parser
from streamapp.settings import Settings, env_name

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
SETTING_VARS = {env_name(f.name): f.name for f in fields(Settings)}


def env_of(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in (SERVICES[service].get("environment") or {}).items()}


def interpolated(value: str, environ: dict[str, str] | None = None) -> str:
    """``value`` as Compose interpolates it: ``${NAME:-default}`` from ``environ`` (none set: the default)."""
    environ = environ or {}
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: environ.get(m.group(1)) or m.group(2), value)


def mounts(service: str) -> dict[str, str]:
    """A service's bind mounts: container path -> host path (relative to the repository)."""
    out = {}
    for volume in SERVICES[service].get("volumes", []):
        parts = str(volume).split(":")
        if parts[0].startswith("./"):
            out[parts[1]] = parts[0]
    return out


def test_the_stack_has_its_eight_services_on_official_images() -> None:
    assert set(SERVICES) == {"kafka", "ksqldb-server", "ksqldb-cli", "worker", "producer", "reconcile", "prometheus",
                             "grafana"}
    assert re.fullmatch(r"prom/prometheus:v\d+\.\d+\.\d+", SERVICES["prometheus"]["image"])
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", SERVICES["grafana"]["image"])
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:")
    assert SERVICES["ksqldb-server"]["image"].startswith("confluentinc/ksqldb-server:")
    assert SERVICES["ksqldb-cli"]["image"].startswith("confluentinc/ksqldb-cli:")
    assert re.search(r"^FROM apache/spark:\$\{SPARK_VERSION\}-python3 AS reconcile$", DOCKERFILE, re.M)
    assert SERVICES["ksqldb-server"]["image"].split(":")[1] == SERVICES["ksqldb-cli"]["image"].split(":")[1]


def test_kafka_runs_in_kraft_mode_without_auto_creation() -> None:
    env = env_of("kafka")
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "zookeeper" not in " ".join(env).lower()
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


@pytest.mark.parametrize("service", ["worker", "producer", "reconcile"])
def test_every_streamapp_variable_is_a_setting_with_a_valid_value(service: str) -> None:
    env = {k: v for k, v in env_of(service).items() if k.startswith("STREAMAPP_")}
    assert env, f"{service} has no STREAMAPP_* environment"
    unknown = sorted(set(env) - set(SETTING_VARS))
    assert not unknown, f"{service}: not settings: {unknown}"
    Settings.from_env(env)  # a value it cannot use raises SettingsError naming it


def test_services_reach_kafka_and_ksqldb_at_their_advertised_addresses() -> None:
    advertised = {urlsplit(u).netloc for u in env_of("kafka")["KAFKA_ADVERTISED_LISTENERS"].split(",")}
    ksql_port = SERVICES["ksqldb-server"]["ports"][0].split(":")[1]
    for service in ("worker", "producer", "reconcile"):
        settings = Settings.from_env(env_of(service))
        assert set(settings.bootstrap_list) <= advertised
        endpoint = urlsplit(settings.ksqldb_endpoint)
        assert (endpoint.hostname, str(endpoint.port)) == ("ksqldb-server", ksql_port)
    assert env_of("ksqldb-server")["KSQL_BOOTSTRAP_SERVERS"] in advertised


def test_host_ports_are_streamapps_defaults() -> None:
    defaults = Settings()
    assert f"{defaults.bootstrap_list[0].split(':')[1]}:9092" in SERVICES["kafka"]["ports"]
    assert "127.0.0.1:9092" in env_of("kafka")["KAFKA_ADVERTISED_LISTENERS"]
    worker = Settings.from_env(env_of("worker"))
    first, _, container = SERVICES["worker"]["ports"][0].rpartition(":")
    assert (int(first.split("-")[0]), int(container)) == (defaults.web_port, worker.web_port)
    assert worker.web_host == "0.0.0.0"


def test_the_worker_scales_to_three_replicas_each_with_its_own_port_state_and_address() -> None:
    """``docker compose up --scale worker=3``: what breaks a scaled service is static, so it is checked here.

    A fixed container_name or host port refuses a second replica; a named volume on the data
    dir is shared, and the second worker's RocksDB cannot take its lock; a wildcard canonical
    URL makes table_route forward lookups to ``0.0.0.0``.
    """
    from streamapp.worker.app import advertised_host

    worker = SERVICES["worker"]
    assert "container_name" not in worker
    low, high = (int(p) for p in worker["ports"][0].rpartition(":")[0].split("-"))
    assert high - low + 1 >= 3
    data_dir = Settings.from_env(env_of("worker")).data_dir
    assert [v for v in worker["volumes"] if str(v).split(":")[-1] == data_dir] == [data_dir]  # anonymous
    assert "volumes" not in COMPOSE or not any(data_dir in str(v) for v in COMPOSE["volumes"].values())
    assert advertised_host(env_of("worker")["STREAMAPP_WEB_HOST"], "3f2a9c1b7d4e") == "3f2a9c1b7d4e"


def test_dependencies_wait_on_health_and_every_awaited_service_has_a_healthcheck() -> None:
    for name, service in SERVICES.items():
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert condition["condition"] in ("service_healthy", "service_completed_successfully"), name
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in SERVICES[dependency], f"{name} waits on {dependency}, which has no healthcheck"
    assert SERVICES["reconcile"]["depends_on"]["producer"]["condition"] == "service_completed_successfully"


def test_producer_command_is_accepted_by_the_streamapp_cli() -> None:
    command = SERVICES["producer"]["command"]
    assert command[:2] == ["streamapp", "produce"]
    args = build_parser().parse_args(command[1:])
    assert args.bootstrap_server == Settings.from_env(env_of("producer")).bootstrap_servers
    assert args.ksqldb_endpoint == Settings.from_env(env_of("producer")).ksqldb_endpoint
    assert args.users_partitioner == "murmur2_random"


def test_reconcile_runs_the_job_with_the_matching_spark_sql_kafka_package() -> None:
    from spark_batch.options import build_parser as reconcile_parser

    service = SERVICES["reconcile"]
    words = shlex.split(service["command"][2].replace("$$", "$"))
    assert words[:2] == ["exec", "/opt/spark/bin/spark-submit"]
    package = words[words.index("--packages") + 1]
    group, artifact, version = package.split(":")
    assert (group, artifact) == ("org.apache.spark", "spark-sql-kafka-0-10_2.13")
    assert version == service["build"]["args"]["SPARK_VERSION"]
    # the JVM the nightly DAG gives the job, its JAVA_OPTIONS (docs/how-to/schedule-nightly.md#jvm): local mode, the
    # driver runs the tasks; read as the cold benchmark reads it (the DAG imports Airflow, which this venv has not)
    spec = importlib.util.spec_from_file_location("reconcile_cold", ROOT / "benchmarks" / "reconcile_cold.py")
    assert spec is not None and spec.loader is not None
    cold = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cold)
    java = cold.nightly_java_options()
    assert java.startswith("-XX:") and words[words.index(f"spark.driver.extraJavaOptions={java}") - 1] == "--conf"
    script = next(w for w in words if w.endswith(".py"))
    assert script == "/opt/streamapp/spark_batch/reconcile.py" and (ROOT / "spark_batch" / "reconcile.py").is_file()
    job_args = [w if not w.startswith("${RECONCILE_DATE") else "2026-11-20" for w in words[words.index(script) + 1:]]
    parsed = reconcile_parser(Settings.from_env(env_of("reconcile"))).parse_args(job_args)
    assert parsed.bootstrap == "kafka:29092" and parsed.kafka_reader == "spark"


def test_dockerfile_copies_what_exists_and_the_worker_image_runs_the_worker() -> None:
    for line in DOCKERFILE.splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), line
    targets = {m.group(1) for m in re.finditer(r"^FROM \S+ AS (\S+)$", DOCKERFILE, re.M)}
    assert {SERVICES[s]["build"]["target"] for s in SERVICES if "build" in SERVICES[s]} <= targets
    assert SERVICES["worker"]["command"] == ["faust", "-A", "streamapp", "worker", "-l", "info"]
    assert SERVICES["producer"]["image"] == SERVICES["worker"]["image"]


def _pom_property(name: str) -> str:
    match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", (ROOT / "jvm" / "pom.xml").read_text())
    assert match, f"jvm/pom.xml has no <{name}>"
    return match.group(1)


def test_compose_runs_the_versions_the_project_pins() -> None:
    """One version of Kafka and of Spark: the pom's (what the tests run) is what the stack runs."""
    kafka = _pom_property("kafka.version")
    spark = _pom_property("spark.version")
    assert SERVICES["kafka"]["image"] == f"apache/kafka:{kafka}"
    assert SERVICES["reconcile"]["build"]["args"]["SPARK_VERSION"] == spark
    assert re.search(rf"^ARG SPARK_VERSION={re.escape(spark)}$", DOCKERFILE, re.M)
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark}" in " ".join(SERVICES["reconcile"]["command"])
    assert f"pyspark=={spark}" in (ROOT / "setup.cfg").read_text()


# -- monitoring: Prometheus and Grafana, provisioned from deploy/ ---------------------------------------------------

PROMETHEUS_YML = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())


def test_monitoring_mounts_exist_and_prometheus_reads_the_shipped_config_and_alerts() -> None:
    for service in ("prometheus", "grafana"):
        for container, host in mounts(service).items():
            assert (ROOT / host).exists(), f"{service} mounts {host}, which does not exist"
    prometheus = mounts("prometheus")
    config = next(c for c in SERVICES["prometheus"]["command"] if c.startswith("--config.file="))
    config_path = config.split("=", 1)[1]
    assert prometheus[config_path] == "./deploy/prometheus/prometheus.yml"
    for rules in PROMETHEUS_YML["rule_files"]:  # relative to the config file, as Prometheus resolves them
        assert prometheus[str(Path(config_path).parent / rules)] == f"./deploy/prometheus/{rules}"


def test_prometheus_scrapes_every_worker_replica_on_its_port_with_its_token() -> None:
    from streamapp.worker.web.views import ROUTES

    job = next(j for j in PROMETHEUS_YML["scrape_configs"] if j["job_name"] == "streamapp")
    assert job["metrics_path"] in {path for path, _, _ in ROUTES}
    worker = Settings.from_env({k: interpolated(v) for k, v in env_of("worker").items()})
    assert worker.metrics, "the compose worker turns its metrics off"
    container_port = int(SERVICES["worker"]["ports"][0].rpartition(":")[2])
    (target,) = job["dns_sd_configs"]
    assert target["names"] == ["worker"] and target["type"] == "A"  # every replica of the service
    assert target["port"] == worker.web_port == container_port
    # the token: the worker's and the file Prometheus reads are one value, whatever STREAMAPP_WEB_TOKEN says
    (token,) = SERVICES["prometheus"]["configs"]
    assert token["target"] == job["authorization"]["credentials_file"]
    content = COMPOSE["configs"][token["source"]]["content"]
    for environ in ({}, {"STREAMAPP_WEB_TOKEN": "s3cret"}):
        assert interpolated(content, environ) == interpolated(env_of("worker")["STREAMAPP_WEB_TOKEN"], environ) != ""
    assert "STREAMAPP_WEB_TOKEN" in " ".join(SERVICES["worker"]["healthcheck"]["test"])  # /health needs it too


def test_grafana_is_provisioned_with_prometheus_and_the_shipped_dashboard() -> None:
    grafana = mounts("grafana")
    provisioning = ROOT / grafana["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    address = urlsplit(source["url"])
    assert source["type"] == "prometheus" and address.hostname == "prometheus"
    assert f"{address.port}:{address.port}" in SERVICES["prometheus"]["ports"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "streamapp.yml").read_text())["providers"]
    dashboards = {c: h for c, h in grafana.items() if c.startswith(provider["options"]["path"] + "/")}
    assert list(dashboards.values()) == ["./deploy/grafana/streamapp.json"]
    home = env_of("grafana")["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home in dashboards
    assert SERVICES["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"
