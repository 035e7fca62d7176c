"""The security settings (issue 20): read from the environment or a ``…_FILE``, never a flag, never shown; each problem one line."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from streamapp.cli import main
from streamapp.settings import Settings, SettingsError, add_arguments

SECRET = "pa55-w0rd-never-shown"
SASL = {"STREAMAPP_SECURITY_PROTOCOL": "SASL_SSL", "STREAMAPP_SASL_MECHANISM": "SCRAM-SHA-512",
        "STREAMAPP_SASL_USERNAME": "alice", "STREAMAPP_SASL_PASSWORD": SECRET}


def test_sasl_settings_from_the_environment() -> None:
    access = Settings.from_env({**SASL, "STREAMAPP_BOOTSTRAP_SERVERS": "k1:9093,k2:9093"}).kafka
    assert (access.protocol, access.mechanism, access.username, access.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "alice", SECRET)
    assert access.tls and access.sasl and access.servers_list == ["k1:9093", "k2:9093"]


def test_password_from_a_file_one_trailing_newline_dropped(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(SECRET + "\n", encoding="utf-8")
    env = {**SASL, "STREAMAPP_SASL_PASSWORD_FILE": str(secret)}
    del env["STREAMAPP_SASL_PASSWORD"]
    assert Settings.from_env(env).sasl_password == SECRET


@pytest.mark.parametrize("change, fragment", [
    ({"STREAMAPP_SECURITY_PROTOCOL": "TLS"}, "security_protocol='TLS': expected one of PLAINTEXT, SSL"),
    ({"STREAMAPP_SASL_MECHANISM": "GSSAPI"}, "sasl_mechanism='GSSAPI': expected one of PLAIN"),
    ({"STREAMAPP_SASL_USERNAME": ""}, "sasl_username is empty"),
    ({"STREAMAPP_SASL_PASSWORD": ""}, "sasl_password is empty: security_protocol=SASL_SSL needs it"),
    ({"STREAMAPP_SASL_PASSWORD_FILE": "/nonexistent/pw"}, "are both set: give one"),
    ({"STREAMAPP_SSL_CAFILE": "/nonexistent/ca.pem"}, "ssl_cafile='/nonexistent/ca.pem': no such file"),
    ({"STREAMAPP_SSL_CERTFILE": "/etc/hostname"}, "ssl_certfile and ssl_keyfile go together"),
    ({"STREAMAPP_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "STREAMAPP_SSL_CAFILE": "/etc/hostname"},
     "ssl_cafile is set but security_protocol=SASL_PLAINTEXT does not use TLS"),
    ({"STREAMAPP_KSQLDB_USERNAME": "bob"}, "ksqldb_username and ksqldb_password go together"),
    ({"STREAMAPP_SSL_CHECK_HOSTNAME": "perhaps"}, "STREAMAPP_SSL_CHECK_HOSTNAME='perhaps': expected true or false"),
])
def test_bad_security_settings_are_one_line_naming_the_setting(change: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({**SASL, **change})
    message = str(caught.value)
    assert fragment in message and "\n" not in message and SECRET not in message


def test_unreadable_password_file_is_named(tmp_path: Path) -> None:
    env = {k: v for k, v in SASL.items() if k != "STREAMAPP_SASL_PASSWORD"}
    with pytest.raises(SettingsError, match=r"STREAMAPP_SASL_PASSWORD_FILE='.*missing': cannot read it \(No such file"):
        Settings.from_env({**env, "STREAMAPP_SASL_PASSWORD_FILE": str(tmp_path / "missing")})


def test_passwords_are_never_flags_nor_shown() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    flags = {action.dest for action in parser._actions}
    assert "sasl_password" not in flags and "ksqldb_password" not in flags
    assert {"ssl_cafile", "sasl_username"} <= flags  # the other settings are
    settings = Settings.from_env({**SASL, "STREAMAPP_KSQLDB_USERNAME": "bob", "STREAMAPP_KSQLDB_PASSWORD": SECRET})
    assert SECRET not in repr(settings) and SECRET not in repr(settings.kafka) and SECRET not in str(settings.kafka)
    assert str(settings.kafka) == settings.bootstrap_servers


def test_cli_names_the_bad_setting_exit_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in {**SASL, "STREAMAPP_SASL_USERNAME": ""}.items():
        monkeypatch.setenv(name, value)
    assert main(["topics", "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "streamapp topics: sasl_username is empty: security_protocol=SASL_SSL needs a user"



#: The commands that talk to Kafka, each with its own arguments before the settings flags.
KAFKA_COMMANDS = (("topics", "list"), ("topics", "describe", "x"), ("topics", "create", "x"), ("fingerprint", "--topic", "x"),
                  ("guard",), ("doctor",), ("produce",), ("ksql-equivalent",))


@pytest.mark.parametrize("command", KAFKA_COMMANDS, ids=" ".join)
def test_every_kafka_command_takes_the_non_secret_security_flags(command: tuple[str, ...], tmp_path: Path) -> None:
    from streamapp.cli import build_parser

    pem = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    for path in pem.values():
        path.write_text("-", encoding="utf-8")
    parser = build_parser()
    args = parser.parse_args([*command, "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-256",
                              "--sasl-username", "bob", "--ssl-cafile", str(pem["ca"]), "--ssl-certfile", str(pem["cert"]),
                              "--ssl-keyfile", str(pem["key"]), "--no-ssl-check-hostname"])
    base = Settings(security_protocol="SSL", sasl_password=SECRET)
    access = base.with_args(args).kafka
    assert (access.protocol, access.mechanism, access.username, access.cafile, access.certfile, access.keyfile,
            access.check_hostname) == ("SASL_SSL", "SCRAM-SHA-256", "bob", *map(str, pem.values()), False)
    assert access.password == SECRET  # from the environment (or its file) only
    with pytest.raises(SystemExit):
        parser.parse_args([*command, "--sasl-password", SECRET])
