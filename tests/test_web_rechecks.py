"""The co-partitioning checks on the worker's page run again once keyed records arrive, and on demand.

A fresh worker (`faust -A streamapp worker`, the session's Apache Kafka broker,
topics it creates itself, empty) is opened in headless Chromium at 1280 px.  Its
guard could not check the partitioners (no keyed records): the page says so.
Then ten users are produced by librdkafka's ``consistent`` (crc32) partitioner
and one order each by ``murmur2`` (ksqlDB's): once the worker's ``/stats`` has
counted them and its ``/copartition`` says the checks ran again, the page shows
every check run, the doctor's verdict for the worker's pairs (the direct pair
broken, its predicted miss rate the share of users the broker put in another
partition than their order, a fix), the placement grid drawn from the same
delivery reports, and no horizontal overflow.  The "Run the checks again" button
runs them once more.  The pure parts (when to run, the grid, the SVG) are tested
without a broker below.
"""
from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from streamapp.copartition.doctor import TopicSample, topic_report
from streamapp.kafka.broker import EmbeddedBroker, free_port
from streamapp.settings import Settings
from streamapp.worker.process import WorkerProcess
from streamapp.worker.web.picture import layout
from streamapp.worker.web.rechecks import placement_matrix, recheck_reason, undecided_topics
from test_web_browser import Page, page  # noqa: F401  (the browser fixture)
from test_web_views import TOKEN, Running, get, produce_orders, produce_users, unique_settings, wait_for

USERS = 10
WIDTH = 1280


def long_names(broker: EmbeddedBroker, tmp_path: Path) -> Settings:
    """Unique settings whose output topics are as long as the defaults (their names head the counters)."""
    settings = unique_settings(broker, tmp_path, TOKEN)
    tag = settings.app_id.rsplit("-", 1)[-1]
    return settings.replace(web_port=free_port(), merged_topic=f"streamapp_orders_merged_{tag}",
                            merged_repartition_topic=f"streamapp_orders_merged_repartition_{tag}")


@pytest.fixture
def fresh_worker(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Running]:
    settings = long_names(broker, tmp_path)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start(timeout=120)
    try:
        yield Running(settings, [worker], {})
    finally:
        assert worker.stop() == 0, worker.tail()


async def post(url: str, token: str | None = TOKEN, header: bool = True) -> tuple[int, Any]:
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if header:
        headers["X-Streamapp-Request"] = "test"
    async with aiohttp.ClientSession() as session:
        async with session.post(url, headers=headers, timeout=aiohttp.ClientTimeout(total=60)) as response:
            return response.status, await response.json()


def text(element_id: str) -> str:
    return f"(document.getElementById({element_id!r}) || {{textContent: ''}}).textContent"


async def no_overflow(page: Page) -> dict[str, int]:  # noqa: F811
    return await page.eval("({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,"
                           " inner: window.innerWidth})")


