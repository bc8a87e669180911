"""Solve a Pyomo model with HiGHS through Pyomo's current solver interface.

``pyomo.contrib.solver``'s ``highs`` (not the legacy ``pyo.SolverFactory``
wrapper, which rejects ``time_limit``). Solutions are loaded only when HiGHS
has a primal feasible one; statuses map to :class:`SolveStatus` without ever
upgrading a non-proven result to OPTIMAL. HiGHS's own absolute MIP gap
(``mip_abs_gap``, 1e-6 in objective units) stays at its default: models should
be scaled so that this is negligible (the CIM model is; see
``placement.models.cim.build``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from typing import Any, TextIO

import pyomo.environ as pyo
from pyomo.core.base.constraint import Constraint
from pyomo.core.base.objective import Objective
from pyomo.util.vars_from_expressions import get_vars_from_components

from placement.errors import PlacementError
from placement.solvers.base import ModelSize, SolveResult, SolveStatus

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
    start: Mapping[Any, float] | None = None,
) -> SolveResult:
    """Solve ``model`` with HiGHS; load the incumbent into it when there is one.

    Objective and bound are in the model's own objective units.

    ``start``: a MIP start, values by variable (a ``ComponentMap``; Pyomo variables
    are not hashable). Variables that are no solver column (fixed ones) are skipped.
    Whether HiGHS accepted it is recorded as ``options["start"]``: "accepted" when
    its log says the start is feasible, else "rejected" (then the solve simply runs
    without one).
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
        extra: dict[str, Any] = {}
        if start is not None:
            _set_start(solver, model, start)
            # The start lives in the highspy model; any automatic update at solve() would
            # reset it (measured: silently dropped). Nothing changed since set_instance.
            extra["auto_updates"] = dict.fromkeys(_AUTO_UPDATES, False)
        res = solver.solve(
            model,
            tee=tee,
            time_limit=time_limit,
            rel_gap=rel_gap,
            threads=threads,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            **extra,
        )
    except Exception as exc:  # the interface or HiGHS failed: report, do not crash the caller
        return result(SolveStatus.ERROR, time.perf_counter() - tick, f"HiGHS failed: {exc}")
    seconds = res.timing_info.wall_time or (time.perf_counter() - tick)
    if start is not None:
        options["start"] = _start_verdict(getattr(res, "solver_log", "") or "")

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


_AUTO_UPDATES = (
    "check_for_new_or_removed_constraints",
    "check_for_new_or_removed_vars",
    "check_for_new_or_removed_params",
    "check_for_new_objective",
    "update_constraints",
    "update_vars",
    "update_parameters",
    "update_named_expressions",
    "update_objective",
)
#: HiGHS's log line when a user-given MIP start (possibly repaired by an LP over the
#: continuous variables with the start's integer values) became its incumbent.
_START_ACCEPTED = "MIP start solution is feasible"
_START_CHECK = re.compile(r"(Col|Integer|Row)\s+infeasibilities\s+(\d+)")


def _start_verdict(log: str) -> str:
    """"accepted" or "rejected", from HiGHS's log.

    When presolve solves the whole MIP HiGHS never prints the acceptance line; its
    feasibility check of the given start (printed first) then decides.
    """
    if _START_ACCEPTED in log:
        return "accepted"
    head, sep, tail = log.partition("Assessing feasibility of MIP")
    counts = _START_CHECK.findall(tail.split("Presolving", 1)[0]) if sep else []
    if len(counts) == 3 and all(int(n) == 0 for _, n in counts):
        return "accepted"
    return "rejected"


def _set_start(solver: Any, model: pyo.Block, start: Mapping[Any, float]) -> None:
    """Load ``model`` into the persistent solver and hand ``start`` to highspy.

    Uses the interface's variable-to-column map (private in Pyomo 6.10; no public API
    exists for a MIP start in the contrib HiGHS interface).
    """
    import numpy as np

    solver.set_instance(model)
    columns = solver._pyomo_var_to_solver_var_map
    index, value = [], []
    for var, val in start.items():
        col = columns.get(id(var))
        if col is not None and val is not None:
            index.append(col)
            value.append(float(val))
    if index:
        solver._solver_model.setSolution(
            len(index), np.array(index, dtype=np.int32), np.array(value, dtype=np.float64)
        )


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
