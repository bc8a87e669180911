"""One entry point for every MIP solver that can take a Pyomo model: ``solve_with``.

Backends (Pyomo 6.10; checked which interfaces actually work):

==========  ==========================================================================
``highs``   :func:`placement.solvers.highs.solve_model` (contrib ``highs``), the default
``scip``    contrib ``scip_direct`` (needs ``pyscipopt``; the legacy ``scip`` interface
            wants a ``scipampl`` executable, which the pyscipopt wheel does not ship)
``cbc``     legacy ``SolverFactory('cbc')`` (shell interface; needs the ``cbc``
            executable, e.g. Debian's ``coinor-cbc``; there is no contrib CBC interface)
``gurobi``  contrib ``gurobi_direct`` (needs ``gurobipy``; the pip wheel carries a
            size-limited licence: 2,000 variables / 2,000 rows)
==========  ==========================================================================

Statuses follow :class:`SolveStatus`: OPTIMAL only when the solver itself proved it;
a solution is loaded into the model only when the solver has a feasible one.
Gurobi's size-limited licence refusing a model is not a failure of ours: it comes back
as ``SolveStatus.ERROR`` with ``options["licence_limit"] = True`` and a message starting
with :data:`LICENCE_LIMIT` (callers such as ``placement bench`` show it as its own
status). ``start`` is a MIP start by variable (a ``ComponentMap`` as from
``placement.models.cim.build.start_values``); backends that only take the integer part of a
start (SCIP, Gurobi, CBC) get the values loaded into the model's variables.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any, TextIO

import pyomo.environ as pyo

from placement.errors import PlacementError
from placement.solvers.base import SolveResult, SolveStatus
from placement.solvers.highs import _gap, model_size, solve_model

SOLVERS: tuple[str, ...] = ("highs", "scip", "cbc", "gurobi")
LICENCE_LIMIT = "licence limit"
_GUROBI_SIZE_LIMIT = 10010  # GurobiError code: "Model too large for size-limited license"
_INSTALL = {
    "highs": "pip install highspy==1.15.1",
    "scip": "pip install pyscipopt",
    "cbc": "install the cbc executable (Debian/Ubuntu: apt-get install coinor-cbc)",
    "gurobi": "pip install gurobipy (the pip wheel has a size-limited licence)",
}


def available_solvers() -> dict[str, str | None]:
    """Every known backend: None when usable, else why not (and how to install it)."""
    return {name: _unavailable_reason(name) for name in SOLVERS}


def _unavailable_reason(name: str) -> str | None:
    try:
        if name == "highs":
            from placement.solvers.highs import highs_solver

            highs_solver()
            return None
        if name in ("scip", "gurobi"):
            avail = _contrib(name).available()
            if not avail:
                return f"{name} is not available ({avail.name}): {_INSTALL[name]}"
            if name == "gurobi" and avail.name == "LimitedLicense":
                return None  # usable; size refusals are reported per model
            return None
        if name == "cbc":
            if pyo.SolverFactory("cbc").available(exception_flag=False):
                return None
            return f"cbc is not available: {_INSTALL['cbc']}"
    except Exception as exc:  # broken installs fail in many shapes
        return f"{name} is not available ({exc}): {_INSTALL.get(name, '')}"
    return f"unknown solver {name!r}; known: {', '.join(SOLVERS)}"


def gurobi_licence() -> str | None:
    """'LimitedLicense' / 'FullLicense' when gurobipy is usable, else None."""
    try:
        avail = _contrib("gurobi").available()
    except Exception:
        return None
    return avail.name if avail else None


def _contrib(name: str) -> Any:
    from pyomo.contrib.solver.common.factory import SolverFactory

    solver = SolverFactory({"scip": "scip_direct", "gurobi": "gurobi_direct"}[name])
    if solver is None:  # pragma: no cover - registration failed
        raise PlacementError(f"Pyomo has no {name} interface")
    return solver


def solve_with(
    model: pyo.Block,
    solver: str,
    *,
    time_limit: float | None = None,
    rel_gap: float = 1e-4,
    threads: int | None = None,
    start: Mapping[Any, float] | None = None,
    build_seconds: float = 0.0,
    tee: bool | list[TextIO] = False,
) -> SolveResult:
    """Solve ``model`` with ``solver`` (one of :data:`SOLVERS`); same contract as HiGHS's.

    Objective and bound are in the model's own units. An unavailable solver raises
    :class:`PlacementError` naming how to install it.
    """
    if solver not in SOLVERS:
        raise PlacementError(f"unknown solver {solver!r}; known: {', '.join(SOLVERS)}")
    if solver == "highs":
        return solve_model(
            model,
            time_limit=time_limit,
            rel_gap=rel_gap,
            threads=threads,
            build_seconds=build_seconds,
            tee=tee,
            start=start,
        )
    if time_limit is not None and not (time_limit > 0 and math.isfinite(time_limit)):
        raise PlacementError(f"time limit must be a positive number of seconds, got {time_limit!r}")
    if not (rel_gap >= 0 and math.isfinite(rel_gap)):
        raise PlacementError(f"relative gap must be a non-negative number, got {rel_gap!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise PlacementError(f"solver threads must be a positive integer, got {threads!r}")
    reason = _unavailable_reason(solver)
    if reason is not None:
        raise PlacementError(reason)
    if start is not None:
        _load_start(model, start)
    if solver == "cbc":
        return _solve_cbc(model, time_limit, rel_gap, threads, start is not None, build_seconds,
                          tee)
    return _solve_contrib(model, solver, time_limit, rel_gap, threads, start is not None,
                          build_seconds, tee)


def _load_start(model: pyo.Block, start: Mapping[Any, float]) -> None:
    """Put the start into the variables: the contrib and legacy interfaces read it there."""
    for var, val in start.items():
        if val is not None and not var.fixed:
            var.set_value(float(val), skip_validation=True)


def _result(
    solver: str,
    status: SolveStatus,
    model: pyo.Block,
    seconds: float,
    build_seconds: float,
    options: dict[str, object],
    message: str = "",
    objective: float | None = None,
    bound: float | None = None,
) -> SolveResult:
    if bound is not None and not math.isfinite(bound):
        bound = None
    return SolveResult(
        status=status,
        solver=solver,
        objective=objective,
        best_bound=bound,
        gap=_gap(objective, bound),
        build_seconds=build_seconds,
        solve_seconds=seconds,
        size=model_size(model),
        message=message,
        options=options,
    )


def _solve_contrib(
    model: pyo.Block,
    solver: str,
    time_limit: float | None,
    rel_gap: float,
    threads: int | None,
    warm: bool,
    build_seconds: float,
    tee: bool | list[TextIO],
) -> SolveResult:
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    options: dict[str, object] = {"time_limit": time_limit, "rel_gap": rel_gap, "threads": threads}
    if solver == "gurobi":
        options["licence"] = gurobi_licence()
    opt = _contrib(solver)
    tick = time.perf_counter()
    try:
        res = opt.solve(
            model,
            tee=tee,
            time_limit=time_limit,
            rel_gap=rel_gap,
            threads=threads,
            warmstart_discrete_vars=warm,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
        )
    except Exception as exc:
        seconds = time.perf_counter() - tick
        if getattr(exc, "errno", None) == _GUROBI_SIZE_LIMIT:
            # Not our failure: the free pip licence refuses models over 2,000 vars/rows.
            options["licence_limit"] = True
            size = model_size(model)
            msg = (f"{LICENCE_LIMIT}: Gurobi's size-limited licence refuses this model"
                   f" ({size.variables} variables, {size.constraints} rows)")
            return _result(solver, SolveStatus.ERROR, model, seconds, build_seconds, options, msg)
        return _result(solver, SolveStatus.ERROR, model, seconds, build_seconds, options,
                       f"{solver} failed: {exc}")
    seconds = res.timing_info.wall_time or (time.perf_counter() - tick)
    term = res.termination_condition
    has_solution = res.solution_status in (SolutionStatus.optimal, SolutionStatus.feasible)
    incumbent = res.incumbent_objective if has_solution else None
    bound = res.objective_bound
    if has_solution:
        res.solution_loader.load_vars()
    words = f"{solver}: {getattr(term, 'name', term)}"
    kw = {"objective": incumbent, "bound": bound}
    if term == TerminationCondition.convergenceCriteriaSatisfied and has_solution:
        return _result(solver, SolveStatus.OPTIMAL, model, seconds, build_seconds, options, **kw)
    if term == TerminationCondition.maxTimeLimit:
        if has_solution:
            return _result(solver, SolveStatus.TIME_LIMIT, model, seconds, build_seconds,
                           options, words, **kw)
        return _result(solver, SolveStatus.TIME_LIMIT_NO_SOLUTION, model, seconds,
                       build_seconds, options, words, bound=bound)
    if term == TerminationCondition.provenInfeasible:
        return _result(solver, SolveStatus.INFEASIBLE, model, seconds, build_seconds, options,
                       words)
    return _result(solver, SolveStatus.ERROR, model, seconds, build_seconds, options, words, **kw)


def _solve_cbc(
    model: pyo.Block,
    time_limit: float | None,
    rel_gap: float,
    threads: int | None,
    warm: bool,
    build_seconds: float,
    tee: bool | list[TextIO],
) -> SolveResult:
    from pyomo.opt import SolverStatus, TerminationCondition

    options: dict[str, object] = {"time_limit": time_limit, "rel_gap": rel_gap, "threads": threads}
    opt = pyo.SolverFactory("cbc")
    opt.options["ratioGap"] = rel_gap
    if time_limit is not None:
        opt.options["sec"] = time_limit
    if threads is not None:
        opt.options["threads"] = threads
    tick = time.perf_counter()
    try:
        res = opt.solve(model, tee=bool(tee), warmstart=warm, load_solutions=False)
    except Exception as exc:
        return _result("cbc", SolveStatus.ERROR, model, time.perf_counter() - tick,
                       build_seconds, options, f"cbc failed: {exc}")
    seconds = time.perf_counter() - tick
    term = res.solver.termination_condition
    has_solution = len(res.solution) > 0 and term not in (
        TerminationCondition.infeasible, TerminationCondition.error
    )
    incumbent = bound = None
    if has_solution:
        model.solutions.load_from(res)
        obj = next(model.component_data_objects(pyo.Objective, active=True))
        incumbent = pyo.value(obj)
    lower = res.problem[0].lower_bound if len(res.problem) else None
    if isinstance(lower, (int, float)) and math.isfinite(lower):
        bound = float(lower)
    words = f"cbc: {term}"
    kw = {"objective": incumbent, "bound": bound}
    if term == TerminationCondition.optimal and has_solution:
        if bound is None:  # CBC reports the bound only when it closes the gap
            kw["bound"] = incumbent
        return _result("cbc", SolveStatus.OPTIMAL, model, seconds, build_seconds, options, **kw)
    if term in (TerminationCondition.maxTimeLimit, TerminationCondition.maxIterations) or (
        res.solver.status == SolverStatus.aborted
    ):
        status = SolveStatus.TIME_LIMIT if has_solution else SolveStatus.TIME_LIMIT_NO_SOLUTION
        return _result("cbc", status, model, seconds, build_seconds, options, words, **kw)
    if term == TerminationCondition.infeasible:
        return _result("cbc", SolveStatus.INFEASIBLE, model, seconds, build_seconds, options,
                       words)
    return _result("cbc", SolveStatus.ERROR, model, seconds, build_seconds, options, words, **kw)
