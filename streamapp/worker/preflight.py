"""What the worker needs from its machine, checked before Faust starts: one line each, not a traceback.

Faust would find out later and worse: an address it cannot bind or a port in use
ends in a traceback from aiohttp, a data directory that is a file in one from RocksDB.
"""
from __future__ import annotations

import asyncio
import errno
import socket
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from ..errors import StreamappError
from ..kafka.admin import broker_configs
from ..kafka.security import aiokafka_options
from ..partitioners import PartitionerError, get_partitioner
from ..settings import Settings, ensure_directory, env_name


class PreflightError(StreamappError):
    """The machine cannot give the worker what a setting asks for; the message names the setting."""


def check_web_address(host: str, port: int) -> None:
    """The web server's address must be local and its port free (SO_REUSEADDR, as aiohttp binds)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise PreflightError(f"{env_name('web_host')}={host!r}: not an address this machine has ({reason})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PreflightError(
                    f"{env_name('web_port')}={port}: already in use on {host}; stop what listens there or "
                    f"choose another port"
                ) from None
            raise PreflightError(f"{env_name('web_host')}={host!r}: cannot listen there ({exc.strerror})") from None


def check_data_dir(path: Path) -> None:
    """RocksDB needs a directory it can write."""
    ensure_directory(path, f"{env_name('data_dir')}={str(path)!r}", PreflightError)


def check_partitioner(settings: Settings) -> None:
    """The partitioner places a key: a user's that fails or answers no partition stops the worker before it reads
    a record, not at its first output (one key tried: one that fails on some keys still fails there)."""
    try:
        get_partitioner(settings.partitioner)(b"streamapp-preflight", settings.partitions)
    except PartitionerError as exc:
        raise PreflightError(f"{env_name('partitioner')}={settings.partitioner!r}: {exc}") from None


#: The brokers' bounds of a consumer group's session timeout, in milliseconds.
SESSION_BOUNDS = ("group.min.session.timeout.ms", "group.max.session.timeout.ms")


def check_session_timeout(settings: Settings) -> None:
    """The brokers refuse a session timeout outside their bounds (InvalidSessionTimeoutError), and Faust asks again
    for ever: refused here in one line.  Brokers whose configs cannot be read are not judged."""
    try:
        bounds = broker_configs(settings.kafka, SESSION_BOUNDS)
    except StreamappError:  # not authorized to describe the cluster, or gone: the start-up says what is wrong
        return
    if len(bounds) < len(SESSION_BOUNDS):
        return
    low, high = (int(bounds[name]) / 1000 for name in SESSION_BOUNDS)
    if not low <= settings.broker_session_timeout <= high:
        raise PreflightError(
            f"{env_name('broker_session_timeout')}={settings.broker_session_timeout:g}: the brokers at "
            f"{settings.bootstrap_servers} take {low:g} to {high:g} s ({' and '.join(SESSION_BOUNDS)})")


def check_worker(settings: Settings) -> None:
    check_data_dir(settings.data_path)
    check_web_address(settings.web_host, settings.web_port)
    check_partitioner(settings)


#: Seconds the probe transaction may take; a healthy broker answers in about 0.5 s (docs/research/exactly-once.md).
TRANSACTIONS_TIMEOUT = 10.0


async def check_transactions(settings: Settings, timeout: float = TRANSACTIONS_TIMEOUT) -> None:
    """``processing_guarantee=exactly_once`` needs a broker that can do transactions: no silent downgrade.

    A probe transactional producer with an id of its own (never a partition's: that
    would fence the partition's owner) starts (InitProducerId, which needs the
    transaction coordinator and its state log) and runs one empty transaction.
    """
    named = f"{env_name('processing_guarantee')}=exactly_once"
    producer = AIOKafkaProducer(**aiokafka_options(settings.kafka),
                                transactional_id=f"{settings.app_id}-preflight-{uuid.uuid4().hex[:12]}")
    try:
        await asyncio.wait_for(_probe(producer), timeout)
    except asyncio.TimeoutError:
        raise PreflightError(
            f"{named}: the brokers at {settings.kafka} did not start a transaction within {timeout:.0f}s (is the "
            f"transaction state log available? transaction.state.log.replication.factor must not exceed the "
            f"brokers); use at_least_once or fix the cluster") from None
    except (KafkaError, OSError) as exc:
        raise PreflightError(
            f"{named}: the brokers at {settings.kafka} cannot do transactions ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); use at_least_once or fix the cluster") from None
    finally:
        try:
            await asyncio.wait_for(producer.stop(), 5.0)
        except Exception:  # noqa: BLE001 - the probe's connections only
            pass


async def _probe(producer: Any) -> None:
    await producer.start()
    await producer.begin_transaction()
    await producer.abort_transaction()
