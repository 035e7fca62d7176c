"""Apache Kafka on loopback: one KRaft node, broker and controller, in a child JVM.

What runs the whole pipeline on a machine with no Kafka cluster: the demo, the tests and
``streamapp broker``. A data directory keeps the ports of the first start (the controller's address
is part of the KRaft quorum); ``secured=True`` adds a ``SASL_SSL`` listener and, in
:data:`OTHER_LISTENERS`, one per other protocol, so that one node proves them all.
See docs/explanation/kafka-access.md#the-local-node.
"""
from __future__ import annotations

import base64
import ipaddress
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import StreamappError
from ..settings import FILE_SUFFIX, KafkaAccess, Settings, ensure_directory, env_name
from .child import ChildProcess
from .jvm import JvmError, classpath, java
from .security import Kafka, KafkaSecurityError

READY_TIMEOUT = 60.0
STATE_FILE = "streamapp-broker.json"
LOG_DIR = "kraft-log"
#: The class behind bin/kafka-storage.sh and the one behind bin/kafka-server-start.sh (Kafka 4.4).
STORAGE_TOOL = "kafka.tools.StorageTool"
SERVER_MAIN = "kafka.Kafka"

#: A single node: no replication to wait for, no auto-created topics, groups form at once.
SINGLE_NODE_CONFIG = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "6",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A restart after kill -9 waits out the dead node's broker session: keep it short on loopback.
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "2000",
    "num.partitions": "1",
    # Keep records whatever their timestamps: data replayed with old timestamps (tests, demos) would
    # otherwise be deleted by the default 7-day retention at the next 5-minute check, mid-run.
    "log.retention.ms": "-1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
}

#: The SASL user a secured broker creates for clients, and its mechanism.
CLIENT_USER = "streamapp"
BROKER_USER = "broker"
SCRAM = "SCRAM-SHA-512"
#: Files of a secured broker's data directory: the CA clients trust, the broker's key and chain, the secrets.
CA_FILE, CA_KEY, KEYSTORE_FILE = "ca.pem", "ca.key", "broker-keystore.pem"
CLIENT_PASSWORD_FILE, BROKER_PASSWORD_FILE = "client.password", "broker.password"
#: The client certificate (signed by the CA) that the MTLS listener requires, and the certificate naming another host.
CLIENT_CERT_FILE, CLIENT_KEY_FILE, WRONG_HOST_KEYSTORE = "client.pem", "client.key", "wrong-host-keystore.pem"
WRONG_HOST_NAME = "kafka.invalid"
#: The mechanisms a secured node's SASL listeners enable (inter-broker: :data:`SCRAM`).
SASL_MECHANISMS = (SCRAM, "SCRAM-SHA-256", "PLAIN")
#: A secured node's listeners besides ``SASL_SSL`` (the one advertised first, between brokers too): name -> protocol.
OTHER_LISTENERS = {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "MTLS": "SSL", "WRONG_HOST": "SSL"}

#: Kafka 4 logs through log4j2: warnings and the "started" line only, on stdout, which we drain.
LOG4J2_YAML = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      target: SYSTEM_OUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
    Logger:
      - name: kafka.server.KafkaRaftServer
        level: INFO
"""


class BrokerError(StreamappError):
    """The broker could not be started or stopped; the message says why and what to do."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def check_address(host: str, port: int) -> None:
    """One line for a port out of range or a host that is not a local address."""
    if not 0 <= port <= 65535:
        raise BrokerError(f"--port {port}: a port is between 0 and 65535 (0 picks a free one)")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BrokerError(f"--host {host!r}: cannot listen there ({reason}); give a local address such as 127.0.0.1") from None


def metadata_ok(bootstrap: Kafka, timeout: float = 2.0) -> bool:
    """True when the broker answers a Metadata request (the Kafka handshake clients start with)."""
    from .admin import TopicError, describe  # librdkafka (about 1 s) loads while the JVM starts, not before it

    try:
        describe(bootstrap, (), timeout=timeout)
        return True
    except (TopicError, KafkaSecurityError):
        return False


def can_create_topics(bootstrap: Kafka, timeout: float = 5.0) -> bool:
    """True when the controller accepts a topic (validated only, nothing is created)."""
    from confluent_kafka import KafkaException  # deferred as in metadata_ok
    from confluent_kafka.admin import NewTopic

    from .admin import admin_client

    admin = admin_client(bootstrap)  # kept referenced: a collected client cancels its futures
    futures = admin.create_topics(
        [NewTopic("__streamapp_ready", 1, 1)], validate_only=True, operation_timeout=timeout, request_timeout=timeout
    )
    try:
        for future in futures.values():
            future.result(timeout)
        return True
    except (KafkaException, TimeoutError, Exception):  # noqa: BLE001 - any refusal means "not yet"
        return False


