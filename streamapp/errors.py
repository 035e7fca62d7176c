"""The one exception type the CLI turns into a one-line message instead of a traceback."""
from __future__ import annotations


class StreamappError(Exception):
    """An error a user can act on; its message names the field, value or resource at fault."""
