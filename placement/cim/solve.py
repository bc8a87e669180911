"""Solve a CIM placement end to end: build the ILP, solve with HiGHS, extract, verify.

A placement is never returned unverified: a schedule that fails
``verify_cim`` raises :class:`PlacementError`. The result's objective and
bound are in seconds (the model itself is scaled; see ``placement.models.cim.build``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, TextIO

import pyomo.environ as pyo

from placement.cim.heuristic import heuristic_schedule
from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule
from placement.cim.verify import Verification, verify_cim
from placement.errors import PlacementError
from placement.models.cim.build import (
    build_cim_model,
    extract_schedule,
    formulation_families,
    start_values,
)
from placement.solvers.base import SolveResult, SolveStatus
from placement.solvers.highs import solve_model


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


#: Up to this many parallel pairs (Eq. 10), "auto" solves the bounded model without a
#: heuristic: ResNets and MobileNetV2 (0-20 pairs) then close in well under a second,
#: where the heuristic alone costs about 0.5 s. Beyond it, ordering decisions
#: dominate and the tightened model with a heuristic start and per-pair big-M wins.
AUTO_MAX_PAIRS_FOR_BOUNDED = 200


def auto_formulation(instance: CimInstance) -> str:
    """"bounded" for near-chain graphs, "tightened" (with a heuristic start) otherwise."""
    return "bounded" if len(instance.parallel_pairs) <= AUTO_MAX_PAIRS_FOR_BOUNDED else "tightened"


def solve_cim(
    instance: CimInstance,
    *,
    model: pyo.ConcreteModel | None = None,
    time_limit: float | None = None,
    rel_gap: float = 1e-4,
    threads: int | None = None,
    tee: bool | list[TextIO] = False,  # True: stdout; or streams for HiGHS's log
    formulation: str = "faithful",
    warm_start: bool | None = None,
) -> CimPlacement:
    """Optimal (or, with a time limit, best found) placement of ``instance``, verified.

    ``model`` is a model from ``build_cim_model(instance)`` that the caller may
    have extended with constraints of their own; by default one is built here
    with the families of ``formulation`` (see ``FORMULATIONS``).
    The verifier still checks the paper's constraints only, so a user's extra
    constraints can only make the reported placement more restricted, never wrong.

    ``formulation`` "auto" picks by graph shape (``auto_formulation``).
    ``warm_start`` (default: only for "tightened"): run the list-scheduling
    heuristic first and give its schedule to HiGHS as a MIP start. A time-limited
    solve then never reports a placement worse than the heuristic's (should HiGHS
    end without one that good, the verified heuristic schedule is returned, with
    HiGHS's bound).
    The result's ``options`` record ``formulation``, ``heuristic_makespan`` and
    ``heuristic_seconds`` (when the heuristic ran) and ``start`` (HiGHS's verdict).
    """
    if formulation == "auto":
        formulation = auto_formulation(instance)
    if warm_start is None:
        warm_start = formulation == "tightened"
    families = formulation_families(formulation)
    heuristic: CimSchedule | None = None
    heuristic_seconds = 0.0
    if warm_start or (model is None and "window_big_m" in families):
        tick = time.perf_counter()
        heuristic = heuristic_schedule(instance)
        heuristic_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    if model is None:
        upper = heuristic.makespan if heuristic is not None else None
        model = build_cim_model(instance, families=families, upper_bound=upper)
    start = start_values(model, instance, heuristic) if warm_start and heuristic else None
    build_seconds = time.perf_counter() - tick
    raw = solve_model(
        model,
        time_limit=time_limit,
        rel_gap=rel_gap,
        threads=threads,
        build_seconds=build_seconds,
        tee=tee,
        start=start,
    )
    extra: dict[str, object] = {"formulation": formulation}
    if heuristic is not None:
        extra["heuristic_makespan"] = heuristic.makespan
        extra["heuristic_seconds"] = heuristic_seconds
    raw = dataclasses.replace(raw, options={**raw.options, **extra})
    unit = pyo.value(model.time_unit)
    result = dataclasses.replace(
        raw,
        objective=None if raw.objective is None else raw.objective * unit,
        best_bound=None if raw.best_bound is None else raw.best_bound * unit,
    )
    cpu_only = instance.cpu_only_latency

    if result.status == SolveStatus.ERROR:
        raise PlacementError(f"the CIM model could not be solved: {result.message}")
    if result.status == SolveStatus.INFEASIBLE:
        # All operators on the host is always feasible: this is a solver failure.
        raise PlacementError(
            f"HiGHS declared the CIM model infeasible ({result.message}), but placing every"
            " operator on the host is always feasible: solver error"
        )
    if warm_start and heuristic is not None and result.status != SolveStatus.OPTIMAL:
        if result.objective is None or result.objective > heuristic.makespan:
            return _heuristic_placement(instance, result, heuristic, cpu_only)
    if not result.status.has_solution:
        return CimPlacement(instance, result, None, None, cpu_only)

    schedule = extract_schedule(model, instance)
    result = _tighten_incumbent(result, schedule)
    verification = verify_cim(instance, schedule, claimed_makespan=result.objective)
    verification.raise_if_failed()
    return CimPlacement(instance, result, schedule, verification, cpu_only)


def _heuristic_placement(
    instance: CimInstance, result: SolveResult, heuristic: CimSchedule, cpu_only: float
) -> CimPlacement:
    """HiGHS stopped without an incumbent as good as its start: report the start itself."""
    objective = heuristic.makespan
    bound = result.best_bound
    gap = None
    if bound is not None and objective > 0:
        gap = max(objective - bound, 0.0) / objective
    note = "heuristic schedule reported (HiGHS had no better incumbent)"
    message = f"{result.message}; {note}" if result.message else note
    result = dataclasses.replace(
        result, status=SolveStatus.TIME_LIMIT, objective=objective, gap=gap, message=message
    )
    verification = verify_cim(instance, heuristic, claimed_makespan=objective)
    verification.raise_if_failed()
    return CimPlacement(instance, result, heuristic, verification, cpu_only)


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
