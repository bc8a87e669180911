"""SCIP through Pyomo's ``scip_direct`` interface (needs ``pyscipopt``).

The legacy ``scip`` interface wants a ``scipampl`` executable, which the pyscipopt
wheel does not ship. SCIP takes the integer part of a MIP start from the variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyomo.environ as pyo

from placement.solvers.base import BackendBase, SolveOptions, SolveResult, SolveStatus
from placement.solvers.contrib import ResultBuilder, contrib_outcome, contrib_solver, prepare

INSTALL = "pip install pyscipopt"


class ScipBackend(BackendBase):
    name = "scip"
    label = "SCIP"
    interface = "scip_direct"  # Pyomo's registered name
    install = INSTALL

    def unavailable_reason(self) -> str | None:
        try:
            avail = contrib_solver(self.interface).available()
        except Exception as exc:  # broken installs fail in many shapes
            return f"{self.name} is not available ({exc}): {self.install}"
        if not avail:
            return f"{self.name} is not available ({avail.name}): {self.install}"
        return None


    def solve(
        self, model: pyo.Block, options: SolveOptions, *, start: Mapping[Any, float] | None = None
    ) -> SolveResult:
        result = prepare(self, model, options, start)
        self.record_options(result.options)
        try:
            res = contrib_solver(self.interface).solve(
                model,
                tee=options.tee,
                time_limit=options.time_limit,
                rel_gap=options.rel_gap,
                threads=options.threads,
                warmstart_discrete_vars=start is not None,
                load_solutions=False,
                raise_exception_on_nonoptimal_result=False,
            )
        except Exception as exc:
            return self.failure(exc, result)
        seconds = res.timing_info.wall_time or result.elapsed()
        term = res.termination_condition
        words = f"{self.name}: {getattr(term, 'name', term)}"
        return contrib_outcome(res, result, words, seconds)

    def record_options(self, options: dict[str, object]) -> None:
        """Backend-specific facts recorded with every result (none for SCIP)."""

    def failure(self, exc: Exception, result: ResultBuilder) -> SolveResult:
        """The result of a run the interface aborted with ``exc``."""
        return result(SolveStatus.ERROR, result.elapsed(), f"{self.name} failed: {exc}")
