"""The PIM pipeline up to the instance: lower a model, profile its nests, attach counters.

``lower_model``: a model (.onnx, or .mlir at linalg-on-tensors level) lowered with
torch-mlir to its loop nests. ``profile_nests``: every nest timed in the MLIR JIT
(the JIT's outputs checked against ONNX Runtime for .onnx), and counters per nest from
the source asked for (``counters``): ``perf`` (the Table 1 events, where the host's PMU
counts them), ``simulated`` (a callgrind cache simulation,
:mod:`placement.profiling.simulated`), ``none``, or ``auto`` (the default: perf where
available, else simulated where valgrind and gcc are installed, else none with the
reasons). ``with_counters_file``: counters measured elsewhere. ``instance``: the profile
and a PIM spec as the plain data the rule and the model take (``placement.pim.solve``
solves it).

Host times (``host_times``, recorded in the profile, see
:mod:`placement.profiling.nest_profile`): ``ort`` (default for .onnx) -- ONNX Runtime's
per-operator times (1 thread, :func:`~placement.profiling.ort.measure.profile_model`)
split over each operator's nests by their compiled-JIT shares (:func:`apportion_ort`);
``compiled`` (default for .mlir, which ONNX Runtime cannot run) -- the JIT times of the
program optimized for the host (:mod:`placement.profiling.mlir.optimize`); ``jit`` -- the
JIT times of the loops as lowered (the original method). For .onnx, ONNX Runtime's
CPU-only time is measured whatever the source and stored with the profile
(``ort_cpu_only``). ``cache``: ``warm`` or ``cold`` (last-level cache flushed before
every run, :mod:`placement.profiling.cache_flush`), for the JIT and ONNX Runtime alike.
Counters are counted (or simulated) on the program that was timed: the optimized one
for ``ort``/``compiled``, the lowered one for ``jit``.

Basic blocks (``nest_loops``, ``profile_loops``): each nest's loops and body segments
(:class:`placement.blocks.Loop`) read from the lowered program, for basic-block
granularity. They are a property of the lowering, not of a measurement, so profiles do
not store them: a saved profile is matched with a fresh lowering of its model.

torch-mlir is imported only when a model is lowered or timed (about 0.3 s), so the
CIM path and loading saved profiles never pay for it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from placement.blocks import Loop
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.io import file_sha256
from placement.onnxfile import read_onnx
from placement.pim.instance import PimInstance
from placement.pim.times import PimTimes
from placement.profiling.counters import (
    AUTO,
    COUNTER_SOURCES,
    NONE,
    PERF,
    SIMULATED,
    CountersUnavailable,
    count_nests,
    load_counters,
    select_source,
)
from placement.profiling.host import host_description
from placement.profiling.memory import check_model_memory, check_program_memory
from placement.profiling.nest_profile import FILE, MEASURED, UNAVAILABLE, NestProfile

Progress = Callable[[str, int, int], None]  # (phase, done, total); phases below
SIMULATION_PHASE = "simulating the caches with callgrind"
# Valgrind with cache simulation runs the compiled program ~10-100x slower than natively
# (unoptimized loops) up to several hundred times (vectorized code), plus its start-up;
# `auto` skips a simulation expected to exceed the budget (explicit `simulated` never does).
SIMULATION_SLOWDOWN = (100.0, 600.0)
SIMULATION_STARTUP_SECONDS = 0.4
AUTO_SIMULATION_BUDGET_SECONDS = 900.0

# The counter source of profile_nests calls that do not name one. The CLI sets it from
# --counters-source around placement.cli.common.measure_nests (which does not pass one).
_DEFAULT_SOURCE: ContextVar[str] = ContextVar("placement_counter_source", default=AUTO)


@contextmanager
def default_counter_source(source: str | None) -> Iterator[None]:
    """Within the block, ``profile_nests`` without ``counters=`` uses ``source``."""
    if source is not None and source not in COUNTER_SOURCES:
        raise PlacementError(
            f"unknown counter source {source!r}; known: {', '.join(COUNTER_SOURCES)}"
        )
    token = _DEFAULT_SOURCE.set(source or AUTO)
    try:
        yield
    finally:
        _DEFAULT_SOURCE.reset(token)


HOST_TIME_SOURCES = ("ort", "compiled", "jit")
CACHE_STATES = ("warm", "cold")
DEFAULT_HOST_TIMES = "ort"  # closest to what a user runs today (ONNX Runtime on the host)
DEFAULT_CACHE = "warm"
ORT_PHASE = "profiling with ONNX Runtime (1 thread)"

# host_times / cache of profile_nests calls that do not name them; the CLI sets them
# from --host-times / --cache around placement.cli.common.measure_nests.
_DEFAULT_HOST: ContextVar[tuple[str | None, str | None]] = ContextVar(
    "placement_host_times", default=(None, None)
)


@contextmanager
def default_host_times(host_times: str | None, cache: str | None) -> Iterator[None]:
    """Within the block, ``profile_nests`` without ``host_times=``/``cache=`` uses these."""
    if host_times is not None and host_times not in HOST_TIME_SOURCES:
        raise PlacementError(
            f"unknown host-time source {host_times!r}; known: {', '.join(HOST_TIME_SOURCES)}"
        )
    if cache is not None and cache not in CACHE_STATES:
        raise PlacementError(f"cache state must be 'warm' or 'cold', got {cache!r}")
    token = _DEFAULT_HOST.set((host_times, cache))
    try:
        yield
    finally:
        _DEFAULT_HOST.reset(token)


def resolve_host_times(host_times: str | None, path: str | Path) -> str:
    """The host-time source for ``path``: ``ort`` unless .mlir (ONNX Runtime cannot run it)."""
    if host_times is None:
        return "compiled" if is_mlir(path) else DEFAULT_HOST_TIMES
    if host_times not in HOST_TIME_SOURCES:
        raise PlacementError(
            f"unknown host-time source {host_times!r}; known: {', '.join(HOST_TIME_SOURCES)}"
        )
    if host_times == "ort" and is_mlir(path):
        raise PlacementError(
            f"{path}: --host-times ort needs an ONNX model (ONNX Runtime cannot run .mlir);"
            " use --host-times compiled or jit"
        )
    return host_times


def apportion_ort(
    nests: Sequence[Any], compiled: Mapping[str, float], ort_times: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, Any]]:
    """Per nest, its ONNX operator's ONNX Runtime time times the nest's compiled share.

    ``compiled``: per nest id, its measured JIT time; ``ort_times``: per ONNX node name,
    ONNX Runtime's time. For every operator with nests, the nests' times sum to the
    operator's ONNX Runtime time (shares by compiled time; by ``N_total`` when all of an
    operator's nests measured 0). Nests with no ONNX operator (or one ONNX Runtime does
    not list) keep their compiled time. Returns the times and a record of what was done,
    including the ONNX Runtime time of operators with no nest (it stays on the host
    whatever the placement and is in no nest's T_cpu).
    """
    groups: dict[str, list[Any]] = {}
    for nest in nests:
        if nest.onnx_node and nest.onnx_node in ort_times:
            groups.setdefault(nest.onnx_node, []).append(nest)
    t_cpu: dict[str, float] = {}
    by_work: list[str] = []
    for node, group in groups.items():
        total = math.fsum(compiled[n.id] for n in group)
        if total > 0:
            weights = [compiled[n.id] for n in group]
        else:
            weights = [float(max(1, n.n_total)) for n in group]
            total = math.fsum(weights)
            by_work.append(node)
        for nest, weight in zip(group, weights, strict=True):
            t_cpu[nest.id] = ort_times[node] * weight / total
    kept = [n.id for n in nests if n.id not in t_cpu]
    for nid in kept:
        t_cpu[nid] = compiled[nid]
    without = {node: t for node, t in ort_times.items() if node not in groups}
    record = {
        "rule": "T_cpu(nest) = T_ort(operator) x T_compiled(nest) / sum of T_compiled over"
        " the operator's nests",
        "operators": len(groups),
        "shares_by_n_total": by_work,
        "nests_kept_compiled": kept,
        "operators_without_nests": without,
        "operators_without_nests_seconds": math.fsum(without.values()),
    }
    return {n.id: t_cpu[n.id] for n in nests}, record


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
    counters: str | bool | None = None,
    progress: Progress | None = None,
    program: Any = None,
    cache_geometry: Any = None,
    host_times: str | None = None,
    cache: str | None = None,
    markers: str = "auto",
    memory_limit_gb: float | None = None,
) -> NestProfile:
    """Lower ``path``, time its nests, attach counters; see the module doc.

    ``program`` may be a program already lowered from ``path`` (saves ~0.2 s).
    ``counters``: ``"auto"`` | ``"perf"`` | ``"simulated"`` | ``"none"`` (``True`` = auto,
    ``False`` = none, None = the :func:`default_counter_source`, auto unless set). An
    explicit ``perf`` or ``simulated`` that this host cannot provide is an error, raised
    before anything is timed; ``auto`` records the reasons instead. ``cache_geometry``: a
    :class:`~placement.profiling.cache_geometry.CacheGeometry` for the simulation (default:
    this host's, :func:`~placement.profiling.cache_geometry.host_cache_geometry`).
    ``host_times``: ``"ort"`` | ``"compiled"`` | ``"jit"`` and ``cache``: ``"warm"`` |
    ``"cold"`` (module doc; None = the :func:`default_host_times`, else ort for .onnx,
    compiled for .mlir, and warm). ``markers``: ``"auto"`` | ``"c"`` | ``"python"``
    (:func:`~placement.profiling.nest_timing.time_nests`). A model whose run (in the JIT
    or in ONNX Runtime) would need more memory than ``memory_limit_gb`` (default: half the
    available memory) is refused before anything is allocated
    (:mod:`placement.profiling.memory`).
    """
    from placement.profiling.nest_timing import time_nests  # loads torch-mlir

    path = Path(path)
    if runs < 1 or warmup < 0:
        raise PlacementError(f"--runs must be >= 1 and --warmup >= 0 (got {runs}, {warmup})")
    sha = model_sha256(path)
    default_host, default_cache = _DEFAULT_HOST.get()
    host_times = resolve_host_times(host_times or default_host, path)
    cache = cache or default_cache or DEFAULT_CACHE
    if cache not in CACHE_STATES:
        raise PlacementError(f"cache state must be 'warm' or 'cold', got {cache!r}")
    requested = _DEFAULT_SOURCE.get() if counters is None else counters
    if isinstance(requested, bool):
        requested = AUTO if requested else NONE
    try:
        choice = select_source(requested)
    except CountersUnavailable as exc:
        raise PlacementError(f"--counters-source {requested}: {exc.reason}") from None
    if not is_mlir(path):  # ONNX Runtime runs it too; refused before it is even lowered
        check_model_memory(path, read_onnx(path, load_weights=False), memory_limit_gb)
    if program is None:
        program = lower_model(path)
    if not program.nests:
        raise PlacementError(f"{path}: the lowering materializes no loop nests; nothing to place")
    check_program_memory(program, memory_limit_gb)

    def phase(name: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        return lambda done, total: progress(name, done, total)

    onnx_ref = None if program.source_kind == "mlir" else path
    if host_times != "jit":  # time (and count) the program a compiler would run
        from placement.profiling.mlir.optimize import optimize_program

        program = optimize_program(program)
    timing = time_nests(
        program, runs=runs, warmup=warmup, seed=seed, check_against_onnx=onnx_ref,
        progress=phase("timing"), cache=cache, markers=markers,
    )  # fmt: skip
    t_cpu = dict(timing.t_cpu)
    ort_record: dict[str, Any] | None = None
    ort_cpu_only: float | None = None
    host_detail: dict[str, Any] = {
        "source": host_times,
        "jit_seconds": dict(timing.t_cpu),  # the measured JIT times (compiled unless jit)
    }
    if onnx_ref is not None:
        from placement.profiling.ort.measure import profile_model

        ort_profile = profile_model(
            path, runs=runs, warmup=warmup, intra_op_threads=1, optimization="all",
            seed=seed, cache=cache, progress=phase(ORT_PHASE), memory_limit_gb=memory_limit_gb,
        )  # fmt: skip
        ort_cpu_only = ort_profile.kernel_total
        ort_record = _ort_summary(ort_profile)
        if host_times == "ort":
            t_cpu, apportioning = apportion_ort(program.nests, timing.t_cpu, ort_profile.latencies)
            host_detail["apportioning"] = apportioning
    else:
        host_detail["onnxruntime"] = "not measured: .mlir input (nothing for ONNX Runtime to run)"

    values: dict[str, dict[str, float]] | None = None
    simulation: dict[str, Any] | None = None
    if choice.source == PERF:
        try:
            values = count_nests(
                program, choice.events, runs=runs, warmup=min(warmup, 1), seed=seed,
                progress=phase("counters"),
            )  # fmt: skip
            source = MEASURED
        except CountersUnavailable as exc:
            if requested != AUTO:
                raise PlacementError(f"--counters-source perf: {exc.reason}") from None
            source = f"{UNAVAILABLE}: {exc.reason}"
    elif choice.source == SIMULATED:
        from placement.profiling.simulated import DEFAULT_WARMUP, simulate_nests

        program_runs = (DEFAULT_WARMUP + 1) * timing.total_seconds
        low, high = (SIMULATION_STARTUP_SECONDS + program_runs * f for f in SIMULATION_SLOWDOWN)
        sim = None
        if requested == AUTO and low > AUTO_SIMULATION_BUDGET_SECONDS:
            source = (
                f"{UNAVAILABLE}: {choice.skipped[0] + '; ' if choice.skipped else ''}simulated"
                f" counters skipped: the cache simulation would take {low / 60:.0f}-"
                f"{high / 60:.0f} min ({DEFAULT_WARMUP + 1} runs of"
                f" {timing.total_seconds:.3g} s under valgrind); --counters-source simulated"
                " runs it anyway"
            )
        else:
            try:
                sim = simulate_nests(
                    program, geometry=cache_geometry, cold=cache == "cold", seed=seed,
                    progress=phase(f"{SIMULATION_PHASE} (~{low:.0f}-{high:.0f} s)"),
                )  # fmt: skip
            except (CountersUnavailable, PlacementError) as exc:
                reason = getattr(exc, "reason", None) or str(exc)
                if requested != AUTO:
                    raise PlacementError(f"--counters-source simulated: {reason}") from None
                source = f"{UNAVAILABLE}: simulated counters failed: {reason}"
        if sim is not None:
            values, source = sim.counters, SIMULATED
            simulation = dict(sim.metadata)
            if choice.skipped:
                simulation["perf_unavailable"] = choice.skipped[0]
    else:
        source = f"{UNAVAILABLE}: {choice.reason}"

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
        "counters_requested": requested,
        "host_times_detail": host_detail,
        "onnxruntime": ort_record,
        "warnings": list(timing.metadata.get("warnings", []))
        + list((ort_record or {}).get("warnings", [])),
    }
    if simulation is not None:
        metadata["simulation"] = simulation
    return NestProfile(
        host_times=host_times,
        cache=cache,
        ort_cpu_only=ort_cpu_only,
        nests=list(program.nests),
        t_cpu=t_cpu,
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


def instance(
    profile: NestProfile, spec: PimSpec, cores: int | None = None,
    pim_times: PimTimes | None = None, blocks: Mapping[str, Loop] | None = None,
) -> PimInstance:  # fmt: skip
    """The instance of ``profile`` on the PIM machine ``spec`` (``cores``: else the spec's),
    with ``pim_times`` (:mod:`placement.pim.times`) replacing the analytical T_pim of the
    nests they name; ``blocks``: the nests' loops (:func:`profile_loops`), for basic-block
    granularity. Rule C3 divides the counted traffic by the counted program's time
    (:attr:`~placement.profiling.nest_profile.NestProfile.counter_seconds`)."""
    return PimInstance(
        nests=tuple(profile.nests), t_cpu=profile.t_cpu, spec=spec, n_cores=cores,
        counters=profile.counters, measured=pim_times, blocks=blocks,
        counter_seconds=profile.counter_seconds if profile.counters else None,
    )  # fmt: skip


def nest_loops(program: Any) -> dict[str, Loop]:
    """Per nest of a lowered program (as lowered, not optimized), its loops and segments."""
    from torch_mlir import ir

    from placement.profiling.mlir.extract import DynamicBounds, control_trees
    from placement.profiling.mlir.lower import find_func, new_context

    with new_context():
        module = ir.Module.parse(program.module_text)
        try:
            trees = control_trees(find_func(module, program.func_name))
        except DynamicBounds:
            raise PlacementError(
                f"{program.source}: a loop nest has non-constant bounds; its basic blocks"
                " cannot be counted"
            ) from None
    if len(trees) != len(program.nests):
        raise PlacementError(
            f"internal error: {len(trees)} loop nests in the lowered program, {len(program.nests)}"
            " extracted"
        )
    return {n.id: tree for n, tree in zip(program.nests, trees, strict=True)}


def profile_loops(path: str | Path, profile: NestProfile) -> dict[str, Loop]:
    """:func:`nest_loops` of a fresh lowering of ``path``, checked against ``profile``'s nests.

    A profile from another lowering (another torch-mlir version) whose nests differ is an
    error: their blocks would not be the profile's."""
    program = lower_model(path)
    mine = [(n.id, n.linalg_op, n.n_iter, n.n_total, n.trip_count) for n in program.nests]
    theirs = [(n.id, n.linalg_op, n.n_iter, n.n_total, n.trip_count) for n in profile.nests]
    if mine != theirs:
        where = next((a[0] for a, b in zip(mine, theirs, strict=False) if a != b), None)
        detail = f"nest {where!r} differs" if where else f"{len(mine)} vs {len(theirs)} nests"
        raise PlacementError(
            f"{profile.source or 'the profile'}: its nests are not those of lowering {path}"
            f" here ({detail}; torch-mlir {_package_version('torch-mlir')} here, the profile's"
            f" {profile.metadata.get('torch_mlir_version')}); re-profile to use basic blocks"
        )
    return nest_loops(program)


def _ort_summary(profile: Any) -> dict[str, Any]:
    """What the nest profile keeps of ONNX Runtime's profile of the same model."""
    meta = profile.metadata
    keys = ("onnxruntime_version", "optimization", "intra_op_threads", "runs", "warmup",
            "statistic", "cache", "cache_flush_bytes", "total_spread", "machine_load",
            "warnings", "median_run_wall_seconds", "attribution_rule")  # fmt: skip
    record = {k: meta.get(k) for k in keys if k in meta}
    record["cpu_only_seconds"] = profile.kernel_total
    record["operator_seconds"] = dict(profile.latencies)
    return record


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None
