"""The project's files: atomic writes, strict JSON, format headers, model hashes.

Every reader turns any problem into a one-line :class:`PlacementError` naming the
file; every writer goes through a temp file and a rename, so a failure never leaves
half a file behind. The profile formats (host profile, nest profile) are JSON objects
with a ``format`` name and ``version``, tied to one model file by ``model_path`` and
``model_sha256``; the checks below keep their messages identical.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import math
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from placement.errors import PlacementError

#: Filesystems whose entries are the kernel's (or devices), not files: nothing is written
#: there (a mkdir under /proc fails with "No such file or directory", and an atomic
#: write into /dev as root would replace a device node with a file).
SPECIAL_FILESYSTEMS = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs",
    "securityfs", "pstore", "bpf", "configfs", "fusectl", "mqueue", "binfmt_misc",
    "efivarfs", "selinuxfs", "autofs", "hugetlbfs", "rpc_pipefs", "nsfs",
})  # fmt: skip
_MOUNTS = Path("/proc/self/mounts")


def special_filesystem(path: str | Path) -> str | None:
    """The type of the special filesystem ``path`` is on (e.g. ``"proc"``), or None.

    Decided by the deepest mount point enclosing the resolved path (``/proc/self/mounts``;
    None where that cannot be read, e.g. off Linux)."""
    try:
        lines = _MOUNTS.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    target = Path(path).resolve()
    best, best_type = "", ""
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        # Spaces and tabs in mount points are written as octal escapes (\040, \011).
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        mount = Path(point)
        if (target == mount or mount in target.parents) and len(point) >= len(best):
            best, best_type = point, fields[2]
    return best_type if best_type in SPECIAL_FILESYSTEMS else None


def _check_place(directory: Path, where: str) -> None:
    """An existing directory that may receive files: not on a special filesystem, writable."""
    special = special_filesystem(directory)
    if special is not None:
        raise PlacementError(
            f"{where}: {directory} is on the special filesystem {special} (kernel or device"
            " entries, not files); choose another directory"
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PlacementError(f"{where}: directory {directory} is not writable")


def _existing_ancestor(path: Path) -> Path:
    """The nearest of ``path`` and its parents that exists (``.`` for a relative path)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(".")


