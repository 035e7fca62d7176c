"""Is each endpoint the producer was given reachable?  Said once, up front, for people.

Kafka is reachable when it answers Metadata; an HTTP endpoint (Control Center,
ksqlDB) when it answers HTTP at all, since even a 404 proves something listens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import StreamappError
from ..kafka.broker import metadata_ok

HTTP_TIMEOUT = 3.0


class EndpointError(StreamappError):
    """An endpoint option is not a usable URL; the message names the option and value."""


@dataclass(frozen=True)
class Endpoint:
    name: str
    address: str
    reachable: bool
    detail: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "address": self.address, "reachable": self.reachable, "detail": self.detail}


def validate_http_url(option: str, url: str) -> str:
    """``url`` without a trailing slash, or an error naming ``option`` when it is not http(s)://host[:port]."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(f"{option}={url!r}: expected http://host:port or https://host:port")
    try:
        parts.port
    except ValueError:
        raise EndpointError(f"{option}={url!r}: the port is not a number between 0 and 65535") from None
    return url.rstrip("/")


def check_kafka(bootstrap: str, timeout: float = HTTP_TIMEOUT) -> Endpoint:
    ok = metadata_ok(bootstrap, timeout=timeout)
    return Endpoint("Kafka", str(bootstrap), ok, "answers Metadata" if ok else "no Metadata answer")


def check_http(name: str, url: str, path: str = "/", timeout: float = HTTP_TIMEOUT, **http: Any) -> Endpoint:
    try:
        response = httpx.get(url + path, timeout=timeout, **http)
    except httpx.HTTPError as exc:
        return Endpoint(name, url, False, str(exc) or type(exc).__name__)
    return Endpoint(name, url, True, f"HTTP {response.status_code} on {path}")
