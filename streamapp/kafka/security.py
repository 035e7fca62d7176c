"""One :class:`~streamapp.settings.KafkaAccess` (servers plus security) in each Kafka client's own dialect.

Every client streamapp builds takes its security from here, so a secured cluster is reached the
same way by the CLI, the worker, the reconciliation and the JVM programs. Clients say little about
why they cannot connect, so :func:`check_access` asks first and says in one line which setting to check.
See docs/explanation/kafka-access.md#security-in-each-clients-dialect.
"""
from __future__ import annotations

import json
import logging
import socket
import ssl
import struct
import threading
import time
from functools import cache
from typing import TYPE_CHECKING, Any, Mapping, Union

from ..errors import StreamappError
from ..settings import KafkaAccess, Settings

if TYPE_CHECKING:
    from faust.types.auth import CredentialT

#: A bootstrap string (plaintext) or the servers with their security; what every Kafka-facing function takes.
Kafka = Union[str, KafkaAccess]

#: The JAAS login module of each SASL mechanism (Java client, Kafka Streams, Spark).
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: Seconds the pre-flight may take per step; a server that does not answer in time is left to the client.
PROBE_TIMEOUT = 3.0
#: OpenSSL's verify codes for a certificate that does not name the host (62: hostname, 64: IP address).
HOSTNAME_MISMATCH = (62, 64)
#: The option of the Python DataSource that carries the security (read back by :func:`access_from_options`).
SECURITY_OPTION = "security"


class KafkaSecurityError(StreamappError):
    """The cluster refused how streamapp connects; the message names the setting to check."""


def access_of(kafka: Kafka) -> KafkaAccess:
    """A plain bootstrap string is plaintext; a :class:`KafkaAccess` is taken as it is."""
    return kafka if isinstance(kafka, KafkaAccess) else KafkaAccess(str(kafka))


# -- one mapping per client dialect ------------------------------------------------------------------


def librdkafka_config(kafka: Kafka) -> dict[str, str]:
    """confluent-kafka / librdkafka: ``bootstrap.servers`` and the security keys."""
    access = access_of(kafka)
    config = {"bootstrap.servers": access.servers}
    if access.protocol != "PLAINTEXT":
        config["security.protocol"] = access.protocol
    if access.sasl:
        config.update({"sasl.mechanisms": access.mechanism, "sasl.username": access.username,
                       "sasl.password": access.password})
    if access.tls:
        config["ssl.endpoint.identification.algorithm"] = "https" if access.check_hostname else "none"
        if access.cafile:
            config["ssl.ca.location"] = access.cafile
        if access.certfile:
            config.update({"ssl.certificate.location": access.certfile, "ssl.key.location": access.keyfile})
    return config


def ssl_context(kafka: Kafka) -> ssl.SSLContext | None:
    """The TLS context of aiokafka, Faust and the pre-flight (None without TLS); reads the PEM files."""
    access = access_of(kafka)
    if not access.tls:
        return None
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=access.cafile or None)
    except ssl.SSLError as exc:
        raise KafkaSecurityError(f"ssl_cafile={access.cafile!r}: not a PEM file of CA certificates ({exc.reason})") from None
    if access.certfile:
        try:
            context.load_cert_chain(access.certfile, access.keyfile, password=lambda: b"")
        except ssl.SSLError as exc:
            raise KafkaSecurityError(
                f"ssl_certfile={access.certfile!r}, ssl_keyfile={access.keyfile!r}: not a PEM certificate and "
                f"its unencrypted private key ({exc.reason})") from None
    context.check_hostname = access.check_hostname
    return context


def aiokafka_options(kafka: Kafka) -> dict[str, Any]:
    """aiokafka's producer, consumer and admin client: ``bootstrap_servers`` and the security keywords."""
    access = access_of(kafka)
    options: dict[str, Any] = {"bootstrap_servers": access.servers_list, "security_protocol": access.protocol}
    if access.sasl:
        options.update({"sasl_mechanism": access.mechanism, "sasl_plain_username": access.username,
                        "sasl_plain_password": access.password})
    if access.tls:
        options["ssl_context"] = ssl_context(access)
    return options


