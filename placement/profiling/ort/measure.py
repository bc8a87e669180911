"""Per-operator host latencies measured with ONNX Runtime (CPU, sequential).

Measuring
---------
One session (CPUExecutionProvider, ``ORT_SEQUENTIAL``, ``intra_op_threads``
intra-op threads, one inter-op thread, the requested graph optimization level)
runs the model on deterministic random inputs with ORT's profiler on: ``warmup``
runs back to back, then the ``runs`` measured runs in *rounds* (the runs of a
round back to back, a short pause between rounds; ``runs`` is split by
:func:`~placement.profiling.ort.robust.round_sizes`, e.g. 20 runs = 5 rounds of 4);
when they would take less than ``min_seconds`` (default 8 s) at the warm-up's pace,
rounds of 4 runs 0.3 s apart follow, as many as make the measured runs span that long
(the count is fixed before measuring, so the progress line counts to it).
The trace holds one ``model_run`` event per run; kernel events (``cat == "Node"``)
are assigned to the run whose window starts last before them, and the warm-up runs
are dropped. Per run, every kernel's time is split over original nodes (below).

Statistic and spread
--------------------
A node's latency is its *minimum over the measured runs* (``minimum-over-runs``,
:func:`~placement.profiling.ort.robust.fastest_time`): background load only adds
time, and on a shared machine it comes in spells of seconds, so a profile spanning a
few seconds reaches the node's own latency between them (why and how much:
:mod:`placement.profiling.ort.robust`). ``kernel_total`` is defined as the sum of
these per-node statistics, so the latencies sum to it exactly. A node's *spread* (``spread`` of the
profile) is the relative interquartile range ``(p75 - p25) / p50`` of its per-round
minima; ``metadata["total_spread"]`` is the same over the per-round totals of minima
(``metadata["round_kernel_seconds"]``); definitions in
:mod:`placement.profiling.ort.robust`. The median of the per-run kernel sums is
still recorded as ``metadata["median_run_kernel_seconds"]``.

``runs="auto"`` adds rounds of 4 runs until the minimum of the per-run *wall* time
(the kernel times are only known once the trace is read)
changed by at most ``tolerance`` over the last 3 rounds, after at least 5 rounds
(``metadata["stopped"] == "stable"``), or until ``time_budget`` seconds of warm-up
and measured runs are spent (``"time budget"``; the round under way is finished),
or until a cap on the run count that keeps ORT's trace small (``"run limit"``).

Machine load and warnings
-------------------------
``metadata["machine_load"]`` holds ``os.getloadavg()`` (1 minute) before and after
measuring, also divided by ``os.cpu_count()`` (``load_per_cpu_before/after``), and,
on Linux when loading the model, preparing the session and running took at least
0.25 s, ``busy_others_per_cpu``: the fraction of all CPUs kept busy by *other*
processes meanwhile (``/proc/stat`` busy time, steal included, minus this process's
CPU time). When the total's spread exceeds 5 %, or the machine was busy (others'
share above 0.5; without that figure, a load average above 0.5 per CPU before
measuring, which may include this process's own earlier work), one sentence is put
in ``metadata["warnings"]``.

Where the machine exposes RAPL energy counters (:mod:`placement.profiling.rapl`),
``metadata["host_power"]`` holds the package power the measured runs added above idle:
the measured host power of the energy model. Elsewhere (this project's VM) it is absent.

Before ORT sees the model, every node gets its
:func:`~placement.onnxfile.node_names` name, so ORT's derived kernel names start
from the names the rest of the tool uses (this also lets ORT load models with
duplicate node names, which it otherwise rejects).

Caveat, measured with onnxruntime 1.31 on x86: the profiler costs ~9 µs of wall
time per executed kernel, ~3-4 µs of which fall inside the kernel's own reported
duration (shape strings, memory statistics). Kernels of a few µs are therefore
overstated; ``metadata["median_run_wall_seconds"]`` beside
:func:`plain_inference_seconds` shows the overhead for a given model.

Attribution
-----------
Kernels of ORT's optimized graph are mapped back to the original nodes by the
attribution rule (version ``ort-groups/1``) described and implemented in
:mod:`placement.profiling.ort.attribution`; the trace is read by
:mod:`placement.profiling.ort.trace`. Attribution works per run, before any
statistic is taken.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
import onnxruntime as ort

from placement.errors import PlacementError
from placement.io import file_sha256
from placement.onnxfile import node_names, read_onnx
from placement.profiling.cache_flush import CacheFlusher, cache_metadata, make_flusher
from placement.profiling.host import LoadProbe, host_description
from placement.profiling.host_profile import HostProfile
from placement.profiling.memory import check_model_memory
from placement.profiling.ort.attribution import ATTRIBUTION_RULE_VERSION, attribute, tensor_shapes
from placement.profiling.ort.robust import (
    AUTO_MIN_ROUNDS,
    AUTO_TIME_BUDGET,
    AUTO_TOLERANCE,
    AUTO_WINDOW,
    MIN_SECONDS,
    ROUND_PAUSE_SECONDS,
    RUNS_PER_ROUND,
    SPACED_PAUSE_SECONDS,
    SPREAD_DEFINITION,
    STATISTIC,
    fastest_time,
    group_rounds,
    is_stable,
    relative_spread,
    round_minima,
    round_sizes,
    round_totals,
    stability_warning,
)
from placement.profiling.ort.session import (
    OPTIMIZATION_LEVELS,
    create_session,
    random_inputs,
    run_session,
    session_options,
)
from placement.profiling.ort.trace import (
    add_event_shapes,
    event_shares,
    per_node_times,
    split_runs,
)
from placement.profiling.rapl import METADATA_KEY as POWER_KEY
from placement.profiling.rapl import EnergyMeter, PowerMeasurement

# --runs auto: at most this many measured runs, and few enough that ORT's trace stays well
# below its cap of a million events (an event per kernel and run, plus a few per run).
_AUTO_MAX_RUNS = 400
_TRACE_EVENT_BUDGET = 500_000

Runs = int | Literal["auto"]


# --------------------------------------------------------------------------- public API


@dataclass
class Measurement:
    """The raw result of one profiling session, before any statistic is taken."""

    path: Path
    model_sha256: str
    names: list[str]  # original nodes, in graph order (node_names)
    per_run: list[dict[str, float]]  # per measured run: seconds charged to each node
    run_totals: list[float]  # per measured run: summed kernel seconds
    wall: list[float]  # per measured run: wall seconds of session.run (profiler on)
    sizes: list[int]  # runs per round, in order (sum = len(per_run))
    charge: dict[str, dict[str, float]]  # profiled kernel -> {node: fraction}
    notes: dict[str, str]  # attribution notes per node
    settings: dict[str, Any]  # optimization, intra_op_threads, warmup, seed, runs requested
    machine_load: dict[str, Any]
    auto: dict[str, Any] | None  # --runs auto: its parameters and why it stopped

    def node_rounds(self) -> dict[str, list[list[float]]]:
        """Per node, its per-run seconds cut into the rounds they were measured in."""
        return {
            name: group_rounds([run[name] for run in self.per_run], self.sizes)
            for name in self.names
        }


def profile_model(path: str | Path, **options: Any) -> HostProfile:
    """Measure every original node's host latency, in seconds (module docstring): per node
    the minimum over the runs of :func:`measure_runs` (``options`` are its). The
    profile's ``metadata["warnings"]`` holds a sentence when the
    measurement looks unreliable."""
    return summarize_runs(measure_runs(path, **options))


def measure_runs(
    path: str | Path,
    *,
    runs: Runs = 20,
    warmup: int = 5,
    min_seconds: float = MIN_SECONDS,
    intra_op_threads: int = 1,
    optimization: str = "all",
    seed: int = 0,
    tolerance: float = AUTO_TOLERANCE,
    time_budget: float = AUTO_TIME_BUDGET,
    round_pause: float = ROUND_PAUSE_SECONDS,
    progress: Callable[[int, int], None] | None = None,
    cache: str = "warm",
    memory_limit_gb: float | None = None,
) -> Measurement:
    """Run and trace the model; per node its per-run seconds, unreduced.

    ``runs`` measured runs (or ``"auto"``: rounds until stable within ``tolerance``, or
    ``time_budget`` seconds) after ``warmup`` runs, with ``round_pause`` seconds of sleep
    between rounds, then rounds 0.3 s apart for as long as the measured runs, at the
    warm-up's pace, would span less than ``min_seconds`` (0: only the runs asked for).
    ``progress(done, total)`` is called after every measured run (with
    ``"auto"``, ``total`` is the cap until the last call). ``cache="cold"`` flushes the
    last-level cache before every run (:mod:`placement.profiling.cache_flush`); the
    default ``"warm"`` runs back to back. A model whose run would need more memory than
    ``memory_limit_gb`` (default: half the available memory) is refused before anything
    is allocated (:mod:`placement.profiling.memory`)."""
    _check_options(runs, warmup, intra_op_threads, optimization, seed)
    if runs == "auto":
        _check_auto(tolerance, time_budget)
    if isinstance(min_seconds, bool) or not isinstance(min_seconds, (int, float)):
        raise PlacementError(f"minimum seconds must be a number, got {min_seconds!r}")
    if not (math.isfinite(min_seconds) and 0 <= min_seconds <= 600):
        raise PlacementError(f"minimum seconds must be 0 to 600, got {min_seconds!r}")
    if isinstance(round_pause, bool) or not isinstance(round_pause, (int, float)):
        raise PlacementError(f"round pause must be a number of seconds, got {round_pause!r}")
    if not 0 <= round_pause <= 60:
        raise PlacementError(f"round pause must be 0 to 60 seconds, got {round_pause!r}")
    probe = LoadProbe()  # from here to the last run: others' load while preparing and running
    path = Path(path)
    model = read_onnx(path, load_weights=False)  # ORT maps the weights from their files
    check_model_memory(path, model, memory_limit_gb)
    sha = file_sha256(path)
    names = node_names(model.graph)
    if not names:
        raise PlacementError(f"{path}: the model has no operators to profile")
    for node, name in zip(model.graph.node, names, strict=True):
        node.name = name  # ORT derives kernel names from these
    shapes = tensor_shapes(model)
    flusher = make_flusher(cache)
    session = _ProfiledSession(model, path, intra_op_threads, optimization, seed, round_pause)
    session.flusher = flusher
    session.min_seconds = min_seconds
    events, optimized, wall, sizes, auto, load = session.measure(
        runs, warmup, tolerance, time_budget, probe, progress
    )
    measured = split_runs(events, warmup, sum(sizes), path)
    add_event_shapes(shapes, optimized.graph, measured[0])
    attribution = attribute(model.graph, optimized.graph, shapes)
    charge = event_shares(attribution, measured)
    per_run, run_totals = per_node_times(names, charge, measured)
    return Measurement(
        path=path,
        model_sha256=sha,
        names=names,
        per_run=per_run,
        run_totals=run_totals,
        wall=wall,
        sizes=sizes,
        charge=charge,
        notes=dict(attribution.notes),
        settings={
            "optimization": optimization,
            "intra_op_threads": intra_op_threads,
            "warmup": warmup,
            "seed": seed,
            "runs_requested": runs,
            "min_seconds": min_seconds,
            "round_pause_seconds": round_pause,
            **cache_metadata(flusher),
            **({} if session.power is None else {POWER_KEY: session.power.to_json()}),
        },
        machine_load=load,
        auto=auto,
    )


def summarize_runs(measurement: Measurement) -> HostProfile:
    """The profile of a measurement: per node the minimum over its runs."""
    m = measurement
    rounds = m.node_rounds()
    latencies = {name: fastest_time(rounds[name]) for name in m.names}
    spread = {name: relative_spread(round_minima(rounds[name])) for name in m.names}
    kernel_total = math.fsum(latencies.values())
    totals = round_totals([rounds[name] for name in m.names])
    total_spread = relative_spread(totals)
    warning = stability_warning(
        total_spread=total_spread,
        rounds=len(m.sizes),
        round_totals=totals,
        load_per_cpu_before=m.machine_load.get("load_per_cpu_before"),
        busy_others_per_cpu=m.machine_load.get("busy_others_per_cpu"),
    )
    metadata = _metadata(
        m,
        kernel_total=kernel_total,
        round_kernel_seconds=totals,
        total_spread=total_spread,
        warnings=[warning] if warning else [],
    )
    metadata["kernels"] = {
        k: {n: round(f, 12) for n, f in shares.items()} for k, shares in m.charge.items()
    }
    return HostProfile(
        latencies=latencies,
        model_sha256=m.model_sha256,
        model_path=str(m.path),
        metadata=metadata,
        kernel_total=kernel_total,
        notes=dict(m.notes),
        spread=spread,
    )


def plain_inference_seconds(
    path: str | Path,
    *,
    runs: int = 20,
    warmup: int = 5,
    intra_op_threads: int = 1,
    optimization: str = "all",
    seed: int = 0,
    memory_limit_gb: float | None = None,
) -> list[float]:
    """Wall-clock seconds of each of ``runs`` plain runs (no profiler), after ``warmup`` runs
    (``memory_limit_gb`` as for :func:`measure_runs`)."""
    _check_options(runs, warmup, intra_op_threads, optimization, seed)
    if runs == "auto":
        raise PlacementError("runs must be an integer >= 1 for plain inference, got 'auto'")
    path = Path(path)
    model = read_onnx(path, load_weights=False)
    check_model_memory(path, model, memory_limit_gb)
    with tempfile.TemporaryDirectory(prefix="placement-plain-") as tmp:
        session = create_session(
            model, session_options(intra_op_threads, optimization), path, tmp
        )
        feeds = random_inputs(session, seed, path)
        for _ in range(warmup):
            run_session(session, feeds, path)
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            run_session(session, feeds, path)
            seconds.append(time.perf_counter() - start)
    return seconds


# --------------------------------------------------------------------------- session


class _ProfiledSession:
    """One ORT session with the profiler on, measured in rounds (module docstring)."""

    def __init__(
        self,
        model: onnx.ModelProto,
        path: Path,
        threads: int,
        optimization: str,
        seed: int,
        pause: float,
    ) -> None:
        self.model, self.path = model, path
        self.threads, self.optimization, self.seed = threads, optimization, seed
        self.pause = pause
        self.flusher: CacheFlusher | None = None  # cold cache: flushed before every run
        self.wall: list[float] = []
        self.sizes: list[int] = []
        self.power: PowerMeasurement | None = None  # RAPL, where the machine has it
        self.min_seconds = 0.0  # spaced rounds until the measured runs span this long

    def measure(
        self,
        runs: Runs,
        warmup: int,
        tolerance: float,
        time_budget: float,
        probe: LoadProbe,
        progress: Callable[[int, int], None] | None,
    ) -> tuple[
        list[dict[str, Any]],
        onnx.ModelProto,
        list[float],
        list[int],
        dict[str, Any] | None,
        dict[str, Any],
    ]:
        """Run with ORT's profiler on: the trace, optimized graph, run wall times, round
        sizes, the ``--runs auto`` record (or ``None``) and the machine load."""
        path = self.path
        with tempfile.TemporaryDirectory(prefix="placement-profile-") as tmp:
            options = session_options(self.threads, self.optimization)
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(tmp, "ort_profile")
            optimized_path = os.path.join(tmp, "optimized.onnx")
            options.optimized_model_filepath = optimized_path
            # Keep the saved graph small: only its structure is needed, not the weights.
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", "optimized.data"
            )
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
            )
            session = create_session(self.model, options, path, tmp)
            try:  # saved while the session was created
                optimized = onnx.load(optimized_path, load_external_data=False)
            except (OSError, ValueError) as exc:
                raise PlacementError(
                    f"{path}: ONNX Runtime left no usable optimized graph ({exc})"
                ) from None
            feeds = random_inputs(session, self.seed, path)
            started = time.perf_counter()
            for _ in range(warmup):
                self._flush()
                run_session(session, feeds, path)
            auto: dict[str, Any] | None = None
            meter = EnergyMeter.open()
            if meter is not None:
                meter.start()
            if runs == "auto":
                limit = _auto_run_limit(len(optimized.graph.node), warmup)
                auto = self._auto_rounds(
                    session, feeds, limit, tolerance, time_budget, started, progress
                )
            else:
                limit = _auto_run_limit(len(optimized.graph.node), warmup)
                per_run = (time.perf_counter() - started) / warmup if warmup else None
                total = self._planned(runs, per_run, limit)
                for size in round_sizes(runs):
                    self._round(session, feeds, size, total, progress)
                if per_run is None:  # no warm-up to time: plan from the measured runs
                    total = self._planned(runs, sum(self.wall) / len(self.wall), limit)
                self.pause = max(self.pause, SPACED_PAUSE_SECONDS)
                while len(self.wall) < total:
                    self._round(session, feeds, RUNS_PER_ROUND, total, progress)
            if meter is not None:
                self.power = meter.stop(busy_seconds=math.fsum(self.wall))
            load = probe.stop()
            trace_file = session.end_profiling()
            del session  # release ORT's handles before the directory goes
            try:
                with open(trace_file, encoding="utf-8") as fh:
                    events = json.load(fh)
            except (OSError, ValueError) as exc:
                raise PlacementError(f"{path}: ONNX Runtime left no usable trace ({exc})") from None
        return events, optimized, self.wall, self.sizes, auto, load

    def _round(
        self,
        session: ort.InferenceSession,
        feeds: dict[str, np.ndarray],
        size: int,
        total: int,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        """``size`` runs back to back, after a pause if a round came before."""
        if self.sizes:
            time.sleep(self.pause)
        for _ in range(size):
            self._flush()
            start = time.perf_counter()
            run_session(session, feeds, self.path)
            self.wall.append(time.perf_counter() - start)
            if progress is not None:
                progress(len(self.wall), total)
        self.sizes.append(size)

    def _planned(self, runs: int, per_run: float | None, limit: int) -> int:
        """Measured runs in all: ``runs``, and rounds of RUNS_PER_ROUND runs
        SPACED_PAUSE_SECONDS apart for as long as, at ``per_run`` seconds a run, the
        profile would span less than ``min_seconds`` (at most ``limit`` runs); ``runs``
        while the pace is not known."""
        if per_run is None:
            return runs
        sizes = round_sizes(runs)
        first = runs * per_run + (len(sizes) - 1) * self.pause
        if self.min_seconds <= first:
            return runs
        per_round = RUNS_PER_ROUND * per_run + SPACED_PAUSE_SECONDS
        rounds = math.ceil((self.min_seconds - first) / per_round)
        room = max(0, limit - runs) // RUNS_PER_ROUND
        return runs + RUNS_PER_ROUND * min(rounds, room)

    def _flush(self) -> None:
        if self.flusher is not None:
            self.flusher.flush()

    def _auto_rounds(
        self,
        session: ort.InferenceSession,
        feeds: dict[str, np.ndarray],
        limit: int,
        tolerance: float,
        time_budget: float,
        started: float,
        progress: Callable[[int, int], None] | None,
    ) -> dict[str, Any]:
        """Rounds of RUNS_PER_ROUND runs until stable, out of time, or at ``limit`` runs."""
        history: list[float] = []
        while True:
            self._round(session, feeds, RUNS_PER_ROUND, limit, progress)
            history.append(fastest_time(group_rounds(self.wall, self.sizes)))
            if is_stable(history, tolerance):
                stopped = "stable"
            elif time.perf_counter() - started >= time_budget:
                stopped = "time budget"
            elif len(self.wall) + RUNS_PER_ROUND > limit:
                stopped = "run limit"
            else:
                continue
            break
        if progress is not None and len(self.wall) != limit:
            progress(len(self.wall), len(self.wall))  # the true total: ends the counter
        return {
            "tolerance": tolerance,
            "time_budget_seconds": time_budget,
            "min_rounds": AUTO_MIN_ROUNDS,
            "window_rounds": AUTO_WINDOW,
            "max_runs": limit,
            "criterion": f"{STATISTIC} of the per-run wall time, after every round",
            "wall_statistic_seconds": history,
            "stopped": stopped,
            "seconds": time.perf_counter() - started,
        }


def _auto_run_limit(kernels: int, warmup: int) -> int:
    """Most measured runs ``--runs auto`` may take: a whole number of rounds, at least one."""
    per_run = 2 * max(1, kernels) + 4  # kernel events, generously, and the run's own events
    fits = _TRACE_EVENT_BUDGET // per_run - warmup
    runs = min(_AUTO_MAX_RUNS, fits)
    return max(RUNS_PER_ROUND, runs - runs % RUNS_PER_ROUND)


def _check_options(runs: Runs, warmup: int, threads: int, optimization: str, seed: int) -> None:
    if optimization not in OPTIMIZATION_LEVELS:
        raise PlacementError(
            f"unknown optimization level {optimization!r}; "
            f"choose one of {', '.join(OPTIMIZATION_LEVELS)}"
        )
    if runs != "auto" and (isinstance(runs, bool) or not isinstance(runs, int) or runs < 1):
        raise PlacementError(f"runs must be an integer >= 1 or 'auto', got {runs!r}")
    for label, value, low in (
        ("warmup", warmup, 0),
        ("intra-op threads", threads, 1),
        ("seed", seed, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PlacementError(f"{label} must be an integer >= {low}, got {value!r}")


def _check_auto(tolerance: float, time_budget: float) -> None:
    for label, value in (("tolerance", tolerance), ("time budget", time_budget)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise PlacementError(f"{label} must be a positive number, got {value!r}")
        if not math.isfinite(value):
            raise PlacementError(f"{label} must be finite, got {value!r}")


# --------------------------------------------------------------------------- metadata


def _metadata(
    m: Measurement,
    *,
    kernel_total: float,
    round_kernel_seconds: list[float],
    total_spread: float,
    warnings: list[str],
) -> dict[str, Any]:
    settings = m.settings
    metadata: dict[str, Any] = {
        "onnxruntime_version": ort.__version__,
        "onnx_version": onnx.__version__,
        "execution_provider": "CPUExecutionProvider",
        "execution_mode": "sequential",
        "optimization": settings["optimization"],
        "intra_op_threads": settings["intra_op_threads"],
        "inter_op_threads": 1,
        "runs": len(m.per_run),  # measured runs = sum of round_sizes
        "runs_requested": settings["runs_requested"],  # an integer or "auto"
        "min_seconds": settings.get("min_seconds", 0.0),  # measured runs span at least this
        "warmup": settings["warmup"],
        "seed": settings["seed"],
        "rounds": len(m.sizes),
        "runs_per_round": max(m.sizes),
        "round_sizes": list(m.sizes),
        "round_pause_seconds": settings["round_pause_seconds"],
        "cache": settings.get("cache", "warm"),  # "cold": LLC flushed before every run
        "cache_flush_bytes": settings.get("cache_flush_bytes"),
        # minimum over the measured runs, per node; kernel_total = their sum
        "statistic": STATISTIC,
        "spread_statistic": SPREAD_DEFINITION,
        **host_description(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "kernel_seconds": kernel_total,
        "total_spread": total_spread,
        "round_kernel_seconds": round_kernel_seconds,  # per round: sum of node minima
        "median_run_kernel_seconds": statistics.median(m.run_totals),
        "run_kernel_seconds": m.run_totals,
        # Wall time of a profiled run; compare with plain_inference_seconds for the overhead.
        "median_run_wall_seconds": statistics.median(m.wall),
        "machine_load": m.machine_load,
        "warnings": warnings,
        "attribution_rule": ATTRIBUTION_RULE_VERSION,
    }
    if POWER_KEY in settings:  # RAPL, measured during the runs
        metadata[POWER_KEY] = settings[POWER_KEY]
    if m.auto is not None:
        metadata["stopped"] = m.auto["stopped"]
        metadata["auto"] = m.auto
    return metadata


def profile_host(model: Any, **options: Any) -> HostProfile:
    """Per-operator host latencies of ``model`` (a path, or a graph from ``load_graph``)
    measured now with ONNX Runtime; ``options`` as for :func:`profile_model`."""
    return profile_model(getattr(model, "path", model), **options)
