"""The one exception type users see.

Every bad input (file, model, profile, hardware value, budget, solver) raises
:class:`PlacementError` with a single line that names the file, node or key at
fault. The CLI prints that line and exits non-zero, without a traceback.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

H = TypeVar("H", bound=Hashable)


class PlacementError(Exception):
    """A user-facing error whose message is one self-explanatory line."""


def raise_violations(violations: list[str]) -> None:
    """A failed independent verification as one line: the first violation and a count."""
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise PlacementError(f"verification failed: {violations[0]}{more}")


def repeated(values: Iterable[H]) -> list[H]:
    """The values that occur more than once, each once, in order: what a "given twice"
    message names (a grid that would run the same point twice is refused, not shrunk)."""
    seen: set[H] = set()
    twice: list[H] = []
    for value in values:
        if value in seen and value not in twice:
            twice.append(value)
        seen.add(value)
    return twice


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (or its type's name)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