@dataclass
class EmbeddedBroker(ChildProcess):
    """Start Apache Kafka on loopback; use as a context manager or call start()/stop().

    ``port=0`` picks a free client port (or reuses the one a data directory was
    first started on); ``data_dir=None`` means a temporary directory removed on stop.
    """

    host: str = "127.0.0.1"
    port: int = 0
    data_dir: Path | None = None
    heap: str = "512m"
    cluster_id: str | None = None
    secured: bool = False
    #: Server properties on top of the single node's (a test's broker that lacks something, e.g. transactions).
    config: dict[str, str] = field(default_factory=dict)
    controller_port: int = field(default=0, init=False)
    #: A secured node's :data:`OTHER_LISTENERS` -> their ports.
    listener_ports: dict[str, int] = field(default_factory=dict, init=False)
    _temporary: bool = field(default=False, init=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings, **kw: object) -> "EmbeddedBroker":
        return cls(heap=settings.broker_heap, **kw)  # type: ignore[arg-type]

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def access(self) -> KafkaAccess:
        """How a client reaches this broker: plaintext, or SASL_SSL as :data:`CLIENT_USER` trusting its CA."""
        if not self.secured:
            return KafkaAccess(self.bootstrap)
        root = self._root()
        return KafkaAccess(self.bootstrap, "SASL_SSL", SCRAM, CLIENT_USER,
                           (root / CLIENT_PASSWORD_FILE).read_text(encoding="utf-8"), str(root / CA_FILE))

    def listener_access(self, listener: str = "SASL_SSL", mechanism: str = SCRAM, *,
                        client_certificate: bool | None = None, check_hostname: bool = True) -> KafkaAccess:
        """How a client reaches one listener of the secured node: its protocol, ``mechanism`` for SASL, the CA for
        TLS, and the client certificate for ``MTLS`` (``client_certificate`` forces it on or off)."""
        if not self.secured:
            raise BrokerError("listener_access: only a secured broker has several listeners")
        if listener != "SASL_SSL" and listener not in OTHER_LISTENERS:
            raise BrokerError(f"listener_access: no listener {listener!r}; one of SASL_SSL, {', '.join(OTHER_LISTENERS)}")
        root = self._root()
        protocol = OTHER_LISTENERS.get(listener, "SASL_SSL")
        port = self.listener_ports[listener] if listener in OTHER_LISTENERS else self.port
        sasl = protocol.startswith("SASL_")
        tls = protocol in ("SSL", "SASL_SSL")
        with_cert = listener == "MTLS" if client_certificate is None else client_certificate
        return KafkaAccess(
            f"{self.host}:{port}", protocol, mechanism if sasl else "PLAIN", CLIENT_USER if sasl else "",
            (root / CLIENT_PASSWORD_FILE).read_text(encoding="utf-8") if sasl else "",
            str(root / CA_FILE) if tls else "", str(root / CLIENT_CERT_FILE) if with_cert else "",
            str(root / CLIENT_KEY_FILE) if with_cert else "", check_hostname)

    def other_listeners(self) -> list[str]:
        """What ``streamapp broker --secured`` says of :data:`OTHER_LISTENERS` (nothing for a plaintext node)."""
        if not self.secured:
            return []
        root = self._root()
        what = {"SASL_PLAINTEXT": f"SASL_PLAINTEXT ({', '.join(SASL_MECHANISMS)}; the same user and password)",
                "SSL": f"SSL ({env_name('ssl_cafile')} as above)",
                "MTLS": f"SSL with a client certificate required: {env_name('ssl_certfile')}={root / CLIENT_CERT_FILE} "
                        f"{env_name('ssl_keyfile')}={root / CLIENT_KEY_FILE}",
                "WRONG_HOST": f"SSL, a certificate naming {WRONG_HOST_NAME} only ({env_name('ssl_check_hostname')}=false)"}
        return [f"Also SASL_SSL with {', '.join(SASL_MECHANISMS[1:])}, and other listeners:",
                *(f"  {self.host}:{self.listener_ports[name]} {what[name]}" for name in OTHER_LISTENERS)]

    def settings(self, base: Settings | None = None) -> Settings:
        """Settings pointing at this broker (with its security when secured)."""
        settings = (base or Settings.from_env()).replace(bootstrap_servers=self.bootstrap)
        if not self.secured:
            return settings
        access = self.access
        return settings.replace(security_protocol=access.protocol, sasl_mechanism=access.mechanism,
                                sasl_username=access.username, sasl_password=access.password,
                                ssl_cafile=access.cafile)

    def env(self) -> dict[str, str]:
        """Environment for a child process (a worker) that should use this broker; the password as a file."""
        env = {env_name("bootstrap_servers"): self.bootstrap}
        if self.secured:
            root = self._root()
            secured = {"security_protocol": "SASL_SSL", "sasl_mechanism": SCRAM, "sasl_username": CLIENT_USER,
                       "ssl_cafile": str(root / CA_FILE)}
            env.update({env_name(name): value for name, value in secured.items()})
            env[env_name("sasl_password") + FILE_SUFFIX] = str(root / CLIENT_PASSWORD_FILE)
        return env

    @property
    def log_dir(self) -> Path:
        """Where the node keeps its partitions' logs (``log.dirs``), one directory per partition."""
        return self._root() / LOG_DIR

    def _root(self) -> Path:
        if self.data_dir is None:
            raise BrokerError("the broker has no data directory yet: start it first")
        return Path(self.data_dir).resolve()

    # -- start ---------------------------------------------------------------------------------

    def start(self, timeout: float = READY_TIMEOUT) -> "EmbeddedBroker":
        try:
            java_bin, cp = java(), classpath("broker")
        except JvmError as exc:
            raise BrokerError(str(exc)) from None
        check_address(self.host, self.port)
        root = self._prepare_data_dir()
        state = self._read_state(root)
        self.port = self.port or int(state.get("port", 0)) or free_port(self.host)
        self.controller_port = int(state.get("controller_port", 0)) or free_port(self.host)
        if self.secured:
            known = dict(state.get("listener_ports") or {})  # type: ignore[call-overload]
            self.listener_ports = {name: int(known.get(name, 0)) or free_port(self.host) for name in OTHER_LISTENERS}
        ports = [("port", self.port), ("controller port", self.controller_port),
                 *((f"{name} listener port", port) for name, port in self.listener_ports.items())]
        for name, port in ports:
            if port_taken(self.host, port):
                self._cleanup()
                hint = "stop what is listening there or choose another port (--port 0 picks a free one)"
                raise BrokerError(f"{name} {port} on {self.host} is already in use: {hint}")
        if bool(state.get("secured", self.secured)) != self.secured:
            self._cleanup()
            was = "with" if state.get("secured") else "without"
            raise BrokerError(f"--data-dir {root}: first started {was} --secured; start it the same way or use another directory")
        if self.secured:
            make_secrets(root, self.host)
        properties = self._write_config(root)
        self._format(java_bin, cp, root, properties, state)
        self._spawn([java_bin, f"-Xmx{self.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={root / 'log4j2.yaml'}",
                     "-cp", cp, SERVER_MAIN, str(properties)])
        self._wait_ready(timeout)
        (root / STATE_FILE).write_text(json.dumps({
            "cluster_id": self.cluster_id, "port": self.port, "controller_port": self.controller_port,
            "secured": self.secured, "listener_ports": self.listener_ports,
        }), encoding="utf-8")
        return self

    def _prepare_data_dir(self) -> Path:
        if self.data_dir is None:
            self.data_dir, self._temporary = Path(tempfile.mkdtemp(prefix="streamapp-broker-")), True
        root = Path(self.data_dir)
        ensure_directory(root, f"--data-dir {root}", BrokerError)
        return root

    def _read_state(self, root: Path) -> dict[str, object]:
        meta = root / LOG_DIR / "meta.properties"
        if not meta.is_file():
            return {}
        formatted = dict(
            line.split("=", 1) for line in meta.read_text(encoding="utf-8").splitlines() if "=" in line
        ).get("cluster.id", "").strip()
        if self.cluster_id and formatted and formatted != self.cluster_id:
            raise BrokerError(
                f"--data-dir {root}: formatted for cluster id {formatted}, not {self.cluster_id}; "
                f"use another directory or the cluster id it was formatted with"
            )
        self.cluster_id = formatted or self.cluster_id
        try:
            return json.loads((root / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _write_config(self, root: Path) -> Path:
        config = {
            **SINGLE_NODE_CONFIG,
            "listeners": f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.quorum.bootstrap.servers": f"{self.host}:{self.controller_port}",
            "log.dirs": str(root / LOG_DIR),
        }
        if self.secured:
            config.update(self._secured_config(root))
        config.update(self.config)
        properties = root / "server.properties"
        _write_private(properties, "".join(f"{k}={v}\n" for k, v in config.items()))
        (root / "log4j2.yaml").write_text(LOG4J2_YAML, encoding="utf-8")
        return properties

    def _secured_config(self, root: Path) -> dict[str, str]:
        """SASL_SSL (also between brokers, SCRAM-SHA-512) and :data:`OTHER_LISTENERS`; PEM keys, chains and CA from the data dir.

        PLAIN's users are listed in its JAAS line (``user_<name>``); SCRAM's were created at format time.
        """
        password = (root / BROKER_PASSWORD_FILE).read_text(encoding="utf-8")
        client_password = (root / CLIENT_PASSWORD_FILE).read_text(encoding="utf-8")
        listeners = {"SASL_SSL": ("SASL_SSL", self.port)}
        listeners.update({name: (OTHER_LISTENERS[name], port) for name, port in self.listener_ports.items()})
        addresses = ",".join(f"{name}://{self.host}:{port}" for name, (_, port) in listeners.items())
        config = {
            "listeners": f"{addresses},CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": addresses,
            "listener.security.protocol.map": ",".join(
                [f"{name}:{protocol}" for name, (protocol, _) in listeners.items()] + ["CONTROLLER:PLAINTEXT"]),
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": SCRAM,
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(root / KEYSTORE_FILE),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(root / CA_FILE),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.wrong_host.ssl.keystore.type": "PEM",
            "listener.name.wrong_host.ssl.keystore.location": str(root / WRONG_HOST_KEYSTORE),
        }
        for name, (protocol, _) in listeners.items():
            if not protocol.startswith("SASL_"):
                continue
            prefix = f"listener.name.{name.lower()}"
            config[f"{prefix}.{SCRAM.lower()}.sasl.jaas.config"] = (
                f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="{BROKER_USER}" password="{password}";')
            config[f"{prefix}.scram-sha-256.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;")
            config[f"{prefix}.plain.sasl.jaas.config"] = (
                f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                f'user_{CLIENT_USER}="{client_password}";')
        return config

    def _scram_users(self, root: Path) -> list[str]:
        """StorageTool's ``--add-scram`` arguments: the broker's own user and the clients' (format time only)."""
        if not self.secured:
            return []
        users = ((SCRAM, BROKER_USER, BROKER_PASSWORD_FILE), (SCRAM, CLIENT_USER, CLIENT_PASSWORD_FILE),
                 ("SCRAM-SHA-256", CLIENT_USER, CLIENT_PASSWORD_FILE))
        return [arg for mechanism, name, file in users for arg in (
            "--add-scram", f"{mechanism}=[name={name},password={(root / file).read_text(encoding='utf-8')}]")]

    def _format(self, java_bin: str, cp: str, root: Path, properties: Path, state: dict[str, object]) -> None:
        """Format the storage once, on the first start of a data directory (bin/kafka-storage.sh format)."""
        if (root / LOG_DIR / "meta.properties").is_file():
            return
        self.cluster_id = self.cluster_id or _cluster_id()
        result = subprocess.run(
            [java_bin, "-Xmx256m", "-cp", cp, STORAGE_TOOL, "format", "--standalone",
             f"--cluster-id={self.cluster_id}", "-c", str(properties), *self._scram_users(root)],
            capture_output=True, text=True, timeout=120,
        )
        if result.returncode != 0:
            self._cleanup()
            tail = " | ".join((result.stdout + result.stderr).strip().splitlines()[-2:])
            raise BrokerError(f"formatting the broker's storage in {root} failed: {tail}")

    def _wait_ready(self, timeout: float) -> None:
        """Ready once it answers Metadata and its controller accepts a topic."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._exited():
                message = self._failure_message()
                self.stop()
                raise BrokerError(message)
            if metadata_ok(self.access, timeout=1.0) and can_create_topics(self.access):
                return
            time.sleep(0.1)
        self.stop()
        raise BrokerError(f"Apache Kafka did not become ready on {self.bootstrap} within {timeout:.0f}s")

    def _failure_message(self) -> str:
        text = "\n".join(self.log_lines)
        if "Address already in use" in text:
            return f"port {self.port} or {self.controller_port} on {self.host} is already in use: choose another port"
        if "InconsistentClusterIdException" in text or "Invalid cluster.id" in text:
            return f"--data-dir {self.data_dir}: formatted for another cluster; use another directory"
        errors = [line for line in self.log_lines if " ERROR " in line or "Exception" in line]
        tail = (errors or list(self.log_lines))[-1:] or ["no output"]
        return f"Apache Kafka exited at start: {tail[0][:300]}"

    # -- stop: ChildProcess.stop() (SIGTERM, Kafka's controlled shutdown) and kill() keep the data dir,
    # except that stop() removes a temporary one.

    def _after_stop(self) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        if self._temporary and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir, self._temporary = None, False


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it may hold a secret)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def make_secrets(root: Path, host: str) -> None:
    """Once per data directory: the SCRAM passwords, a throw-away CA and the certificates it signs (PEM, openssl).

    The broker's PEM keystore is its PKCS#8 key, its certificate and the CA in one file;
    the certificate names ``host`` and localhost/127.0.0.1.  The WRONG_HOST listener's
    names :data:`WRONG_HOST_NAME` only; the client's (for MTLS) is for :data:`CLIENT_USER`.
    Each missing piece is made on its own, so a data directory of an older streamapp
    gets the new ones.  A ``,`` cannot be in an ``--add-scram`` password, which
    ``token_urlsafe`` never gives.
    """
    for name in (BROKER_PASSWORD_FILE, CLIENT_PASSWORD_FILE):
        if not (root / name).is_file():
            _write_private(root / name, secrets.token_urlsafe(24))
    names = {"DNS:localhost", "IP:127.0.0.1"}
    try:
        names.add(f"IP:{ipaddress.ip_address(host)}")
    except ValueError:
        names.add(f"DNS:{host}")
    work = Path(tempfile.mkdtemp(prefix="certs-", dir=root))
    try:
        if not ((root / CA_FILE).is_file() and (root / CA_KEY).is_file()):
            _openssl(work, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                            "-subj", "/CN=streamapp-throwaway-ca", "-keyout", "ca.key", "-out", "ca.pem",
                            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            _write_private(root / CA_KEY, (work / "ca.key").read_text(encoding="utf-8"))
            (root / CA_FILE).write_text((work / "ca.pem").read_text(encoding="utf-8"), encoding="utf-8")
            for stale in (KEYSTORE_FILE, WRONG_HOST_KEYSTORE, CLIENT_CERT_FILE):  # signed by a CA that is gone
                (root / stale).unlink(missing_ok=True)
        shutil.copyfile(root / CA_FILE, work / "ca.pem")
        shutil.copyfile(root / CA_KEY, work / "ca.key")
        chain = (root / CA_FILE).read_text(encoding="utf-8")
        if not (root / KEYSTORE_FILE).is_file():
            key, cert = _signed(work, "broker", host, f"subjectAltName={','.join(sorted(names))}")
            _write_private(root / KEYSTORE_FILE, key + cert + chain)
        if not (root / WRONG_HOST_KEYSTORE).is_file():
            key, cert = _signed(work, "wrong-host", WRONG_HOST_NAME, f"subjectAltName=DNS:{WRONG_HOST_NAME}")
            _write_private(root / WRONG_HOST_KEYSTORE, key + cert + chain)
        if not (root / CLIENT_CERT_FILE).is_file() or not (root / CLIENT_KEY_FILE).is_file():
            key, cert = _signed(work, "client", CLIENT_USER, "extendedKeyUsage=clientAuth", usage=False)
            _write_private(root / CLIENT_KEY_FILE, key)
            (root / CLIENT_CERT_FILE).write_text(cert, encoding="utf-8")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _signed(work: Path, name: str, common_name: str, extension: str, usage: bool = True) -> tuple[str, str]:
    """A new key and its certificate signed by the CA in ``work`` (PEM texts)."""
    (work / f"{name}.cnf").write_text(
        extension + ("\nextendedKeyUsage=serverAuth,clientAuth" if usage else "") + "\n", encoding="utf-8")
    _openssl(work, ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={common_name}",
                    "-keyout", f"{name}.key", "-out", f"{name}.csr"])
    _openssl(work, ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                    "-days", "30", "-extfile", f"{name}.cnf", "-out", f"{name}.crt"])
    return (work / f"{name}.key").read_text(encoding="utf-8"), (work / f"{name}.crt").read_text(encoding="utf-8")


def _openssl(work: Path, step: list[str]) -> None:
    try:
        result = subprocess.run(["openssl", *step], cwd=work, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise BrokerError("--secured: openssl is not installed; it makes the broker's certificate") from None
    if result.returncode != 0:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise BrokerError(f"--secured: openssl {step[0]} failed: {tail}")


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (what `random-uuid` prints).

    Like Kafka's ``Uuid.randomUuid()``, never one starting with ``-``: StorageTool would read it as an option.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text
