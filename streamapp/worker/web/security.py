"""aiohttp middlewares for the worker's web server: bearer token, read-only, JSON errors.

They wrap every route of the server, Faust's own blueprints included, so the
token also guards ``/router`` and (when enabled) ``/table``.  The HTML page and
its static files carry no data and stay public so a browser can load them and
then send the token with each API call.

The server changes nothing, so it takes GET only, with one exception: ``POST
/copartition/recheck`` runs the co-partitioning checks again (it reads Kafka,
so it is not a GET a crawler or a prefetch may follow).  It takes the token like
any route, and also the header :data:`REQUEST_HEADER`: a cross-site form cannot
send it, and a cross-site script cannot without a CORS preflight the server never
grants, so another site open in the same browser cannot make the worker sample Kafka.
"""
from __future__ import annotations

import hmac
import logging
import re
from typing import Awaitable, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from .params import WebInputError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC_PATHS = frozenset({"/", "/favicon.ico"})
PUBLIC_PREFIX = "/static/"
#: The one path that takes a writing method, and that method.
ACTIONS = {"/copartition/recheck": "POST"}
#: The header a POST must carry (any non-empty value); the page sends it.
REQUEST_HEADER = "X-Streamapp-Request"


def json_error(status: int, message: str, **extra: object) -> web.Response:
    return web.json_response({"error": message, "status": status, **extra}, status=status)


def token_ok(header: str | None, token: str) -> bool:
    """True when ``header`` is ``Bearer <token>``; constant-time so the token cannot be guessed by timing."""
    if not header or not header.startswith("Bearer "):
        return False
    # aiohttp decodes header bytes as UTF-8 with surrogate escapes: undo that, so any bytes compare (and fail).
    sent = header[len("Bearer "):].strip().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(sent, token.encode("utf-8", "surrogateescape"))


#: Where aiohttp's message of a refused request starts quoting the request's own bytes.
_REQUEST_BYTES = re.compile(r":? (?:bytearray\(|b['\"])")


class MalformedRequestFilter(logging.Filter):
    """aiohttp logs a request it cannot parse (a 100 kB URL, a bad header) with a traceback: make it one line.

    The client already got its 400 from aiohttp; the log only needs what was refused and why.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            # what the request held (a header's bytes: a bearer token's start) stays out of the log
            reason = _REQUEST_BYTES.split(str(exc.message), maxsplit=1)[0].strip().rstrip(":")
            record.msg, record.args = "refused a malformed HTTP request (%s %s)", (exc.code, reason[:200])
            record.exc_info = record.exc_text = None
        return True


def quiet_malformed_requests(logger: logging.Logger = logging.getLogger("aiohttp.server")) -> None:
    """Install :class:`MalformedRequestFilter` once on aiohttp's server logger."""
    if not any(isinstance(f, MalformedRequestFilter) for f in logger.filters):
        logger.addFilter(MalformedRequestFilter())


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIX)


def middlewares(token: str) -> list[Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]]:
    """The middlewares, outermost first: errors as JSON, then read-only, then the token."""

    @web.middleware
    async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except WebInputError as exc:
            return json_error(exc.status, str(exc), field=exc.field)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = json_error(exc.status, f"{exc.reason}: {request.method} {request.path}")
            if "Allow" in exc.headers:  # a route's 405 says which methods it takes (RFC 9110)
                response.headers["Allow"] = exc.headers["Allow"]
            return response
        except Exception as exc:
            log.exception("web request %s %s failed", request.method, request.path)
            return json_error(500, f"internal error ({type(exc).__name__}); see the worker log")

    @web.middleware
    async def read_only(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in READ_METHODS:
            if ACTIONS.get(request.path) != request.method:
                response = json_error(405, f"{request.method} is not allowed: this server is read-only (GET only, "
                                           f"but POST /copartition/recheck)")
                response.headers["Allow"] = ACTIONS.get(request.path, "GET, HEAD")
                return response
            if not request.headers.get(REQUEST_HEADER, "").strip():
                return json_error(403, f"{request.method} {request.path} needs the header {REQUEST_HEADER} "
                                       f"(the page sends it; a form from another site cannot)")
        return await handler(request)

    @web.middleware
    async def bearer_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        if token and not is_public(request.path) and not token_ok(request.headers.get("Authorization"), token):
            response = json_error(401, "missing or wrong bearer token: send 'Authorization: Bearer <token>'")
            response.headers["WWW-Authenticate"] = 'Bearer realm="streamapp"'
            return response
        return await handler(request)

    return [json_errors, read_only, bearer_token]