async def test_checks_run_again_once_keyed_records_arrive_and_on_demand(
        fresh_worker: Running, page: Page, tmp_path: Path) -> None:  # noqa: F811
    url, s = fresh_worker.url(), fresh_worker.settings
    await page.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=900, deviceScaleFactor=1, mobile=False)
    await page.send("Page.navigate", url=f"{url}/#token={TOKEN}")
    await page.wait(f"{text('copartition')}.includes('could not run yet')")
    status, before = await get(f"{url}/copartition")
    assert status == 200 and any(c["ok"] is None for c in before["checks"]), before
    assert f"partitioner of {s.orders_topic}" in [c["name"] for c in before["checks"] if c["ok"] is None]

    # The worker's first look: the doctor has nothing keyed to judge either.
    async def doctor_ran() -> Any:
        body = (await get(f"{url}/copartition"))[1]
        return body if body["doctor"] is not None else None

    first = await wait_for(doctor_ran, "the doctor's first run")
    assert all(p["status"] == "unknown" for p in first["doctor"]["pairs"] if p["joined_by"]), first["doctor"]
    await page.wait(f"{text('doctor-verdict')}.includes('not decided yet')")

    users = produce_users(s, USERS, partitioner="consistent")

    async def counted(group: str, topic: str) -> bool:
        return (await get(f"{url}/stats"))[1]["group"]["totals"][group].get(topic) == USERS

    await wait_for(lambda: counted("rows", s.users_repartition_topic), "the worker to load the users in both tables")
    order_partitions, _ = produce_orders(s, list(users))
    await wait_for(lambda: counted("records", s.orders_topic), "the worker to count the orders")

    async def rechecked() -> Any:
        body = (await get(f"{url}/copartition"))[1]
        decided = all(c["ok"] is not None for c in body["checks"])
        return body if decided and body["doctor"] and body["runs"]["reason"].startswith("keyed records") else None

    after = await wait_for(rechecked, "the checks to run again on the keyed records")
    apart = sum(1 for u, (q, _) in users.items() if order_partitions[u] != q)
    assert apart > 0, "every crc32 partition equals murmur2's: choose other users"
    assert after["ok"] is False and after["verdict"].startswith("Not co-partitioned")
    pairs = {(p["left"], p["right"]): p for p in after["doctor"]["pairs"] if p["joined_by"]}
    direct = pairs.get((s.orders_topic, s.users_topic)) or pairs[(s.users_topic, s.orders_topic)]
    assert direct["status"] == "broken" and direct["shared_keys"] == USERS
    assert direct["partition_miss_rate"] == round(apart / USERS, 4) and direct["fixes"], direct

    # The page: every check run, the doctor's verdict and fix for its pairs, the grid. The page shows the report of its
    # own last refresh, which may be one where the verdict was already known but a check had not run yet.
    await page.wait(f"!{text('copartition')}.includes('could not run yet') && "
                    f"{text('copartition')}.startsWith('Not co-partitioned') && "
                    f"!{text('guard-checks')}.includes('could not run yet')")
    await page.wait(f"{text('doctor-verdict')}.includes('broken')")
    row_id = f"doctor-pair-{direct['left']}-{direct['right']}"
    shown = await page.eval(f"[...document.getElementById({row_id!r}).cells].map(c => c.textContent)")
    assert shown[1] == "broken" and shown[2] == f"{100 * direct['miss_rate']:.1f}% of {USERS} keys"
    assert shown[4] and shown[4] != "none needed" and shown[4].split("\n")[0] == direct["fixes"][0]["text"]
    assert "could not run yet" not in await page.eval(text("guard-checks"))
    await page.wait("!!document.querySelector('#stats-picture svg') && "
                    "document.getElementById('records-in-0').textContent !== ''")
    grid = Counter((order_partitions[u], q) for u, (q, _) in users.items())
    cells = await page.eval(
        "Object.fromEntries([...document.querySelectorAll('#counters-picture g[id^=cell-]')]"
        ".map(g => [g.id, [g.getAttribute('class'), g.querySelector('text') ? g.querySelector('text').textContent : '0']]))")
    n = s.partitions
    assert len(cells) == n * n
    for p in range(n):
        for q in range(n):
            kind, count = cells[f"cell-{p}-{q}"]
            assert int(count) == grid[(p, q)], (p, q, cells)
            assert kind == ("none" if not grid[(p, q)] else "hit" if p == q else "miss")
    for p in range(n):  # the bars: what the worker counted, the direct join finding exactly the diagonal
        orders_in = sum(1 for q in order_partitions.values() if q == p)
        bar = await page.eval(f"(() => {{ const g = document.getElementById('bar-{s.merged_topic}-{p}');"
                              " return [g.dataset.joined, g.dataset.missed]; })()")
        assert bar == [str(grid[(p, p)]), str(orders_in - grid[(p, p)])], (p, bar)
        assert await page.eval(text(f"records-in-{p}")) == str(orders_in)
    users_in = Counter(q for q, _ in users.values())
    assert [await page.eval(text(f"rows-in-{q}")) for q in range(n)] == [str(users_in[q]) for q in range(n)]
    size = await no_overflow(page)
    assert size["inner"] == WIDTH and size["scroll"] <= size["client"], size
    shot = await page.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    (tmp_path / "rechecked.png").write_bytes(base64.b64decode(shot["data"]))
    box = await page.eval("(() => { const r = document.getElementById('stats-picture').getBoundingClientRect();"
                          " return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height, scale: 1}; })()")
    shot = await page.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=box)
    (tmp_path / "picture.png").write_bytes(base64.b64decode(shot["data"]))

    # On demand, from the page.
    count = int(await page.eval("document.getElementById('recheck-line').dataset.count"))
    await page.eval("document.getElementById('recheck-button').click(); true")
    await page.wait(f"Number(document.getElementById('recheck-line').dataset.count) > {count} && "
                    f"{text('recheck-line')}.includes('asked for on the page')")
    assert (await get(f"{url}/copartition"))[1]["runs"]["count"] > count


