"""The one exception type users see.

Every bad input (file, model, profile, hardware value, budget, solver) raises
:class:`PlacementError` with a single line that names the file, node or key at
fault. The CLI prints that line and exits non-zero, without a traceback.
"""


class PlacementError(Exception):
    """A user-facing error whose message is one self-explanatory line."""
