"""Reading and atomically writing the project's text and JSON files.

Every reader turns any problem into a one-line :class:`PlacementError` naming the
file; every writer goes through a temp file and a rename, so a failure never leaves
half a file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from placement.errors import PlacementError


def write_text_atomic(path: Path, text: str, what: str) -> None:
    """Temp file beside ``path``, fsync, rename: a failure leaves no partial file."""
    directory = path.parent if str(path.parent) else Path(".")
    tmp_name = None
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=directory, prefix=f".{path.name}.", suffix=".tmp",
            delete=False,
        ) as fh:  # fmt: skip
            tmp_name = fh.name
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise PlacementError(f"{path}: cannot write {what} ({exc.strerror or exc})") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def write_json_atomic(
    path: str | Path, document: Any, what: str = "JSON", *, allow_nan: bool = False
) -> None:
    """Write ``document`` as indented JSON via :func:`write_text_atomic`.

    ``allow_nan=False`` (the default) refuses NaN/Infinity, which strict JSON readers
    (and :func:`parse_json`) reject.
    """
    try:
        text = json.dumps(document, indent=2, allow_nan=allow_nan) + "\n"
    except (TypeError, ValueError) as exc:
        raise PlacementError(f"{path}: cannot write {what} ({exc})") from None
    write_text_atomic(Path(path), text, what)


def read_text_file(path: Path, kind: str, expected: str) -> str:
    """The UTF-8 text of ``path``, a ``kind`` file; ``expected`` names it for a directory."""
    if not path.exists():
        raise PlacementError(f"{path}: no such {kind} file")
    if path.is_dir():
        raise PlacementError(f"{path}: is a directory, expected {expected}")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlacementError(f"{path}: cannot read {kind} ({exc})") from None


def parse_json(text: str, path: Path, what: str, number: str = "number") -> Any:
    """Parse strict JSON: NaN/Infinity are refused as not a valid ``number``."""

    def reject_constant(name: str) -> float:
        # json accepts NaN/Infinity by default; our files must not hold them.
        raise ValueError(f"{name} is not a valid {number}")

    try:
        return json.loads(text, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise PlacementError(f"{path}: not a JSON {what} ({reason})") from None


def read_json_file(path: Path, kind: str, what: str, number: str = "number") -> Any:
    """Read and parse the JSON ``kind`` file ``path`` (see :func:`parse_json`)."""
    text = read_text_file(path, kind, f"a {kind} .json file")
    return parse_json(text, path, what, number)
