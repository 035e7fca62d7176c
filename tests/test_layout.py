"""The package layout points one way: no module of streamapp imports one above it, and none imports the job or the agents.

Read from the source (ast), every import counted, those inside functions too, so a
lazy import cannot hide a dependency that points up.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "streamapp"
#: Bottom to top: a module may import its own layer and those below it, never one above.
LAYERS = ("errors", "templates", "settings", "partitioners", "model", "sql", "kafka", "copartition", "worker", "demo", "cli")
#: The package's entry points sit above every layer (``streamapp.app`` is the worker's app, built lazily).
TOP = len(LAYERS)
#: Packages beside streamapp that use it; streamapp never imports them.
USERS = ("spark_batch", "agents")


def layer_of(module: str) -> int:
    """``streamapp.kafka.admin`` -> the index of ``kafka``; the package itself and ``__main__`` -> TOP."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] == "__main__":
        return TOP
    return LAYERS.index(parts[1])


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if node.module is None:  # from . import x: each name may be a module
                found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
    return found


def violations() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for line, target in imported(path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if target.split(".")[0] in USERS:
                found.append(f"{where}: {source} imports {target} (it uses streamapp, not the reverse)")
            elif target.startswith("streamapp.") and layer_of(target) > layer_of(source):
                found.append(f"{where}: {source} imports {target}, a layer above it")
    return found


def test_every_module_is_in_a_layer() -> None:
    layers = {path.name for path in PACKAGE.iterdir() if path.is_dir() and (path / "__init__.py").exists()}
    layers |= {path.stem for path in PACKAGE.glob("*.py") if not path.stem.startswith("__")}
    assert layers == set(LAYERS)


def test_no_module_imports_one_above_it() -> None:
    assert violations() == []


@pytest.mark.parametrize("source, target, allowed", [
    ("streamapp.kafka.admin", "streamapp.copartition.fingerprint", False),
    ("streamapp.copartition.guard", "streamapp.kafka.admin", True),
    ("streamapp.demo.producer", "streamapp.worker.process", True),
    ("streamapp.worker.app", "streamapp.demo.ksqldb", False),
    ("streamapp", "streamapp.worker.app", True),
])
def test_the_rule_itself(source: str, target: str, allowed: bool) -> None:
    assert (layer_of(target) <= layer_of(source)) is allowed


#: The demo's columns: they live in its statements (streamapp/sql/seed.sql), the tests and the docs only.
DEMO_COLUMNS = re.compile(r"\b(product_id|unit_price|channel|age)\b", re.IGNORECASE)


def test_no_module_of_the_product_names_a_demo_column() -> None:
    """Every join-running part takes its columns from the declared plan (issue 33): none knows the demo's."""
    root = PACKAGE.parent
    named = [f"{path.relative_to(root)}:{n}" for part in ("streamapp", "agents", "spark_batch")
             for path in sorted((root / part).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if DEMO_COLUMNS.search(line)]
    assert named == []
    assert DEMO_COLUMNS.search((root / "streamapp" / "sql" / "seed.sql").read_text(encoding="utf-8"))
