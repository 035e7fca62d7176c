"""A real browser (Debian's headless Chromium, driven over the DevTools protocol) uses the worker's page.

It opens ``/`` on a running worker, types a user id into the lookup box, clicks
"Look up", and the test reads the row and its partition from the rendered page.
The screenshot is saved under the test's temporary directory.
"""
from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import pytest

from test_web_placement import rdkafka_partition
from test_web_views import (DIRECT, PARTITIONS, REPARTITIONED, USERS, Running, declared, get, produce_orders, wait_for,
                            wait_loaded)
from test_web_views import web_worker  # noqa: F401  (the module's worker fixture)
from workerkit import end_process

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--remote-debugging-port=0", "--window-size=1200,1400",
]


class Page:
    """The one page of a headless Chromium, over its DevTools websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self._ids = itertools.count(1)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self._ids)
        await self.ws.send_json({"id": call_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.ws.receive_json(), 30)
            if message.get("id") == call_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]

    async def eval(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait(self, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = await self.eval(expression)
            except AssertionError as exc:  # the page is between two documents: ask the next one
                if not any(m in str(exc) for m in NAVIGATING):
                    raise
                value = None
            if value:
                return value
            await asyncio.sleep(0.2)
        raise AssertionError(f"timed out waiting for {expression}")


#: What Chromium answers to a call that reached a page while it navigated away (its old document's context is gone).
NAVIGATING = ("Inspected target navigated or closed", "Cannot find context with specified id",
              "Execution context was destroyed")


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Page]:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: run `make test-deps` (apt-get install chromium)"
    profile = tmp_path / "chromium-profile"
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, "chromium did not start its DevTools server"
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
                targets = json.loads(await response.text())
            (target,) = [t for t in targets if t["type"] == "page"]
            async with session.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                yield Page(ws)
    finally:
        end_process(proc, 10)


async def test_browser_looks_up_a_user(web_worker: Running, page: Page, tmp_path: Path) -> None:  # noqa: F811
    await wait_loaded(web_worker, web_worker.url())
    order_partitions, _ = produce_orders(web_worker.settings, list(web_worker.users))
    missed = sum(1 for u, p in order_partitions.items() if web_worker.users[u][0] != p)

    async def counted() -> bool:
        totals = (await get(f"{web_worker.url()}/stats"))[1]["group"]["totals"]
        return totals["records"].get(web_worker.settings.orders_topic) == USERS

    await wait_for(counted, "the orders to be counted")
    user_id, (partition, value) = next(
        (u, pv) for u, pv in web_worker.users.items() if pv[0] != rdkafka_partition("murmur2", u.encode(), PARTITIONS)
    )
    await page.send("Page.navigate", url=f"{web_worker.url()}/#token={web_worker.settings.web_token}")
    await page.wait("document.readyState === 'complete' && document.getElementById('table-input').options.length === 2")
    await page.wait("document.getElementById('copartition').textContent.startsWith('Co-partitioned') "
                    "|| document.getElementById('copartition').textContent.startsWith('Not co-partitioned')")
    await page.eval(f"document.getElementById('table-input').value = {json.dumps(DIRECT)}; "
                    f"document.getElementById('key-input').value = {json.dumps(user_id)}; "
                    "document.getElementById('lookup-button').click(); true")
    await page.wait("!document.getElementById('result').hidden")
    shown = await page.eval(
        "({user: document.getElementById('result-key').textContent,"
        f" partition: document.getElementById('partition-{DIRECT}').textContent,"
        f" repartition: document.getElementById('partition-{REPARTITIONED}').textContent,"
        f" row: document.getElementById('value-{DIRECT}').textContent,"
        " verdict: document.getElementById('verdict').textContent,"
        " error: document.getElementById('error').textContent})"
    )
    screenshot = tmp_path / "lookup.png"
    shot = await page.send("Page.captureScreenshot", format="png")
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    assert shown["error"] == ""
    assert shown["user"] == user_id
    assert shown["partition"] == str(partition)
    assert shown["repartition"] == str(rdkafka_partition("murmur2", user_id.encode(), PARTITIONS))
    assert json.loads(shown["row"]) == declared(value)
    assert user_id in shown["verdict"] and f"table {DIRECT} has it in partition {partition}" in shown["verdict"]
    users_in_partition = sum(1 for p, _ in web_worker.users.values() if p == partition)
    await page.wait(f"!!document.getElementById('rows-in-{partition}') && "
                    f"document.getElementById('rows-in-{partition}').textContent === '{users_in_partition}'")
    orders_in = sum(1 for p in order_partitions.values() if p == partition)
    bar = await page.eval(f"(() => {{ const g = document.getElementById('bar-{web_worker.settings.merged_topic}-{partition}');"
                          " return [g.dataset.joined, g.dataset.missed]; })()")
    assert await page.eval(f"document.getElementById('records-in-{partition}').textContent") == str(orders_in)
    direct_hits = sum(1 for u, p in order_partitions.items() if p == partition and web_worker.users[u][0] == p)
    assert bar == [str(direct_hits), str(orders_in - direct_hits)]
    merged = await page.eval(
        "[...document.querySelectorAll('#stats tbody tr')].map(r => [...r.cells].map(c => c.textContent))"
    )
    direct = {row[0]: row[1:] for row in merged}[web_worker.settings.merged_topic]
    assert direct == [str(USERS - missed), str(missed), f"{100 * missed / USERS:.2f}%"]
    assert screenshot.stat().st_size > 10_000 and screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_browser_shows_the_error_for_a_wrong_token(web_worker: Running, page: Page) -> None:  # noqa: F811
    await page.send("Page.navigate", url=f"{web_worker.url()}/#token=wrong")
    await page.wait("document.readyState === 'complete' && !!document.getElementById('key-input')")
    await page.eval("document.getElementById('key-input').value = 'someone'; "
                    "document.getElementById('lookup-button').click(); true")
    error = await page.wait("document.getElementById('error').textContent")
    assert "bearer token" in error
    assert await page.eval("document.getElementById('result').hidden") is True
