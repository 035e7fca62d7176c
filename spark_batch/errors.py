"""The reconciliation job's one error type: a bad option, a missing topic or file, named in one line."""
from __future__ import annotations

from streamapp.errors import StreamappError

#: A one-line message is cut here (Spark's messages can embed whole plans or schemas).
MESSAGE_LIMIT = 400


class ReconcileError(StreamappError):
    """Something the operator can fix; the CLI prints it on one line and exits 2."""


def one_line(exc: BaseException) -> str:
    """An exception from Spark or Py4J as one line that says what went wrong.

    ``str()`` of a ``Py4JJavaError`` starts with ``An error occurred while calling o71.parquet.``,
    which names no file and no reason: the Java exception and its root cause do.
    """
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            top, root = _first_line(str(java.toString())), java
            while root.getCause() is not None and root.getCause() != root:
                root = root.getCause()
            cause = _first_line(str(root.toString()))
            text = top if root == java or cause in top else f"{top} (caused by {cause})"
        except Exception:  # the JVM is gone: fall back to the Python side's text
            text = _first_line(str(exc))
    else:
        text = _first_line(str(exc))
    text = text or type(exc).__name__
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
