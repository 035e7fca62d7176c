"""Each client's dialect of one KafkaAccess (streamapp.kafka.security): pure mappings, checked key by key.

That each dialect really connects is proven on the secured broker (tests/test_security_broker.py);
these pin what each client is given, the JAAS quoting and the DataSource's round trip.
"""
from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from streamapp.kafka.security import (KafkaSecurityError, access_from_options, access_of, aiokafka_options, datasource_options,
                                      faust_credentials, jaas_quoted, java_properties, librdkafka_config,
                                      spark_kafka_options, ssl_context)
from streamapp.settings import KafkaAccess

CA = "/etc/ssl/certs/ca-certificates.crt"
SASL_SSL = KafkaAccess("k1:9093,k2:9093", "SASL_SSL", "SCRAM-SHA-512", "alice", 'p"a\\ss', CA)


def test_a_plain_string_is_plaintext_everywhere() -> None:
    assert access_of("k:9092") == KafkaAccess("k:9092")
    assert librdkafka_config("k:9092") == {"bootstrap.servers": "k:9092"}
    assert aiokafka_options("k:9092") == {"bootstrap_servers": ["k:9092"], "security_protocol": "PLAINTEXT"}
    assert faust_credentials("k:9092") is None and ssl_context("k:9092") is None
    assert java_properties("k:9092") == {"bootstrap.servers": "k:9092", "security.protocol": "PLAINTEXT"}
    assert datasource_options("k:9092") == {"bootstrap": "k:9092"}


def test_librdkafka() -> None:
    assert librdkafka_config(SASL_SSL) == {
        "bootstrap.servers": "k1:9093,k2:9093", "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": 'p"a\\ss', "ssl.ca.location": CA,
        "ssl.endpoint.identification.algorithm": "https",
    }
    mtls = KafkaAccess("k:9093", "SSL", cafile=CA, certfile="c.pem", keyfile="k.pem", check_hostname=False)
    assert librdkafka_config(mtls) == {
        "bootstrap.servers": "k:9093", "security.protocol": "SSL", "ssl.ca.location": CA,
        "ssl.endpoint.identification.algorithm": "none", "ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem",
    }


def test_aiokafka_and_its_ssl_context() -> None:
    options = aiokafka_options(SASL_SSL)
    context = options.pop("ssl_context")
    assert options == {"bootstrap_servers": ["k1:9093", "k2:9093"], "security_protocol": "SASL_SSL",
                       "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": 'p"a\\ss'}
    assert isinstance(context, ssl.SSLContext) and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    unchecked = ssl_context(KafkaAccess("k:9093", "SSL", cafile=CA, check_hostname=False))
    assert unchecked is not None and not unchecked.check_hostname
    assert "sasl_mechanism" not in aiokafka_options(KafkaAccess("k:9093", "SSL"))


def test_faust_credentials() -> None:
    from faust.auth import SASLCredentials, SSLCredentials

    sasl = faust_credentials(SASL_SSL)
    assert isinstance(sasl, SASLCredentials)
    assert (sasl.username, sasl.password, sasl.mechanism.value, sasl.protocol.value) == (
        "alice", 'p"a\\ss', "SCRAM-SHA-512", "SASL_SSL")
    assert 'p"a' not in repr(sasl)  # Faust shows the user only
    plain = faust_credentials(KafkaAccess("k:9092", "SASL_PLAINTEXT", "PLAIN", "bob", "x"))
    assert plain.protocol.value == "SASL_PLAINTEXT" and plain.ssl_context is None
    assert isinstance(faust_credentials(KafkaAccess("k:9093", "SSL", cafile=CA)), SSLCredentials)


@pytest.mark.parametrize("text, quoted", [("plain", '"plain"'), ('a"b', '"a\\"b"'), ("a\\b", '"a\\\\b"')])
def test_jaas_quoting(text: str, quoted: str) -> None:
    assert jaas_quoted(text) == quoted


def test_java_properties_and_spark_options() -> None:
    props = java_properties(SASL_SSL)
    assert props == {
        "bootstrap.servers": "k1:9093,k2:9093", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="p\\"a\\\\ss";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": CA,
    }
    plain = java_properties(KafkaAccess("k:9092", "SASL_PLAINTEXT", "PLAIN", "bob", "x"))
    assert plain["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")
    assert java_properties(KafkaAccess("k:9093", "SSL", check_hostname=False))["ssl.endpoint.identification.algorithm"] == ""
    assert spark_kafka_options(SASL_SSL) == {f"kafka.{k}": v for k, v in props.items()}


def test_java_mutual_tls_inlines_the_pem(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("CERT", encoding="utf-8")
    (tmp_path / "k.pem").write_text("KEY", encoding="utf-8")
    mtls = KafkaAccess("k:9093", "SSL", certfile=str(tmp_path / "c.pem"), keyfile=str(tmp_path / "k.pem"))
    props = java_properties(mtls)
    assert (props["ssl.keystore.type"], props["ssl.keystore.certificate.chain"], props["ssl.keystore.key"]) == (
        "PEM", "CERT", "KEY")


def test_datasource_options_round_trip() -> None:
    assert access_from_options(datasource_options(SASL_SSL)) == SASL_SSL
    assert access_from_options(datasource_options("k:9092")) == KafkaAccess("k:9092")


def test_a_file_that_is_not_pem_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate", encoding="utf-8")
    with pytest.raises(KafkaSecurityError, match=r"^ssl_cafile='.*bad.pem': not a PEM file of CA certificates \("):
        ssl_context(KafkaAccess("k:9093", "SSL", cafile=str(bad)))
    with pytest.raises(KafkaSecurityError, match=r"^ssl_certfile='.*bad.pem', ssl_keyfile='.*bad.pem': not a PEM certificate"):
        ssl_context(KafkaAccess("k:9093", "SSL", certfile=str(bad), keyfile=str(bad)))