async def test_recheck_takes_post_with_token_and_header_only(fresh_worker: Running) -> None:
    url = fresh_worker.url()
    status, body = await post(f"{url}/copartition/recheck", token=None)
    assert status == 401 and "bearer token" in body["error"]
    status, body = await post(f"{url}/copartition/recheck", header=False)
    assert status == 403 and "X-Streamapp-Request" in body["error"]
    status, body = await post(f"{url}/copartition/recheck")
    assert status == 200 and body["runs"]["reason"] == "asked for on the page" and body["doctor"] is not None
    assert (await get(f"{url}/copartition/recheck"))[0] == 405
    status, body = await post(f"{url}/copartition")
    assert status == 405 and "read-only" in body["error"]
    status, svg = await get(f"{url}/stats/picture")
    assert status == 200 and svg.startswith("<svg") and "counters-picture" in svg
    assert (await get(f"{url}/stats/picture", token=None))[0] == 401


GUARD_SKIPPED = {"checks": [{"name": "partitions o × u", "ok": True, "message": ""},
                            {"name": "partitioner of o", "ok": None, "message": "no keyed records"}]}


def test_recheck_reason() -> None:
    assert recheck_reason(None, None, {"o": 5}, None) is None  # the guard has not run
    assert recheck_reason(GUARD_SKIPPED, None, {"o": 0}, None) == "the worker started"
    assert recheck_reason(GUARD_SKIPPED, None, {"o": 0, "u": 3}, {"o": 0, "u": 0}) is None  # u was decided
    assert recheck_reason(GUARD_SKIPPED, None, {"o": 2, "u": 3}, {"o": 0, "u": 0}) == "keyed records of o were read"
    decided = {"checks": [{**c, "ok": True} for c in GUARD_SKIPPED["checks"]]}
    assert recheck_reason(decided, None, {"o": 9}, {"o": 2}) is None
    doctor = {"pairs": [{"left": "o", "right": "u", "joined_by": ["worker:direct"], "status": "unknown"},
                        {"left": "o", "right": "x", "joined_by": [], "status": "unknown"}]}
    assert undecided_topics(decided, doctor, ["o", "u", "x"]) == ["o", "u"]
    prefix = {"checks": [{"name": "partitioner of users_repartition", "ok": None, "message": ""}]}
    assert undecided_topics(prefix, None, ["users", "users_repartition"]) == ["users_repartition"]
    assert recheck_reason(decided, doctor, {"o": 2, "u": 4}, {"o": 2, "u": 3}) == "keyed records of u were read"
    assert recheck_reason(decided, doctor, {"o": 0, "u": 4}, {"o": 0, "u": 3}) is None  # the pair's other side is empty
    one_side = {"checks": [{"name": "partitioner of u", "ok": None, "message": ""}]}
    assert recheck_reason(one_side, doctor, {"o": 0, "u": 4}, {"o": 0, "u": 3}) == "keyed records of u were read"


def test_placement_matrix_and_picture_escape_names() -> None:
    orders = topic_report(TopicSample("o", 2, [(b"a", 0), (b"b", 1), (b"c", 1), (None, 0)]))
    users = topic_report(TopicSample("u", 3, [(b"a", 0), (b"b", 2), (b"c", 1), (b"z", 0)]))
    assert placement_matrix(orders, users) == [[1, 0, 0], [0, 1, 1]]
    assert placement_matrix(orders, None) is None
    group = {"rows": {"u": {"0": 2}}, "records": {"<o>": {"0": 1, "1": 2}}, "joined": {"<out>": {"0": 1, "1": 1}},
             "missed": {"<out>": {"1": 1}}, "dead_lettered": {}}
    svg = layout(group, "<o>", "u", ["<out>"], 2, placement_matrix(orders, users)).render()
    assert "<out>" not in svg and "&lt;out&gt;" in svg and "<o>" not in svg and "&lt;o&gt; partition" in svg
    assert '<text id="records-in-1"' in svg and '>2</text>' in svg and '<text id="rows-in-0"' in svg
    assert 'id="cell-1-2" class="miss"' in svg and 'id="cell-0-0" class="hit"' in svg
    assert 'data-joined="1" data-missed="1"' in svg
