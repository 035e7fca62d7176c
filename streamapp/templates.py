"""The one way streamapp renders HTML: Jinja2 with autoescape on and undefined names an error.

Every page (the reconciliation report, the doctor's report, the worker's picture) draws
topic names, keys and values that came off Kafka, so escaping is not a per-page choice; and
a template naming a field the data lacks should fail in the tests, not render an empty cell.
"""
from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def environment(package: str, folder: str = "templates") -> Environment:
    """The Jinja2 environment for the templates shipped in ``package``'s ``folder``: built on the first render, then
    kept (Jinja2 caches its compiled templates in it), never at import."""
    return Environment(loader=PackageLoader(package, folder), autoescape=True, undefined=StrictUndefined,
                       keep_trailing_newline=True)
