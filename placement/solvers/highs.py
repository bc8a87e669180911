"""HiGHS (``highspy``) through Pyomo's current solver interface: the default backend.

``pyomo.contrib.solver``'s ``highs`` (not the legacy ``pyo.SolverFactory`` wrapper,
which rejects ``time_limit``). HiGHS's own absolute MIP gap (``mip_abs_gap``, 1e-6 in
objective units) stays at its default: models are scaled so that it is negligible
(``placement.models.common``). A MIP start is handed to highspy directly (the contrib
interface has none) and HiGHS's verdict on it is recorded as ``options["start"]``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pyomo.environ as pyo

from placement.solvers.base import (
    BackendBase,
    SolveMonitor,
    SolveOptions,
    SolveResult,
    SolveStatus,
    finite_or_none,
)
from placement.solvers.contrib import ResultBuilder, contrib_outcome, contrib_solver

INSTALL = "pip install highspy==1.15.1"


class HighsBackend(BackendBase):
    name = "highs"
    label = "HiGHS"

    def unavailable_reason(self) -> str | None:
        try:
            available = bool(contrib_solver("highs").available())
        except Exception:  # a broken highspy install surfaces here in many shapes
            available = False
        return None if available else f"HiGHS is not available: {INSTALL}"


    def solve(
        self, model: pyo.Block, options: SolveOptions, *, start: Mapping[Any, float] | None = None
    ) -> SolveResult:
        """Solve with HiGHS; ``start`` is a MIP start by variable (a ``ComponentMap``).

        Variables that are no solver column (fixed ones) are skipped. Whether HiGHS
        accepted the start is recorded as ``options["start"]``: "accepted" when its log
        says the start is feasible, else "rejected" (the solve then runs without one).
        ``options.time_limit`` covers handing the model over to HiGHS as well.
        """
        self.check_ready(options)
        solver = contrib_solver("highs")
        result = ResultBuilder(self.name, model, options)
        try:
            if options.threads is not None:
                _reset_thread_pool()
            solver.set_instance(model)  # the highspy model exists from here on
            # A start lives in the highspy model, and so do callbacks; any automatic
            # update at solve() would reset them (measured: a start silently dropped).
            # Nothing changed since set_instance.
            extra: dict[str, Any] = {"auto_updates": dict.fromkeys(_AUTO_UPDATES, False)}
            if start is not None:
                _set_start(solver, start)
            if options.monitor is not None:
                _watch(solver._solver_model, options.monitor)  # private in Pyomo 6.10
            # the limit covers handing the model over too (seconds at 10,000s of rows)
            limit = options.time_limit
            if limit is not None:
                limit = max(limit - result.elapsed(), _LEAST_SEARCH)
            res = solver.solve(
                model,
                tee=options.tee,
                time_limit=limit,
                rel_gap=options.rel_gap,
                threads=options.threads,
                load_solutions=False,
                raise_exception_on_nonoptimal_result=False,
                **extra,
            )
        except Exception as exc:  # the interface or HiGHS failed: report, do not crash
            return result(SolveStatus.ERROR, result.elapsed(), f"HiGHS failed: {exc}")
        seconds = res.timing_info.wall_time or result.elapsed()
        if start is not None:
            result.options["start"] = start_verdict(getattr(res, "solver_log", "") or "")
        return contrib_outcome(res, result, _highs_words(solver, res.termination_condition),
                               seconds)


#: Seconds HiGHS may always search, even when handing the model over took its whole limit.
_LEAST_SEARCH = 0.1
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


def start_verdict(log: str) -> str:
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


def _set_start(solver: Any, start: Mapping[Any, float]) -> None:
    """Hand ``start`` to highspy (the model is loaded into the persistent solver).

    Uses the interface's variable-to-column map (private in Pyomo 6.10; no public API
    exists for a MIP start in the contrib HiGHS interface).
    """
    import numpy as np

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


def _watch(highs: Any, monitor: SolveMonitor) -> None:
    """Tell ``monitor`` HiGHS's incumbent and bound (model units) at every improving
    solution and every MIP log line (HiGHS logs one every 5 s at least): both callbacks
    are rare (8-20 a solve), and the solve does not slow down measurably
    (``benchmarks/solve_progress.py``; docs/results.md gives the runs)."""

    def improving(event: Any) -> None:
        monitor.improved(finite_or_none(event.data_out.objective_function_value), None)

    def logging(event: Any) -> None:
        out = event.data_out
        monitor.improved(finite_or_none(out.mip_primal_bound),
                         finite_or_none(out.mip_dual_bound))  # fmt: skip

    highs.cbMipImprovingSolution.subscribe(improving)
    highs.cbMipLogging.subscribe(logging)


def _reset_thread_pool() -> None:
    """Let an explicit thread count take effect.

    HiGHS keeps one process-wide scheduler: once it has run with n threads, a
    solve asking for another count fails with model status "Not Set" ("global
    scheduler has already been initialized"). Resetting it first avoids that.
    """
    import highspy

    highspy.Highs.resetGlobalScheduler(True)


def _highs_words(solver: Any, term: Any) -> str:
    """HiGHS's model status string (e.g. 'Time limit reached'), else Pyomo's condition name."""
    try:
        highs = solver._solver_model  # private in Pyomo 6.10; only used for the message
        return f"HiGHS: {highs.modelStatusToString(highs.getModelStatus())}"
    except Exception:
        return f"HiGHS: {getattr(term, 'name', term)}"
