"""``placement bench``: an instance set across formulations and solvers, Table-I style.

For each network (a name from :data:`placement.networks.zoo.NETWORKS`, generated as
int8, or an ONNX path), each hardware preset and each grid point (the paper's DSE grid
of 25/50/100/200 crossbars x 50/100/500/1000 ns MVM latency, or the preset alone), the
CIM instance is built once and every (formulation, solver) combination is run on it.
Every placement is verified (``placement.cim.verify.verify_cim``); the ``verified`` column
says so per run. Host latencies are profiled once per network and cached as
``<out>/profiles/<network>-<sha12>.json`` (reused on rerun when the ONNX file is the same).

Solvers ("modes"):

* ``highs`` (default), ``scip``, ``cbc``, ``gurobi``: the Pyomo ILP of each formulation
  (``faithful``: the paper's Eqs. 5-14 as is, no start; ``tightened``: valid
  inequalities + per-pair big-M, with the list-scheduling heuristic as MIP start).
  HiGHS runs through :func:`placement.cim.solve.solve_cim`; the others through
  :func:`solve_cim_backend` (same extraction, fallback and verification).
* ``cpsat``: the OR-Tools CP-SAT interval model (``placement.solvers.cpsat``); its
  formulation column reads ``interval`` and it runs once per point.
* ``cpsat+highs``: CP-SAT for half the time limit; unless it proved optimality, HiGHS
  (tightened) for the rest with CP-SAT's schedule as MIP start and upper bound; the
  bound reported is the better of the two (both are valid lower bounds).

Time columns (seconds, wall clock, noisy on a shared machine): ``heuristic_s`` (the
list-scheduling heuristic), ``build_s`` (Pyomo model build + start values, as the solve
reports it), ``solve_s`` (the solver's own wall time), ``total_s`` (the whole run,
measured around it), ``overhead_s = total_s - heuristic_s - solve_s`` (model build,
hand-off to the solver, extraction, verification) and ``build_share = overhead_s /
total_s``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pyomo.environ as pyo

from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule
from placement.errors import PlacementError
from placement.solvers.base import SolveResult, SolveStatus

PAPER_CROSSBARS: tuple[int, ...] = (25, 50, 100, 200)
PAPER_T_MVM_NS: tuple[float, ...] = (50.0, 100.0, 500.0, 1000.0)
GRIDS: dict[str, tuple[tuple[int | None, float | None], ...]] = {
    "paper": tuple((c, t) for c in PAPER_CROSSBARS for t in PAPER_T_MVM_NS),
    "single": ((None, None),),  # the preset's own crossbars and MVM latency
}
FORMULATION_NAMES = ("faithful", "bounded", "tightened", "auto")
MIP_SOLVERS = ("highs", "scip", "cbc", "gurobi")
MODES = (*MIP_SOLVERS, "cpsat", "cpsat+highs")
COLUMNS = (
    "network", "onnx", "hardware", "crossbars", "t_mvm_ns", "formulation", "solver", "repeat",
    "operators", "edges", "parallel_pairs", "variables", "binaries", "constraints",
    "heuristic_s", "build_s", "solve_s", "total_s", "overhead_s", "build_share",
    "status", "objective_s", "bound_s", "gap", "verified", "heuristic_makespan_s",
    "cpu_only_s", "speedup", "start", "message",
)  # fmt: skip
LICENCE_STATUS = "licence_limit"  # Gurobi's size-limited licence refused the model
UNAVAILABLE_STATUS = "unavailable"


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


def solve_cim_backend(
    instance: CimInstance,
    solver: str,
    *,
    formulation: str = "faithful",
    warm_start: bool = False,
    start_schedule: CimSchedule | None = None,
    time_limit: float | None = None,
    rel_gap: float = 1e-4,
    threads: int | None = None,
) -> tuple[SolveResult, CimSchedule | None]:
    """Like :func:`placement.cim.solve.solve_cim` for any MIP backend; the schedule is verified.

    ``start_schedule`` (a feasible schedule, e.g. CP-SAT's) replaces the heuristic as
    MIP start and as the upper bound of the per-pair big-M. The result's objective and
    bound are in seconds. Raises :class:`PlacementError` if a returned schedule fails
    verification or the solver claims infeasibility.
    """
    from placement.cim.heuristic import heuristic_schedule
    from placement.cim.solve import _heuristic_placement, _tighten_incumbent
    from placement.cim.verify import verify_cim
    from placement.models.cim.build import (
        build_cim_model,
        extract_schedule,
        formulation_families,
        start_values,
    )
    from placement.solvers.registry import solve_with

    families = formulation_families(formulation)
    start_from = start_schedule
    heuristic_seconds = 0.0
    if start_from is None and (warm_start or "window_big_m" in families):
        tick = time.perf_counter()
        start_from = heuristic_schedule(instance)
        heuristic_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    upper = start_from.makespan if start_from is not None else None
    model = build_cim_model(instance, families=families, upper_bound=upper)
    use_start = start_from is not None and (warm_start or start_schedule is not None)
    start = start_values(model, instance, start_from) if use_start and start_from else None
    build_seconds = time.perf_counter() - tick
    raw = solve_with(model, solver, time_limit=time_limit, rel_gap=rel_gap, threads=threads,
                     start=start, build_seconds=build_seconds)
    extra: dict[str, object] = {"formulation": formulation}
    if start_from is not None:
        extra["heuristic_makespan"] = start_from.makespan
        extra["heuristic_seconds"] = heuristic_seconds
    unit = pyo.value(model.time_unit)
    result = dataclasses.replace(
        raw,
        options={**raw.options, **extra},
        objective=None if raw.objective is None else raw.objective * unit,
        best_bound=None if raw.best_bound is None else raw.best_bound * unit,
    )
    if result.status == SolveStatus.INFEASIBLE:
        raise PlacementError(f"{solver} declared the CIM model infeasible ({result.message}),"
                             " but all-host is always feasible: solver error")
    if result.status == SolveStatus.ERROR:
        return result, None
    if use_start and start_from is not None and result.status != SolveStatus.OPTIMAL:
        if result.objective is None or result.objective > start_from.makespan:
            placed = _heuristic_placement(instance, result, start_from, instance.cpu_only_latency)
            return placed.result, placed.schedule
    if not result.status.has_solution:
        return result, None
    schedule = extract_schedule(model, instance)
    result = _tighten_incumbent(result, schedule)
    verify_cim(instance, schedule, claimed_makespan=result.objective).raise_if_failed()
    return result, schedule


def run_one(
    instance: CimInstance,
    formulation: str,
    solver: str,
    *,
    time_limit: float,
    rel_gap: float = 1e-4,
    threads: int | None = None,
    warm_start: bool | None = None,
) -> RunOutcome:
    """One run; ``warm_start`` None means: the heuristic start for ``tightened`` only."""
    warm = formulation == "tightened" if warm_start is None else warm_start
    tick = time.perf_counter()
    if solver == "highs":
        from placement.cim.solve import solve_cim

        placed = solve_cim(instance, formulation=formulation, warm_start=warm,
                           time_limit=time_limit, rel_gap=rel_gap, threads=threads)
        result, schedule = placed.result, placed.schedule
    elif solver in MIP_SOLVERS:
        result, schedule = solve_cim_backend(
            instance, solver, formulation=formulation, warm_start=warm,
            time_limit=time_limit, rel_gap=rel_gap, threads=threads,
        )
    elif solver == "cpsat":
        from placement.solvers.cpsat import solve_cpsat

        out = solve_cpsat(instance, time_limit=time_limit, rel_gap=rel_gap, threads=threads)
        result, schedule = out.result, out.schedule
    elif solver == "cpsat+highs":
        result, schedule = _cpsat_then_highs(instance, time_limit, rel_gap, threads)
    else:
        raise PlacementError(f"unknown solver {solver!r}; known: {', '.join(MODES)}")
    total = time.perf_counter() - tick
    verified = False
    if schedule is not None:
        from placement.cim.verify import verify_cim

        verified = verify_cim(instance, schedule, claimed_makespan=result.objective).ok
    opts = result.options
    hs = opts.get("heuristic_seconds")
    hm = opts.get("heuristic_makespan")
    return RunOutcome(result, schedule, verified, float(hs) if hs is not None else 0.0,
                      float(hm) if hm is not None else None, total)


def _cpsat_then_highs(
    instance: CimInstance, time_limit: float, rel_gap: float, threads: int | None
) -> tuple[SolveResult, CimSchedule | None]:
    """CP-SAT for half the limit; if not proven, HiGHS (tightened) from its incumbent."""
    from placement.solvers.cpsat import solve_cpsat

    tick = time.perf_counter()
    first = solve_cpsat(instance, time_limit=time_limit / 2, rel_gap=rel_gap, threads=threads)
    r1 = first.result
    heur_s = r1.options.get("heuristic_seconds", 0.0)
    if r1.status == SolveStatus.OPTIMAL or first.schedule is None:
        return dataclasses.replace(r1, solver="cpsat+highs"), first.schedule
    left = max(time_limit - (time.perf_counter() - tick), 1.0)
    r2, sched = solve_cim_backend(instance, "highs", formulation="tightened",
                                  start_schedule=first.schedule, time_limit=left,
                                  rel_gap=rel_gap, threads=threads)
    if sched is None:
        sched = first.schedule
    obj = sched.makespan if sched is not None else None
    bounds = [b for b in (r1.best_bound, r2.best_bound) if b is not None]
    bound = max(bounds) if bounds else None
    gap = None
    if obj is not None and bound is not None:
        gap = max(obj - bound, 0.0) / obj if obj > 0 else 0.0
    status = r2.status
    if status != SolveStatus.OPTIMAL and gap is not None and gap <= rel_gap:
        status = SolveStatus.OPTIMAL  # the two bounds together prove it
    if status == SolveStatus.ERROR and sched is not None:
        status = SolveStatus.TIME_LIMIT  # HiGHS failed; CP-SAT's verified schedule stands
    message = "; ".join(m for m in (r1.message, r2.message) if m)
    options = {**r2.options, "cpsat_seconds": r1.solve_seconds, "cpsat_bound": r1.best_bound,
               "heuristic_seconds": heur_s,
               "heuristic_makespan": r1.options.get("heuristic_makespan")}
    return dataclasses.replace(
        r2, status=status, solver="cpsat+highs", objective=obj, best_bound=bound, gap=gap,
        build_seconds=r1.build_seconds + r2.build_seconds,
        solve_seconds=r1.solve_seconds + r2.solve_seconds, message=message, options=options,
    ), sched


# --- the instance set ----------------------------------------------------------------


@dataclass
class BenchNetwork:
    name: str
    path: Path
    graph: Any  # OpGraph
    latencies: dict[str, float]
    profile_file: Path


def resolve_network(spec: str) -> tuple[str, Path]:
    """A zoo name (int8 network, generated and cached on first use) or an ONNX path."""
    from placement.networks.zoo import NETWORKS, network_path

    if spec in NETWORKS:
        return spec, network_path(spec, int8=True)
    path = Path(spec)
    if not path.exists():
        raise PlacementError(
            f"{spec}: neither a network name ({', '.join(NETWORKS)}) nor an existing ONNX file"
        )
    return path.stem, path


def load_network(spec: str, out_dir: Path, *, runs: int = 20, warmup: int = 5,
                 log: Callable[[str], None] = lambda _: None) -> BenchNetwork:
    """Ingest and profile once; the profile JSON is cached under ``out_dir/profiles``."""
    from placement.graph import load_graph
    from placement.profiling.host_profile import HostProfile
    from placement.profiling.ort.measure import profile_model

    name, path = resolve_network(spec)
    graph = load_graph(path)
    cache = out_dir / "profiles" / f"{name}-{graph.sha256[:12]}.json"
    if cache.exists():
        profile = HostProfile.load(cache)
        profile.check_matches(graph.sha256, str(path))
        log(f"{name}: host profile reused from {cache}")
    else:
        tick = time.perf_counter()
        profile = profile_model(path, runs=runs, warmup=warmup, intra_op_threads=1)
        cache.parent.mkdir(parents=True, exist_ok=True)
        profile.save(cache)
        log(f"{name}: profiled in {time.perf_counter() - tick:.1f} s, saved {cache}")
    return BenchNetwork(name, path, graph, dict(profile.latencies), cache)


def parse_grid(spec: str) -> tuple[tuple[int | None, float | None], ...]:
    """``paper``, ``single``, or ``C[,C...]xT[,T...]`` (crossbars x MVM latency in ns)."""
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
    return tuple((c, t) for c in xbars for t in t_mvm)


def grid_instances(
    net: BenchNetwork, hardware: str, grid: str
) -> Iterable[tuple[int, float, CimInstance | PlacementError]]:
    """(crossbars, t_mvm_ns, instance or the error building it) per grid point."""
    from placement.cim.instance import cim_instance
    from placement.hardware.cim import load_hardware, with_overrides

    base = load_hardware(hardware)
    for crossbars, t_mvm in parse_grid(grid):
        hw = with_overrides(base, crossbars=crossbars, t_mvm_ns=t_mvm)
        try:
            inst: CimInstance | PlacementError = cim_instance(net.graph, net.latencies, hw.cim)
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
        else:
            out.extend((f, solver) for f in formulations)
    return out


def check_solvers(solvers: Sequence[str]) -> dict[str, str | None]:
    """Unavailable reason per requested solver (None = usable); unknown names raise."""
    from placement.solvers.cpsat import cpsat_unavailable
    from placement.solvers.registry import available_solvers

    unknown = [s for s in solvers if s not in MODES]
    if unknown:
        raise PlacementError(f"unknown solver {unknown[0]!r}; known: {', '.join(MODES)}")
    mip = available_solvers()
    cp = cpsat_unavailable()
    reasons: dict[str, str | None] = {}
    for s in solvers:
        if s == "cpsat":
            reasons[s] = cp
        elif s == "cpsat+highs":
            reasons[s] = cp or mip["highs"]
        else:
            reasons[s] = mip[s]
    return reasons


def run_bench(
    networks: Sequence[str],
    out_dir: Path,
    *,
    grid: str = "paper",
    hardware: Sequence[str] = ("arm-a72",),
    formulations: Sequence[str] = FORMULATION_NAMES,
    solvers: Sequence[str] = ("highs",),
    time_limit: float = 60.0,
    rel_gap: float = 1e-4,
    threads: int | None = 2,
    repeat: int = 1,
    profile_runs: int = 20,
    progress: TextIO | None = sys.stderr,
) -> list[dict[str, Any]]:
    """Run everything; rows are written to ``out_dir/runs.csv`` and ``runs.json`` as they come.

    An unavailable solver gets one row per point with status ``unavailable`` and the reason
    (the rest still runs); a failed run is a row with status ``error`` and its message.
    """
    points = parse_grid(grid)
    bad = [f for f in formulations if f not in FORMULATION_NAMES]
    if bad:
        known = ", ".join(FORMULATION_NAMES)
        raise PlacementError(f"unknown formulation {bad[0]!r}; known: {known}")
    if repeat < 1:
        raise PlacementError(f"--repeat must be at least 1, got {repeat}")
    reasons = check_solvers(solvers)
    out_dir.mkdir(parents=True, exist_ok=True)

    def log(text: str) -> None:
        if progress is not None:
            print(text, file=progress, flush=True)

    for s, why in reasons.items():
        if why is not None:
            log(f"placement bench: solver {s} unavailable: {why}")
    pairs = combos(formulations, solvers)
    nets = [load_network(spec, out_dir, runs=profile_runs, log=log) for spec in networks]
    total = len(nets) * len(hardware) * len(points) * len(pairs) * repeat
    rows: list[dict[str, Any]] = []
    done = 0
    started = time.perf_counter()
    for net in nets:
        for hw_name in hardware:
            for crossbars, t_mvm, inst in grid_instances(net, hw_name, grid):
                for formulation, solver in pairs:
                    for rep in range(repeat):
                        row = _row_base(net, hw_name, crossbars, t_mvm, formulation, solver, rep)
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
    except PlacementError as exc:  # includes a failed verification: a bug to report
        row.update(status="error", verified=False, total_s=time.perf_counter() - tick,
                   message=str(exc))
        return
    r = out.result
    status = r.status.value
    if r.options.get("licence_limit"):
        status = LICENCE_STATUS
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
    tmp = out_dir / ".runs.json.tmp"
    tmp.write_text(json.dumps(rows, indent=1, default=str, allow_nan=False) + "\n")
    tmp.replace(out_dir / "runs.json")


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    tmp.replace(path)


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.9g}"
    return value


# --- Table I --------------------------------------------------------------------------


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (network, hardware, formulation, solver), over grid points and repeats."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["network"], row["hardware"], row["formulation"], row["solver"])
        groups.setdefault(key, []).append(row)
    out = []
    for (net, hw, form, solver), rs in groups.items():
        ran = [r for r in rs if r.get("total_s") is not None and r["status"] not in
               (UNAVAILABLE_STATUS, LICENCE_STATUS)]
        gaps = [r["gap"] for r in ran if r.get("gap") is not None]
        statuses = sorted({r["status"] for r in rs})
        out.append({
            "network": net, "hardware": hw, "formulation": form, "solver": solver,
            "operators": _first(rs, "operators"),
            "variables": _max(rs, "variables"), "binaries": _max(rs, "binaries"),
            "constraints": _max(rs, "constraints"),
            "runs": len(rs),
            "optimal": sum(1 for r in rs if r["status"] == "optimal"),
            "verified": sum(1 for r in rs if r["verified"]),
            "mean_total_s": _mean([r["total_s"] for r in ran]),
            "max_total_s": max((r["total_s"] for r in ran), default=None),
            "mean_solve_s": _mean([r["solve_s"] for r in ran if r.get("solve_s") is not None]),
            "mean_gap": _mean(gaps), "max_gap": max(gaps, default=None),
            "no_gap_runs": len(ran) - len(gaps),
            "mean_build_share": _mean([r["build_share"] for r in ran
                                       if r.get("build_share") is not None]),
            "statuses": ",".join(statuses),
        })
    return out


def _first(rows: Sequence[dict[str, Any]], key: str) -> Any:
    return next((r[key] for r in rows if r.get(key) is not None), None)


def _max(rows: Sequence[dict[str, Any]], key: str) -> Any:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return max(vals) if vals else None


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _pct(v: float | None) -> float | None:
    return None if v is None else 100 * v


def format_summary(summary: Sequence[dict[str, Any]]) -> list[str]:
    """The Table-I-shaped text table (gaps in %, times in s)."""
    w = max([14, *(len(str(s["network"])) + 2 for s in summary)])
    head = (f"{'network':<{w}}{'hw':<10}{'formulation':<12}{'solver':<12}{'ops':>5}{'vars':>7}"
            f"{'bins':>7}{'rows':>7}{'mean s':>9}{'max s':>9}{'mean gap%':>10}{'max gap%':>9}"
            f"{'opt/pts':>9}{'verif':>7}{'build%':>7}")
    lines = [head, "-" * len(head)]

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    for s in summary:
        lines.append(
            f"{s['network']:<{w}}{s['hardware']:<10}{s['formulation']:<12}{s['solver']:<12}"
            f"{num(s['operators'], 'd'):>5}{num(s['variables'], 'd'):>7}"
            f"{num(s['binaries'], 'd'):>7}{num(s['constraints'], 'd'):>7}"
            f"{num(s['mean_total_s'], '.3f'):>9}{num(s['max_total_s'], '.2f'):>9}"
            f"{num(None if s['mean_gap'] is None else 100 * s['mean_gap'], '.3f'):>10}"
            f"{num(None if s['max_gap'] is None else 100 * s['max_gap'], '.3f'):>9}"
            f"{s['optimal']:>5}/{s['runs']:<3}{s['verified']:>7}"
            f"{num(_pct(s['mean_build_share']), '.1f'):>7}"
            + ("" if s["statuses"] in ("optimal", "optimal,time_limit", "time_limit")
               else f"  [{s['statuses']}]")
        )
    return lines
