"""Add up the counters of several workers: pure, so ``/stats`` for a group is one sum away."""
from __future__ import annotations

from typing import Any, Iterable


def merge(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum numbers leaf by leaf; keys present in any snapshot appear in the result.

    Each worker counts only the partitions it processed, so the sum is the
    group's count; a partition that moved between workers is counted by both
    for the records each processed, which is still each record once.
    """
    result: dict[str, Any] = {}
    for snap in snapshots:
        _add(result, snap)
    return result


def _add(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict):
            _add(into.setdefault(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            into[key] = into.get(key, 0) + value
