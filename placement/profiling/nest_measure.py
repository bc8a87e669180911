"""Measure a model's loop nests on this host: lower it, time its nests, attach counters.

``lower_model``: a model (.onnx, or .mlir at linalg-on-tensors level) lowered with
torch-mlir to its loop nests. ``profile_nests``: every nest timed in the MLIR JIT
(the JIT's outputs checked against ONNX Runtime for .onnx), and counters per nest from
the source asked for (``counters``): ``perf`` (the Table 1 events, where the host's PMU
counts them), ``simulated`` (a callgrind cache simulation,
:mod:`placement.profiling.simulated`), ``none``, or ``auto`` (the default: perf where
available, else simulated where valgrind and gcc are installed, else none with the
reasons). ``with_counters_file``: counters measured elsewhere. The PIM target builds
its instance from the resulting :class:`~placement.profiling.nest_profile.NestProfile`
(:func:`placement.pim.instance.build_instance`).

Host times (``host_times``, recorded in the profile, see
:mod:`placement.profiling.nest_profile`): ``ort`` (default for .onnx) -- ONNX Runtime's
per-operator times (1 thread, :func:`~placement.profiling.ort.measure.profile_model`)
split over each operator's nests by their compiled-JIT shares
(:func:`~placement.profiling.ort.apportion.apportion_ort`); ``compiled`` (default for
.mlir, which ONNX Runtime cannot run) -- the JIT times of the program optimized for the
host (:mod:`placement.profiling.mlir.optimize`); ``jit`` -- the JIT times of the loops as
lowered (the original method). For .onnx, ONNX Runtime's CPU-only time is measured
whatever the source and stored with the profile (``ort_cpu_only``). ``cache``: ``warm``
or ``cold`` (last-level cache flushed before every run,
:mod:`placement.profiling.cache_flush`), for the JIT and ONNX Runtime alike. Counters are
counted (or simulated) on the program that was timed: the optimized one for
``ort``/``compiled``, the lowered one for ``jit``.

Counters of repeated layers (``representative_layers``, default on): in a stack of at
least three identical layers the simulation counts the first two and gives the later
layers' nests the counters of the second's (:mod:`placement.profiling.repeats`); the
profile's ``metadata["simulation"]["nests"]`` says which nests took whose counters.

Phases: ``metadata["phase_seconds"]`` holds the wall time of each phase, in order and
back to back (reading the model and checking its memory, lowering unless a lowered
program was given, host optimization, JIT timing, the output check against ONNX Runtime,
ONNX Runtime's profile, the cache simulation) and ``metadata["machine_load"]`` the
1-minute load average before and after.

Memory: the phases hold the weights one copy at a time -- the lowering none (they stay
in their files, :class:`~placement.profiling.mlir.weight_layout.WeightFile`, in the
layout the program reads), the JIT timing its arguments, released before ONNX Runtime
loads the model (mapping the weights from their files), the simulation's driver its own
(read from the files, in its own process).

Basic blocks (``profile_loops``): each nest's loops and body segments
(:class:`placement.blocks.Loop`, :mod:`placement.profiling.mlir.loops`) read from a fresh
lowering, for basic-block granularity; profiles do not store them.

torch-mlir is imported only when a model is lowered or timed (about 0.3 s), so the
CIM path and loading saved profiles never pay for it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from placement.blocks import Loop
from placement.errors import PlacementError
from placement.io import file_sha256
from placement.onnxfile import read_onnx
from placement.profiling.counters import (
    AUTO,
    NONE,
    PERF,
    SIMULATED,
    CountersUnavailable,
    SourceChoice,
    count_nests,
    load_counters,
    select_source,
)
from placement.profiling.dram_bandwidth import measure_dram_read
from placement.profiling.host import host_description
from placement.profiling.memory import check_model_memory, check_program_memory
from placement.profiling.nest_profile import FILE, MEASURED, UNAVAILABLE, NestProfile
from placement.profiling.ort.robust import MIN_SECONDS

Progress = Callable[[str, int, int], None]  # (phase, done, total); phases below
SIMULATION_PHASE = "simulating the caches with callgrind"
# Valgrind with cache simulation runs the compiled program ~10-100x slower than natively
# (unoptimized loops) up to several hundred times (vectorized code), plus its start-up;
# `auto` skips a simulation expected to exceed the budget (explicit `simulated` never does).
SIMULATION_SLOWDOWN = (100.0, 600.0)
SIMULATION_STARTUP_SECONDS = 0.4
AUTO_SIMULATION_BUDGET_SECONDS = 900.0

HOST_TIME_SOURCES = ("ort", "compiled", "jit")
CACHE_STATES = ("warm", "cold")
DEFAULT_HOST_TIMES = "ort"  # closest to what a user runs today (ONNX Runtime on the host)
DEFAULT_CACHE = "warm"
ORT_PHASE = "profiling with ONNX Runtime (1 thread)"


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


def resolve_cache(cache: str | None) -> str:
    """The cache state: ``warm`` unless given; anything but warm or cold is an error."""
    if cache is None:
        return DEFAULT_CACHE
    if cache not in CACHE_STATES:
        raise PlacementError(f"cache state must be 'warm' or 'cold', got {cache!r}")
    return cache


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
    lowered: Callable[[Any, float], None] | None = None,
    program: Any = None,
    cache_geometry: Any = None,
    host_times: str | None = None,
    cache: str | None = None,
    markers: str = "auto",
    memory_limit_gb: float | None = None,
    representative_layers: bool = True,
    min_seconds: float = MIN_SECONDS,
) -> NestProfile:
    """Lower ``path``, time its nests, attach counters; see the module doc.

    ``lowered`` is called with the lowered program and the seconds its lowering took (0
    for a ``program`` given), before anything is measured: a caller's checks of files
    keyed by nest id fail fast there, and it may report the lowering. ``program`` may be
    a program already lowered from ``path`` (saves ~0.2 s).
    ``counters``: ``"auto"`` (None, True) | ``"perf"`` | ``"simulated"`` | ``"none"``
    (False). An explicit ``perf`` or ``simulated`` that this host cannot provide is an
    error, raised before anything is timed; ``auto`` records the reasons instead.
    ``cache_geometry``: a :class:`~placement.profiling.cache_geometry.CacheGeometry` for
    the simulation (default: this host's,
    :func:`~placement.profiling.cache_geometry.host_cache_geometry`). ``host_times``:
    ``"ort"`` | ``"compiled"`` | ``"jit"`` (None: ort for .onnx, compiled for .mlir) and
    ``cache``: ``"warm"`` (None) | ``"cold"``; see the module doc. ``markers``: ``"auto"``
    | ``"c"`` | ``"python"`` (:func:`~placement.profiling.nest_timing.time_nests`). A
    model whose run (in the JIT or in ONNX Runtime) would need more memory than
    ``memory_limit_gb`` (default: half the available memory) is refused before anything
    is allocated (:mod:`placement.profiling.memory`). ``representative_layers``: simulate
    repeated layers once (module doc; False: every nest). ``min_seconds``: the ONNX
    Runtime profile spans at least this long
    (:func:`~placement.profiling.ort.measure.measure_runs`).
    """
    from placement.profiling.nest_timing import time_nests  # loads torch-mlir

    phases = _Phases()
    path = Path(path)
    if runs < 1 or warmup < 0:
        raise PlacementError(f"--runs must be >= 1 and --warmup >= 0 (got {runs}, {warmup})")
    with phases("reading"):
        sha = model_sha256(path)
    host_times = resolve_host_times(host_times, path)
    cache = resolve_cache(cache)
    requested = {None: AUTO, True: AUTO, False: NONE}.get(counters, counters)  # type: ignore[arg-type]
    try:
        choice = select_source(requested)
    except CountersUnavailable as exc:
        raise PlacementError(f"--counters-source {requested}: {exc.reason}") from None
    with phases("reading"):
        if not is_mlir(path):  # ONNX Runtime runs it too; refused before it is even lowered
            check_model_memory(path, read_onnx(path, load_weights=False), memory_limit_gb)
    if program is None:
        with phases("lowering"):
            program = lower_model(path)
    if lowered is not None:
        lowered(program, phases.seconds.get("lowering", 0.0))
    if not program.nests:
        raise PlacementError(f"{path}: the lowering materializes no loop nests; nothing to place")
    check_program_memory(program, memory_limit_gb)

    def phase(name: str) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        return lambda done, total: progress(name, done, total)

    # B_cpu of rule C3's theta, on the host that times the nests; its buffer (>= 128 MiB)
    # is freed before the nests run.
    host_dram_read = measure_dram_read().to_json()
    onnx_ref = None if program.source_kind == "mlir" else path
    if host_times != "jit":  # time (and count) the program a compiler would run
        from placement.profiling.mlir.optimize import optimize_program

        with phases("host optimization"):
            program = optimize_program(program)
    with phases("JIT timing"):
        timing = time_nests(
            program, runs=runs, warmup=warmup, seed=seed, check_against_onnx=onnx_ref,
            progress=phase("timing"), cache=cache, markers=markers,
        )  # fmt: skip
    check_seconds = timing.metadata.get("output_check_seconds")
    if check_seconds is not None:  # timed inside time_nests, after the JIT is released
        phases.split("JIT timing", "output check", check_seconds)
    with phases("ONNX Runtime") if onnx_ref is not None else contextlib.nullcontext():
        t_cpu, host_detail, ort_cpu_only, ort_record = _host_times(
            path, program, timing, host_times, onnx_ref is not None,
            runs=runs, warmup=warmup, seed=seed, cache=cache, phase=phase,
            memory_limit_gb=memory_limit_gb, min_seconds=min_seconds,
        )  # fmt: skip
    counting = {PERF: "counters (perf)", SIMULATED: "cache simulation"}.get(choice.source)
    with phases(counting) if counting else contextlib.nullcontext():
        values, source, simulation = _nest_counters(
            program, choice, requested, timing,
            runs=runs, warmup=warmup, seed=seed, cache=cache, phase=phase,
            cache_geometry=cache_geometry, representative_layers=representative_layers,
        )  # fmt: skip
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
        "phase_seconds": phases.seconds,
        "phase_started": phases.started,  # Unix time
        "machine_load": {"before": phases.load_before, "after": _load()},
    }
    if simulation is not None:
        metadata["simulation"] = simulation
    return NestProfile(
        host_times=host_times,
        cache=cache,
        ort_cpu_only=ort_cpu_only,
        host_dram_read=host_dram_read,
        nests=list(program.nests),
        t_cpu=t_cpu,
        counters=values,
        counter_source=source,
        model_sha256=sha,
        model_path=str(path),
        source_kind=program.source_kind,
        metadata=metadata,
    )


def _host_times(
    path: Path, program: Any, timing: Any, host_times: str, is_onnx: bool, *,
    runs: int, warmup: int, seed: int, cache: str,
    phase: Callable[[str], Callable[[int, int], None] | None], memory_limit_gb: float | None,
    min_seconds: float,
) -> tuple[dict[str, float], dict[str, Any], float | None, dict[str, Any] | None]:  # fmt: skip
    """Each nest's T_cpu from ``host_times``, the record of how, and (for .onnx) ONNX
    Runtime's CPU-only time and profile summary, measured whatever the source."""
    t_cpu = dict(timing.t_cpu)
    detail: dict[str, Any] = {
        "source": host_times,
        "jit_seconds": dict(timing.t_cpu),  # the measured JIT times (compiled unless jit)
    }
    if not is_onnx:
        detail["onnxruntime"] = "not measured: .mlir input (nothing for ONNX Runtime to run)"
        return t_cpu, detail, None, None
    from placement.profiling.ort.apportion import apportion_ort
    from placement.profiling.ort.measure import profile_model

    ort_profile = profile_model(
        path, runs=runs, warmup=warmup, intra_op_threads=1, optimization="all",
        seed=seed, cache=cache, progress=phase(ORT_PHASE), memory_limit_gb=memory_limit_gb,
        min_seconds=min_seconds,
    )  # fmt: skip
    if host_times == "ort":
        t_cpu, detail["apportioning"] = apportion_ort(
            program.nests, timing.t_cpu, ort_profile.latencies
        )
    return t_cpu, detail, ort_profile.kernel_total, _ort_summary(ort_profile)


