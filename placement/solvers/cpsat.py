"""An exact non-MIP reference for the CIM makespan problem: an OR-Tools CP-SAT interval model.

Same problem as the ILP of ``placement.models.cim.build`` (paper Eqs. 5-14), stated with
scheduling constraints instead of big-M rows:

* per operator v a Boolean x_v (1 = host; fixed to 1 outside V_acc), integer start s_v
  and end e_v = s_v + T_acc,v + x_v (T_host,v - T_acc,v);
* one *optional* fixed-size interval [s_v, s_v + T_host,v) per operator, present iff
  x_v, and a single NoOverlap over them: the host runs one operator at a time (no
  ordering binaries, no big-M);
* per edge (u, v): s_v >= e_u, and s_v >= e_u + T_transfer,(u,v) enforced when
  x_u != x_v (two reified rows);
* the crossbar budget (Eq. 14), T >= e_v for sinks, minimize T;
* the valid bounds (1)-(3) of the solver notes (host-serial, ancestor/descendant host
  work, consecutive bottlenecks) and constant head/tail bounds on the domains; without
  them CP-SAT proves little on YOLO-sized graphs;
* the list-scheduling heuristic's schedule as a hint, its makespan as the horizon.

Integer data and rounding: CP-SAT needs integers. Every latency is divided by a time
unit ``u`` (1 ns, or finer for instances whose total work is under ~0.1 s, so that the
horizon spans at least ~1e8 units) and rounded *down*. The rounded instance is a
relaxation of the true one (a placement's makespan never grows when latencies shrink),
so CP-SAT's bound times ``u`` is a valid lower bound in seconds. CP-SAT's solution is
never reported with its rounded times: its assignment and its host order (by start
time) are re-timed by the earliest-start schedule on the ORIGINAL instance
(``placement.cim.schedule.asap_schedule``), which is feasible by construction, then checked
by ``verify_cim``. The reported gap is between that makespan and the rounded bound, so
rounding can only make the gap look larger (by at most about n_operators * u).

Process isolation: OR-Tools' ``libortools.so`` exports its own (older) HiGHS symbols, and
highspy's extension binds to whichever HiGHS is loaded first: importing ``ortools`` and
``highspy`` in one process breaks one of them ("undefined symbol", measured with
ortools 9.15 and highspy 1.15.1). CP-SAT therefore always runs in a separate ``spawn``ed
worker process (kept for reuse); this module never imports ``ortools`` in the caller's
process. The worker receives plain integer data and returns plain values.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from placement.cim.heuristic import heuristic_schedule
from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import CimSchedule, asap_schedule
from placement.cim.verify import verify_cim
from placement.errors import PlacementError
from placement.solvers.base import ModelSize, SolveResult, SolveStatus

SOLVER_NAME = "cpsat"
_INSTALL = "OR-Tools is not installed: pip install ortools"
_SPAN_UNITS = 1e8  # the horizon spans at least this many time units
_MAX_UNIT = 1e-9  # never coarser than 1 ns


def cpsat_unavailable() -> str | None:
    """None when OR-Tools' CP-SAT can be imported, else why not."""
    # Never import ortools here: it would break highspy in this process (module docstring).
    if importlib.util.find_spec("ortools") is None:
        return _INSTALL
    return None


def time_unit(instance: CimInstance) -> float:
    """Seconds per CP-SAT time unit: a power of ten, at most 1 ns."""
    horizon = instance.cpu_only_latency + math.fsum(e.t_transfer for e in instance.edges)
    if horizon <= 0.0:
        return _MAX_UNIT
    return min(_MAX_UNIT, 10.0 ** (math.floor(math.log10(horizon / _SPAN_UNITS))))


def rounded_instance(instance: CimInstance, unit: float) -> CimInstance:
    """The instance with every latency in ``unit``s, rounded down (a relaxation)."""
    def down(t: float) -> float:
        return float(math.floor(t / unit))

    ops = [
        CimOperator(op.name, down(op.t_host), None if op.t_acc is None else down(op.t_acc),
                    op.crossbars, op.op_type)
        for op in instance.operators
    ]
    edges = [CimEdge(e.src, e.dst, down(e.t_transfer)) for e in instance.edges]
    return CimInstance.build(ops, edges, instance.crossbar_budget)


@dataclass
class CpSatOutcome:
    """CP-SAT's result: a verified schedule on the original instance (or none)."""

    result: SolveResult  # objective and bound in seconds
    schedule: CimSchedule | None
    heuristic: CimSchedule


