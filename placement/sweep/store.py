"""The sweep directory: manifest, the durable per-point log, schedules and the final tables.

See :mod:`placement.sweep.run` for the layout and the column schema.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import math
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.io import check_output_dir, remove_created, write_json_atomic, write_text_atomic
from placement.sweep.plan import ERROR, PointOutcome

FORMAT = "placement-sweep"
FORMAT_VERSION = 1
#: The file a running sweep holds locked (``flock``), with its process id in it.
LOCK_FILE = ".lock"


class SweepStore:
    """The sweep directory: manifest, durable per-point log, schedules, final tables."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.manifest_path = self.dir / "manifest.json"
        self.log_path = self.dir / "points.jsonl"
        self.csv_path = self.dir / "points.csv"
        self.json_path = self.dir / "points.json"
        self.profiles_dir = self.dir / "profiles"
        self.schedules_dir = self.dir / "schedules"
        self.lock_path = self.dir / LOCK_FILE
        self._log: io.TextIOWrapper | None = None

    # -- holding

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """This sweep's hold on the directory while the block runs (created here when it
        does not exist). A second sweep started on it meanwhile refuses in one line,
        naming this one's process, instead of solving every point again beside it. The
        hold is an ``flock`` on :data:`LOCK_FILE`, which the operating system drops when
        the process ends however it ends, so a crashed or killed sweep leaves nothing
        stuck. The file goes when the hold ends, and so does the directory if this run
        created it and no sweep was started in it."""
        check_output_dir(self.dir, f"-o {self.dir}")  # a file, /proc, no parent: one line
        created_dir = not self.dir.exists()
        self.dir.mkdir(exist_ok=True)
        fd = self._lock()
        try:
            yield
        finally:
            self.lock_path.unlink(missing_ok=True)  # before the lock drops: see _lock
            os.close(fd)
            if created_dir and not self.manifest_path.exists():
                remove_created([], [self.dir])

    def _lock(self) -> int:
        """The lock file's descriptor, locked; refuses when another process holds it. A
        file found locked by a holder that then removed it (its hold ended) is not the
        lock any more: the path is opened again."""
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip()
                os.close(fd)
                raise PlacementError(
                    f"-o {self.dir}: another sweep is running in this directory"
                    + (f" (process {holder})" if holder.isdigit() else "")
                    + "; wait for it to finish, or use another directory"
                ) from None
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode("ascii"))
                return fd
            os.close(fd)

    # -- opening

    def existing_manifest(self) -> dict[str, Any] | None:
        """The directory's manifest, None when there is none; unreadable ones are refused."""
        if not self.manifest_path.exists():
            return None
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PlacementError(
                f"{self.manifest_path}: unreadable sweep manifest ({exc})"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PlacementError(f"{self.manifest_path}: not a placement sweep manifest")
        return data

    def check_directory(self, identity: dict[str, Any], force: bool) -> dict[str, Any] | None:
        """The existing manifest when it describes the same sweep; refuse any other sweep.

        With ``force`` a different sweep's files are deleted (only the files a sweep writes).
        """
        check_output_dir(self.dir, f"-o {self.dir}")  # a file, /proc, no parent: one line
        if not self.dir.exists():
            return None
        old = self.existing_manifest() if not force else _try(self.existing_manifest)
        if old is None:
            if any(p != self.lock_path for p in self.dir.iterdir()):
                if not force:
                    raise PlacementError(
                        f"-o {self.dir}: not empty and not a sweep directory (no readable"
                        " manifest.json); choose another directory or pass --force"
                    )
                self.discard()
            return None
        difference = _identity_difference(old.get("identity", {}), identity)
        if difference is None:
            return old
        if not force:
            raise PlacementError(
                f"-o {self.dir} holds another sweep ({difference}); nothing was changed."
                " Use another directory, or --force to discard its"
                f" {self.count_logged()} finished point(s)"
            )
        self.discard()
        return None

    def count_logged(self) -> int:
        """How many point records ``points.jsonl`` holds (0 when it cannot be read)."""
        try:
            return sum(1 for line in self.log_path.open(encoding="utf-8") if line.strip())
        except OSError:
            return 0

    def discard(self) -> None:
        """Delete the files and folders a sweep writes (nothing else)."""
        for path in (self.manifest_path, self.log_path, self.csv_path, self.json_path):
            path.unlink(missing_ok=True)
        for folder in (self.profiles_dir, self.schedules_dir):
            shutil.rmtree(folder, ignore_errors=True)

    def remove_started(self) -> None:
        """Undo a start that failed before any point was solved: the files a sweep writes
        (:meth:`discard`; a new sweep's directory holds no others of a sweep). The
        directory, if this run created it, goes when the hold ends (:meth:`held`)."""
        self.close()
        self.discard()

    def create(self, manifest: dict[str, Any]) -> None:
        """Start a sweep here: the folders, then the manifest."""
        self.dir.mkdir(exist_ok=True)
        self.profiles_dir.mkdir(exist_ok=True)
        self.schedules_dir.mkdir(exist_ok=True)
        write_json_atomic(self.manifest_path, manifest)

    # -- points

    def load_done(self, point_ids: set[str]) -> dict[str, dict[str, Any]]:
        """Rows already finished (last record wins); a torn last line is dropped."""
        if not self.log_path.exists():
            return {}
        raw = self.log_path.read_bytes()
        if raw and not raw.endswith(b"\n"):  # interrupted mid-write: drop the partial line
            keep = raw.rfind(b"\n") + 1
            with self.log_path.open("r+b") as fh:
                fh.truncate(keep)
            raw = raw[:keep]
        done: dict[str, dict[str, Any]] = {}
        for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pid = row["point_id"]
            except (ValueError, KeyError, TypeError):
                raise PlacementError(
                    f"{self.log_path}: line {n} is not a point record; fix or delete that line"
                ) from None
            if pid not in point_ids:
                continue
            has_doc = (self.schedules_dir / f"{pid}.json").exists()
            if row.get("status") == ERROR or has_doc:  # a lost schedule: solve again
                done[pid] = row
        return done

    def record(self, outcome: PointOutcome) -> None:
        """Schedule first, then the log line (fsynced): a logged point always has both."""
        pid = outcome.row["point_id"]
        if outcome.document is not None:
            write_json_atomic(self.schedules_dir / f"{pid}.json", outcome.document)
        if self._log is None:
            self._log = self.log_path.open("a", encoding="utf-8")
        self._log.write(json.dumps(_clean(outcome.row), allow_nan=False) + "\n")
        self._log.flush()
        os.fsync(self._log.fileno())

    def load_document(self, point_id: str) -> dict[str, Any] | None:
        """The schedule document of a finished point (None for a failed one)."""
        path = self.schedules_dir / f"{point_id}.json"
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PlacementError(f"{path}: unreadable schedule ({exc})") from None

    def close(self) -> None:
        """Close the point log (reopened by the next :meth:`record`)."""
        if self._log is not None:
            self._log.close()
            self._log = None

    def row_order(self, row: Mapping[str, Any]) -> Any:
        """The sort key of the tables' rows: the point id."""
        return row["point_id"]

    def write_tables(self, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
        """``points.csv`` and ``points.json``: ``rows`` in :meth:`row_order`, ``columns`` only."""
        rows = sorted(rows, key=self.row_order)
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_csv_cell(row.get(c)) for c in columns])
        write_text_atomic(self.csv_path, buf.getvalue(), "sweep table")
        write_json_atomic(
            self.json_path, [{c: _clean_value(row.get(c)) for c in columns} for row in rows]
        )


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except PlacementError:
        return None


def _identity_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    if old == new:
        return None
    if old.get("target") != new.get("target"):
        return f"target {old.get('target')}, not {new.get('target')}"
    if old.get("models") != new.get("models"):
        shown = ", ".join(
            f"{m.get('name')} (sha256 {str(m.get('sha256'))[:12]})" for m in old.get("models", [])
        )
        return f"of model(s) {shown}"
    if old.get("grid") != new.get("grid") or old.get("hardware") != new.get("hardware"):
        return f"another grid: {json.dumps(old.get('grid'))}"
    return f"other solver options: {json.dumps(old.get('solver'))}"


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value


def _clean_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _clean(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _clean_value(v) for k, v in row.items()}
