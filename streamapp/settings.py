"""Every setting streamapp reads, in one place.

Each field is read from an environment variable ``STREAMAPP_<FIELD>`` and can be
overridden by the matching ``--<field-with-dashes>`` flag of the ``streamapp``
CLI.  The Faust worker (``faust -A streamapp worker``) reads the environment
only, because Faust owns its command line.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .errors import StreamappError

ENV_PREFIX = "STREAMAPP_"

GUARD_POLICIES = ("warn", "fail")
#: ``processing_guarantee``: the orders' join outputs at least once (a crash may repeat some), or exactly once
#: (one Kafka transaction per orders partition holds outputs and offsets; see docs/RELIABILITY.md).
PROCESSING_GUARANTEES = ("at_least_once", "exactly_once")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The protocols that use TLS, and those that use SASL.
TLS_PROTOCOLS, SASL_PROTOCOLS = ("SSL", "SASL_SSL"), ("SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: The worker's Kafka request timeout in seconds (Faust's default, given explicitly): a consumer group's session
#: timeout may not exceed it.
REQUEST_TIMEOUT_S = 90.0
#: The least ``broker_heap`` (MiB) a broker starts with: its log cleaner alone takes 128 MiB
#: (``log.cleaner.dedupe.buffer.size``); at 128m Kafka 4 exits at start, "Error starting LogManager".
MIN_BROKER_HEAP_MIB = 160
_JVM_UNITS = {"": 1 / 2**20, "k": 1 / 2**10, "m": 1, "g": 2**10}
#: Read from ``STREAMAPP_<FIELD>`` or from the file ``STREAMAPP_<FIELD>_FILE`` names; never a CLI flag, never shown.
SECRETS = ("sasl_password", "ksqldb_password")
#: The non-secret Kafka security settings: every command that takes ``--bootstrap-servers`` takes their flags too.
KAFKA_SECURITY_FLAGS = ("security_protocol", "sasl_mechanism", "sasl_username", "ssl_cafile", "ssl_certfile",
                        "ssl_keyfile", "ssl_check_hostname")
FILE_SUFFIX = "_FILE"


def env_name(field_name: str) -> str:
    """The environment variable a setting is read from."""
    return ENV_PREFIX + field_name.upper()


class SettingsError(StreamappError, ValueError):
    """A setting has a value streamapp cannot use; the message names it."""


def _doc(text: str, **kw: Any) -> Any:
    return field(metadata={"doc": text}, **kw)


def _secret(text: str) -> Any:
    """A setting that is a secret: kept out of ``repr``, the CLI and every table of values."""
    return field(default="", repr=False, metadata={"doc": text, "secret": True})


def servers_list(servers: str) -> list[str]:
    """``host:port,host:port`` (a ``kafka://`` prefix allowed, as Faust writes its broker URLs) as a list."""
    return [s.strip().removeprefix("kafka://") for s in servers.split(",") if s.strip()]


@dataclass(frozen=True)
class KafkaAccess:
    """How to reach Kafka: the bootstrap servers and the security to use, for every client streamapp builds.

    ``str()`` is the servers alone, so a message naming the brokers never shows
    the password (``repr`` leaves it out too).  Each client's dialect is made from
    this by :mod:`streamapp.kafka.security`.
    """

    servers: str
    protocol: str = "PLAINTEXT"
    mechanism: str = "PLAIN"
    username: str = ""
    password: str = field(default="", repr=False)
    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""
    check_hostname: bool = True

    def __str__(self) -> str:
        return self.servers

    @property
    def servers_list(self) -> list[str]:
        return servers_list(self.servers)

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def with_servers(self, servers: str) -> "KafkaAccess":
        return dataclasses.replace(self, servers=servers)


@dataclass(frozen=True)
class Settings:
    bootstrap_servers: str = _doc(
        "Kafka bootstrap servers, comma separated host:port.", default="127.0.0.1:9092"
    )
    statements: str = _doc(
        "The ksqlDB statements (a `.sql` file) that declare the joins the worker runs and tests; empty: the "
        "seed's five statements shipped with streamapp (the demo's users and orders), whose topics the seed "
        "topic settings below rename.",
        default="",
    )
    output_prefix: str = _doc(
        "Prefix of each topic the worker's queries write, before the topic ksqlDB writes (the query's "
        "`KAFKA_TOPIC`, else its name), so the worker and ksqlDB run side by side; empty: the worker replaces ksqlDB.",
        default="streamapp_",
    )
    users_topic: str = _doc("Users table topic (ksqlDB `DEMO_USER`).", default="demo_user")
    orders_topic: str = _doc("Orders stream topic.", default="demo_user_orders")
    users_repartition_topic: str = _doc(
        "Users re-keyed by the join's partitioner, written by the Faust worker.",
        default="streamapp_demo_user_repartition",
    )
    merged_topic: str = _doc(
        "Faust output of the direct join (mirrors `DEMO_USER_ORDERS_MERGED`).",
        default="streamapp_DEMO_USER_ORDERS_MERGED",
    )
    merged_repartition_topic: str = _doc(
        "Faust output of the repartitioned join (mirrors `DEMO_USER_ORDERS_MERGED_REPARTITION`).",
        default="streamapp_DEMO_USER_ORDERS_MERGED_REPARTITION",
    )
    ksqldb_users_repartition_topic: str = _doc(
        "Users rewritten by ksqlDB's (murmur2) partitioner: the topic of `DEMO_USER_REPARTITION`, "
        "written by ksqlDB or by `streamapp ksql-equivalent`.",
        default="demo_user_repartition",
    )
    ksqldb_merged_topic: str = _doc(
        "ksqlDB output of the direct join.", default="DEMO_USER_ORDERS_MERGED"
    )
    ksqldb_merged_repartition_topic: str = _doc(
        "ksqlDB output of the repartitioned join.",
        default="DEMO_USER_ORDERS_MERGED_REPARTITION",
    )
    dead_letter_topic: str = _doc(
        "Where records the worker cannot decode go, with the reason.",
        default="streamapp_dead_letters",
    )
    partitions: int = _doc("Partition count of the topics streamapp creates.", default=6)
    replication_factor: int = _doc("Replication factor of the topics streamapp creates.", default=1)
    partitioner: str = _doc(
        "Partitioner of the worker's producer and repartition: a name (`streamapp partition "
        "--list`) or `package.module:callable`.",
        default="murmur2",
    )
    guard_policy: str = _doc(
        "What the co-partitioning guard does on a problem: `warn` or `fail`.", default="warn"
    )
    web_host: str = _doc("Address the worker's web server binds.", default="127.0.0.1")
    web_port: int = _doc("Port of the worker's web server.", default=6066)
    web_token: str = _doc("Bearer token required by the web views; empty = none.", default="")
    web_table_blueprint: bool = _doc(
        "Expose Faust's raw table blueprint (`/table/...`) on the web server.", default=False
    )
    metrics: bool = _doc(
        "Serve Prometheus metrics at `/metrics`, and measure what only they need (batch times, misplaced keys, "
        "commit times, the cause of each join miss); false: `/metrics` is not served and none of it runs, so the "
        "co-partitioning verdict no longer follows misplaced keys as they arrive (only partition count changes).",
        default=True,
    )
    data_dir: str = _doc("Directory for the worker's RocksDB tables.", default="./data")
    ksqldb_endpoint: str = _doc(
        "ksqlDB REST endpoint, e.g. http://localhost:8088; empty = none.", default=""
    )
    broker_session_timeout: float = _doc(
        "Consumer group session timeout in seconds: how long a dead worker keeps its partitions. At most the "
        f"worker's request timeout ({REQUEST_TIMEOUT_S:g} s), and at least the brokers' `group.min.session.timeout.ms` (6 s by default).",
        default=60.0,
    )
    broker_heap: str = _doc(
        "Heap of the Apache Kafka JVM that `streamapp broker`, the demo and the tests start (`-Xmx`); "
        f"at least {MIN_BROKER_HEAP_MIB}m, as its log cleaner alone takes 128 MiB.",
        default="512m",
    )
    kafka_unreachable_timeout: float = _doc(
        "Seconds the worker may go without reaching any Kafka broker before it logs so and "
        "its `/health` answers 503.",
        default=60.0,
    )
    kafka_unreachable_exit: float = _doc(
        "Seconds without reaching any Kafka broker after which the worker exits with status 3, "
        "so a supervisor restarts it; 0 = never.",
        default=300.0,
    )
    output_failure_exit: float = _doc(
        "Seconds a topic the worker writes may stay unwritable (deleted, not authorized, refused) before the worker "
        "exits with status 4, so a supervisor restarts it and it re-creates its topics; `/health` answers 503 "
        "after a few seconds of it. 0 = never (it waits for the topic).",
        default=180.0,
    )
    stop_timeout: float = _doc(
        "Seconds a stopping worker (SIGTERM) may take to finish its batch, commit and flush; past it, it leaves "
        "at once with status 5 (what was not committed is processed again after a restart). Keep it below the "
        "supervisor's grace period before SIGKILL (Kubernetes: 30 s).",
        default=25.0,
    )
    app_id: str = _doc("Faust application id (consumer group and changelog prefix).", default="streamapp")
    processing_guarantee: str = _doc(
        "The join outputs' delivery: `at_least_once` (a crash may repeat records) or `exactly_once` (Kafka "
        "transactions: outputs and orders offsets commit together; readers must read `read_committed`).",
        default="at_least_once",
    )
    # -- security: every Kafka client streamapp builds, and the ksqlDB REST API --------------------
    security_protocol: str = _doc(
        "How clients talk to Kafka: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`.", default="PLAINTEXT"
    )
    sasl_mechanism: str = _doc(
        "SASL mechanism (with a `SASL_*` protocol): `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.", default="PLAIN"
    )
    sasl_username: str = _doc("SASL user name (with a `SASL_*` protocol).", default="")
    sasl_password: str = _secret(
        f"SASL password: environment only, or the file `{env_name('sasl_password')}{FILE_SUFFIX}` names; never a flag, "
        "never shown."
    )
    ssl_cafile: str = _doc(
        "PEM file of the CA(s) that signed the brokers' certificates (with `SSL`/`SASL_SSL`); "
        "empty = the system's trust store.",
        default="",
    )
    ssl_certfile: str = _doc("PEM client certificate for mutual TLS (with `ssl_keyfile`).", default="")
    ssl_keyfile: str = _doc("PEM private key of `ssl_certfile` (unencrypted), for mutual TLS.", default="")
    ssl_check_hostname: bool = _doc(
        "Check that a broker's certificate names the host connected to (TLS).", default=True
    )
    ksqldb_username: str = _doc("ksqlDB REST API basic-auth user; empty = no authentication.", default="")
    ksqldb_password: str = _secret(
        f"ksqlDB REST API basic-auth password: environment only, or the file `{env_name('ksqldb_password')}"
        f"{FILE_SUFFIX}` names; never a flag, never shown."
    )
    ksqldb_cafile: str = _doc(
        "PEM file of the CA that signed the ksqlDB server's certificate (https); empty = the system's.", default=""
    )

    def __post_init__(self) -> None:
        if self.guard_policy not in GUARD_POLICIES:
            raise SettingsError(
                f"guard_policy={self.guard_policy!r}: expected one of {', '.join(GUARD_POLICIES)}"
            )
        if self.processing_guarantee not in PROCESSING_GUARANTEES:
            raise SettingsError(
                f"processing_guarantee={self.processing_guarantee!r}: expected one of {', '.join(PROCESSING_GUARANTEES)}"
            )
        if self.partitions < 1:
            raise SettingsError(f"partitions={self.partitions}: must be at least 1")
        if not 0 < self.web_port < 65536:
            raise SettingsError(f"web_port={self.web_port}: must be between 1 and 65535")
        if not self.bootstrap_servers.strip():
            raise SettingsError("bootstrap_servers is empty: give host:port[,host:port]")
        for server in servers_list(self.bootstrap_servers):
            host, colon, port = server.rpartition(":")
            if colon and not (host.strip("[]") and port.isdigit() and 0 < int(port) < 65536):
                raise SettingsError(f"bootstrap_servers={self.bootstrap_servers!r}: {server!r} is not host:port "
                                    "(a port from 1 to 65535; an IPv6 host in brackets, [::1]:9092)")
        if self.replication_factor < 1:
            raise SettingsError(f"replication_factor={self.replication_factor}: must be at least 1")
        if not 0 < self.broker_session_timeout <= REQUEST_TIMEOUT_S:  # also refuses nan
            raise SettingsError(
                f"broker_session_timeout={self.broker_session_timeout}: must be above 0 seconds "
                f"(Kafka's group.min.session.timeout.ms is 6 s by default) and at most the worker's request "
                f"timeout, {REQUEST_TIMEOUT_S:g} s"
            )
        if not self.web_host.strip():
            raise SettingsError("web_host is empty: give an address to bind, e.g. 127.0.0.1")
        heap = re.fullmatch(r"([0-9]+)([kKmMgG]?)", self.broker_heap)
        if not heap:
            raise SettingsError(f"broker_heap={self.broker_heap!r}: expected a JVM size such as 512m or 1g")
        if int(heap[1]) * _JVM_UNITS[heap[2].lower()] < MIN_BROKER_HEAP_MIB:
            raise SettingsError(f"broker_heap={self.broker_heap!r}: below {MIN_BROKER_HEAP_MIB}m, the least a Kafka "
                                f"broker starts with (its log cleaner alone takes 128 MiB)")
        if not self.kafka_unreachable_timeout > 0:
            raise SettingsError(f"kafka_unreachable_timeout={self.kafka_unreachable_timeout}: must be above 0 seconds")
        if self.kafka_unreachable_exit and not self.kafka_unreachable_exit >= self.kafka_unreachable_timeout:
            raise SettingsError(
                f"kafka_unreachable_exit={self.kafka_unreachable_exit}: must be 0 (never) or at least "
                f"kafka_unreachable_timeout ({self.kafka_unreachable_timeout})"
            )
        if not self.output_failure_exit >= 0:  # also refuses nan
            raise SettingsError(f"output_failure_exit={self.output_failure_exit}: must be 0 (never) or more seconds")
        if not 0 < self.stop_timeout < float("inf"):
            raise SettingsError(f"stop_timeout={self.stop_timeout}: must be above 0 seconds")
        self._check_security()

    def _check_security(self) -> None:
        """The security settings, each problem one line naming the setting (never its secret)."""
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise SettingsError(
                f"security_protocol={self.security_protocol!r}: expected one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise SettingsError(f"sasl_mechanism={self.sasl_mechanism!r}: expected one of {', '.join(SASL_MECHANISMS)}")
        if self.security_protocol in SASL_PROTOCOLS:
            if not self.sasl_username:
                raise SettingsError(f"sasl_username is empty: security_protocol={self.security_protocol} needs a user")
            if not self.sasl_password:
                raise SettingsError(
                    f"sasl_password is empty: security_protocol={self.security_protocol} needs it "
                    f"({env_name('sasl_password')} or {env_name('sasl_password')}{FILE_SUFFIX})"
                )
        tls_files = [name for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile") if getattr(self, name)]
        if tls_files and self.security_protocol not in TLS_PROTOCOLS:
            raise SettingsError(
                f"{tls_files[0]} is set but security_protocol={self.security_protocol} does not use TLS: "
                f"set security_protocol to SSL or SASL_SSL"
            )
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise SettingsError("ssl_certfile and ssl_keyfile go together (mutual TLS): give both or neither")
        for name in (*tls_files, *(["ksqldb_cafile"] if self.ksqldb_cafile else [])):
            _check_readable(name, getattr(self, name))
        if bool(self.ksqldb_username) != bool(self.ksqldb_password):
            raise SettingsError(
                f"ksqldb_username and ksqldb_password go together ({env_name('ksqldb_password')} or "
                f"{env_name('ksqldb_password')}{FILE_SUFFIX}): give both or neither"
            )

    @property
    def bootstrap_list(self) -> list[str]:
        return servers_list(self.bootstrap_servers)

    @property
    def exactly_once(self) -> bool:
        """``processing_guarantee=exactly_once``: outputs and offsets in one Kafka transaction a partition."""
        return self.processing_guarantee == "exactly_once"

    @property
    def kafka(self) -> KafkaAccess:
        """The servers and security every Kafka client is built from (see :mod:`streamapp.kafka.security`)."""
        return KafkaAccess(
            self.bootstrap_servers, self.security_protocol, self.sasl_mechanism, self.sasl_username,
            self.sasl_password, self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile, self.ssl_check_hostname,
        )

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = _secret_from_env(f.name, environ) if f.name in SECRETS else environ.get(env_name(f.name))
            if raw is not None:
                values[f.name] = _parse(f.name, f.type, raw)
        return cls(**values)

    def with_args(self, args: argparse.Namespace) -> "Settings":
        """Apply the settings flags :func:`add_arguments` gave the command and that were given (``None``: not
        given); a command's own option that shares a setting's name (``demo --partitioner``) is its own."""
        flags = set(getattr(args, FLAGS_DEFAULT, None) or ())
        changes = {
            f.name: getattr(args, f.name)
            for f in fields(self)
            if f.name in flags and f.name not in SECRETS and getattr(args, f.name, None) is not None
        }
        return self.replace(**changes)


def _secret_from_env(name: str, environ: Mapping[str, str]) -> str | None:
    """A secret from ``STREAMAPP_<NAME>`` or from the file ``STREAMAPP_<NAME>_FILE`` names (one trailing newline dropped)."""
    direct, path = environ.get(env_name(name)), environ.get(env_name(name) + FILE_SUFFIX)
    if path is None:
        return direct
    if direct is not None:
        raise SettingsError(f"{env_name(name)} and {env_name(name)}{FILE_SUFFIX} are both set: give one")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise SettingsError(f"{env_name(name)}{FILE_SUFFIX}={path!r}: cannot read it ({reason})") from None
    return text.removesuffix("\n").removesuffix("\r")


def _check_readable(name: str, path: str) -> None:
    if not os.path.isfile(path):
        raise SettingsError(f"{name}={path!r}: no such file")
    if not os.access(path, os.R_OK):
        raise SettingsError(f"{name}={path!r}: not readable by this user")


def _parse(name: str, type_name: Any, raw: str) -> Any:
    type_name = getattr(type_name, "__name__", type_name)
    try:
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
    except ValueError:
        raise SettingsError(f"{env_name(name)}={raw!r}: expected a {type_name}") from None
    if type_name == "bool":
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise SettingsError(f"{env_name(name)}={raw!r}: expected true or false")
    return raw


#: The parser default under which :func:`add_arguments` records the settings a command takes.
FLAGS_DEFAULT = "settings_flags"


def add_arguments(parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
    """Add a ``--flag`` for each setting (or for those in ``only``) to a CLI parser."""
    group = parser.add_argument_group(f"settings (also from {ENV_PREFIX}* environment variables)")
    if only is not None and "bootstrap_servers" in only:  # who names the brokers says how to reach them
        only = (*only, *KAFKA_SECURITY_FLAGS)
    taken = [f.name for f in fields(Settings) if (only is None or f.name in only) and f.name not in SECRETS]
    parser.set_defaults(**{FLAGS_DEFAULT: (*(parser.get_default(FLAGS_DEFAULT) or ()), *taken)})
    for f in fields(Settings):
        if f.name not in taken:
            continue
        flag = "--" + f.name.replace("_", "-")
        type_name = getattr(f.type, "__name__", f.type)
        kwargs: dict[str, Any] = {"dest": f.name, "default": None, "help": f.metadata["doc"]}
        if type_name == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = {"int": int, "float": float}.get(type_name, str)
            kwargs["metavar"] = f.name.upper()
        group.add_argument(flag, **kwargs)


def ensure_directory(path: Path, named: str, error: type[StreamappError]) -> None:
    """A directory we can write, created if missing; ``named`` is how the user gave it (``--data-dir x``).

    One check for every directory a user names: the broker's ``--data-dir`` and the worker's ``data_dir``.
    """
    if path.exists() and not path.is_dir():
        raise error(f"{named}: is a file, not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"{named}: cannot create it ({exc.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise error(f"{named}: not writable by this user")
