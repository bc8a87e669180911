"""CBC through Pyomo's legacy shell interface (``SolverFactory('cbc')``).

Needs the ``cbc`` executable (Debian/Ubuntu: ``apt-get install coinor-cbc``); there is
no contrib CBC interface. CBC reports its bound only when it closes the gap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pyomo.environ as pyo

from placement.solvers.base import BackendBase, SolveOptions, SolveResult, SolveStatus
from placement.solvers.contrib import prepare

INSTALL = "install the cbc executable (Debian/Ubuntu: apt-get install coinor-cbc)"


class CbcBackend(BackendBase):
    name = "cbc"
    label = "CBC"

    def unavailable_reason(self) -> str | None:
        try:
            if pyo.SolverFactory("cbc").available(exception_flag=False):
                return None
        except Exception as exc:  # broken installs fail in many shapes
            return f"cbc is not available ({exc}): {INSTALL}"
        return f"cbc is not available: {INSTALL}"


    def solve(
        self, model: pyo.Block, options: SolveOptions, *, start: Mapping[Any, float] | None = None
    ) -> SolveResult:
        from pyomo.opt import SolverStatus, TerminationCondition

        result = prepare(self, model, options, start)
        opt = pyo.SolverFactory("cbc")
        opt.options["ratioGap"] = options.rel_gap
        if options.time_limit is not None:
            opt.options["sec"] = options.time_limit
        if options.threads is not None:
            opt.options["threads"] = options.threads
        try:
            res = opt.solve(model, tee=bool(options.tee), warmstart=start is not None,
                            load_solutions=False)
        except Exception as exc:
            return result(SolveStatus.ERROR, result.elapsed(), f"cbc failed: {exc}")
        seconds = result.elapsed()
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
            return result(SolveStatus.OPTIMAL, seconds, **kw)
        if term in (TerminationCondition.maxTimeLimit, TerminationCondition.maxIterations) or (
            res.solver.status == SolverStatus.aborted
        ):
            status = SolveStatus.TIME_LIMIT if has_solution else SolveStatus.TIME_LIMIT_NO_SOLUTION
            return result(status, seconds, words, **kw)
        if term == TerminationCondition.infeasible:
            return result(SolveStatus.INFEASIBLE, seconds, words)
        return result(SolveStatus.ERROR, seconds, words, **kw)
