"""Every protocol and mechanism of issue 20 on a real broker: the ``secured_broker``'s listeners (tests/conftest.py).

The one secured node carries SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN), SASL_PLAINTEXT,
SSL, MTLS (``ssl.client.auth=required``) and WRONG_HOST (a certificate naming
``kafka.invalid`` only).  For each way in, three real clients configured by
streamapp's mappings write and read back the same records: librdkafka
(``librdkafka_config``: confluent-kafka's producer, streamapp's reader), aiokafka
(``aiokafka_options``) and the JVM's producer and consumer (``java_properties``,
tests/java/JavaRoundTrip.java).  Then, for each, the mistake a user makes first
is one line naming the setting, through the CLI's flags (exit 2).
"""
from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from javatools import compile_java

from streamapp.cli import main
from streamapp.kafka.ksql_equivalent import properties_text
from streamapp.kafka.admin import ensure_topics
from streamapp.kafka.broker import EmbeddedBroker, make_secrets
from streamapp.kafka.reader import key_partitions, read_topic
from streamapp.kafka.security import (KafkaSecurityError, aiokafka_options, check_access, java_properties,
                                      librdkafka_config)
from streamapp.settings import KafkaAccess

COUNT = 30
PARTITIONS = 3
#: A generous bound for a JVM that should finish; reaching it fails the test (a hang), it is not a timing claim.
HANG = 240

#: id -> (listener, mechanism, ssl_check_hostname): every way into the secured node but the SASL_SSL/SCRAM-SHA-512
#: one that tests/test_security_broker.py runs the whole product over.
WAYS = {
    "sasl_ssl-scram-sha-256": ("SASL_SSL", "SCRAM-SHA-256", True),
    "sasl_ssl-plain": ("SASL_SSL", "PLAIN", True),
    "sasl_plaintext-scram-sha-512": ("SASL_PLAINTEXT", "SCRAM-SHA-512", True),
    "sasl_plaintext-plain": ("SASL_PLAINTEXT", "PLAIN", True),
    "ssl": ("SSL", "PLAIN", True),
    "mtls": ("MTLS", "PLAIN", True),
    "wrong_host-no-hostname-check": ("WRONG_HOST", "PLAIN", False),
}


def access_for(broker: EmbeddedBroker, way: str) -> KafkaAccess:
    listener, mechanism, check_hostname = WAYS[way]
    return broker.listener_access(listener, mechanism, check_hostname=check_hostname)


def new_topic(access: KafkaAccess, client: str) -> str:
    topic = f"proto_{client}_{uuid.uuid4().hex[:8]}"
    ensure_topics(access, {topic: PARTITIONS})
    return topic


@pytest.mark.parametrize("way", WAYS)
def test_librdkafka_round_trip(secured_broker: EmbeddedBroker, way: str) -> None:
    from confluent_kafka import Producer

    access = access_for(secured_broker, way)
    check_access(access)
    topic = new_topic(access, "rdkafka")
    producer = Producer({**librdkafka_config(access), "acks": "all"})
    acknowledged: dict[str, int] = {}

    def delivered(error, message) -> None:  # noqa: ANN001 - confluent-kafka's callback
        assert error is None, error
        acknowledged[message.key().decode()] = message.partition()

    for i in range(COUNT):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=delivered)
    assert producer.flush(HANG) == 0
    assert len(acknowledged) == COUNT
    assert key_partitions(read_topic(access, topic)) == acknowledged


@pytest.mark.parametrize("way", WAYS)
def test_aiokafka_round_trip(secured_broker: EmbeddedBroker, way: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    access = access_for(secured_broker, way)
    topic = new_topic(access, "aiokafka")

    async def round_trip() -> tuple[dict[str, int], dict[str, int]]:
        producer = AIOKafkaProducer(**aiokafka_options(access), acks="all")
        await producer.start()
        try:
            sent = {f"k{i}": (await producer.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode())).partition
                    for i in range(COUNT)}
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **aiokafka_options(access), auto_offset_reset="earliest",
                                    enable_auto_commit=False, group_id=None)
        await consumer.start()
        read: dict[str, int] = {}
        try:
            while len(read) < COUNT:  # bounded by wait_for below: a hang fails, it is not a timing claim
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    read.update({record.key.decode(): record.partition for record in records})
        finally:
            await consumer.stop()
        return sent, read

    sent, read = asyncio.run(asyncio.wait_for(round_trip(), HANG))
    assert len(sent) == COUNT and read == sent


@pytest.mark.parametrize("way", WAYS)
def test_jvm_round_trip(secured_broker: EmbeddedBroker, way: str, java_build_dir: Path, tmp_path: Path) -> None:
    access = access_for(secured_broker, way)
    topic = new_topic(access, "jvm")
    config = tmp_path / "client.properties"
    config.touch(mode=0o600)
    config.write_text(properties_text(java_properties(access)), encoding="utf-8")
    classpath = compile_java(java_build_dir, "JavaRoundTrip")
    done = subprocess.run(["java", "-cp", classpath, "JavaRoundTrip", topic, str(COUNT), "k", str(config)],
                          capture_output=True, text=True, timeout=HANG, env={**os.environ})
    assert done.returncode == 0, done.stderr[-2000:]
    read = {key: int(p) for key, p in (line.split() for line in done.stdout.splitlines())}
    assert len(read) == COUNT
    assert key_partitions(read_topic(access, topic)) == read  # what the JVM read is what librdkafka reads
    if access.password:
        assert access.password not in done.stdout + done.stderr


# -- the mistake a user makes first, for each way in: one line naming the setting, exit 2 ------------------------


