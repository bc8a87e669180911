"""HiGHS (``highspy``): the default backend.

The Pyomo model is read by Pyomo's linear expression walker (``pyomo.repn.linear``, the
one its LP and standard-form writers use) and handed to ``highspy`` in one call
(:func:`to_highs`). Pyomo's persistent HiGHS interface (``pyomo.contrib.solver``) builds
the same problem a row at a time, through its older expression walker: on the
decomposition's small block models that took most of each solve
(``benchmarks/highs_loading.py`` measures both). Fixed variables are constants, not
columns; they keep their values. HiGHS's
own absolute MIP gap (``mip_abs_gap``, 1e-6 in objective units) stays at its default:
models are scaled so that it is negligible (``placement.models.common``). HiGHS's verdict
on a MIP start is recorded as ``options["start"]``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
import pyomo.environ as pyo

from placement.solvers.base import (
    BackendBase,
    SolveMonitor,
    SolveOptions,
    SolveResult,
    SolveStatus,
    finite_or_none,
)
from placement.solvers.contrib import ResultBuilder, model_columns, outcome

INSTALL = "pip install highspy==1.15.1"


class HighsBackend(BackendBase):
    name = "highs"
    label = "HiGHS"

    def unavailable_reason(self) -> str | None:
        try:
            import highspy

            highspy.Highs()
        except Exception:  # a broken highspy install surfaces here in many shapes
            return f"HiGHS is not available: {INSTALL}"
        return None

    def solve(
        self, model: pyo.Block, options: SolveOptions, *, start: Mapping[Any, float] | None = None
    ) -> SolveResult:
        """Solve with HiGHS; ``start`` is a MIP start by variable (a ``ComponentMap``).

        Variables that are no column (fixed ones) are skipped. Whether HiGHS accepted the
        start is recorded as ``options["start"]``: "accepted" when its log says the start
        is feasible, else "rejected" (the solve then runs without one).
        ``options.time_limit`` covers handing the model over to HiGHS as well.
        """
        self.check_ready(options)
        columns = model_columns(model)
        result = ResultBuilder(self.name, model, options, columns)
        try:
            if options.threads is not None:
                _reset_thread_pool()
            try:
                problem = to_highs(model, columns)
            except InfeasibleRow as exc:  # a row of constants that fails
                return result(SolveStatus.INFEASIBLE, result.elapsed(), f"HiGHS: {exc}")
            log = _Log(options.tee)
            highs = problem.highs
            highs.cbLogging.subscribe(log.line)
            _set_options(highs, options, max(options.time_limit - result.elapsed(), _LEAST_SEARCH)
                         if options.time_limit is not None else None)  # fmt: skip
            if start is not None:
                problem.set_start(start)
            if options.monitor is not None:
                _watch(highs, options.monitor)
            highs.HandleKeyboardInterrupt = True
            highs.run()
        except Exception as exc:  # highspy failed: report, do not crash
            return result(SolveStatus.ERROR, result.elapsed(), f"HiGHS failed: {exc}")
        if start is not None:
            result.options["start"] = start_verdict(log.text())
        return problem.outcome(result, result.elapsed())


@dataclass
class HighsProblem:
    """A Pyomo model as a ``highspy.Highs`` problem: column ``i`` is ``columns[i]``."""

    highs: Any
    columns: list[Any]
    offset: float  # the objective's constant (fixed variables included)

    def set_start(self, start: Mapping[Any, float]) -> None:
        """Hand HiGHS a MIP start by variable; variables that are no column are skipped."""
        index_of = {id(v): i for i, v in enumerate(self.columns)}
        pairs = [(index_of[id(var)], float(val)) for var, val in start.items()
                 if val is not None and id(var) in index_of]  # fmt: skip
        if pairs:
            index, value = zip(*pairs, strict=True)
            self.highs.setSolution(len(index), np.array(index, dtype=np.int32),
                                   np.array(value, dtype=np.float64))  # fmt: skip

    def outcome(self, result: ResultBuilder, seconds: float) -> SolveResult:
        """The run's status, incumbent and bound; its solution loaded into the model."""
        import highspy

        highs = self.highs
        status = highs.getModelStatus()
        if not self.columns:  # nothing to decide: HiGHS calls the model empty
            return result(SolveStatus.OPTIMAL, seconds, objective=self.offset, bound=self.offset)
        info = highs.getInfo()
        has_solution = info.primal_solution_status == 2  # 0 none, 1 infeasible, 2 feasible
        if has_solution:
            for var, value in zip(self.columns, highs.getSolution().col_value, strict=True):
                var.set_value(value, skip_validation=True)
        incumbent = info.objective_function_value if has_solution else None
        if info.mip_node_count == -1:  # an LP (no integer column): optimal means proven
            bound = incumbent if status == highspy.HighsModelStatus.kOptimal else None
        else:
            bound = info.mip_dual_bound
        return status_of(status, has_solution, incumbent, bound, result, seconds,
                         f"HiGHS: {highs.modelStatusToString(status)}")  # fmt: skip