def check_output_file(path: str | Path, label: str | None = None) -> Path:
    """``path`` as a Path if a file can be written there: not a directory, in an existing,
    writable directory that is not on a special filesystem (``/proc``, ``/sys``, ``/dev``).
    Otherwise a one-line PlacementError starting with ``label`` (default: the path), so
    that commands fail before their real work."""
    path = Path(path)
    where = label or str(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise PlacementError(f"{where}: is a directory")
    if not parent.is_dir():
        blocker = _existing_ancestor(parent)
        if blocker.exists() and not blocker.is_dir():
            raise PlacementError(f"{where}: {blocker} is a file, not a directory")
        raise PlacementError(f"{where}: directory {parent} does not exist")
    _check_place(parent, where)
    return path


def check_output_dir(path: str | Path, label: str | None = None, *, parents: bool = False) -> Path:
    """``path`` as a Path if it is, or can be created as, a writable directory of files:
    not an existing file, not on a special filesystem; its parent must exist unless
    ``parents`` (then the nearest existing ancestor must be a directory). Nothing is
    created. Otherwise a one-line PlacementError starting with ``label``."""
    path = Path(path)
    where = label or str(path)
    if path.exists() and not path.is_dir():
        raise PlacementError(f"{where}: exists and is not a directory")
    if path.is_dir():
        _check_place(path, where)
        return path
    parent = path.parent if str(path.parent) else Path(".")
    existing = _existing_ancestor(parent)
    if existing.exists() and not existing.is_dir():
        raise PlacementError(f"{where}: {existing} is a file, not a directory")
    if not parents and existing != parent:
        raise PlacementError(f"{where}: directory {parent} does not exist")
    _check_place(existing, where)
    return path


def missing_dirs(path: str | Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first: what
    ``mkdir(parents=True)`` creates, for :func:`remove_created` to undo."""
    out: list[Path] = []
    for candidate in (Path(path), *Path(path).parents):
        if candidate.exists() or not str(candidate) or str(candidate) == ".":
            break
        out.append(candidate)
    return out


def remove_created(files: Iterable[str | Path], dirs: Iterable[str | Path]) -> None:
    """Undo what a failed command created: delete ``files``, then each of ``dirs``
    (deepest first) that is left empty. Nothing else is touched."""
    for file in files:
        try:
            Path(file).unlink(missing_ok=True)
        except OSError:
            pass
    for directory in dirs:
        try:
            Path(directory).rmdir()  # only an empty directory
        except OSError:
            pass


#: Mode of every file this package writes, before the umask: what ``open()`` and the
#: shell give a new file (``tempfile`` would make it 0600 whatever the umask).
FILE_MODE = 0o666


#: Set by the command line's Ctrl-C handler. Once set, no output file is completed: a
#: library may swallow the KeyboardInterrupt the handler raises (a bare ``except`` around
#: an import), and the command would otherwise run on to its outputs.
INTERRUPTED = threading.Event()


@contextlib.contextmanager
def replacing(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """A new, empty temporary file beside ``path`` to write to; renamed over ``path`` when
    the block ends, removed when it fails, so a failure never leaves half a file.

    The file is created by ``os.open`` with :data:`FILE_MODE`: the kernel applies the
    umask, as for any other program's output (no process-wide ``os.umask`` call, which
    would race with other threads). ``suffix`` ends the temporary name (writers such as
    Pyomo's guess the format from it). Raises OSError.
    """
    directory = path.parent if str(path.parent) else Path(".")
    for _ in range(100):
        tmp = directory / f".{path.name}.{secrets.token_hex(4)}{suffix}"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 32 random bits
        raise FileExistsError(f"no free temporary name beside {path}")
    try:
        yield tmp
        if INTERRUPTED.is_set():
            raise KeyboardInterrupt
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # gone already once renamed


def write_text_atomic(path: Path, text: str, what: str) -> None:
    """``text`` into ``path`` through :func:`replacing` (fsynced before the rename)."""
    try:
        with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise PlacementError(f"{path}: cannot write {what} ({exc.strerror or exc})") from None


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


def file_sha256(path: str | Path) -> str:
    """Hash of the file's bytes: a profile is valid only for the exact file it was measured on."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

# ------------------------------------------------------------ profile file formats

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


# ------------------------------------------------------------ tables keyed by nest id
# Files a user measured elsewhere (--counters, --pim-times): CSV with a header row, or
# JSON; every problem one line naming the file and the line or nest.


def read_table_file(path: Path, kind: str) -> tuple[str, bool]:
    """The text of a CSV or JSON ``kind`` file, and whether it is JSON (a ``.json`` suffix,
    or text starting with ``{``)."""
    text = read_text_file(path, kind, f"a {kind} .csv or .json file")
    return text, path.suffix.lower() == ".json" or text.lstrip().startswith("{")


def csv_records(
    text: str,
    path: Path,
    kind: str,
    needed: Iterable[str],
    normalize: Callable[[str], str] = lambda h: h.strip().lower(),
) -> list[tuple[int, dict[str, str]]]:
    """(line number, {column: raw text}) for every non-blank data row of a CSV whose
    header (names passed through ``normalize``) has every ``needed`` column once; other
    columns are ignored. Line numbers are those of the file."""
    rows = [
        (line_no, row)
        for line_no, row in enumerate(csv.reader(text.splitlines()), start=1)
        if any(cell.strip() for cell in row)
    ]
    if not rows:
        raise PlacementError(f"{path}: empty {kind} file; expected a header row")
    header = [normalize(h) for h in rows[0][1]]
    needed = tuple(needed)
    missing = [c for c in needed if c not in header]
    if missing:
        raise PlacementError(f"{path}: missing column(s) {', '.join(missing)}")
    dupes = sorted({c for c in needed if header.count(c) > 1})
    if dupes:
        raise PlacementError(f"{path}: column(s) {', '.join(dupes)} appear more than once")
    col = {c: header.index(c) for c in needed}
    out = []
    for line_no, row in rows[1:]:
        if len(row) != len(header):
            raise PlacementError(
                f"{path}: line {line_no} has {len(row)} fields, the header has {len(header)}"
            )
        out.append((line_no, {c: row[i] for c, i in col.items()}))
    return out


def nonnegative_value(value: Any, where: str, what: str = "a count") -> float:
    """``value`` (a number, or text holding one) as a finite float >= 0; else one line
    starting with ``where`` (``what`` names the kind: "a count", "a time in seconds")."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise PlacementError(f"{where}: empty value")
        try:
            value = float(text)
        except ValueError:
            raise PlacementError(f"{where}: not a number: {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlacementError(f"{where}: not a number: {value!r}")
    if not math.isfinite(value) or value < 0:
        raise PlacementError(f"{where}: must be {what} >= 0, got {value!r}")
    return float(value)


def check_known_nests(keys: Iterable[str], ids: list[str], path: Path) -> None:
    """Refuse nest ids in a file that the model does not have (a typo or another model)."""
    known = set(ids)
    unknown = [k for k in keys if k not in known]
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" (+{len(unknown) - 5} more)" if len(unknown) > 5 else ""
        )
        span = f"{ids[0]}..{ids[-1]}" if ids else "none"
        raise PlacementError(
            f"{path}: unknown nest id(s) {shown}; this model's nests are {span}"
            " (see `placement nests MODEL`)"
        )