def solve_cpsat(
    instance: CimInstance,
    *,
    time_limit: float | None = None,
    rel_gap: float = 1e-4,
    threads: int | None = None,
    heuristic: CimSchedule | None = None,
    use_bounds: bool = True,
) -> CpSatOutcome:
    """Solve ``instance`` with CP-SAT's interval model; the schedule is verified.

    Status OPTIMAL only when CP-SAT proved its optimum and the re-timed makespan is within
    ``rel_gap`` of the (rounded, valid) bound. Without a CP-SAT solution the heuristic's
    schedule is reported (as ``solve_cim``'s warm start does), with CP-SAT's bound.
    """
    reason = cpsat_unavailable()
    if reason is not None:
        raise PlacementError(reason)
    if time_limit is not None and not (time_limit > 0 and math.isfinite(time_limit)):
        raise PlacementError(f"time limit must be a positive number of seconds, got {time_limit!r}")
    if not (rel_gap >= 0 and math.isfinite(rel_gap)):
        raise PlacementError(f"relative gap must be a non-negative number, got {rel_gap!r}")
    from placement.models.cim.build import _structure

    heuristic_seconds = 0.0
    if heuristic is None:
        tick = time.perf_counter()
        heuristic = heuristic_schedule(instance)
        heuristic_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    unit = time_unit(instance)
    r = rounded_instance(instance, unit)
    hint = asap_schedule(r, heuristic.on_host, heuristic.host_order)
    st = _structure(r, 1.0)
    names = [op.name for op in r.operators]
    data = {
        "names": names,
        "t_host": [int(op.t_host) for op in r.operators],
        "t_acc": [None if op.t_acc is None else int(op.t_acc) for op in r.operators],
        "crossbars": [op.crossbars for op in r.operators],
        "budget": r.crossbar_budget,
        "edges": [(e.src, e.dst, int(e.t_transfer)) for e in r.edges],
        "sinks": list(r.sinks),
        "horizon": int(math.ceil(hint.makespan)),
        "head": {v: int(math.floor(st["head"][v])) for v in names},
        "tail": {v: int(math.floor(st["tail"][v])) for v in names},
        "ancestors": {v: sorted(st["ancestors"][v]) for v in names},
        "descendants": {v: sorted(st["descendants"][v]) for v in names},
        "bottleneck_pairs": list(st["bottleneck_pairs"]),
        "use_bounds": use_bounds,
        "hint": {v: (bool(hint.on_host[v]), int(round(hint.start[v])),
                     int(round(hint.finish[v]))) for v in names},
        "time_limit": time_limit,
        "threads": threads,
        "rel_gap": rel_gap / 2,  # room for the re-timing's rounding
    }
    prepare = time.perf_counter() - tick
    tick = time.perf_counter()
    try:
        out = _executor().submit(_solve_in_worker, data).result()
    except BrokenProcessPool as exc:
        _shutdown()
        raise PlacementError(f"the CP-SAT worker process died: {exc}") from None
    wall = time.perf_counter() - tick
    build_seconds = prepare + out["build_seconds"]
    seconds = out["solve_seconds"]
    size = ModelSize(out["variables"], len(names), out["constraints"])
    words = f"CP-SAT: {out['status']}"
    options: dict[str, object] = {
        "time_limit": time_limit, "rel_gap": rel_gap, "threads": threads, "time_unit": unit,
        "heuristic_makespan": heuristic.makespan, "heuristic_seconds": heuristic_seconds,
        "cpsat_status": out["status"],
        "worker_overhead_seconds": max(wall - out["build_seconds"] - seconds, 0.0),
    }
    bound = None
    if out["bound"] is not None and math.isfinite(out["bound"]):
        bound = max(out["bound"], 0.0) * unit  # valid for the original: rounding down relaxes

    def outcome(status: SolveStatus, schedule: CimSchedule | None, msg: str) -> CpSatOutcome:
        obj = None if schedule is None else schedule.makespan
        gap = None
        if obj is not None and bound is not None:
            gap = max(obj - bound, 0.0) / obj if obj > 0 else 0.0
        res = SolveResult(status, SOLVER_NAME, obj, bound, gap, build_seconds, seconds, size,
                          msg, options)
        return CpSatOutcome(res, schedule, heuristic)

    status = out["status"]
    if status == "INFEASIBLE":
        # Everything on the host is always feasible: a modelling or solver error.
        return outcome(SolveStatus.ERROR, None, f"{words} (impossible: all-host is feasible)")
    if status not in ("OPTIMAL", "FEASIBLE"):
        if status != "UNKNOWN":  # MODEL_INVALID or worse
            return outcome(SolveStatus.ERROR, None, f"{words}: {out.get('message', '')}")
        schedule = heuristic  # no solution in time
        msg = f"{words}; heuristic schedule reported (CP-SAT had no solution)"
    else:
        on_host = {v: bool(h) for v, h in zip(names, out["host"], strict=True)}
        pos = {v: i for i, v in enumerate(names)}
        timing = {v: (out["start"][i], out["finish"][i]) for i, v in enumerate(names)}
        order = sorted((v for v in names if on_host[v]), key=lambda v: (*timing[v], pos[v]))
        schedule = asap_schedule(instance, on_host, order)  # re-timed on the original data
        if schedule.makespan > heuristic.makespan:  # rounding made it worse: keep the better
            schedule = heuristic
        msg = "" if status == "OPTIMAL" else words
    verify_cim(instance, schedule, claimed_makespan=schedule.makespan).raise_if_failed()
    obj = schedule.makespan
    if status == "OPTIMAL" and bound is not None and (obj - bound) <= rel_gap * obj + 1e-15:
        return outcome(SolveStatus.OPTIMAL, schedule, "")
    if status == "OPTIMAL":
        msg = f"{words}, but the re-timed makespan is not within {rel_gap:g} of the rounded bound"
    return outcome(SolveStatus.TIME_LIMIT, schedule, msg)


