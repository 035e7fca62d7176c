"""How the planner refuses a statement: one :class:`PlanError` line that names the statement by its line.

Two kinds, kept apart because ksqlDB's QTT cases match on the first one's exact text: what ksqlDB itself rejects
(:func:`rejected`, with ksqlDB's own message) and what ksqlDB accepts and streamapp cannot run yet
(:func:`unsupported`, saying so).  See docs/reference/statements.md.
"""
from __future__ import annotations

from ..errors import StreamappError
from . import syntax as s


class PlanError(StreamappError, s.SqlError):
    """A statement ksqlDB rejects, or one streamapp cannot run yet: one line naming it, even where it quotes a
    name or a string that runs over lines."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.splitlines()))


def rejected(statement: s.Statement, message: str) -> PlanError:
    """What ksqlDB itself rejects, with ksqlDB's message."""
    return PlanError(f"{statement.label}: {message}")


def unsupported(statement: s.Statement, message: str) -> PlanError:
    """What ksqlDB accepts and streamapp does not run yet."""
    return PlanError(f"{statement.label}: not supported by streamapp yet: {message}")
