"""Host latency profiles and their JSON file format.

A profile holds one latency (seconds) for every node of the original ONNX graph,
keyed by :func:`placement.onnxfile.node_names`, measured with ONNX Runtime on
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
      "spread": {"<node>": 0.012, ...}, # optional: relative spread of each latency
      "metadata": {"onnxruntime_version": "1.31.1", ...}
    }

``spread`` (written only when known) is the relative interquartile range of each
node's per-round minima (:mod:`placement.profiling.ort.robust`). ``metadata`` is free
form; profiles measured by :func:`placement.profiling.ort.measure.profile_model` also
record ``statistic``, ``rounds``, ``runs_per_round``, ``total_spread``,
``machine_load`` and ``warnings`` (a list of sentences). All of these are optional:
files written before they existed load unchanged (empty spread, no warnings), and
readers that ignore them read newer files, so the format version stays 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.io import (
    check_header,
    check_model_fields,
    check_model_match,
    is_nonnegative_number,
    read_json_file,
    write_json_atomic,
)

FORMAT_NAME = "placement-host-profile"
FORMAT_VERSION = 1


@dataclass
class HostProfile:
    """Per-operator host latencies of one model, in seconds."""

    latencies: dict[str, float]
    model_sha256: str
    model_path: str
    metadata: dict[str, Any]
    kernel_total: float
    notes: dict[str, str] = field(default_factory=dict)
    # Relative spread of each latency (empty when unknown, e.g. in older files).
    spread: dict[str, float] = field(default_factory=dict)
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
            **({"spread": self.spread} if self.spread else {}),
            "metadata": self.metadata,
        }

    @property
    def warnings(self) -> list[str]:
        """Sentences the measurement left in ``metadata["warnings"]`` (none in older files)."""
        found = self.metadata.get("warnings", [])
        return [w for w in found if isinstance(w, str)] if isinstance(found, list) else []

    def save(self, path: str | Path) -> None:
        """Write the profile as JSON, atomically (temp file + rename): never half a file."""
        write_json_atomic(Path(path), self.to_json(), "profile")

    @classmethod
    def load(cls, path: str | Path) -> HostProfile:
        """Read a profile file; any problem is a one-line PlacementError naming the file."""
        path = Path(path)
        return cls._from_json(read_json_file(path, "profile", "profile file", "latency"), path)

    @classmethod
    def _from_json(cls, data: Any, path: Path) -> HostProfile:
        def bad(what: str) -> PlacementError:
            return PlacementError(f"{path}: invalid profile file: {what}")

        data = check_header(
            data, path, bad, kind="profile", format_name=FORMAT_NAME, version=FORMAT_VERSION,
            rerun="placement profile",
            keys=("model_path", "model_sha256", "kernel_total", "latencies", "metadata"),
        )  # fmt: skip
        model_path, sha = check_model_fields(data, bad)
        kernel_total = data["kernel_total"]
        if not is_nonnegative_number(kernel_total):
            raise bad("'kernel_total' must be a non-negative number of seconds")
        latencies = data["latencies"]
        if not isinstance(latencies, dict) or not latencies:
            raise bad("'latencies' must be a non-empty object of node name -> seconds")
        for name, value in latencies.items():
            if not is_nonnegative_number(value):
                raise bad(f"latency of node {name!r} must be a non-negative number, got {value!r}")
        notes = data.get("notes", {})
        if not isinstance(notes, dict) or not all(isinstance(v, str) for v in notes.values()):
            raise bad("'notes' must be an object of node name -> text")
        spread = data.get("spread", {})
        if not isinstance(spread, dict):
            raise bad("'spread' must be an object of node name -> relative spread")
        for name, value in spread.items():
            if not is_nonnegative_number(value):
                raise bad(f"spread of node {name!r} must be a non-negative number, got {value!r}")
        metadata = data["metadata"]
        if not isinstance(metadata, dict):
            raise bad("'metadata' must be an object")
        warnings = metadata.get("warnings", [])
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise bad("'metadata.warnings' must be a list of strings")
        return cls(
            latencies={k: float(v) for k, v in latencies.items()},
            model_sha256=sha,
            model_path=model_path,
            metadata=metadata,
            kernel_total=float(kernel_total),
            notes=dict(notes),
            spread={k: float(v) for k, v in spread.items()},
            source=str(path),
        )

    def check_matches(self, sha256: str, path_for_message: str) -> None:
        """Refuse a profile measured on a different model file (hash mismatch)."""
        check_model_match(
            kind="profile", source=self.source, model_path=self.model_path,
            model_sha256=self.model_sha256, sha256=sha256, path_for_message=path_for_message,
            fresh_suffix=".profile.json",
        )  # fmt: skip
