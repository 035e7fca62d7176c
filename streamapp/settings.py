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
from typing import Any, Mapping, Sequence

from .errors import StreamappError

ENV_PREFIX = "STREAMAPP_"

GUARD_POLICIES = ("warn", "fail")


class SettingsError(StreamappError, ValueError):
    """A setting has a value streamapp cannot use; the message names it."""


def _doc(text: str, **kw: Any) -> Any:
    return field(metadata={"doc": text}, **kw)


@dataclass(frozen=True)
class Settings:
    bootstrap_servers: str = _doc(
        "Kafka bootstrap servers, comma separated host:port.", default="127.0.0.1:9092"
    )
    users_topic: str = _doc("Users table topic (ksqlDB `DEMO_USER`).", default="demo_user")
    orders_topic: str = _doc("Orders stream topic.", default="demo_user_orders")
    users_repartition_topic: str = _doc(
        "Users re-keyed by the join's partitioner, written by the Faust worker.",
        default="streamapp_user_repartition",
    )
    merged_topic: str = _doc(
        "Faust output of the direct join (mirrors `DEMO_USER_ORDERS_MERGED`).",
        default="streamapp_orders_merged",
    )
    merged_repartition_topic: str = _doc(
        "Faust output of the repartitioned join (mirrors `DEMO_USER_ORDERS_MERGED_REPARTITION`).",
        default="streamapp_orders_merged_repartition",
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
    data_dir: str = _doc("Directory for the worker's RocksDB tables.", default="./data")
    ksqldb_endpoint: str = _doc(
        "ksqlDB REST endpoint, e.g. http://localhost:8088; empty = none.", default=""
    )
    broker_session_timeout: float = _doc(
        "Consumer group session timeout in seconds: how long a dead worker keeps its partitions.",
        default=60.0,
    )
    broker_heap: str = _doc(
        "Heap of the Apache Kafka JVM that `streamapp broker`, the demo and the tests start (`-Xmx`).",
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
    app_id: str = _doc("Faust application id (consumer group and changelog prefix).", default="streamapp")

    def __post_init__(self) -> None:
        if self.guard_policy not in GUARD_POLICIES:
            raise SettingsError(
                f"guard_policy={self.guard_policy!r}: expected one of {', '.join(GUARD_POLICIES)}"
            )
        if self.partitions < 1:
            raise SettingsError(f"partitions={self.partitions}: must be at least 1")
        if not 0 < self.web_port < 65536:
            raise SettingsError(f"web_port={self.web_port}: must be between 1 and 65535")
        if not self.bootstrap_servers.strip():
            raise SettingsError("bootstrap_servers is empty: give host:port[,host:port]")
        if self.replication_factor < 1:
            raise SettingsError(f"replication_factor={self.replication_factor}: must be at least 1")
        if not self.broker_session_timeout > 0:  # also refuses nan
            raise SettingsError(
                f"broker_session_timeout={self.broker_session_timeout}: must be above 0 seconds "
                f"(Kafka's group.min.session.timeout.ms is 6 s by default)"
            )
        if not self.web_host.strip():
            raise SettingsError("web_host is empty: give an address to bind, e.g. 127.0.0.1")
        if not re.fullmatch(r"[0-9]+(?:[kKmMgG])?", self.broker_heap):
            raise SettingsError(f"broker_heap={self.broker_heap!r}: expected a JVM size such as 512m or 1g")
        if not self.kafka_unreachable_timeout > 0:
            raise SettingsError(f"kafka_unreachable_timeout={self.kafka_unreachable_timeout}: must be above 0 seconds")
        if self.kafka_unreachable_exit and not self.kafka_unreachable_exit >= self.kafka_unreachable_timeout:
            raise SettingsError(
                f"kafka_unreachable_exit={self.kafka_unreachable_exit}: must be 0 (never) or at least "
                f"kafka_unreachable_timeout ({self.kafka_unreachable_timeout})"
            )

    @property
    def bootstrap_list(self) -> list[str]:
        return [s.strip().removeprefix("kafka://") for s in self.bootstrap_servers.split(",") if s.strip()]

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
            raw = environ.get(env_name(f.name))
            if raw is not None:
                values[f.name] = _parse(f.name, f.type, raw)
        return cls(**values)

    def with_args(self, args: argparse.Namespace) -> "Settings":
        """Apply the CLI flags that were given (``None`` means not given)."""
        changes = {
            f.name: getattr(args, f.name)
            for f in fields(self)
            if getattr(args, f.name, None) is not None
        }
        return self.replace(**changes)


def env_name(field_name: str) -> str:
    return ENV_PREFIX + field_name.upper()


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
    group = parser.add_argument_group("settings (also from STREAMAPP_* environment variables)")
    taken = [f.name for f in fields(Settings) if only is None or f.name in only]
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


def documentation_table(commands: Mapping[str, Sequence[str]]) -> str:
    """The README's settings table, generated so it cannot drift from the code.

    ``commands`` maps a setting to the ``streamapp`` commands that take its flag
    (:func:`streamapp.cli.settings_commands`); a setting no command takes is environment only.
    """
    rows = ["| Setting | Environment variable | CLI flag | Default | Meaning |", "|---|---|---|---|---|"]
    for f in fields(Settings):
        takers = commands.get(f.name, ())
        flag = f"`--{f.name.replace('_', '-')}` ({', '.join(takers)})" if takers else "environment only"
        rows.append(f"| {f.name} | `{env_name(f.name)}` | {flag} | `{f.default}` | {f.metadata['doc']} |")
    return "\n".join(rows)


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
