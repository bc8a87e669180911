"""Solve a Pyomo model with HiGHS through Pyomo's current solver interface.

``pyomo.contrib.solver``'s ``highs`` (not the legacy ``pyo.SolverFactory``
wrapper, which rejects ``time_limit``). Solutions are loaded only when HiGHS
has a primal feasible one; statuses map to :class:`SolveStatus` without ever
upgrading a non-proven result to OPTIMAL. HiGHS's own absolute MIP gap
(``mip_abs_gap``, 1e-6 in objective units) stays at its default: models should
be scaled so that this is negligible (the CIM model is; see
``placement.models.cim``).
"""

from __future__ import annotations

import math
import time
from typing import Any, TextIO

import pyomo.environ as pyo
from pyomo.core.base.constraint import Constraint
from pyomo.core.base.objective import Objective
from pyomo.util.vars_from_expressions import get_vars_from_components

from placement.errors import PlacementError
from placement.solvers.result import ModelSize, SolveResult, SolveStatus

SOLVER_NAME = "highs"
_UNAVAILABLE = "HiGHS is not available: pip install highspy==1.15.1"


def model_size(model: pyo.Block) -> ModelSize:
    """What the solver sees: unfixed variables used in active rows or objectives, active rows."""
    seen: dict[int, Any] = {}
    for ctype in (Constraint, Objective):
        for var in get_vars_from_components(model, ctype, include_fixed=False, active=True):
            seen[id(var)] = var
    binaries = sum(1 for v in seen.values() if v.is_binary())
    rows = sum(1 for _ in model.component_data_objects(Constraint, active=True))
    return ModelSize(variables=len(seen), binaries=binaries, constraints=rows)


def highs_solver() -> Any:
    """A fresh contrib HiGHS solver; PlacementError when highspy is missing."""
    try:
        from pyomo.contrib.solver.common.factory import SolverFactory

        solver = SolverFactory("highs")
        available = bool(solver.available())
    except Exception:  # a broken highspy install surfaces here in many shapes
        available = False
    if not available:
        raise PlacementError(_UNAVAILABLE)
    return solver


def solve_model(
    model: pyo.Block,
    *,
    time_limit: float | None = None,
    rel_gap: float = 1e-4,
    threads: int | None = None,
    build_seconds: float = 0.0,
    tee: bool | list[TextIO] = False,  # True: stdout; or streams for HiGHS's log
) -> SolveResult:
    """Solve ``model`` with HiGHS; load the incumbent into it when there is one.

    Objective and bound are in the model's own objective units.
    """
    if time_limit is not None and not (time_limit > 0 and math.isfinite(time_limit)):
        raise PlacementError(f"time limit must be a positive number of seconds, got {time_limit!r}")
    if not (rel_gap >= 0 and math.isfinite(rel_gap)):
        raise PlacementError(f"relative gap must be a non-negative number, got {rel_gap!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise PlacementError(f"solver threads must be a positive integer, got {threads!r}")

    solver = highs_solver()
    size = model_size(model)
    options: dict[str, object] = {"time_limit": time_limit, "rel_gap": rel_gap, "threads": threads}

    def result(status: SolveStatus, seconds: float, message: str = "", **kw: Any) -> SolveResult:
        return SolveResult(
            status=status,
            solver=SOLVER_NAME,
            objective=kw.get("objective"),
            best_bound=kw.get("bound"),
            gap=kw.get("gap"),
            build_seconds=build_seconds,
            solve_seconds=seconds,
            size=size,
            message=message,
            options=options,
        )

    tick = time.perf_counter()
    try:
        if threads is not None:
            _reset_thread_pool()
        res = solver.solve(
            model,
            tee=tee,
            time_limit=time_limit,
            rel_gap=rel_gap,
            threads=threads,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
        )
    except Exception as exc:  # the interface or HiGHS failed: report, do not crash the caller
        return result(SolveStatus.ERROR, time.perf_counter() - tick, f"HiGHS failed: {exc}")
    seconds = res.timing_info.wall_time or (time.perf_counter() - tick)

    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    term = res.termination_condition
    has_solution = res.solution_status in (SolutionStatus.optimal, SolutionStatus.feasible)
    words = _highs_words(solver, term)
    incumbent = res.incumbent_objective if has_solution else None
    bound = res.objective_bound
    if bound is not None and not math.isfinite(bound):
        bound = None
    if has_solution:
        res.solution_loader.load_vars()
    values = {"objective": incumbent, "bound": bound, "gap": _gap(incumbent, bound)}

    if term == TerminationCondition.convergenceCriteriaSatisfied and has_solution:
        return result(SolveStatus.OPTIMAL, seconds, "", **values)
    if term == TerminationCondition.maxTimeLimit:
        if has_solution:
            return result(SolveStatus.TIME_LIMIT, seconds, words, **values)
        return result(SolveStatus.TIME_LIMIT_NO_SOLUTION, seconds, words, bound=bound)
    if term == TerminationCondition.provenInfeasible:
        return result(SolveStatus.INFEASIBLE, seconds, words)
    # Anything else, including "infeasible or unbounded": the solver's words, no claim.
    return result(SolveStatus.ERROR, seconds, words, **values)


def _reset_thread_pool() -> None:
    """Let an explicit thread count take effect.

    HiGHS keeps one process-wide scheduler: once it has run with n threads, a
    solve asking for another count fails with model status "Not Set" ("global
    scheduler has already been initialized"). Resetting it first avoids that.
    """
    import highspy

    highspy.Highs.resetGlobalScheduler(True)


def _gap(incumbent: float | None, bound: float | None) -> float | None:
    """Relative gap |incumbent - bound| / |incumbent|; None when undefined."""
    if incumbent is None or bound is None:
        return None
    diff = abs(incumbent - bound)
    if incumbent == 0.0:
        return 0.0 if diff <= 1e-12 else None
    return diff / abs(incumbent)


def _highs_words(solver: Any, term: Any) -> str:
    """HiGHS's model status string (e.g. 'Time limit reached'), else Pyomo's condition name."""
    try:
        highs = solver._solver_model  # private in Pyomo 6.10; only used for the message
        return f"HiGHS: {highs.modelStatusToString(highs.getModelStatus())}"
    except Exception:
        return f"HiGHS: {getattr(term, 'name', term)}"
