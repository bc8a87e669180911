"""The one CIM pipeline: from an instance to a verified placement, with any backend.

``solve(instance)`` picks the formulation and the solver ("auto" for each, as
``placement solve`` does), builds the Pyomo model (or the CP-SAT interval model),
solves it through the backend interface, reads the schedule back, and verifies it
independently (``placement.cim.verify``). ``placement solve``, ``placement bench``,
``placement sweep`` and the Python API all come through here, so a solver error, a
time limit or a start that the solver could not beat is handled the same way whatever
ran. A placement is never returned unverified: a schedule that fails verification
raises :class:`PlacementError`. Objective and bound are in seconds.

Solvers:

* ``highs`` (default), ``scip``, ``cbc``, ``gurobi``: the Pyomo ILP of the formulation
  (``placement.models.cim``), with the list-scheduling heuristic as MIP start for
  ``tightened`` (or when ``warm_start``);
* ``cpsat``: OR-Tools CP-SAT on the interval model (``placement.cim.cpsat``);
* ``cpsat+highs``: CP-SAT for half the time limit; unless it proved optimality, HiGHS
  on the tightened model for the rest with CP-SAT's schedule as start and upper bound;
  the bound reported is the better of the two (both are valid lower bounds);
* ``auto``: ``cpsat+highs`` where the formulation is ``tightened`` (many parallel
  pairs: measured best on YOLOv5n), a start is allowed and OR-Tools is installed;
  HiGHS otherwise.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, TextIO

import pyomo.environ as pyo

from placement.cim.cpsat import solve_cpsat
from placement.cim.heuristic import heuristic_schedule
from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule
from placement.cim.verify import Verification, verify_cim
from placement.errors import PlacementError
from placement.models.cim.build import (
    FORMULATIONS,
    build_cim_model,
    extract_schedule,
    formulation_families,
    start_values,
)
from placement.models.common import solve_in_seconds
from placement.solvers.base import SolveOptions, SolverError, SolveResult, SolveStatus
from placement.solvers.registry import MIP_BACKENDS, get_backend

#: What ``solver=`` accepts.
SOLVERS: tuple[str, ...] = ("auto", "highs", "cpsat+highs", "cpsat", "scip", "cbc", "gurobi")
#: What ``formulation=`` accepts.
FORMULATION_CHOICES: tuple[str, ...] = ("auto", *FORMULATIONS)

#: Up to this many parallel pairs (Eq. 10), "auto" solves the bounded model without a
#: heuristic: ResNets and MobileNetV2 (0-20 pairs) then close in well under a second,
#: where the heuristic alone costs about 0.5 s. Beyond it, ordering decisions
#: dominate and the tightened model with a heuristic start and per-pair big-M wins.
AUTO_MAX_PAIRS_FOR_BOUNDED = 200


@dataclass
class CimPlacement:
    instance: CimInstance
    result: SolveResult  # objective and bound in seconds
    schedule: CimSchedule | None  # None when the solver found no solution (time limit)
    verification: Verification | None
    cpu_only: float  # every operator on the host, seconds

    @property
    def speedup(self) -> float | None:
        """CPU-only latency over the placement's makespan."""
        if self.schedule is None:
            return None
        if self.schedule.makespan <= 0.0:
            return 1.0 if self.cpu_only <= 0.0 else math.inf
        return self.cpu_only / self.schedule.makespan

    @property
    def crossbars_used(self) -> int:
        return 0 if self.schedule is None else self.schedule.crossbars_used(self.instance)

    def to_json(self) -> dict[str, Any]:
        inst = self.instance
        speedup = self.speedup
        return {
            "instance": {
                "operators": len(inst.operators),
                "edges": len(inst.edges),
                "parallel_pairs": len(inst.parallel_pairs),
                "cim_capable": sum(1 for op in inst.operators if op.supported),
                "crossbar_budget": inst.crossbar_budget,
            },
            "result": self.result.to_json(),
            "cpu_only": self.cpu_only,
            "makespan": None if self.schedule is None else self.schedule.makespan,
            "speedup": None if speedup is None or math.isinf(speedup) else speedup,
            "crossbars_used": self.crossbars_used,
            "verification": None if self.verification is None else self.verification.to_json(),
            "schedule": None if self.schedule is None else self.schedule.to_json(),
        }


def auto_formulation(instance: CimInstance) -> str:
    """"bounded" for near-chain graphs, "tightened" (with a heuristic start) otherwise."""
    return "bounded" if len(instance.parallel_pairs) <= AUTO_MAX_PAIRS_FOR_BOUNDED else "tightened"


def resolve_formulation(instance: CimInstance, formulation: str) -> str:
    """The formulation "auto" stands for on ``instance``; an unknown name is an error."""
    if formulation == "auto":
        return auto_formulation(instance)
    formulation_families(formulation)  # validates the name
    return formulation


