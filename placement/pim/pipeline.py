"""The CPU + PIM pipeline end to end, for the CLI and the Python API.

``profile_nests``: lower a model (.onnx, or .mlir at linalg-on-tensors level), time
every loop nest in the MLIR JIT (checking the JIT's outputs against ONNX Runtime for
.onnx), and read the Table 1 counters per nest where the host exposes them.

``solve_pim_for_cores``: for each PIM core count, the threshold rule's decisions
(Eqs. 1-7), the rule's own hybrid time (Eq. 9), and the Eq.-9-optimal placement from
the loop-nest model, verified.

``pim_document``: the JSON document of a solve. Derived values that are estimated
rather than measured carry ``"estimated": true`` next to the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, TextIO

from placement.devices.pim import HybridTime, speedup
from placement.errors import PlacementError
from placement.hardware.pim import PimHardware, PimSpec
from placement.io import file_sha256
from placement.models.pim import PimInstance, PimPlacement, solve_pim
from placement.nests import LoopNest
from placement.pim.rules import (
    BACKEND_EVENTS,
    EV_BOUND_ON_STORES,
    EV_OFFCORE_RD,
    RuleDecision,
    rule_placement,
)
from placement.pim.verify import check_mode, evaluate_placement
from placement.profiling.host import host_description
from placement.profiling.nest_profile import FILE, MEASURED, UNAVAILABLE, NestProfile

RESULT_FORMAT = "placement-pim-result"
RESULT_VERSION = 1

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
    from placement.profiling.counters import CountersUnavailable, count_nests, table1_events
    from placement.profiling.nest_timing import time_nests

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
    from dataclasses import replace

    from placement.profiling.counters import load_counters

    table = load_counters(path, profile.nest_ids)
    meta = dict(profile.metadata, counters_file=str(path))
    return replace(profile, counters=table, counter_source=FILE, metadata=meta)


# --------------------------------------------------------------------------- solving


@dataclass
class CoreResult:
    """Everything decided for one PIM core count."""

    cores: int
    rule: dict[str, RuleDecision]  # nest id -> decision, program order
    rule_hybrid: HybridTime  # Eq. 9 of the rule's placement (same copy accounting)
    placement: PimPlacement  # the Eq.-9-optimal placement (verified)

    @property
    def rule_speedup(self) -> float:
        return speedup(self.placement.cpu_only, self.rule_hybrid.total)

    @property
    def rule_on_pim(self) -> list[str]:
        return [k for k, d in self.rule.items() if d.on_pim]

    @property
    def model_on_pim(self) -> list[str] | None:
        if self.placement.on_pim is None:
            return None
        return [k for k, v in self.placement.on_pim.items() if v]


def solve_pim_for_cores(
    profile: NestProfile,
    hw: PimHardware | PimSpec,
    cores: Sequence[int],
    copy: str = "upper_bound",
    granularity: str = "loop",
    allow_estimates: bool = False,
    *,
    time_limit: float | None = None,
    rel_gap: float = 1e-6,
    threads: int | None = None,
    tee: bool | list[TextIO] = False,
    progress: Callable[[int], None] | None = None,
) -> list[CoreResult]:
    """Rule and optimal placement for every core count in ``cores`` (in the order given).

    The rule is per nest at any ``granularity`` (the paper's rule); its placement is
    evaluated with the same ``copy`` accounting as the model, so the two compare.
    """
    check_mode(copy, granularity)
    spec = hw.pim if isinstance(hw, PimHardware) else hw
    if not cores:
        raise PlacementError("no PIM core counts given")
    base = PimInstance(
        nests=tuple(profile.nests),
        t_cpu=profile.t_cpu,
        spec=spec,
        n_cores=cores[0],
        counters=profile.counters,
    )
    out: list[CoreResult] = []
    for n in cores:
        if progress is not None:
            progress(n)
        instance = base.with_cores(n)
        rule = rule_placement(instance, allow_estimates=allow_estimates)
        rule_hybrid = evaluate_placement(
            instance, {k: d.on_pim for k, d in rule.items()}, copy=copy
        )
        placement = solve_pim(
            instance, copy=copy, granularity=granularity, time_limit=time_limit,
            rel_gap=rel_gap, threads=threads, tee=tee,
        )  # fmt: skip
        out.append(CoreResult(n, rule, rule_hybrid, placement))
    return out


# --------------------------------------------------------------------------- derived values


@dataclass(frozen=True)
class Derived:
    """A value derived for display; ``estimated`` when not from a measured counter."""

    value: float | None
    estimated: bool

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "estimated": self.estimated}


def read_bandwidth(
    nest: LoopNest, t_cpu: float, counters: Mapping[str, float] | None, cache_line: int
) -> Derived:
    """Eq. 6 from the off-core read counter, else fetch_bytes / T_cpu (estimated)."""
    if t_cpu <= 0:
        return Derived(None, counters is None or EV_OFFCORE_RD not in counters)
    if counters is not None and EV_OFFCORE_RD in counters:
        return Derived(counters[EV_OFFCORE_RD] * cache_line / t_cpu, False)
    return Derived(nest.fetch_bytes / t_cpu, True)


def store_bound(counters: Mapping[str, float] | None) -> Derived:
    """Eq. 7 from the counters; no estimate exists (None without them)."""
    if counters is None or any(e not in counters for e in (EV_BOUND_ON_STORES, *BACKEND_EVENTS)):
        return Derived(None, False)
    c_store = counters[EV_BOUND_ON_STORES]
    backend = math.fsum(counters[e] for e in BACKEND_EVENTS) + c_store
    return Derived(c_store / backend if backend > 0 else 0.0, False)


# --------------------------------------------------------------------------- JSON


def pim_document(
    profile: NestProfile,
    hw: PimHardware,
    results: Sequence[CoreResult],
    *,
    copy: str,
    granularity: str,
    allow_estimates: bool,
) -> dict[str, Any]:
    """The complete JSON document of a PIM solve (see the module docstring)."""
    spec = hw.pim
    counters = profile.counters or {}
    nests = []
    for n in profile.nests:
        t = profile.t_cpu[n.id]
        row = n.to_json()
        row["t_cpu"] = t
        row["counters"] = counters.get(n.id)
        row["read_bandwidth"] = read_bandwidth(n, t, counters.get(n.id), spec.cache_line).to_json()
        row["store_bound"] = store_bound(counters.get(n.id)).to_json()
        nests.append(row)
    per_core = []
    for r in results:
        model = r.placement.to_json()
        rs = r.rule_speedup
        per_core.append(
            {
                "n_cores": r.cores,
                "rule": {
                    "hybrid": r.rule_hybrid.to_json(),
                    "speedup": None if math.isinf(rs) else rs,
                    "on_pim": r.rule_on_pim,
                    "estimated": any(d.estimated for d in r.rule.values()),
                    "decisions": {k: d.to_json() for k, d in r.rule.items()},
                },
                "model": model,
            }
        )
    return {
        "format": RESULT_FORMAT,
        "version": RESULT_VERSION,
        "target": "pim",
        "model": {
            "path": profile.model_path,
            "sha256": profile.model_sha256,
            "source_kind": profile.source_kind,
            "nests": len(profile.nests),
        },
        "hardware": hw.to_json(),
        "options": {
            "copy": copy,
            "granularity": granularity,
            "allow_estimates": allow_estimates,
            "cores": [r.cores for r in results],
        },
        "nest_profile": {
            "source": profile.source,
            "counter_source": profile.counter_source,
            "metadata": profile.metadata,
        },
        "estimates": {
            "read_bandwidth": "fetch_bytes / T_cpu where the off-core read counter is missing",
            "t_pim": "analytical model (placement.devices.pim), not measured",
        },
        "cpu_only": profile.cpu_only,
        "nests": nests,
        "results": per_core,
    }


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None
