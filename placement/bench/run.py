"""``placement bench``: an instance set across formulations and solvers, Table-I style.

For each network (a name from :data:`placement.networks.zoo.NETWORKS`, generated as
int8, or an ONNX path), each hardware preset and each grid point (the paper's DSE grid
of 25/50/100/200 crossbars x 50/100/500/1000 ns MVM latency, or the preset alone), the
CIM instance is built once and every (formulation, solver) combination is run on it.
Every placement is verified (``placement.cim.verifier.verify_cim``); the ``verified`` column
says so per run. Host latencies are profiled once per network and cached as
``<out>/profiles/<network>-<sha12>.json`` (reused on rerun when the ONNX file is the same);
hardware whose host sets ``latency = "model"`` (``arm-a72-model``, ``x86-ryzen-model``)
takes them from the analytical host model instead, and nothing is profiled when every
hardware does. The ``host_latencies`` and ``host_mismatch`` columns say where they came
from (:mod:`placement.hardware.hostcheck`); a profile measured on another architecture
than a hardware's host is one warning per network and hardware.

Solvers ("modes"), every run through the one CIM pipeline
(:func:`placement.cim.pipeline.solve`: same extraction, fallback and verification):

* ``highs`` (default), ``scip``, ``cbc``, ``gurobi``: the Pyomo ILP of each formulation
  (``faithful``: the paper's Eqs. 5-14 as is, no start; ``tightened``: valid
  inequalities + per-pair big-M, with the list-scheduling heuristic as MIP start).
* ``cpsat``: the OR-Tools CP-SAT interval model (``placement.cim.cpsat_route``); its
  formulation column reads ``interval`` and it runs once per point.
* ``auto``: what ``placement solve`` runs by default (formulation, solver and method
  ``auto``: possibly the decomposition at bottlenecks); its formulation column reads
  ``auto`` and it runs once per point.
* ``cpsat+highs``: CP-SAT for half the time limit; unless it proved optimality, HiGHS
  (tightened) for the rest with CP-SAT's schedule as MIP start and upper bound; the
  bound reported is the better of the two (both are valid lower bounds).

A solver that fails on a run (status ``error``, or ``licence_limit`` when Gurobi's
size-limited licence refuses the model) is a row with its message; the rest still runs.

Time columns (seconds, wall clock, noisy on a shared machine): ``heuristic_s`` (the
list-scheduling heuristic), ``build_s`` (Pyomo model build + start values, as the solve
reports it), ``solve_s`` (the solver's own wall time), ``total_s`` (the whole run,
measured around it), ``overhead_s = total_s - heuristic_s - solve_s`` (model build,
hand-off to the solver, extraction, verification) and ``build_share = overhead_s /
total_s``.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from placement.bench.choices import (
    CP_MODES,
    FORMULATION_NAMES,
    GRIDS,
    MODES,
    PRODUCT_MODE,
)
from placement.bench.summary import (
    LICENCE_STATUS,
    UNAVAILABLE_STATUS,
    format_summary,
    summarize,
)
from placement.cim.instance import CimInstance, check_latencies, cim_instance
from placement.cim.pipeline import solve, unavailable_reason
from placement.cim.schedule import CimSchedule
from placement.errors import PlacementError, repeated
from placement.graph import load_graph
from placement.hardware.cim import load_hardware, with_overrides
from placement.hardware.hostcheck import host_latency_source
from placement.io import check_output_dir, missing_dirs, remove_created, write_text_atomic
from placement.networks.zoo import NETWORKS, network_path
from placement.onnxfile import read_onnx
from placement.profiling.host_profile import HostProfile
from placement.profiling.memory import check_model_memory
from placement.profiling.ort.measure import profile_model
from placement.solvers.base import DEFAULT_REL_GAP, SolverError, SolveResult

COLUMNS = (
    "network", "onnx", "hardware", "crossbars", "t_mvm_ns", "formulation", "solver", "repeat",
    "operators", "edges", "parallel_pairs", "variables", "binaries", "constraints",
    "heuristic_s", "build_s", "solve_s", "total_s", "overhead_s", "build_share",
    "status", "objective_s", "bound_s", "gap", "verified", "heuristic_makespan_s",
    "cpu_only_s", "speedup", "start", "message", "host_latencies", "host_mismatch",
)  # fmt: skip


# --- one run -------------------------------------------------------------------------


@dataclass
class RunOutcome:
    """What one (instance, formulation, solver) run produced (times in seconds)."""

    result: SolveResult
    schedule: CimSchedule | None
    verified: bool
    heuristic_seconds: float
    heuristic_makespan: float | None
    total_seconds: float


def run_one(
    instance: CimInstance,
    formulation: str,
    solver: str,
    *,
    time_limit: float,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = None,
    warm_start: bool | None = None,
) -> RunOutcome:
    """One run through the CIM pipeline (:func:`placement.cim.pipeline.solve`), verified.

    ``warm_start`` None means: the heuristic start for ``tightened`` only. The CP-SAT
    modes take no formulation (their column reads ``interval`` / ``tightened``).
    """
    tick = time.perf_counter()
    placed = solve(
        instance,
        formulation="auto" if solver in CP_MODES else formulation,
        solver=solver,
        warm_start=warm_start,
        time_limit=time_limit,
        rel_gap=rel_gap,
        threads=threads,
    )
    total = time.perf_counter() - tick
    opts = placed.result.options
    hs = opts.get("heuristic_seconds")
    hm = opts.get("heuristic_makespan")
    verified = placed.verification is not None and placed.verification.ok
    return RunOutcome(placed.result, placed.schedule, verified,
                      float(hs) if hs is not None else 0.0,
                      float(hm) if hm is not None else None, total)


# --- the instance set ----------------------------------------------------------------


@dataclass
class BenchNetwork:
    name: str
    path: Path
    graph: Any  # OpGraph
    latencies: dict[str, float] | None  # None: not profiled (every hardware models the host)
    profile_file: Path | None
    metadata: dict[str, Any] | None = None  # the profile's metadata (machine, cpu, ...)


def resolve_network(spec: str) -> tuple[str, Path]:
    """A zoo name (int8 network, generated and cached on first use) or an ONNX path."""
    if spec in NETWORKS:
        return spec, network_path(spec, int8=True)
    path = Path(spec)
    if not path.exists():
        raise PlacementError(
            f"{spec}: neither a network name ({', '.join(NETWORKS)}) nor an existing ONNX file"
        )
    return path.stem, path


def ingest_network(spec: str) -> tuple[str, Path, Any]:
    """(name, ONNX path, OpGraph) of a zoo name or an ONNX path, checked (nothing profiled)."""
    name, path = resolve_network(spec)
    return name, path, load_graph(path)


def profile_file(out_dir: Path, name: str, graph: Any) -> Path:
    """Where the host profile of ``graph`` is cached: ``out_dir/profiles/<name>-<sha12>.json``."""
    return out_dir / "profiles" / f"{name}-{graph.sha256[:12]}.json"


def profile_network(name: str, path: Path, graph: Any, out_dir: Path, *, runs: int = 20,
                    warmup: int = 5, log: Callable[[str], None] = lambda _: None,
                    profile: bool = True,
                    memory_limit_gb: float | None = None) -> BenchNetwork:
    """The network with its host profile: cached in ``out_dir/profiles``, or measured now
    and saved there; ``profile=False``: none (every hardware models the host latencies)."""
    if not profile:
        return BenchNetwork(name, path, graph, None, None)
    cache = profile_file(out_dir, name, graph)
    if cache.exists():
        measured = HostProfile.load(cache)
        measured.check_matches(graph.sha256, str(path))
        log(f"{name}: host profile reused from {cache}")
    else:
        tick = time.perf_counter()
        measured = profile_model(path, runs=runs, warmup=warmup, intra_op_threads=1,
                                 memory_limit_gb=memory_limit_gb)
        cache.parent.mkdir(parents=True, exist_ok=True)
        measured.save(cache)
        log(f"{name}: profiled in {time.perf_counter() - tick:.1f} s, saved {cache}")
    check_latencies(graph, measured.latencies, measured.source or "the host profile")
    return BenchNetwork(name, path, graph, dict(measured.latencies), cache, measured.metadata)


def parse_grid(spec: str) -> tuple[tuple[int | None, float | None], ...]:
    """``paper``, ``single``, or ``C[,C...]xT[,T...]`` (crossbars x MVM latency in ns);
    a value given twice is an error naming it (it would run the same point twice)."""
    if spec in GRIDS:
        return GRIDS[spec]
    try:
        left, right = spec.split("x")
        xbars = [int(c) for c in left.split(",") if c.strip()]
        t_mvm = [float(t) for t in right.split(",") if t.strip()]
    except ValueError:
        xbars, t_mvm = [], []
    if not xbars or not t_mvm or min(xbars) < 1 or not min(t_mvm) > 0:
        raise PlacementError(
            f"grid {spec!r}: use {', '.join(GRIDS)} or CROSSBARS[,..]xT_MVM_NS[,..],"
            " e.g. 25,100x50,1000"
        )
    for what, values in (("crossbar count", xbars), ("MVM latency", t_mvm)):
        twice = repeated(values)
        if twice:
            raise PlacementError(
                f"grid {spec!r}: {what} {', '.join(f'{v:g}' for v in twice)} given twice;"
                " give each value once"
            )
    return tuple((c, t) for c in xbars for t in t_mvm)


def grid_instances(
    net: BenchNetwork, hardware: str, grid: str
) -> Iterable[tuple[int, float, CimInstance | PlacementError]]:
    """(crossbars, t_mvm_ns, instance or the error building it) per grid point."""
    base = load_hardware(hardware)
    for crossbars, t_mvm in parse_grid(grid):
        hw = with_overrides(base, crossbars=crossbars, t_mvm_ns=t_mvm)
        try:
            inst: CimInstance | PlacementError = cim_instance(
                net.graph, net.latencies, hw.cim, host=hw.host
            )
        except PlacementError as exc:
            inst = exc
        yield hw.cim.crossbars, round(hw.cim.t_mvm * 1e9, 6), inst


def combos(formulations: Sequence[str], solvers: Sequence[str]) -> list[tuple[str, str]]:
    """(formulation, solver) pairs; CP-SAT modes do not take a formulation."""
    out: list[tuple[str, str]] = []
    for solver in solvers:
        if solver == "cpsat":
            out.append(("interval", solver))
        elif solver == "cpsat+highs":
            out.append(("tightened", solver))
        elif solver == PRODUCT_MODE:
            out.append(("auto", solver))
        else:
            out.extend((f, solver) for f in formulations)
    return out


def check_solvers(solvers: Sequence[str]) -> dict[str, str | None]:
    """Unavailable reason per requested solver (None = usable); unknown names raise."""
    unknown = [s for s in solvers if s not in MODES]
    if unknown:
        raise PlacementError(f"unknown solver {unknown[0]!r}; known: {', '.join(MODES)}")
    return {s: unavailable_reason(s) for s in solvers}  # PRODUCT_MODE is solve's "auto"


def run_bench(
    networks: Sequence[str],
    out_dir: Path,
    *,
    grid: str = "paper",
    hardware: Sequence[str] = ("arm-a72",),
    formulations: Sequence[str] = FORMULATION_NAMES,
    solvers: Sequence[str] = ("highs",),
    time_limit: float = 60.0,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = 2,
    repeat: int = 1,
    profile_runs: int = 20,
    progress: TextIO | None = sys.stderr,
    warn: Callable[[str], None] | None = None,
    memory_limit_gb: float | None = None,
) -> list[dict[str, Any]]:
    """Run everything; rows are written to ``out_dir/runs.csv`` and ``runs.json`` as they come.

    An unavailable solver gets one row per point with status ``unavailable`` and the reason
    (the rest still runs); a failed run is a row with status ``error`` and its message.
    ``warn`` receives one sentence per network and hardware whose profile was measured on
    another architecture than the hardware's host (default: a line on ``progress``).
    Every input (hardware names, networks, grid, the output directory, the memory a
    network's profiling needs against ``memory_limit_gb``) is checked before anything is
    profiled or written; a failure while profiling removes what this run created.
    """
    points = parse_grid(grid)
    bad = [f for f in formulations if f not in FORMULATION_NAMES]
    if bad:
        known = ", ".join(FORMULATION_NAMES)
        raise PlacementError(f"unknown formulation {bad[0]!r}; known: {known}")
    if repeat < 1:
        raise PlacementError(f"--repeat must be at least 1, got {repeat}")
    reasons = check_solvers(solvers)
    # Every input is checked before anything is profiled or written.
    bases = {h: load_hardware(h) for h in hardware}
    measured = any(not hw.host.modelled for hw in bases.values())
    check_output_dir(out_dir, f"-o {out_dir}", parents=True)
    ingested = [ingest_network(spec) for spec in networks]
    for name, path, graph in ingested:
        if measured and not profile_file(out_dir, name, graph).exists():
            check_model_memory(path, read_onnx(path), memory_limit_gb)

    def log(text: str) -> None:
        if progress is not None:
            print(text, file=progress, flush=True)

    for s, why in reasons.items():
        if why is not None:
            log(f"placement bench: solver {s} unavailable: {why}")
    say_warning = warn or (lambda text: log(f"placement: warning: {text}"))
    pairs = combos(formulations, solvers)
    created = missing_dirs(out_dir / "profiles")
    fresh = [f for f in (profile_file(out_dir, n, g) for n, _, g in ingested) if not f.exists()]
    try:
        nets = [profile_network(*net, out_dir, runs=profile_runs, log=log, profile=measured,
                                memory_limit_gb=memory_limit_gb) for net in ingested]
    except PlacementError:  # e.g. ONNX Runtime cannot run a model: leave nothing behind
        remove_created(fresh, created)
        raise
    out_dir.mkdir(parents=True, exist_ok=True)
    total = len(nets) * len(hardware) * len(points) * len(pairs) * repeat
    rows: list[dict[str, Any]] = []
    done = 0
    started = time.perf_counter()
    for net in nets:
        for hw_name in hardware:
            source = host_latency_source(bases[hw_name].name, bases[hw_name].host, net.metadata)
            if source.warning:  # once per network and hardware
                say_warning(f"{net.name} on {hw_name}: {source.warning}")
            for crossbars, t_mvm, inst in grid_instances(net, hw_name, grid):
                for formulation, solver in pairs:
                    for rep in range(repeat):
                        row = _row_base(net, hw_name, crossbars, t_mvm, formulation, solver, rep)
                        row.update(host_latencies=source.detail, host_mismatch=source.mismatch)
                        if isinstance(inst, PlacementError):
                            row.update(status="error", verified=False, message=str(inst))
                        elif reasons[solver] is not None:
                            _fill_instance(row, inst)
                            row.update(status=UNAVAILABLE_STATUS, verified=False,
                                       message=reasons[solver])
                        else:
                            _fill_instance(row, inst)
                            _fill_run(row, inst, formulation, solver, time_limit, rel_gap,
                                      threads)
                        rows.append(row)
                        done += 1
                        _write_rows(out_dir, rows)
                        log(_progress_line(done, total, started, row))
    summary = summarize(rows)
    (out_dir / "summary.txt").write_text("\n".join(format_summary(summary)) + "\n")
    _write_csv(out_dir / "summary.csv", summary, list(summary[0]) if summary else [])
    return rows


def _row_base(net: BenchNetwork, hw: str, crossbars: int, t_mvm: float, formulation: str,
              solver: str, rep: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(network=net.name, onnx=str(net.path), hardware=hw, crossbars=crossbars,
               t_mvm_ns=t_mvm, formulation=formulation, solver=solver, repeat=rep, message="")
    return row


def _fill_instance(row: dict[str, Any], inst: CimInstance) -> None:
    row.update(operators=len(inst.operators), edges=len(inst.edges),
               parallel_pairs=len(inst.parallel_pairs), cpu_only_s=inst.cpu_only_latency)


def _fill_run(row: dict[str, Any], inst: CimInstance, formulation: str, solver: str,
              time_limit: float, rel_gap: float, threads: int | None) -> None:
    tick = time.perf_counter()
    try:
        out = run_one(inst, formulation, solver, time_limit=time_limit, rel_gap=rel_gap,
                      threads=threads)
    except SolverError as exc:  # the solver failed (or a size-limited licence refused)
        r = exc.result
        row.update(
            status=LICENCE_STATUS if r.options.get("licence_limit") else "error",
            variables=r.size.variables, binaries=r.size.binaries,
            constraints=r.size.constraints, build_s=r.build_seconds, solve_s=r.solve_seconds,
            total_s=time.perf_counter() - tick, verified=False, message=r.message,
        )
        return
    except PlacementError as exc:  # includes a failed verification: a bug to report
        row.update(status="error", verified=False, total_s=time.perf_counter() - tick,
                   message=str(exc))
        return
    r = out.result
    status = r.status.value
    overhead = max(out.total_seconds - out.heuristic_seconds - r.solve_seconds, 0.0)
    makespan = out.schedule.makespan if out.schedule is not None else None
    row.update(
        variables=r.size.variables, binaries=r.size.binaries, constraints=r.size.constraints,
        heuristic_s=out.heuristic_seconds, build_s=r.build_seconds, solve_s=r.solve_seconds,
        total_s=out.total_seconds, overhead_s=overhead,
        build_share=overhead / out.total_seconds if out.total_seconds > 0 else 0.0,
        status=status, objective_s=r.objective, bound_s=r.best_bound, gap=r.gap,
        verified=out.verified, heuristic_makespan_s=out.heuristic_makespan,
        speedup=(inst.cpu_only_latency / makespan) if makespan else None,
        start=r.options.get("start", ""), message=r.message,
    )
    if solver == PRODUCT_MODE:  # say what "auto" stood for on this instance
        ran = (f"ran {r.options.get('method', 'monolithic')}, formulation"
               f" {r.options.get('formulation', '?')}, solver {r.solver}")  # fmt: skip
        row["message"] = f"{ran}; {r.message}" if r.message else ran


def _progress_line(done: int, total: int, started: float, row: dict[str, Any]) -> str:
    gap = row.get("gap")
    gap_text = "-" if gap is None else f"{100 * gap:.3f}%"
    t = row.get("total_s")
    return (
        f"[{done}/{total} {time.perf_counter() - started:.0f}s] {row['network']} {row['hardware']}"
        f" C={row['crossbars']} t_mvm={row['t_mvm_ns']:g}ns {row['formulation']}/{row['solver']}:"
        f" {row['status']} gap {gap_text} in {'-' if t is None else f'{t:.2f}'}s"
        f" verified={row['verified']}"
        + (f" ({row['message']})" if row.get("message") and row["status"] != "optimal" else "")
    )


def _write_rows(out_dir: Path, rows: list[dict[str, Any]]) -> None:
    """Rewrite runs.csv/json after every run: a long benchmark leaves usable partial output."""
    _write_csv(out_dir / "runs.csv", rows, list(COLUMNS))
    text = json.dumps(rows, indent=1, default=str, allow_nan=False) + "\n"
    write_text_atomic(out_dir / "runs.json", text, "the benchmark's rows")


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    buf = io.StringIO(newline="")
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    write_text_atomic(path, buf.getvalue(), "the benchmark's rows")


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.9g}"
    return value
