"""`streamapp guard` on real topics on Apache Kafka: a table of checks, exit 1 on problems, 0 when fine."""
from __future__ import annotations

import json
import subprocess
import sys

from streamapp.settings import Settings

from workerkit import isolated, make_users, produce, to_json


def guard(settings: Settings, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamapp", "guard", "--bootstrap-servers", settings.bootstrap_servers,
         "--users-topic", settings.users_topic, "--orders-topic", settings.orders_topic,
         "--users-repartition-topic", settings.users_repartition_topic, *extra],
        capture_output=True, text=True, timeout=120,
    )


def test_guard_cli_reports_crc32_users_then_passes_for_murmur2(broker_settings: Settings, new_topic) -> None:
    s = isolated(broker_settings)
    s = s.replace(users_topic=new_topic("users"), orders_topic=new_topic("orders"),
                  users_repartition_topic=new_topic("repart"))
    users = {uid.encode(): to_json(row) for uid, row in make_users(200, seed=21).items()}
    produce(s.bootstrap_servers, s.users_topic, users.items(), "consistent_random")
    result = guard(s)
    assert result.returncode == 1, result.stderr
    assert "PROBLEM" in result.stdout and "1 co-partitioning problem for partitioner murmur2." in result.stdout
    data = json.loads(guard(s, "--json").stdout)
    [problem] = data["problems"]
    assert f"{s.users_topic} was not written with murmur2" in problem and "83%" in problem

    s2 = s.replace(users_topic=new_topic("users"))
    produce(s2.bootstrap_servers, s2.users_topic, users.items(), "murmur2_random")
    result = guard(s2)
    assert result.returncode == 0, result.stdout
    assert "Co-partitioned for partitioner murmur2." in result.stdout


def test_guard_cli_missing_topic_is_a_problem_not_a_traceback(broker_settings: Settings) -> None:
    s = isolated(broker_settings)
    result = guard(s)
    assert result.returncode == 1
    assert "does not exist" in result.stdout and "Traceback" not in result.stderr