def _nest_counters(
    program: Any, choice: SourceChoice, requested: str, timing: Any, *,
    runs: int, warmup: int, seed: int, cache: str,
    phase: Callable[[str], Callable[[int, int], None] | None], cache_geometry: Any,
    representative_layers: bool,
) -> tuple[dict[str, dict[str, float]] | None, str, dict[str, Any] | None]:  # fmt: skip
    """The counters per nest from the chosen source, the profile's counter source label
    and the simulation's record (simulated counters only)."""
    program_seconds = timing.total_seconds
    if choice.source == PERF:
        try:
            values = count_nests(
                program, choice.events, runs=runs, warmup=min(warmup, 1), seed=seed,
                progress=phase("counters"),
            )  # fmt: skip
        except CountersUnavailable as exc:
            if requested != AUTO:
                raise PlacementError(f"--counters-source perf: {exc.reason}") from None
            return None, f"{UNAVAILABLE}: {exc.reason}", None
        return values, MEASURED, None
    if choice.source != SIMULATED:
        return None, f"{UNAVAILABLE}: {choice.reason}", None

    from placement.profiling.cache_geometry import host_cache_geometry
    from placement.profiling.repeats import simulation_plan
    from placement.profiling.simulated import DEFAULT_WARMUP, simulate_nests

    geometry = cache_geometry or host_cache_geometry()
    cold = cache == "cold"
    plan = simulation_plan(program, geometry.ll.size, warm=not cold,
                           representatives=representative_layers)  # fmt: skip
    low, high = simulation_seconds(program, plan, timing, warmup=DEFAULT_WARMUP)
    if requested == AUTO and low > AUTO_SIMULATION_BUDGET_SECONDS:
        skipped = f"{choice.skipped[0]}; " if choice.skipped else ""
        reason = (
            f"{skipped}simulated counters skipped: the cache simulation would take"
            f" {low / 60:.0f}-{high / 60:.0f} min (runs of {program_seconds:.3g} s under"
            " valgrind); --counters-source simulated runs it anyway"
        )
        return None, f"{UNAVAILABLE}: {reason}", None
    try:
        sim = simulate_nests(
            program, geometry=geometry, cold=cold, seed=seed, plan=plan,
            progress=phase(f"{SIMULATION_PHASE} (~{low:.0f}-{high:.0f} s)"),
        )  # fmt: skip
    except (CountersUnavailable, PlacementError) as exc:
        reason = getattr(exc, "reason", None) or str(exc)
        if requested != AUTO:
            raise PlacementError(f"--counters-source simulated: {reason}") from None
        return None, f"{UNAVAILABLE}: simulated counters failed: {reason}", None
    simulation = dict(sim.metadata)
    if choice.skipped:
        simulation["perf_unavailable"] = choice.skipped[0]
    return sim.counters, SIMULATED, simulation


