"""What the worker needs from its machine, checked before Faust starts: one line each, not a traceback.

Faust would find out later and worse: an address it cannot bind or a port in use
ends in a traceback from aiohttp, a data directory that is a file in one from RocksDB.
"""
from __future__ import annotations

import errno
import socket
from pathlib import Path

from ..errors import StreamappError
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


def check_worker(settings: Settings) -> None:
    check_data_dir(settings.data_path)
    check_web_address(settings.web_host, settings.web_port)
