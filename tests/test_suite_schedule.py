"""How ``make test`` splits the suite between its two processes (tests/conftest.py's :class:`ModuleScheduling`).

It rests on one private name of pytest-xdist, ``LoadScopeScheduling._split_scope``: the unit of work a test
belongs to. If xdist stopped calling it, the override would be ignored silently and the security modules
would start the secured broker in both processes.
"""
from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

from conftest import SECURED_MODULES, ModuleScheduling, work_unit

TESTS = Path(__file__).resolve().parent


def test_xdist_splits_its_work_units_by_the_method_overridden() -> None:
    assert "_split_scope" in vars(LoadScopeScheduling)
    assert inspect.getsource(LoadScopeScheduling.schedule).count("self._split_scope(nodeid)") == 1
    unbuilt = object.__new__(ModuleScheduling)  # built, it wants xdist's workers (--tx)
    assert unbuilt._split_scope("tests/test_security_broker.py::test_a") == SECURED_MODULES


def test_a_module_is_one_unit_and_the_security_modules_are_one_together() -> None:
    assert work_unit("tests/test_demo.py::test_a[x::y]") == work_unit("tests/test_demo.py::test_b") == \
        "tests/test_demo.py"
    assert {work_unit(f"tests/test_security_{name}.py::test_c") for name in ("broker", "protocols")} == \
        {SECURED_MODULES}


def test_the_suite_is_collected_long_modules_first_each_module_whole() -> None:
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             str(TESTS)], capture_output=True, text=True, cwd=TESTS.parent, timeout=120)
    modules = [line.split("::")[0] for line in listed.stdout.splitlines() if "::" in line]
    runs = [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
    assert len(runs) == len(set(runs)) > 100, runs  # each module's tests together
    long = {path.relative_to(TESTS.parent).as_posix() for path in TESTS.glob("test_*.py")
            if re.search(r"^pytestmark = pytest\.mark\.long$", path.read_text(encoding="utf-8"), re.M)}
    assert len(long) > 10 and set(runs[:len(long)]) == long
