"""Host latency profiles and their JSON file format.

A profile holds one latency (seconds) for every node of the original ONNX graph,
keyed by :func:`placement.onnx_names.node_names`, measured with ONNX Runtime on
one machine. It is tied to the exact model file by its SHA-256, so a profile
measured elsewhere (e.g. on an ARM board) can be reused, but never for another
model.

File format (JSON object, written with indentation)::

    {
      "format": "placement-host-profile",
      "version": 1,
      "model_path": "examples/resnet_tiny.onnx",
      "model_sha256": "<64 hex digits>",
      "kernel_total": 0.00123,          # seconds, = sum of "latencies"
      "latencies": {"<node>": 1.2e-05, ...},
      "notes": {"<node>": "fused into ...", ...},
      "metadata": {"onnxruntime_version": "1.31.1", ...}
    }
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.errors import PlacementError

FORMAT_NAME = "placement-host-profile"
FORMAT_VERSION = 1

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class HostProfile:
    """Per-operator host latencies of one model, in seconds."""

    latencies: dict[str, float]
    model_sha256: str
    model_path: str
    metadata: dict[str, Any]
    kernel_total: float
    notes: dict[str, str] = field(default_factory=dict)
    # Where the profile was loaded from (not stored in the file): lets messages name it.
    source: str | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "model_path": self.model_path,
            "model_sha256": self.model_sha256,
            "kernel_total": self.kernel_total,
            "latencies": self.latencies,
            "notes": self.notes,
            "metadata": self.metadata,
        }

    def save(self, path: str | Path) -> None:
        """Write the profile as JSON, atomically (temp file + rename): never half a file."""
        path = Path(path)
        try:
            text = json.dumps(self.to_json(), indent=2, allow_nan=False) + "\n"
        except (TypeError, ValueError) as exc:
            raise PlacementError(f"{path}: cannot write profile ({exc})") from None
        directory = path.parent if str(path.parent) else Path(".")
        tmp_name = None
        try:
            with tempfile.NamedTemporaryFile(
                "w",
                encoding="utf-8",
                dir=directory,
                prefix=f".{path.name}.",
                suffix=".tmp",
                delete=False,
            ) as fh:
                tmp_name = fh.name
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_name, path)
            tmp_name = None
        except OSError as exc:
            raise PlacementError(f"{path}: cannot write profile ({exc.strerror or exc})") from None
        finally:
            if tmp_name is not None:
                try:
                    os.unlink(tmp_name)
                except OSError:
                    pass

    @classmethod
    def load(cls, path: str | Path) -> HostProfile:
        """Read a profile file; any problem is a one-line PlacementError naming the file."""
        path = Path(path)
        if not path.exists():
            raise PlacementError(f"{path}: no such profile file")
        if path.is_dir():
            raise PlacementError(f"{path}: is a directory, expected a profile .json file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PlacementError(f"{path}: cannot read profile ({exc})") from None
        try:
            data = json.loads(text, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise PlacementError(f"{path}: not a JSON profile file ({reason})") from None
        return cls._from_json(data, path)

    @classmethod
    def _from_json(cls, data: Any, path: Path) -> HostProfile:
        def bad(what: str) -> PlacementError:
            return PlacementError(f"{path}: invalid profile file: {what}")

        if not isinstance(data, dict):
            raise bad("expected a JSON object")
        if data.get("format") != FORMAT_NAME:
            raise bad(f"'format' is not {FORMAT_NAME!r}")
        version = data.get("version")
        if version != FORMAT_VERSION:
            raise PlacementError(
                f"{path}: profile format version {version!r} is not supported "
                f"(expected {FORMAT_VERSION}); re-run `placement profile` to measure it again"
            )
        for key in ("model_path", "model_sha256", "kernel_total", "latencies", "metadata"):
            if key not in data:
                raise bad(f"missing key {key!r}")
        model_path, sha = data["model_path"], data["model_sha256"]
        if not isinstance(model_path, str):
            raise bad("'model_path' must be a string")
        if not isinstance(sha, str) or not _SHA256.match(sha):
            raise bad("'model_sha256' must be 64 lowercase hex digits")
        kernel_total = data["kernel_total"]
        if not _is_time(kernel_total):
            raise bad("'kernel_total' must be a non-negative number of seconds")
        latencies = data["latencies"]
        if not isinstance(latencies, dict) or not latencies:
            raise bad("'latencies' must be a non-empty object of node name -> seconds")
        for name, value in latencies.items():
            if not _is_time(value):
                raise bad(f"latency of node {name!r} must be a non-negative number, got {value!r}")
        notes = data.get("notes", {})
        if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
            raise bad("'notes' must be an object of node name -> text")
        metadata = data["metadata"]
        if not isinstance(metadata, dict):
            raise bad("'metadata' must be an object")
        return cls(
            latencies={k: float(v) for k, v in latencies.items()},
            model_sha256=sha,
            model_path=model_path,
            metadata=metadata,
            kernel_total=float(kernel_total),
            notes=dict(notes),
            source=str(path),
        )

    def check_matches(self, sha256: str, path_for_message: str) -> None:
        """Refuse a profile measured on a different model file (hash mismatch)."""
        if sha256 == self.model_sha256:
            return
        where = f"profile {self.source}" if self.source else "the profile"
        # Suggest a fresh file next to the model rather than overwriting the other profile.
        fresh = Path(path_for_message).with_suffix(".profile.json")
        raise PlacementError(
            f"{where} was measured on {self.model_path} (sha256 {self.model_sha256[:12]}), "
            f"not on {path_for_message} (sha256 {sha256[:12]}); "
            f"re-run `placement profile {path_for_message} -o {fresh}`"
        )


def _is_time(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _reject_constant(name: str) -> float:
    # json accepts NaN/Infinity by default; a latency file must not.
    raise ValueError(f"{name} is not a valid latency")
