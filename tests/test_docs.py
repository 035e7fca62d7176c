"""The docs site: built strictly, its reference pages generated from the code, and a newcomer's paths through it.

``mkdocs build --strict`` fails on a broken link, a missing page or a bad anchor (``validation`` in
mkdocs.yml). The settings and commands pages come from ``docs/gen_reference.py`` at each build; the
tests here fail when a setting or a flag has no description, and check the hand-written pages that
mirror the code (the HTTP routes, the layers). A real browser then follows the README's links.
"""
from __future__ import annotations

import ast
import functools
import html.parser
import http.server
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

from test_layout import LAYERS
from test_web_browser import Page, page  # noqa: F401  (the headless Chromium fixture)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
#: What a newcomer must find from the README within two clicks: (the README's words, the page, what it must show).
TASKS = (
    ("Run the demo", "tutorials/demo.md", "make demo"),
    ("Point the worker at your cluster", "how-to/real-cluster.md", "STREAMAPP_BOOTSTRAP_SERVERS"),
    ("Declare your own join", "tutorials/your-own-join.md", "STREAMAPP_STATEMENTS"),
    ("Read a reconciliation report", "tutorials/demo.md#read-the-reconciliation-report", "copartition_violation"),
)


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    warnings = [line for line in build.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert build.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(warnings or build.stderr.splitlines()[-20:])
    return out


class Ids(html.parser.HTMLParser):
    """Every id and every text of a built page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for name, value in attrs if name == "id" and value)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def built(site: Path, doc: str) -> Ids:
    """The built page of ``doc`` (``reference/cli.md``), parsed."""
    page_dir = site / ("" if doc == "index.md" else doc.removesuffix(".md"))
    parsed = Ids()
    parsed.feed((page_dir / "index.html").read_text(encoding="utf-8"))
    return parsed


def test_the_site_builds_strictly(site: Path) -> None:
    for doc in ("index.md", "reference/settings.md", "reference/cli.md", "RELIABILITY.md", "research/exactly-once.md"):
        assert (site / ("" if doc == "index.md" else doc.removesuffix(".md")) / "index.html").exists(), doc


def test_every_setting_and_flag_has_a_description() -> None:
    assert generator().undocumented() == [], "give each a description: the setting's _doc() or the flag's help="


def test_the_generated_pages_cover_every_setting_and_flag(site: Path) -> None:
    from dataclasses import fields

    from streamapp.settings import Settings, env_name

    settings = built(site, "reference/settings.md")
    for f in fields(Settings):
        assert f.name in settings.ids, f"the settings page has no section for {f.name}"
        assert env_name(f.name) in "".join(settings.text)
    cli_text = "".join(built(site, "reference/cli.md").text)
    for where, parser in generator().all_parsers():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert flag in cli_text, f"the commands page lacks {where} {flag}"


def test_the_http_api_page_has_every_route() -> None:
    from streamapp.worker.web.views import ROUTES

    page_text = (DOCS / "reference" / "http-api.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `(?:GET|POST) ([^`]+)`", page_text, flags=re.M))
    headings |= set(re.findall(r"`GET (/[^`]*)`", page_text))
    for path, _name, _view in ROUTES:
        assert path in headings, f"docs/reference/http-api.md does not describe {path}"


def test_the_architecture_picture_is_the_layout_tests_order() -> None:
    text = (DOCS / "explanation" / "architecture.md").read_text(encoding="utf-8")
    picture = text.split("```text", 1)[1].split("```", 1)[0]
    drawn = [word for line in picture.splitlines() if (word := line.strip().split(" ")[0]) in LAYERS]
    assert drawn == list(reversed(LAYERS)), "redraw docs/explanation/architecture.md from tests/test_layout.py LAYERS"


def readme_links() -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))


def test_the_readme_is_short_and_its_links_resolve(site: Path) -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150
    for link in readme_links():
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"
        if target.startswith("docs/") and target.endswith(".md"):
            page_ids = built(site, target.removeprefix("docs/")).ids
            assert not anchor or anchor in page_ids, f"README.md links to {link}: no such anchor in the built page"


def test_the_readme_counts_ksqldbs_cases_as_their_table_does() -> None:
    """The README's counts of ksqlDB's cases are those of docs/reference/ksqldb-tests.md (tests/test_qtt.py keeps it true)."""
    rings = re.findall(r"^\| (R0\+?|R1|R2|RN) \|", (DOCS / "reference" / "ksqldb-tests.md").read_text(encoding="utf-8"),
                       re.MULTILINE)
    stream_table, stream_stream, table_table = (sum(r in ring for r in rings) for ring in (("R0", "R0+"), ("R1",), ("R2",)))
    expected = (f"{stream_table + stream_stream + table_table} of ksqlDB's join test cases ({stream_table} stream–table, "
                f"{stream_stream} stream–stream, {table_table} table–table) and {rings.count('RN')} of its rejections")
    assert expected in README.read_text(encoding="utf-8")


def test_the_readme_names_each_task_with_a_link() -> None:
    text = README.read_text(encoding="utf-8")
    for words, doc, _shown in TASKS:
        line = next((line for line in text.splitlines() if words in line), None)
        assert line is not None, f"README.md does not say where to {words.lower()}"
        assert f"(docs/{doc})" in line, f"README.md's line for {words!r} does not link to docs/{doc}: {line}"



BENCHMARKS = ROOT / "benchmarks"
#: The columns of every table in benchmarks/README.md, in this order.
BENCHMARK_COLUMNS = ["what", "figure", "baseline (same run)", "goal", "command", "load", "date, commit"]


def benchmark_rows() -> list[tuple[int, dict[str, str]]]:
    """Every row of benchmarks/README.md's tables: (line number, {column: cell}); "the same" resolved."""
    rows: list[tuple[int, dict[str, str]]] = []
    header: list[str] | None = None
    previous = ""
    for number, line in enumerate((BENCHMARKS / "README.md").read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header, previous = cells, ""
            assert header == BENCHMARK_COLUMNS, f"benchmarks/README.md:{number}: a table's columns must be {BENCHMARK_COLUMNS}"
        elif not set(line) <= set("|-: "):
            assert len(cells) == len(header), f"benchmarks/README.md:{number}: {len(cells)} cells for {len(header)} columns"
            row = dict(zip(header, cells))
            if row["command"] == "the same":
                assert previous, f"benchmarks/README.md:{number}: 'the same' command, with no command above it"
                row["command"] = previous
            previous = row["command"] if row["command"] != "—" else ""
            rows.append((number, row))
    return rows


def benchmark_commands(text: str) -> list[list[str]]:
    """Each code span of ``text`` that runs a script of benchmarks/, as its words."""
    return [shlex.split(span) for span in re.findall(r"`([^`]*)`", text)
            if re.match(r"(\S*python\S* )?benchmarks/\S+\.py\b", span)]


def test_benchmarks_readme_is_short() -> None:
    assert len((BENCHMARKS / "README.md").read_text(encoding="utf-8").splitlines()) <= 200


def test_every_benchmark_command_runs_a_script_of_benchmarks_with_its_flags() -> None:
    commands = benchmark_commands((BENCHMARKS / "README.md").read_text(encoding="utf-8"))
    assert len(commands) >= 10
    for words in commands:
        script = BENCHMARKS.parent / next(word for word in words if word.startswith("benchmarks/"))
        assert script.is_file(), f"benchmarks/README.md runs {script.relative_to(ROOT)}, which does not exist"
        source = script.read_text(encoding="utf-8")
        unknown = [flag for flag in (word.split("=")[0] for word in words if word.startswith("--")) if f'"{flag}"' not in source]
        assert not unknown, f"benchmarks/README.md passes {unknown} to {script.name}, which takes no such flag"


def test_every_benchmark_row_has_its_command_load_date_and_commit() -> None:
    rows = benchmark_rows()
    assert rows, "benchmarks/README.md has no tables"
    changes = re.findall(r"^- ([0-9a-f]{7}(?:, [0-9a-f]{7})*):", (BENCHMARKS / "README.md").read_text(encoding="utf-8"), re.M)
    named = {commit for group in changes for commit in group.split(", ")}
    for number, row in rows:
        where = f"benchmarks/README.md:{number} ({row['what']})"
        assert all(row[column] for column in BENCHMARK_COLUMNS), f"{where}: an empty cell"
        if "not measured yet" in row["figure"]:
            assert row["goal"] != "none", f"{where}: a row 'not measured yet' is there for a goal; this one has none"
            continue
        assert len(benchmark_commands(row["command"])) == 1, f"{where}: its command must run one script of benchmarks/"
        assert re.search(r"\d", row["load"]), f"{where}: no machine load"
        date_commit = re.fullmatch(r"(\d{4}-\d\d-\d\d), ([0-9a-f]{7})(?:–([0-9a-f]{7}))?", row["date, commit"])
        assert date_commit, f"{where}: 'date, commit' must read 2026-11-26, 1234abc"
        named.update(commit for commit in date_commit.groups()[1:] if commit)
    checked = subprocess.run(["git", "cat-file", "--batch-check"], cwd=ROOT, capture_output=True, text=True,
                             input="".join(f"{commit}^{{commit}}\n" for commit in sorted(named))).stdout
    unknown = [line.split("^")[0] for line in checked.splitlines() if line.endswith(" missing")]
    assert not unknown, f"benchmarks/README.md names commits git does not know: {unknown}"


#: A module docstring says what the module is for and why, in a few lines; the explanation is a page of the
#: docs site (docs/explanation/), named in the docstring as "See docs/explanation/….md".
DOCSTRING_LINES = 20


def module_docstrings() -> dict[str, str]:
    """Every Python module of the project (tracked, or new and not ignored) that has a docstring, by path."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    docstrings = {}
    for path in sorted(set(listed)):
        if (ROOT / path).is_file():
            docstring = ast.get_docstring(ast.parse((ROOT / path).read_bytes(), path))
            if docstring:
                docstrings[path] = docstring
    return docstrings


def test_module_docstrings_are_short() -> None:
    docstrings = module_docstrings()
    assert "streamapp/worker/transport.py" in docstrings
    lines = {path: len(docstring.splitlines()) for path, docstring in docstrings.items()}
    too_long = sorted(f"{path} ({n} lines)" for path, n in lines.items() if n > DOCSTRING_LINES)
    assert not too_long, (f"module docstrings over {DOCSTRING_LINES} lines: keep what the module is for and why, "
                          f"and move the explanation to a page under docs/explanation/: {too_long}")


def test_the_pages_module_docstrings_point_to_exist(site: Path) -> None:
    pointed = [(path, link) for path, docstring in module_docstrings().items()
               for link in re.findall(r"\bSee (docs/[\w/.-]+\.md(?:#[\w-]+)?)", docstring)]
    assert ("streamapp/worker/transport.py", "docs/explanation/worker-internals.md#batch-delivery") in pointed
    for path, link in pointed:
        target, _, anchor = link.partition("#")
        assert (ROOT / target).is_file(), f"{path}'s docstring points to {target}, which does not exist"
        assert not anchor or anchor in built(site, target.removeprefix("docs/")).ids, f"{path}: no #{anchor} in {target}'s page"

@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def site_url(base: str, doc: str) -> str:
    path, _, anchor = doc.partition("#")
    return f"{base}/{path.removesuffix('.md')}/" + (f"#{anchor}" if anchor else "")


async def open_and_read(page: Page, url: str, anchor: str) -> dict[str, object]:  # noqa: F811
    await page.send("Page.navigate", url=url)
    # this url's document, not the page before it (navigating takes a moment to start)
    await page.wait(f"location.href.split('#')[0] === {json.dumps(url.split('#')[0])} "
                    "&& document.readyState === 'complete' && document.querySelector('article h1') !== null")
    return await page.eval(
        "({title: document.querySelector('article h1').textContent,"
        " text: document.querySelector('article').innerText,"
        f" anchor: {json.dumps(anchor)} === '' || document.getElementById({json.dumps(anchor)}) !== null}})"
    )


async def test_a_browser_reaches_each_task_from_the_readme(served: str, page: Page) -> None:  # noqa: F811
    """Click one: the README's link (its target in the built site). Click two at most: from the site's home page."""
    for words, doc, shown in TASKS:
        anchor = doc.partition("#")[2]
        landed = await open_and_read(page, site_url(served, doc), anchor)
        assert landed["anchor"], f"{words}: {doc} has no #{anchor}"
        assert shown in str(landed["text"]), f"{words}: {doc} does not show {shown!r}"

    await page.send("Page.navigate", url=f"{served}/")
    await page.wait("document.readyState === 'complete' && document.querySelector('article') !== null")
    home = json.dumps(f"{served}/")
    for words, doc, shown in TASKS:
        await page.send("Page.navigate", url=f"{served}/")
        # the home page itself, not the page the last click left (navigating takes a moment to start)
        await page.wait(f"location.href === {home} && document.readyState === 'complete' "
                        "&& document.querySelector('article a') !== null")
        href = site_url("", doc).lstrip("/")
        clicked = await page.eval(
            f"(() => {{ const a = [...document.querySelectorAll('article a')]"
            f".find(a => a.getAttribute('href') === {json.dumps(href)});"
            " if (!a) return false; a.click(); return true; })()"
        )
        assert clicked, f"the home page has no link to {href} ({words})"
        await page.wait(f"location.href.endsWith({json.dumps(href)}) && document.readyState === 'complete'")
        text = await page.eval("document.querySelector('article').innerText")
        assert shown in text, f"{words}: the page the home page links to does not show {shown!r}"