def resolve_solver(formulation: str, solver: str, warm_start: bool | None) -> str:
    """The solver "auto" stands for, given the resolved formulation (module docstring)."""
    if solver not in SOLVERS:
        raise PlacementError(f"unknown solver {solver!r}; known: {', '.join(SOLVERS)}")
    if solver != "auto":
        return solver
    if (formulation == "tightened" and warm_start is not False
            and get_backend("cpsat").available()):
        return "cpsat+highs"
    return "highs"


def unavailable_reason(solver: str) -> str | None:
    """None when ``solver`` (a :data:`SOLVERS` name other than auto) can run here."""
    names = ("cpsat", "highs") if solver == "cpsat+highs" else (solver,)
    for name in names:
        reason = get_backend(name).unavailable_reason()
        if reason is not None:
            return reason
    return None


def build_model(
    instance: CimInstance, formulation: str = "auto", *, upper_bound: float | None = None
) -> pyo.ConcreteModel:
    """The Pyomo model of ``formulation`` for ``instance``, to extend before :func:`solve`.

    ``tightened`` needs an upper bound on the optimum (the makespan of a feasible
    schedule): without ``upper_bound`` the list-scheduling heuristic provides one.
    """
    formulation = resolve_formulation(instance, formulation)
    families = formulation_families(formulation)
    if upper_bound is None and "window_big_m" in families:
        upper_bound = heuristic_schedule(instance).makespan
    return build_cim_model(instance, families=families, upper_bound=upper_bound)


def solve(
    instance: CimInstance,
    *,
    formulation: str = "auto",
    solver: str = "auto",
    model: pyo.ConcreteModel | None = None,
    time_limit: float | None = None,
    rel_gap: float = 1e-4,
    threads: int | None = None,
    warm_start: bool | None = None,
    tee: bool | list[TextIO] = False,
) -> CimPlacement:
    """Optimal (or, with a time limit, best found) placement of ``instance``, verified.

    ``formulation``: "faithful", "bounded", "tightened" or "auto" (by graph shape,
    :func:`auto_formulation`). ``solver``: one of :data:`SOLVERS` (module docstring).
    ``model``: a model from :func:`placement.cim.build_model` that the caller extended
    with constraints of their own (MIP solvers only); the verifier still checks the
    paper's constraints only, so extra constraints can only restrict the placement,
    never make it wrong. ``warm_start`` (default: only for "tightened"): run the
    list-scheduling heuristic first and give its schedule to the solver as a MIP
    start; a time-limited solve then never reports a placement worse than it.
    ``tee``: True streams the solver's log to stdout, or a list of streams.

    The result's ``options`` record ``formulation``, ``heuristic_makespan`` and
    ``heuristic_seconds`` (when the heuristic ran) and ``start`` (HiGHS's verdict).
    Raises :class:`PlacementError` on bad options, an unavailable solver, a solver
    error (:class:`~placement.solvers.base.SolverError`) or a failed verification.
    """
    options = SolveOptions(time_limit=time_limit, rel_gap=rel_gap, threads=threads, tee=tee)
    options.check()
    formulation = resolve_formulation(instance, formulation)
    solver = resolve_solver(formulation, solver, warm_start)
    if model is not None and solver not in MIP_BACKENDS:
        raise PlacementError(f"a Pyomo model of your own needs a MIP solver, not {solver!r}")
    if solver == "cpsat":
        result, schedule = solve_cpsat(instance, options)
    elif solver == "cpsat+highs":
        result, schedule = _cpsat_then_highs(instance, options)
    else:
        result, schedule = solve_mip(
            instance, solver, formulation, options, model=model, warm_start=warm_start
        )
    verification = None
    if schedule is not None:
        verification = verify_cim(instance, schedule, claimed_makespan=result.objective)
        verification.raise_if_failed()
    return CimPlacement(instance, result, schedule, verification, instance.cpu_only_latency)


