from __future__ import annotations

import argparse
import re

import pytest

from streamapp.cli import build_parser, command_parsers, settings_commands
from streamapp.settings import Settings, SettingsError, add_arguments
from streamapp.worker.app import faust_config


def test_defaults_are_the_demo_topics() -> None:
    s = Settings()
    assert (s.users_topic, s.orders_topic, s.partitions, s.partitioner) == (
        "demo_user",
        "demo_user_orders",
        6,
        "murmur2",
    )
    assert s.web_host == "127.0.0.1"


def test_environment_overrides_defaults() -> None:
    s = Settings.from_env(
        {
            "STREAMAPP_BOOTSTRAP_SERVERS": "k1:9092,k2:9092",
            "STREAMAPP_PARTITIONS": "12",
            "STREAMAPP_BROKER_SESSION_TIMEOUT": "7.5",
            "STREAMAPP_WEB_TABLE_BLUEPRINT": "yes",
            "STREAMAPP_USERS_TOPIC": "users",
        }
    )
    assert s.bootstrap_list == ["k1:9092", "k2:9092"]
    assert s.partitions == 12
    assert s.broker_session_timeout == 7.5
    assert s.web_table_blueprint is True
    assert s.users_topic == "users"


def test_cli_flags_override_environment() -> None:
    env = Settings.from_env({"STREAMAPP_PARTITIONS": "12", "STREAMAPP_USERS_TOPIC": "from_env"})
    args = build_parser().parse_args(["broker", "--port", "0"])
    assert env.with_args(args).partitions == 12
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--partitions", "3", "--guard-policy", "fail"])
    s = env.with_args(args)
    assert (s.partitions, s.guard_policy, s.users_topic) == (3, "fail", "from_env")


def test_only_the_settings_flags_a_command_took_are_applied() -> None:
    """A command's own option named like a setting (``demo --partitioner``, ``topics add-partitions --partitioner``)
    is the command's: it does not change the setting."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitioner", default=None)  # the command's own
    add_arguments(parser, only=("partitions",))
    s = Settings().with_args(parser.parse_args(["--partitioner", "consistent_random", "--partitions", "3"]))
    assert (s.partitioner, s.partitions) == (Settings().partitioner, 3)
    assert Settings().with_args(argparse.Namespace(partitions=5)) == Settings()  # no settings flags: none applied
    for argv in (["demo", "--partitioner", "consistent_random"],
                 ["topics", "add-partitions", "t", "--count", "9", "--partitioner", "fnv1a"]):
        assert Settings().with_args(build_parser().parse_args(argv)).partitioner == Settings().partitioner, argv


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"STREAMAPP_PARTITIONS": "six"}, "STREAMAPP_PARTITIONS='six': expected a int"),
        ({"STREAMAPP_PARTITIONS": "0"}, "partitions=0"),
        ({"STREAMAPP_GUARD_POLICY": "explode"}, "guard_policy='explode'"),
        ({"STREAMAPP_WEB_TABLE_BLUEPRINT": "maybe"}, "STREAMAPP_WEB_TABLE_BLUEPRINT='maybe'"),
        ({"STREAMAPP_BOOTSTRAP_SERVERS": ":::"}, "bootstrap_servers=':::': ':::' is not host:port"),
        ({"STREAMAPP_BOOTSTRAP_SERVERS": "k1:9092,k2:x"}, "bootstrap_servers='k1:9092,k2:x': 'k2:x' is not host:port"),
        ({"STREAMAPP_BOOTSTRAP_SERVERS": "k1:70000"}, "'k1:70000' is not host:port (a port from 1 to 65535"),
        ({"STREAMAPP_BROKER_SESSION_TIMEOUT": "91"}, "broker_session_timeout=91.0: must be above 0 seconds (Kafka's "
                                                     "group.min.session.timeout.ms is 6 s by default) and at most the "
                                                     "worker's request timeout, 90 s"),
        ({"STREAMAPP_BROKER_SESSION_TIMEOUT": "inf"}, "broker_session_timeout=inf"),
        ({"STREAMAPP_BROKER_HEAP": "1k"}, "broker_heap='1k': below 160m, the least a Kafka broker starts with"),
        ({"STREAMAPP_BROKER_HEAP": "128m"}, "broker_heap='128m': below 160m"),
        ({"STREAMAPP_BROKER_HEAP": "167772159"}, "broker_heap='167772159': below 160m"),  # bytes
        ({"STREAMAPP_BROKER_HEAP": "512 m"}, "broker_heap='512 m': expected a JVM size such as 512m or 1g"),
    ],
)
def test_bad_values_name_the_setting(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError, match=re.escape(fragment)):
        Settings.from_env(env)


def test_a_broker_heap_of_160_mib_or_more_in_any_unit_is_taken() -> None:
    for heap in ("160m", "163840k", "167772160", "1g", "2G", "512M"):
        assert Settings.from_env({"STREAMAPP_BROKER_HEAP": heap}).broker_heap == heap


def test_hosts_without_a_port_and_ipv6_hosts_in_brackets_are_servers() -> None:
    servers = "kafka-1, [::1]:9092, kafka://k2:9093"
    assert Settings(bootstrap_servers=servers).bootstrap_list == ["kafka-1", "[::1]:9092", "k2:9093"]


def test_faust_broker_url_lists_every_bootstrap_server() -> None:
    assert faust_config(Settings())["broker"] == "kafka://127.0.0.1:9092"
    assert faust_config(Settings(bootstrap_servers="k1:9092, k2:9093"))["broker"] == "kafka://k1:9092;kafka://k2:9093"


def test_web_server_binds_web_host_not_all_interfaces() -> None:
    """Faust listens on ``web_bind`` (0.0.0.0 by default), so streamapp sets it from web_host."""
    assert faust_config(Settings())["web_bind"] == "127.0.0.1"
    assert faust_config(Settings(web_host="10.1.2.3"))["web_bind"] == "10.1.2.3"


def test_a_worker_bound_to_every_interface_advertises_its_hostname_for_table_route() -> None:
    """Faust's canonical_url is built from web_host: ``http://0.0.0.0:6066`` would route lookups to nowhere."""
    import socket

    from streamapp.worker.app import advertised_host

    assert advertised_host("0.0.0.0", "worker-2") == "worker-2"
    assert advertised_host("::", "worker-2") == "worker-2"
    assert advertised_host("10.1.2.3", "worker-2") == "10.1.2.3"
    config = faust_config(Settings(web_host="0.0.0.0", web_port=6066))
    assert (config["web_host"], config["web_bind"]) == (socket.gethostname(), "0.0.0.0")
    assert faust_config(Settings())["web_host"] == "127.0.0.1"


def test_every_setting_has_a_description() -> None:
    """The docs' settings page is generated from these descriptions at each build (docs/gen_reference.py)."""
    from dataclasses import fields

    assert [f.name for f in fields(Settings) if not str(f.metadata.get("doc", "")).strip()] == []


def test_settings_commands_names_the_commands_that_take_each_flag() -> None:
    """`streamapp guard --guard-policy` was listed but refused: :func:`settings_commands`, which the settings page
    (docs/gen_reference.py) lists, names only commands whose parser takes the flag."""
    commands, parsers = settings_commands(), command_parsers()
    assert "guard_policy" not in commands  # the worker's setting: environment only
    assert "guard" in commands["bootstrap_servers"]
    assert "topics create" in commands["partitions"] and "topics list" in commands["bootstrap_servers"]  # nested
    for setting, takers in commands.items():
        for command in takers:
            flag = "--" + setting.replace("_", "-")
            assert flag in parsers[command].format_help(), f"{command} refuses {flag}"