def to_highs(model: pyo.Block, columns: list[Any] | None = None) -> HighsProblem:
    """``model`` (linear, one active objective) as a loaded ``highspy.Highs`` problem.

    Each row and the objective are read by Pyomo's linear expression walker (the one its
    LP and standard-form writers use; fixed variables are constants to it) and handed to
    HiGHS in one call, a row per constraint, in the model's order. The columns are
    ``columns`` (default :func:`model_columns`), the order in which Pyomo's own HiGHS
    interface creates them: HiGHS's search depends on the order, and in one case tested
    (tests/cim/test_pareto.py, three axes, seed 2) it claimed a worse placement optimal,
    given a MIP start, with the columns in another order. Raises
    :class:`InfeasibleRow` for a row of constants that no value satisfies.
    """
    import highspy
    from pyomo.repn.linear import LinearRepnVisitor

    if columns is None:
        columns = model_columns(model)
    objectives = list(model.component_data_objects(pyo.Objective, active=True))
    if len(objectives) != 1:
        raise ValueError(f"the model has {len(objectives)} active objectives, not one")
    column_of = {id(v): j for j, v in enumerate(columns)}
    walker = LinearRepnVisitor({})

    def linear(expr: Any, what: str) -> tuple[list[int], list[float], float]:
        repn = walker.walk_expression(expr)
        if repn.nonlinear is not None:
            raise ValueError(f"{what} is not linear")
        terms = [(column_of[i], float(c)) for i, c in repn.linear.items() if c != 0]
        return [j for j, _ in terms], [c for _, c in terms], float(repn.constant)

    cost = np.zeros(len(columns))
    index, coefficients, offset = linear(objectives[0].expr, f"objective {objectives[0].name}")
    np.add.at(cost, index, coefficients)
    inf = highspy.kHighsInf
    lower, upper, starts, row_index, row_value = [], [], [], [], []
    for con in model.component_data_objects(pyo.Constraint, active=True):
        lb, body, ub = con.to_bounded_expression(evaluate_bounds=True)
        if lb is None and ub is None:
            continue
        index, coefficients, constant = linear(body, f"constraint {con.name}")
        if not index:  # constants only: true or false, nothing for HiGHS
            if (lb is not None and constant < lb - _ROW_TOLERANCE) or (
                ub is not None and constant > ub + _ROW_TOLERANCE
            ):
                raise InfeasibleRow(f"constraint {con.name} cannot hold (constants only)")
            continue
        lower.append(-inf if lb is None else lb - constant)
        upper.append(inf if ub is None else ub - constant)
        starts.append(len(row_index))
        row_index.extend(index)
        row_value.extend(coefficients)
    bounds = np.array([v.bounds for v in columns], dtype=float).reshape(-1, 2)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", True)  # the log goes to _Log, not to the console
    highs.setOptionValue("log_to_console", False)
    n = len(columns)
    highs.addVars(n, np.nan_to_num(bounds[:, 0], nan=-inf),  # None (no bound) became NaN
                  np.nan_to_num(bounds[:, 1], nan=inf))  # fmt: skip
    if n:
        kind = highspy.HighsVarType
        highs.changeColsCost(n, np.arange(n, dtype=np.int32), cost)
        highs.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.array(
            [kind.kInteger if v.is_integer() else kind.kContinuous for v in columns]))  # fmt: skip
    if lower:
        highs.addRows(len(lower), np.array(lower), np.array(upper), len(row_index),
                      np.array(starts, dtype=np.int32), np.array(row_index, dtype=np.int32),
                      np.array(row_value, dtype=np.float64))  # fmt: skip
    highs.changeObjectiveOffset(offset)
    maximize = objectives[0].sense == pyo.maximize
    highs.changeObjectiveSense(highspy.ObjSense.kMaximize if maximize else
                               highspy.ObjSense.kMinimize)  # fmt: skip
    return HighsProblem(highs, columns, offset)


class InfeasibleRow(ValueError):
    """A constraint of constants only that does not hold."""


#: How far a row of constants may miss its bounds (HiGHS's primal feasibility tolerance).
_ROW_TOLERANCE = 1e-7


def status_of(status: Any, has_solution: bool, incumbent: float | None, bound: float | None,
              result: ResultBuilder, seconds: float, words: str) -> SolveResult:  # fmt: skip
    """HiGHS's model status as a :class:`SolveStatus` (the mapping of
    :func:`~placement.solvers.contrib.outcome`)."""
    import highspy

    kind = highspy.HighsModelStatus
    return outcome(result, seconds, words, has_solution, incumbent, bound,
                   optimal=status == kind.kOptimal, time_limit=status == kind.kTimeLimit,
                   infeasible=status == kind.kInfeasible)  # fmt: skip


#: Seconds HiGHS may always search, even when handing the model over took its whole limit.
_LEAST_SEARCH = 0.1


def _set_options(highs: Any, options: SolveOptions, time_limit: float | None) -> None:
    if options.threads is not None:
        highs.setOptionValue("threads", options.threads)
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    highs.setOptionValue("mip_rel_gap", float(options.rel_gap))


class _Log:
    """HiGHS's log, kept (the MIP start's verdict is read from it) and shown as ``tee`` asks:
    True on stdout, or written to the given streams."""

    def __init__(self, tee: bool | list[TextIO]) -> None:
        self.streams: list[TextIO] = [sys.stdout] if tee is True else list(tee or [])
        self.lines: list[str] = []

    def line(self, event: Any) -> None:
        self.lines.append(event.message)
        for stream in self.streams:
            stream.write(event.message)

    def text(self) -> str:
        return "".join(self.lines)


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
