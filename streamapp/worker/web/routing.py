"""Send a request on to the worker that owns the data, or ask every worker: HTTP between workers.

The owner is decided by Faust's table routing (``app.router``); the request is
forwarded once, marked with :data:`ROUTED_FROM`, so two workers that briefly
disagree about the assignment cannot bounce a request between them forever.
While the group rebalances (a worker joins, leaves or dies) the owner a worker
knows of may be gone or may no longer hold the partition: :func:`route` then
asks again as the assignment settles, so the caller gets the new owner's answer,
not an error, for as long as a rebalance takes.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Iterable

import aiohttp
from aiohttp import web
from faust.types import AppT
from yarl import URL

ROUTED_FROM = "X-Streamapp-Routed-From"
FORWARD_TIMEOUT = aiohttp.ClientTimeout(total=10)


def same_url(a: str | URL, b: str | URL) -> bool:
    ua, ub = URL(str(a)), URL(str(b))
    return (ua.host, ua.port) == (ub.host, ub.port)


def self_url(app: AppT) -> str:
    return str(app.conf.canonical_url)


def routed_from(request: web.Request) -> str | None:
    return request.headers.get(ROUTED_FROM)


def _headers(app: AppT, request: web.Request) -> dict[str, str]:
    headers = {ROUTED_FROM: self_url(app), "Accept": "application/json"}
    if "Authorization" in request.headers:
        headers["Authorization"] = request.headers["Authorization"]
    return headers


#: Between two looks at the assignment while a lookup waits out a rebalance.
SETTLE_POLL = 0.25
#: Beyond the session timeout (the time the group takes to notice a dead worker): the rebalance itself.
SETTLE_MARGIN = 15.0
#: What a worker that is shutting down answers to a lookup it would have to forward.
STOPPING = "this worker is stopping; ask another worker of the group"


def raw_path(request: web.Request) -> str:
    """The request's path as the client sent it, escapes kept (a key's ``%2F`` stays in its segment)."""
    return request.raw_path.split("?", 1)[0]


async def forward(app: AppT, request: web.Request, owner: str) -> web.Response:
    """Ask ``owner`` the same question and return its answer unchanged."""
    target = URL(owner).with_path(raw_path(request), encoded=True).with_query(request.query)
    if app.should_stop:  # Faust closes its HTTP client as it stops
        raise web.HTTPServiceUnavailable(reason=STOPPING)
    try:
        async with app.http_client.get(target, headers=_headers(app, request), timeout=FORWARD_TIMEOUT) as response:
            return web.Response(body=await response.read(), status=response.status, content_type=response.content_type)
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise web.HTTPBadGateway(reason=f"the owner {owner} did not answer ({type(exc).__name__})") from None


async def route(app: AppT, request: web.Request, owner_of: Callable[[], str | None],
                here: Callable[[], Awaitable[web.Response]], what: str) -> web.Response:
    """Answer ``request`` where ``what`` lives: here (``here()``), or at the owner ``owner_of()`` names.

    ``owner_of`` is asked again after each miss: no owner yet (``None``), an owner that does
    not answer (it left or died) or one that answers 503 (the partition moved on while the
    request travelled). The wait is bounded by the session timeout plus a margin, the time the
    group takes to notice a dead worker and reassign; past it, one line: 503 or 502.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(app.conf.broker_session_timeout) + SETTLE_MARGIN
    me = self_url(app)
    while True:
        if app.should_stop:
            raise web.HTTPServiceUnavailable(reason=STOPPING)
        owner = owner_of()
        if owner is not None and same_url(owner, me):
            return await here()
        failure: web.HTTPException
        if owner is None:
            failure = web.HTTPServiceUnavailable(reason=f"{what} has no owner yet; retry in a few seconds")
        else:
            try:
                answer = await forward(app, request, owner)
            except web.HTTPBadGateway as exc:
                failure = exc
            else:
                if answer.status != web.HTTPServiceUnavailable.status_code:
                    return answer
                failure = web.HTTPServiceUnavailable(reason=f"{what}: the owner {owner} no longer holds it; "
                                                            "retry in a few seconds")
        if loop.time() + SETTLE_POLL > deadline:
            raise failure
        await asyncio.sleep(SETTLE_POLL)


async def _ask(app: AppT, request: web.Request, url: str, path: str, query: dict[str, str]) -> tuple[str, Any]:
    target = URL(url).with_path(path, encoded=True).with_query(query)
    try:
        async with app.http_client.get(target, headers=_headers(app, request), timeout=FORWARD_TIMEOUT) as response:
            if response.status != 200:
                return url, {"error": f"HTTP {response.status}", "status": response.status}
            return url, await response.json()
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        return url, {"error": f"unreachable: {type(exc).__name__}"}


async def gather(app: AppT, request: web.Request, urls: Iterable[str], path: str, query: dict[str, str]) -> dict[str, Any]:
    """``GET path?query`` on each of ``urls`` at once (``path`` escaped, as :func:`raw_path`); a worker that fails
    answers ``{"error": ...}``."""
    answers = await asyncio.gather(*(_ask(app, request, url, path, query) for url in urls))
    return dict(answers)


async def answer_forwarded(app: AppT, owner_of: Callable[[], str | None],
                           here: Callable[[], Awaitable[web.Response]], what: str) -> web.Response:
    """A request another worker forwarded here: answer it if ``what`` is still ours, else 503 so that worker asks again."""
    if app.should_stop:
        raise web.HTTPServiceUnavailable(reason=STOPPING)
    owner = owner_of()
    if owner is None or not same_url(owner, self_url(app)):
        raise web.HTTPServiceUnavailable(reason=f"{what} moved between workers while the request was routed; "
                                                "retry in a few seconds")
    return await here()


async def answer(app: AppT, request: web.Request, owner_of: Callable[[], str | None],
                 here: Callable[[], Awaitable[web.Response]], what: str) -> web.Response:
    """``request`` answered by the owner of ``what``: a client's is routed there (:func:`route`); one another worker
    forwarded is answered here while ``what`` is still ours (:func:`answer_forwarded`), so a request hops once."""
    if routed_from(request) is None:
        return await route(app, request, owner_of, here, what)
    return await answer_forwarded(app, owner_of, here, what)


def other_workers(app: AppT) -> list[str]:
    """Every other worker in the group that holds table partitions, from the assignment metadata."""
    me = self_url(app)
    return sorted(url for url in app.router.tables_metadata() if not same_url(url, me))
