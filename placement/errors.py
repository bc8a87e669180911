"""The one exception type users see.

Every bad input (file, model, profile, hardware value, budget, solver) raises
:class:`PlacementError` with a single line that names the file, node or key at
fault. The CLI prints that line and exits non-zero, without a traceback.
"""


class PlacementError(Exception):
    """A user-facing error whose message is one self-explanatory line."""


def raise_violations(violations: list[str]) -> None:
    """A failed independent verification as one line: the first violation and a count."""
    if violations:
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        raise PlacementError(f"verification failed: {violations[0]}{more}")
