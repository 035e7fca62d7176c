"""The reconciliation job's one error type: a bad option, a missing topic or file, named in one line."""
from __future__ import annotations

from streamapp.errors import StreamappError


class ReconcileError(StreamappError):
    """Something the operator can fix; the CLI prints it on one line and exits 2."""
