"""Checks shared by the profile file formats (host profile, nest profile).

Both are JSON objects with a ``format`` name and ``version``, tied to one model file
by ``model_path`` and ``model_sha256``; these helpers keep their messages identical.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from placement.errors import PlacementError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Bad = Callable[[str], PlacementError]


def is_nonnegative_number(value: Any) -> bool:
    """A finite real number >= 0 (not a bool): a time in seconds or a counter value."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def check_header(
    data: Any,
    path: Path,
    bad: Bad,
    *,
    kind: str,
    format_name: str,
    version: int,
    rerun: str,
    keys: Iterable[str],
    format_hints: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Object, ``format``, ``version`` and required ``keys``; returns ``data``.

    ``format_hints`` maps another format's name to a hint appended to the message,
    ``rerun`` is the command that measures the profile again.
    """
    if not isinstance(data, dict):
        raise bad("expected a JSON object")
    found_format = data.get("format")
    if found_format != format_name:
        # Only a string can name another known format (and a list is unhashable).
        hints = format_hints or {}
        hint = hints.get(found_format, "") if isinstance(found_format, str) else ""
        raise bad(f"'format' is not {format_name!r}{hint}")
    found = data.get("version")
    if found != version:
        raise PlacementError(
            f"{path}: {kind} format version {found!r} is not supported (expected"
            f" {version}); re-run `{rerun}` to measure it again"
        )
    for key in keys:
        if key not in data:
            raise bad(f"missing key {key!r}")
    return data


def check_model_fields(data: Mapping[str, Any], bad: Bad) -> tuple[str, str]:
    """The ``model_path`` and ``model_sha256`` of a profile, checked."""
    model_path, sha = data["model_path"], data["model_sha256"]
    if not isinstance(model_path, str):
        raise bad("'model_path' must be a string")
    if not isinstance(sha, str) or not _SHA256.match(sha):
        raise bad("'model_sha256' must be 64 lowercase hex digits")
    return model_path, sha


def check_model_match(
    *,
    kind: str,
    source: str | None,
    model_path: str,
    model_sha256: str,
    sha256: str,
    path_for_message: str,
    fresh_suffix: str,
    profile_flags: str = "",
) -> None:
    """Refuse a profile measured on a different model file (hash mismatch)."""
    if sha256 == model_sha256:
        return
    where = f"{kind} {source}" if source else f"the {kind}"
    # Suggest a fresh file next to the model rather than overwriting the other profile.
    fresh = Path(path_for_message).with_suffix(fresh_suffix)
    raise PlacementError(
        f"{where} was measured on {model_path} (sha256 {model_sha256[:12]}), "
        f"not on {path_for_message} (sha256 {sha256[:12]}); "
        f"re-run `placement profile {path_for_message}{profile_flags} -o {fresh}`"
    )
