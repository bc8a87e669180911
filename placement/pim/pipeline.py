"""The PIM pipeline up to the instance: lower a model, profile its nests, attach counters.

``lower_model``: a model (.onnx, or .mlir at linalg-on-tensors level) lowered with
torch-mlir to its loop nests. ``profile_nests``: every nest timed in the MLIR JIT
(the JIT's outputs checked against ONNX Runtime for .onnx), and the Table 1 counters
per nest where the host exposes them. ``with_counters_file``: counters measured
elsewhere. ``instance``: the profile and a PIM spec as the plain data the rule and the
model take (``placement.pim.solve`` solves it).

torch-mlir is imported only when a model is lowered or timed (about 0.3 s), so the
CIM path and loading saved profiles never pay for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.io import file_sha256
from placement.pim.instance import PimInstance
from placement.profiling.counters import (
    CountersUnavailable,
    count_nests,
    load_counters,
    table1_events,
)
from placement.profiling.host import host_description
from placement.profiling.nest_profile import FILE, MEASURED, UNAVAILABLE, NestProfile

Progress = Callable[[str, int, int], None]  # (phase "timing"|"counters", done, total)


# --------------------------------------------------------------------------- lowering + profiling


def is_mlir(path: str | Path) -> bool:
    return Path(path).suffix.lower() == ".mlir"


def lower_model(path: str | Path) -> Any:
    """A :class:`~placement.profiling.mlir.lower.LoweredProgram` from .onnx or .mlir."""
    from placement.profiling.mlir.lower import lower_mlir, lower_onnx

    return lower_mlir(path) if is_mlir(path) else lower_onnx(path)


def model_sha256(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    if path.is_dir():
        raise PlacementError(f"{path}: is a directory, expected a model file")
    return file_sha256(path)


def profile_nests(
    path: str | Path,
    runs: int = 20,
    warmup: int = 5,
    *,
    seed: int = 0,
    counters: bool = True,
    progress: Progress | None = None,
    program: Any = None,
) -> NestProfile:
    """Lower ``path``, time its nests, read counters if this host can; see the module doc.

    ``program`` may be a program already lowered from ``path`` (saves ~0.2 s).
    ``counters=False`` skips the counter run (recorded as unavailable: not requested).
    """
    from placement.profiling.nest_timing import time_nests  # loads torch-mlir

    path = Path(path)
    if runs < 1 or warmup < 0:
        raise PlacementError(f"--runs must be >= 1 and --warmup >= 0 (got {runs}, {warmup})")
    sha = model_sha256(path)
    if program is None:
        program = lower_model(path)
    if not program.nests:
        raise PlacementError(f"{path}: the lowering materializes no loop nests; nothing to place")

    def phase(name: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        return lambda done, total: progress(name, done, total)

    onnx_ref = None if program.source_kind == "mlir" else path
    timing = time_nests(
        program, runs=runs, warmup=warmup, seed=seed, check_against_onnx=onnx_ref,
        progress=phase("timing"),
    )  # fmt: skip

    values: dict[str, dict[str, float]] | None = None
    if not counters:
        source = f"{UNAVAILABLE}: not requested"
    else:
        try:
            events = table1_events()
            values = count_nests(
                program, events, runs=runs, warmup=min(warmup, 1), seed=seed,
                progress=phase("counters"),
            )  # fmt: skip
            source = MEASURED
        except CountersUnavailable as exc:
            source = f"{UNAVAILABLE}: {exc.reason}"

    metadata: dict[str, Any] = {
        "torch_mlir_version": _package_version("torch-mlir"),
        "placement_version": _package_version("placement"),
        "runs": runs,
        "warmup": warmup,
        "seed": seed,
        "statistic": "median over runs per nest; a nest accumulates over its invocations",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **host_description(),
        "marker_pair_ns": timing.metadata.get("marker_pair_ns"),
        "marker_in_nest_ns": timing.metadata.get("marker_in_nest_ns"),
        "program_seconds": timing.total_seconds,
        "checked_against": None if onnx_ref is None else "onnxruntime",
        "max_abs_error": timing.max_abs_error,
        "timing": timing.metadata,
        "lowering": program.metadata,
    }
    return NestProfile(
        nests=list(program.nests),
        t_cpu=dict(timing.t_cpu),
        counters=values,
        counter_source=source,
        model_sha256=sha,
        model_path=str(path),
        source_kind=program.source_kind,
        metadata=metadata,
    )


def with_counters_file(profile: NestProfile, path: str | Path) -> NestProfile:
    """The profile with counters loaded from ``path`` (CSV/JSON keyed by nest id)."""
    table = load_counters(path, profile.nest_ids)
    meta = dict(profile.metadata, counters_file=str(path))
    return replace(profile, counters=table, counter_source=FILE, metadata=meta)


def instance(profile: NestProfile, spec: PimSpec, cores: int | None = None) -> PimInstance:
    """The instance of ``profile`` on the PIM machine ``spec`` (``cores``: else the spec's)."""
    return PimInstance(
        nests=tuple(profile.nests), t_cpu=profile.t_cpu, spec=spec, n_cores=cores,
        counters=profile.counters,
    )  # fmt: skip


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None