def faust_credentials(kafka: Kafka) -> "CredentialT | None":
    """Faust's ``broker_credentials``: applied by Faust to its consumer, producer and topic creation."""
    from faust.auth import SASLCredentials, SSLCredentials  # deferred: the CLI's Kafka commands never load Faust

    access = access_of(kafka)
    if access.sasl:  # an ssl_context makes Faust speak SASL_SSL, none SASL_PLAINTEXT
        return SASLCredentials(username=access.username, password=access.password,
                               mechanism=access.mechanism, ssl_context=ssl_context(access))
    if access.tls:
        return SSLCredentials(ssl_context(access))
    return None


def jaas_quoted(text: str) -> str:
    """A JAAS option value: in double quotes, ``\\`` and ``"`` escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_properties(kafka: Kafka) -> dict[str, str]:
    """The Java client's and Kafka Streams' properties: ``bootstrap.servers`` and the security keys.

    The CA (and, for mutual TLS, the certificate and key) are PEM; the key's text is
    inlined, so a file of these properties must be private (mode 0600) and short-lived.
    """
    access = access_of(kafka)
    props = {"bootstrap.servers": access.servers, "security.protocol": access.protocol}
    if access.sasl:
        props["sasl.mechanism"] = access.mechanism
        props["sasl.jaas.config"] = (f"{LOGIN_MODULES[access.mechanism]} required "
                                     f"username={jaas_quoted(access.username)} password={jaas_quoted(access.password)};")
    if access.tls:
        if access.cafile:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": access.cafile})
        if not access.check_hostname:
            props["ssl.endpoint.identification.algorithm"] = ""
        if access.certfile:
            with open(access.certfile, encoding="utf-8") as cert, open(access.keyfile, encoding="utf-8") as key:
                props.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert.read(),
                              "ssl.keystore.key": key.read()})
    return props


def spark_kafka_options(kafka: Kafka) -> dict[str, str]:
    """Spark's ``kafka`` source: the Java client's properties, each prefixed ``kafka.``."""
    return {f"kafka.{key}": value for key, value in java_properties(kafka).items()}


def datasource_options(kafka: Kafka) -> dict[str, str]:
    """The Python DataSource's options: ``bootstrap`` and (secured) the security as one JSON option."""
    access = access_of(kafka)
    options = {"bootstrap": access.servers}
    if access.protocol != "PLAINTEXT":
        options[SECURITY_OPTION] = json.dumps({
            "protocol": access.protocol, "mechanism": access.mechanism, "username": access.username,
            "password": access.password, "cafile": access.cafile, "certfile": access.certfile,
            "keyfile": access.keyfile, "check_hostname": access.check_hostname,
        })
    return options


def access_from_options(options: Mapping[str, str]) -> KafkaAccess:
    """The inverse of :func:`datasource_options`, in the DataSource's reader (on an executor)."""
    security = json.loads(options[SECURITY_OPTION]) if SECURITY_OPTION in options else {}
    return KafkaAccess(options["bootstrap"], **security)


def ksqldb_http_options(settings: Settings) -> dict[str, Any]:
    """httpx's keywords for the ksqlDB REST API: basic auth and the CA of its https certificate, when set."""
    options: dict[str, Any] = {}
    if settings.ksqldb_username:
        options["auth"] = (settings.ksqldb_username, settings.ksqldb_password)
    if settings.ksqldb_cafile:
        options["verify"] = ssl.create_default_context(cafile=settings.ksqldb_cafile)
    return options


# -- the pre-flight: which setting is wrong, in milliseconds --------------------------------------------

#: ApiVersions v0 (api key 18), correlation id 1, client id "streamapp": what a plaintext Kafka client sends first.
_API_VERSIONS_V0 = (lambda body: struct.pack(">i", len(body)) + body)(
    struct.pack(">hhih", 18, 0, 1, 9) + b"streamapp"
)
#: The pre-flight's own librdkafka log (:func:`probe_logger`).
PROBE_LOGGER_NAME = "streamapp.librdkafka.preflight"
_checked: set[KafkaAccess] = set()
_checked_lock = threading.Lock()


def check_access(kafka: Kafka, timeout: float = PROBE_TIMEOUT) -> None:
    """Raise :class:`KafkaSecurityError` naming the setting when the first server that answers refuses our security.

    Nothing is raised for a server that cannot be reached: the client itself says so.
    """
    access = access_of(kafka)
    for server in access.servers_list:
        host, _, port = server.rpartition(":")
        try:
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except (OSError, ValueError):
            continue
        with sock:
            problem = _tls_problem(access, sock, host.strip("[]"), server)
        if problem:
            raise KafkaSecurityError(problem)
        if access.sasl:
            problem = _sasl_problem(access, server, timeout)
            if problem:
                raise KafkaSecurityError(problem)
        return


