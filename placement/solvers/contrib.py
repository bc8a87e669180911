"""Shared by the backends that take a Pyomo model: model size, MIP starts, status mapping.

HiGHS, SCIP and Gurobi run through Pyomo's current solver interface
(``pyomo.contrib.solver``); CBC through the legacy one. What a Pyomo backend reports
is mapped to :class:`SolveStatus` here, once: OPTIMAL only when the solver proved it,
a solution loaded into the model only when the solver has a feasible one.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pyomo.environ as pyo
from pyomo.common.numeric_types import native_types
from pyomo.core.base.constraint import Constraint
from pyomo.core.base.objective import Objective

from placement.solvers.base import (
    BackendBase,
    ModelSize,
    SolveOptions,
    SolveResult,
    SolveStatus,
    finite_or_none,
    relative_gap,
)


def model_size(model: pyo.Block, columns: list[Any] | None = None) -> ModelSize:
    """What the solver sees: unfixed variables used in active rows or objectives, active rows.

    ``columns``: :func:`model_columns` of ``model``, when the caller has them already.
    """
    if columns is None:
        columns = model_columns(model)
    rows = sum(1 for _ in model.component_data_objects(Constraint, active=True))
    binaries = sum(1 for v in columns if v.is_binary())
    return ModelSize(variables=len(columns), binaries=binaries, constraints=rows)


def model_columns(model: pyo.Block) -> list[Any]:
    """The unfixed variables of the active rows, then of the active objectives, each in the
    order it first appears (left to right): the order in which Pyomo's own persistent
    interfaces create their columns.

    One walk over each row's and objective's expression (numbers and parameters skipped,
    named expressions entered, each variable looked at once): about twice as fast as
    Pyomo's ``get_vars_from_components``, which counts the same (tests/solvers/test_contrib.py).
    """
    seen: set[int] = set()
    columns: list[Any] = []
    kinds: dict[type, int] = {}  # node class -> _LEAF, _VARIABLE or _EXPRESSION
    stack: list[Any] = []
    for ctype in (Constraint, Objective):
        for data in model.component_data_objects(ctype, active=True):
            stack.append(data.expr)
            while stack:
                node = stack.pop()
                kind = kinds.get(node.__class__)
                if kind is None:
                    kind = kinds[node.__class__] = _node_kind(node)
                if kind == _EXPRESSION:
                    stack.extend(reversed(node.args))  # popped left to right
                elif kind == _VARIABLE and id(node) not in seen:
                    seen.add(id(node))
                    if not node.fixed:
                        columns.append(node)
    return columns


_LEAF, _VARIABLE, _EXPRESSION = 0, 1, 2


def _node_kind(node: Any) -> int:
    """What a node of an expression is, by its class (the same for every instance)."""
    if node.__class__ in native_types:
        return _LEAF
    if node.is_variable_type():
        return _VARIABLE
    return _EXPRESSION if node.is_expression_type() else _LEAF  # parameters: leaves


def load_start(model: pyo.Block, start: Mapping[Any, float]) -> None:
    """Put a MIP start into the variables: the contrib and legacy interfaces read it there."""
    for var, val in start.items():
        if val is not None and not var.fixed:
            var.set_value(float(val), skip_validation=True)


class ResultBuilder:
    """Builds the :class:`SolveResult` of one run; the model size is counted once."""

    def __init__(self, solver: str, model: pyo.Block, options: SolveOptions,
                 columns: list[Any] | None = None) -> None:  # fmt: skip
        self.solver = solver
        self.size = model_size(model, columns)
        self.options: dict[str, object] = options.recorded()
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def __call__(
        self,
        status: SolveStatus,
        seconds: float,
        message: str = "",
        *,
        objective: float | None = None,
        bound: float | None = None,
    ) -> SolveResult:
        bound = finite_or_none(bound)
        return SolveResult(
            status=status,
            solver=self.solver,
            objective=objective,
            best_bound=bound,
            gap=relative_gap(objective, bound),
            build_seconds=0.0,
            solve_seconds=seconds,
            size=self.size,
            message=message,
            options=self.options,
        )


def prepare(
    backend: BackendBase,
    model: pyo.Block,
    options: SolveOptions,
    start: Mapping[Any, float] | None,
) -> ResultBuilder:
    """The checks before a solve, the MIP start in the variables, the result builder."""
    backend.check_ready(options)
    if start is not None:
        load_start(model, start)
    return ResultBuilder(backend.name, model, options)


def contrib_outcome(res: Any, result: ResultBuilder, words: str, seconds: float) -> SolveResult:
    """Map a ``pyomo.contrib.solver`` result; load its solution into the model when it has one."""
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition

    term = res.termination_condition
    has_solution = res.solution_status in (SolutionStatus.optimal, SolutionStatus.feasible)
    incumbent = res.incumbent_objective if has_solution else None
    bound = res.objective_bound
    if has_solution:
        res.solution_loader.load_vars()
    return outcome(result, seconds, words, has_solution, incumbent, bound,
                   optimal=term == TerminationCondition.convergenceCriteriaSatisfied,
                   time_limit=term == TerminationCondition.maxTimeLimit,
                   infeasible=term == TerminationCondition.provenInfeasible)  # fmt: skip


def outcome(result: ResultBuilder, seconds: float, words: str, has_solution: bool,
            incumbent: float | None, bound: float | None, *, optimal: bool, time_limit: bool,
            infeasible: bool) -> SolveResult:  # fmt: skip
    """What a solver said, as a :class:`SolveStatus` (the Pyomo backends' one mapping):
    OPTIMAL only when the solver proved it and has the solution, never upgraded; anything
    unforeseen (e.g. "infeasible or unbounded") an ERROR carrying the solver's ``words``."""
    values = {"objective": incumbent, "bound": bound}
    if optimal and has_solution:
        return result(SolveStatus.OPTIMAL, seconds, "", **values)
    if time_limit:
        if has_solution:
            return result(SolveStatus.TIME_LIMIT, seconds, words, **values)
        return result(SolveStatus.TIME_LIMIT_NO_SOLUTION, seconds, words, bound=bound)
    if infeasible:
        return result(SolveStatus.INFEASIBLE, seconds, words)
    return result(SolveStatus.ERROR, seconds, words, **values)


def contrib_solver(name: str) -> Any:
    """A fresh ``pyomo.contrib.solver`` interface by its registered name."""
    from pyomo.contrib.solver.common.factory import SolverFactory

    return SolverFactory(name)