def cli_flags(access: KafkaAccess) -> list[str]:
    """The CLI's flags for ``access``; the password goes in the environment (never a flag)."""
    flags = ["--bootstrap-servers", access.servers, "--security-protocol", access.protocol]
    if access.sasl:
        flags += ["--sasl-mechanism", access.mechanism, "--sasl-username", access.username]
    for flag, value in (("--ssl-cafile", access.cafile), ("--ssl-certfile", access.certfile),
                        ("--ssl-keyfile", access.keyfile)):
        if value:
            flags += [flag, value]
    if not access.check_hostname:
        flags.append("--no-ssl-check-hostname")
    return flags


def topics_list(access: KafkaAccess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                password: str | None = None) -> tuple[int, str, str]:
    for name in [n for n in os.environ if n.startswith("STREAMAPP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("STREAMAPP_SASL_PASSWORD", access.password if password is None else password)
    status = main(["topics", "list", "--json", *cli_flags(access)])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("way", WAYS)
def test_the_cli_flags_reach_each_way_in(secured_broker: EmbeddedBroker, way: str, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    access = access_for(secured_broker, way)
    topic = new_topic(access, "cli")
    status, out, err = topics_list(access, monkeypatch, capsys)
    assert (status, err) == (0, "")
    assert topic in out


@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "PLAIN"),
                                                    ("SASL_PLAINTEXT", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")])
def test_a_wrong_password(secured_broker: EmbeddedBroker, listener: str, mechanism: str,
                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    access = secured_broker.listener_access(listener, mechanism)
    status, _, err = topics_list(access, monkeypatch, capsys, password="not-" + access.password)
    assert (status, err) == (2, f"streamapp topics: sasl_password: the broker at {access.servers} refused user "
                                f"'streamapp' with {mechanism} (invalid credentials); check sasl_username and sasl_password\n")


def test_sasl_ssl_on_the_sasl_plaintext_port(secured_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    plaintext = secured_broker.listener_access("SASL_PLAINTEXT", "PLAIN")
    access = KafkaAccess(plaintext.servers, "SASL_SSL", "PLAIN", plaintext.username, plaintext.password,
                         secured_broker.access.cafile)
    status, _, err = topics_list(access, monkeypatch, capsys)
    assert (status, err) == (2, f"streamapp topics: security_protocol=SASL_SSL: the broker at {access.servers} does not "
                                f"speak TLS on that port; check security_protocol (PLAINTEXT or SASL_PLAINTEXT?) and the port\n")


def test_ssl_without_the_ca(secured_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    access = KafkaAccess(secured_broker.listener_access("SSL").servers, "SSL")
    status, _, err = topics_list(access, monkeypatch, capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"streamapp topics: ssl_cafile: the certificate of the broker at {access.servers} is not signed "
                          f"by a CA in the system's trust store (ssl_cafile is empty)")


def test_mutual_tls_without_a_client_certificate(secured_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    access = secured_broker.listener_access("MTLS", client_certificate=False)
    status, _, err = topics_list(access, monkeypatch, capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"streamapp topics: ssl_certfile: the broker at {access.servers} requires a client "
                          f"certificate (mutual TLS; ")
    assert err.endswith("); set ssl_certfile and ssl_keyfile\n")


def test_mutual_tls_with_a_certificate_of_another_ca(secured_broker: EmbeddedBroker, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    make_secrets(tmp_path, "127.0.0.1")  # another throw-away CA and a client certificate it signed
    mtls = secured_broker.listener_access("MTLS")
    access = KafkaAccess(mtls.servers, "SSL", cafile=mtls.cafile, certfile=str(tmp_path / "client.pem"),
                         keyfile=str(tmp_path / "client.key"))
    status, _, err = topics_list(access, monkeypatch, capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"streamapp topics: ssl_certfile={access.certfile!r}: the broker at {access.servers} refused "
                          f"this client certificate (")


def test_a_certificate_for_another_host_is_refused_while_ssl_check_hostname(secured_broker: EmbeddedBroker,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    access = secured_broker.listener_access("WRONG_HOST")
    assert access.check_hostname
    status, _, err = topics_list(access, monkeypatch, capsys)
    assert status == 2 and err.count("\n") == 1
    assert err.startswith(f"streamapp topics: ssl_check_hostname: the certificate of the broker at {access.servers} "
                          f"does not name 127.0.0.1 (")
    assert err.endswith("); connect by a name it lists, or set ssl_check_hostname=false\n")


def test_the_clients_themselves_refuse_another_host_while_ssl_check_hostname(secured_broker: EmbeddedBroker,
                                                                            java_build_dir: Path, tmp_path: Path) -> None:
    """Without the pre-flight, librdkafka and the JVM check the name too: ``true`` is not a no-op of the mapping."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    access = secured_broker.listener_access("WRONG_HOST")
    with pytest.raises(KafkaException):
        AdminClient(librdkafka_config(access)).list_topics(timeout=10)
    config = tmp_path / "client.properties"
    config.touch(mode=0o600)
    config.write_text(properties_text({**java_properties(access), "max.block.ms": "10000"}), encoding="utf-8")
    classpath = compile_java(java_build_dir, "JavaRoundTrip")
    done = subprocess.run(["java", "-cp", classpath, "JavaRoundTrip", "absent_topic", "1", "k", str(config)],
                          capture_output=True, text=True, timeout=HANG, env={**os.environ})
    assert done.returncode != 0
    assert "No subject alternative DNS name matching" in done.stderr or "SSLHandshakeException" in done.stderr, done.stderr[-1500:]


def test_the_pre_flight_passes_every_way_in(secured_broker: EmbeddedBroker) -> None:
    for way in WAYS:
        check_access(access_for(secured_broker, way))
    with pytest.raises(KafkaSecurityError):
        check_access(secured_broker.listener_access("MTLS", client_certificate=False))