def check_access_once(kafka: Kafka) -> None:
    """:func:`check_access`, once per process for an access that a server answered (the clients' constructors call it)."""
    access = access_of(kafka)
    with _checked_lock:
        if access in _checked:
            return
    check_access(access)
    with _checked_lock:
        _checked.add(access)


def _tls_problem(access: KafkaAccess, sock: socket.socket, host: str, server: str) -> str | None:
    if not access.tls:
        try:
            sock.sendall(_API_VERSIONS_V0)
            head = sock.recv(5)
        except OSError:
            return None
        if len(head) >= 2 and head[0] == 0x15 and head[1] == 0x03:  # a TLS alert record: this port speaks TLS
            return (f"security_protocol={access.protocol}: the broker at {server} speaks TLS on that port; "
                    f"set security_protocol to SSL or SASL_SSL (and ssl_cafile to its CA)")
        return None
    context = ssl_context(access)
    assert context is not None  # access.tls
    try:
        tls = context.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        if exc.verify_code in HOSTNAME_MISMATCH:
            return (f"ssl_check_hostname: the certificate of the broker at {server} does not name {host} "
                    f"({exc.verify_message}); connect by a name it lists, or set ssl_check_hostname=false")
        where = f"ssl_cafile={access.cafile!r}" if access.cafile else "the system's trust store (ssl_cafile is empty)"
        return (f"ssl_cafile: the certificate of the broker at {server} is not signed by a CA in {where} "
                f"({exc.verify_message})")
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError):
        return (f"security_protocol={access.protocol}: the broker at {server} does not speak TLS on that port; "
                f"check security_protocol (PLAINTEXT or SASL_PLAINTEXT?) and the port")
    except ssl.SSLError as exc:
        return f"security_protocol={access.protocol}: TLS with the broker at {server} failed: {exc.reason or exc}"
    except OSError:  # a timeout or a reset mid-handshake: the client will say what it sees
        return None
    with tls:
        return _client_certificate_problem(access, tls, server)


def _client_certificate_problem(access: KafkaAccess, tls: ssl.SSLSocket, server: str) -> str | None:
    """A broker that requires a client certificate (mutual TLS) refuses it after the handshake (TLS 1.3): ask once."""
    try:
        tls.sendall(_API_VERSIONS_V0)
        tls.recv(5)
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        if not any(word in reason.upper() for word in ("CERTIFICATE", "HANDSHAKE_FAILURE", "UNKNOWN_CA")):
            return None
        if not access.certfile:
            return (f"ssl_certfile: the broker at {server} requires a client certificate (mutual TLS; {reason}); "
                    f"set ssl_certfile and ssl_keyfile")
        return (f"ssl_certfile={access.certfile!r}: the broker at {server} refused this client certificate "
                f"({reason}); use one signed by a CA the broker trusts")
    except OSError:
        return None
    return None


@cache
def probe_logger() -> logging.Logger:
    """The pre-flight's librdkafka log, silenced on first use: its one authentication error becomes our one line."""
    logger = logging.getLogger(PROBE_LOGGER_NAME)
    logger.propagate = False
    logger.addHandler(logging.NullHandler())
    return logger


def _sasl_problem(access: KafkaAccess, server: str, timeout: float) -> str | None:
    """One Metadata request through librdkafka; its first authentication error is final (it would retry for ever)."""
    from confluent_kafka import KafkaError, KafkaException  # deferred: the broker's start imports this module
    from confluent_kafka.admin import AdminClient

    errors: list[KafkaError] = []
    admin = AdminClient({**librdkafka_config(access.with_servers(server)), "error_cb": errors.append,
                         "logger": probe_logger()})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.2)
            return None
        except KafkaException:
            pass
        admin.poll(0)  # serves error_cb
        for error in errors:
            if error.code() == KafkaError._AUTHENTICATION:
                return _authentication_line(access, server, error.str())
    return None


def _authentication_line(access: KafkaAccess, server: str, text: str) -> str:
    if "mechanism" in text.lower() and "support" in text.lower():
        return (f"sasl_mechanism={access.mechanism}: the broker at {server} does not enable it "
                f"({text.split(': ', 1)[-1][:160]})")
    return (f"sasl_password: the broker at {server} refused user {access.username!r} with {access.mechanism} "
            f"(invalid credentials); check sasl_username and sasl_password")