# --- the worker process -----------------------------------------------------------------

_EXECUTOR: ProcessPoolExecutor | None = None


def _executor() -> ProcessPoolExecutor:
    """One reusable spawned worker: a fresh interpreter that never loads highspy."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ProcessPoolExecutor(max_workers=1,
                                        mp_context=multiprocessing.get_context("spawn"))
        atexit.register(_shutdown)
    return _EXECUTOR


def _shutdown() -> None:
    global _EXECUTOR
    if _EXECUTOR is not None:
        _EXECUTOR.shutdown(wait=False, cancel_futures=True)
        _EXECUTOR = None


def _solve_in_worker(data: dict[str, Any]) -> dict[str, Any]:
    """Build and solve the interval model from plain integer data (runs in the worker)."""
    from ortools.sat.python import cp_model

    tick = time.perf_counter()
    names: list[str] = data["names"]
    index = {v: i for i, v in enumerate(names)}
    dh = dict(zip(names, data["t_host"], strict=True))
    horizon: int = data["horizon"]
    m = cp_model.CpModel()
    x = {v: m.new_bool_var(f"host[{v}]") for v in names}
    s, e, intervals = {}, {}, []
    for v in names:
        head = data["head"][v] if data["use_bounds"] else 0
        tail = data["tail"][v] if data["use_bounds"] else 0
        s[v] = m.new_int_var(min(head, horizon), horizon, f"start[{v}]")
        e[v] = m.new_int_var(0, max(horizon - tail, 0), f"finish[{v}]")
        da = data["t_acc"][index[v]]
        if da is None:
            m.add(x[v] == 1)  # Eq. 5
            m.add(e[v] == s[v] + dh[v])
        else:
            m.add(e[v] == s[v] + da + (dh[v] - da) * x[v])  # Eq. 7
        intervals.append(m.new_optional_fixed_size_interval_var(s[v], dh[v], x[v], f"iv[{v}]"))
    m.add_no_overlap(intervals)  # the single host: what Eqs. 11-12 encode with big-M
    for u, v, tr in data["edges"]:
        m.add(s[v] >= e[u])  # Eq. 8 on the same device
        if tr > 0:  # Eqs. 8-9: the transfer only between devices
            m.add(s[v] >= e[u] + tr).only_enforce_if([x[u], x[v].Not()])
            m.add(s[v] >= e[u] + tr).only_enforce_if([x[u].Not(), x[v]])
    capable = [v for v in names if data["t_acc"][index[v]] is not None]
    if capable:  # Eq. 14
        xb = data["crossbars"]
        m.add(sum(xb[index[v]] * (1 - x[v]) for v in capable) <= data["budget"])
    makespan = m.new_int_var(0, horizon, "makespan")
    for v in data["sinks"]:
        m.add(makespan >= e[v])  # Eq. 6
    if data["use_bounds"]:
        def work(nodes: Any) -> Any:
            return sum((dh[w] * x[w] for w in nodes if dh[w] > 0), start=0)

        m.add(makespan >= work(names))  # (1) host-serial
        for v in names:  # (2) host work of ancestors before v, of descendants after it
            if data["ancestors"][v]:
                m.add(s[v] >= work(data["ancestors"][v]))
            if data["descendants"][v]:
                m.add(makespan >= e[v] + work(data["descendants"][v]))
        desc = {v: set(d) for v, d in data["descendants"].items()}
        for u, v in data["bottleneck_pairs"]:  # (3) between consecutive bottlenecks
            m.add(s[v] >= e[u] + work(sorted(desc[u] & set(data["ancestors"][v]))))
    m.minimize(makespan)
    for v in names:  # the heuristic, re-timed on the rounded data: a feasible hint
        on_host, start, finish = data["hint"][v]
        m.add_hint(x[v], on_host)
        m.add_hint(s[v], start)
        m.add_hint(e[v], finish)
    m.add_hint(makespan, horizon)
    proto = m.proto
    n_vars, n_rows = len(proto.variables), len(proto.constraints)
    build_seconds = time.perf_counter() - tick

    solver = cp_model.CpSolver()
    if data["time_limit"] is not None:
        solver.parameters.max_time_in_seconds = float(data["time_limit"])
    solver.parameters.num_workers = data["threads"] or 0
    solver.parameters.relative_gap_limit = data["rel_gap"]
    tick = time.perf_counter()
    code = solver.solve(m)
    out: dict[str, Any] = {
        "status": solver.status_name(code),
        "build_seconds": build_seconds,
        "solve_seconds": time.perf_counter() - tick,
        "variables": n_vars,
        "constraints": n_rows,
        "bound": None,
    }
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        out["bound"] = float(solver.best_objective_bound)
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        out["host"] = [bool(solver.boolean_value(x[v])) for v in names]
        out["start"] = [int(solver.value(s[v])) for v in names]
        out["finish"] = [int(solver.value(e[v])) for v in names]
    if code == cp_model.MODEL_INVALID:
        out["message"] = m.validate()
    return out