def simulation_seconds(program: Any, plan: Any, timing: Any, *, warmup: int) -> tuple[float, float]:
    """The cache simulation's expected wall time (low, high): the JIT's time of what runs
    under valgrind, at SIMULATION_SLOWDOWN. Every nest in every run, unless the plan skips
    nests: then the nests each run runs (by their share of the JIT's time)."""
    from placement.profiling.repeats import SKIP

    total = timing.total_seconds
    if plan.is_full:
        executed = (warmup + 1) * total
    else:
        nest_total = sum(timing.t_cpu.values()) or 1.0

        def share(modes: tuple[int, ...]) -> float:
            nests = zip(program.nests, modes, strict=True)
            return sum(timing.t_cpu[n.id] for n, mode in nests if mode != SKIP) / nest_total

        executed = total * (share(plan.counted_run) + warmup * share(plan.warm_up_run))
    low, high = (SIMULATION_STARTUP_SECONDS + executed * f for f in SIMULATION_SLOWDOWN)
    return low, high


class _Phases:
    """Wall time per phase of profile_nests, in order (``with phases("name"): ...``), and
    when each started (Unix time, for lining up a memory trace)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.started: dict[str, float] = {}
        self.load_before = _load()

    def __call__(self, name: str) -> Any:
        import time

        @contextlib.contextmanager
        def timed() -> Any:
            self.started.setdefault(name, time.time())
            start = time.perf_counter()
            try:
                yield
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

        return timed()

    def split(self, whole: str, part: str, seconds: float) -> None:
        """Move the last ``seconds`` of phase ``whole`` to a phase of its own."""
        self.seconds[whole] -= seconds
        self.seconds[part] = seconds
        self.started[part] = self.started[whole] + self.seconds[whole]


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def with_counters_file(profile: NestProfile, path: str | Path) -> NestProfile:
    """The profile with counters loaded from ``path`` (CSV/JSON keyed by nest id)."""
    table = load_counters(path, profile.nest_ids)
    meta = dict(profile.metadata, counters_file=str(path))
    return replace(profile, counters=table, counter_source=FILE, metadata=meta)


def profile_loops(path: str | Path, profile: NestProfile) -> dict[str, Loop]:
    """:func:`~placement.profiling.mlir.loops.nest_loops` of a fresh lowering of ``path``,
    checked against ``profile``'s nests.

    A profile from another lowering (another torch-mlir version) whose nests differ is an
    error: their blocks would not be the profile's."""
    from placement.profiling.mlir.loops import nest_loops

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
            "warnings", "median_run_wall_seconds", "attribution_rule", "min_seconds")  # fmt: skip
    record = {k: meta.get(k) for k in keys if k in meta}
    record["cpu_only_seconds"] = profile.kernel_total
    record["operator_seconds"] = dict(profile.latencies)
    return record


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None