def solve_mip(
    instance: CimInstance,
    solver: str,
    formulation: str,
    options: SolveOptions,
    *,
    model: pyo.ConcreteModel | None = None,
    warm_start: bool | None = None,
    start_schedule: CimSchedule | None = None,
) -> tuple[SolveResult, CimSchedule | None]:
    """The Pyomo ILP of ``formulation`` with a MIP backend; (result in seconds, schedule).

    ``start_schedule`` (a feasible schedule, e.g. CP-SAT's) replaces the heuristic as
    MIP start and as the upper bound of the per-pair big-M.
    """
    backend = get_backend(solver, mip=True)
    families = formulation_families(formulation)
    if warm_start is None:
        warm_start = formulation == "tightened"
    start_from = start_schedule
    heuristic_seconds = 0.0
    if start_from is None and (warm_start or (model is None and "window_big_m" in families)):
        tick = time.perf_counter()
        start_from = heuristic_schedule(instance)
        heuristic_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    if model is None:
        upper = start_from.makespan if start_from is not None else None
        model = build_cim_model(instance, families=families, upper_bound=upper)
    use_start = start_from is not None and (warm_start or start_schedule is not None)
    start = start_values(model, instance, start_from) if use_start and start_from else None
    build_seconds = time.perf_counter() - tick
    extra: dict[str, object] = {"formulation": formulation}
    if start_from is not None:
        extra["heuristic_makespan"] = start_from.makespan
        extra["heuristic_seconds"] = heuristic_seconds
    result = solve_in_seconds(
        model, backend, options, what="CIM", item="operator", start=start,
        build_seconds=build_seconds, extra=extra,
    )  # fmt: skip
    if use_start and start_from is not None and result.status != SolveStatus.OPTIMAL:
        if result.objective is None or result.objective > start_from.makespan:
            return _start_reported(result, start_from, backend.label), start_from
    if not result.status.has_solution:
        return result, None
    schedule = CimSchedule(**extract_schedule(model, instance)._asdict())
    return _tighten_incumbent(result, schedule), schedule


def _start_reported(result: SolveResult, start: CimSchedule, label: str) -> SolveResult:
    """The solver stopped without an incumbent as good as its start: report the start."""
    objective = start.makespan
    bound = result.best_bound
    gap = None
    if bound is not None and objective > 0:
        gap = max(objective - bound, 0.0) / objective
    note = f"heuristic schedule reported ({label} had no better incumbent)"
    message = f"{result.message}; {note}" if result.message else note
    return dataclasses.replace(
        result, status=SolveStatus.TIME_LIMIT, objective=objective, gap=gap, message=message
    )


def _tighten_incumbent(result: SolveResult, schedule: CimSchedule) -> SolveResult:
    """An incumbent's T may exceed its latest finish (Eq. 6 only bounds T from below).

    The latest finish is then the schedule's true makespan: report it, with the gap
    to the same bound. Never happens at a proven optimum with gap 0.
    """
    latest = max(schedule.finish.values())
    assert result.objective is not None
    if latest >= result.objective * (1 - 1e-9):
        return result
    schedule.makespan = latest
    gap = None
    if result.best_bound is not None and latest > 0:
        gap = max(latest - result.best_bound, 0.0) / latest
    note = f"incumbent T lowered to its latest finish {latest:.9g} s"
    message = f"{result.message}; {note}" if result.message else note
    return dataclasses.replace(result, objective=latest, gap=gap, message=message)


def _cpsat_then_highs(
    instance: CimInstance, options: SolveOptions
) -> tuple[SolveResult, CimSchedule | None]:
    """CP-SAT for half the limit; if not proven, HiGHS (tightened) from its incumbent."""
    tick = time.perf_counter()
    half = None if options.time_limit is None else options.time_limit / 2
    r1, first = solve_cpsat(instance, dataclasses.replace(options, time_limit=half))
    heur_s = r1.options.get("heuristic_seconds", 0.0)
    if r1.status == SolveStatus.OPTIMAL or first is None:
        return dataclasses.replace(r1, solver="cpsat+highs"), first
    left = None
    if options.time_limit is not None:
        left = max(options.time_limit - (time.perf_counter() - tick), 1.0)
    try:
        r2, sched = solve_mip(instance, "highs", "tightened",
                              dataclasses.replace(options, time_limit=left),
                              start_schedule=first)
    except SolverError as exc:  # HiGHS failed; CP-SAT's verified schedule stands
        r2, sched = exc.result, None
    if sched is None:
        sched = first
    obj = sched.makespan
    bounds = [b for b in (r1.best_bound, r2.best_bound) if b is not None]
    bound = max(bounds) if bounds else None
    gap = None
    if bound is not None:
        gap = max(obj - bound, 0.0) / obj if obj > 0 else 0.0
    status = r2.status
    if status != SolveStatus.OPTIMAL and gap is not None and gap <= options.rel_gap:
        status = SolveStatus.OPTIMAL  # the two bounds together prove it
    if status == SolveStatus.ERROR:
        status = SolveStatus.TIME_LIMIT  # HiGHS failed; CP-SAT's verified schedule stands
    message = "; ".join(m for m in (r1.message, r2.message) if m)
    recorded = {**r2.options, "cpsat_seconds": r1.solve_seconds, "cpsat_bound": r1.best_bound,
                "heuristic_seconds": heur_s,
                "heuristic_makespan": r1.options.get("heuristic_makespan")}
    return dataclasses.replace(
        r2, status=status, solver="cpsat+highs", objective=obj, best_bound=bound, gap=gap,
        build_seconds=r1.build_seconds + r2.build_seconds,
        solve_seconds=r1.solve_seconds + r2.solve_seconds, message=message, options=recorded,
    ), sched

