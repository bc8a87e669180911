"""The HiGHS backend (``placement.solvers.highs``): its status mapping (a fake solver, no
HiGHS), its one-line errors, its thread pool and its reading of the MIP-start log."""

from __future__ import annotations

from types import SimpleNamespace

import pyomo.environ as pyo
import pytest
from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
from test_cim_model import fork  # the hand-counted fork (12 columns, 5 binaries, 14 rows)

import placement.solvers.highs as highs_mod
from placement.cim.instance import CimInstance
from placement.cim.pipeline import solve
from placement.errors import PlacementError
from placement.models.cim_makespan.build import build_cim_model
from placement.solvers.base import ModelSize, SolveOptions, SolveResult, SolveStatus
from placement.solvers.highs import start_verdict
from placement.solvers.registry import BACKENDS

HIGHS = BACKENDS["highs"]


def solve_cim(instance: CimInstance, **options):
    """The paper's model with HiGHS through the pipeline."""
    return solve(instance, **{"formulation": "faithful", "solver": "highs", **options})


def solve_model(model, start=None, **options):
    """The HiGHS backend alone: result in the model's units."""
    return HIGHS.solve(model, SolveOptions(**options), start=start)


# --- status mapping and one-line errors (fake solver, no HiGHS) -----------------------


class FakeSolver:
    def __init__(self, term, sol, incumbent=None, bound=None, exc=None):
        self.term, self.sol, self.incumbent, self.bound, self.exc = term, sol, incumbent, bound, exc
        self.loaded = False

    def available(self):
        return True

    def set_instance(self, model):
        pass

    def solve(self, model, **kw):
        if self.exc is not None:
            raise self.exc

        def load_vars():
            self.loaded = True

        return SimpleNamespace(
            termination_condition=self.term,
            solution_status=self.sol,
            incumbent_objective=self.incumbent,
            objective_bound=self.bound,
            timing_info=SimpleNamespace(wall_time=0.25),
            solution_loader=SimpleNamespace(load_vars=load_vars),
        )


def fake_solve(monkeypatch, **kw) -> tuple[SolveResult, FakeSolver]:
    fake = FakeSolver(**kw)
    monkeypatch.setattr(highs_mod, "contrib_solver", lambda name: fake)
    return solve_model(build_cim_model(fork())), fake


@pytest.mark.unit
def test_status_time_limit_with_incumbent(monkeypatch):
    res, fake = fake_solve(monkeypatch, term=TerminationCondition.maxTimeLimit,
                           sol=SolutionStatus.feasible, incumbent=100.0, bound=80.0)
    assert res.status == SolveStatus.TIME_LIMIT and fake.loaded
    assert (res.objective, res.best_bound, res.gap) == (100.0, 80.0, pytest.approx(0.2))
    assert res.solve_seconds == 0.25 and res.build_seconds == 0.0  # the pipeline's to fill
    assert res.size == ModelSize(12, 5, 14)


@pytest.mark.unit
def test_status_time_limit_without_incumbent(monkeypatch):
    res, fake = fake_solve(monkeypatch, term=TerminationCondition.maxTimeLimit,
                           sol=SolutionStatus.noSolution, bound=80.0)
    assert res.status == SolveStatus.TIME_LIMIT_NO_SOLUTION and not fake.loaded
    assert res.objective is None and res.gap is None


@pytest.mark.parametrize(
    ("term", "sol", "status"),
    [
        (TerminationCondition.provenInfeasible, SolutionStatus.noSolution, SolveStatus.INFEASIBLE),
        (TerminationCondition.infeasibleOrUnbounded, SolutionStatus.noSolution,
         SolveStatus.ERROR),
        (TerminationCondition.convergenceCriteriaSatisfied, SolutionStatus.noSolution,
         SolveStatus.ERROR),
        (TerminationCondition.iterationLimit, SolutionStatus.feasible, SolveStatus.ERROR),
        (TerminationCondition.error, SolutionStatus.noSolution, SolveStatus.ERROR),
    ],
)
@pytest.mark.unit
def test_status_never_upgraded(monkeypatch, term, sol, status):
    res, _ = fake_solve(monkeypatch, term=term, sol=sol, incumbent=1.0, bound=0.5)
    assert res.status == status
    if status == SolveStatus.ERROR:
        assert term.name in res.message


@pytest.mark.unit
def test_solver_exception_becomes_error(monkeypatch):
    res, _ = fake_solve(monkeypatch, term=None, sol=None, exc=RuntimeError("boom"))
    assert res.status == SolveStatus.ERROR and "boom" in res.message


@pytest.mark.unit
def test_highs_unavailable(monkeypatch):
    import pyomo.contrib.solver.common.factory as factory

    monkeypatch.setattr(factory, "SolverFactory",
                        lambda name: SimpleNamespace(available=lambda: False))
    with pytest.raises(PlacementError, match=r"HiGHS is not available: pip install highspy"):
        solve_model(build_cim_model(fork()))


@pytest.mark.parametrize(
    ("kw", "needle"),
    [({"time_limit": -1.0}, "time limit"), ({"rel_gap": -0.1}, "relative gap"),
     ({"threads": 0}, "threads")],
)
@pytest.mark.unit
def test_bad_solver_arguments(kw, needle):
    with pytest.raises(PlacementError, match=needle):
        solve_model(build_cim_model(fork()), **kw)


# --- real HiGHS -----------------------------------------------------------------------


@pytest.mark.solver
def test_infeasible_user_model_reports_infeasible():
    m = build_cim_model(fork())
    m.impossible = pyo.Constraint(expr=m.makespan <= 0.5 * pyo.value(m.t_host["a"]))
    m.host["a"].fix(1)
    res = solve_model(m)
    assert res.status == SolveStatus.INFEASIBLE
    assert res.objective is None and "Infeasible" in res.message


@pytest.mark.solver
def test_changing_thread_count_between_solves():
    # HiGHS keeps one process-wide scheduler; solve_model must reset it for a new count.
    for threads in (1, 2, None, 1):
        assert solve_cim(fork(), threads=threads).result.status == SolveStatus.OPTIMAL


# --- the MIP-start verdict in HiGHS's log (no solver) ---------------------------------


@pytest.mark.unit
def test_start_verdict_parsing():
    accepted = "Presolving model\nMIP start solution is feasible, objective value is 1.0\n"
    empty = ("Assessing feasibility of MIP using primal feasibility\nSolution has num max sum\n"
             "Col     infeasibilities      0            0            0\n"
             "Integer infeasibilities      0            0            0\n"
             "Row     infeasibilities      0            0            0\n"
             "Presolving model\nPresolve: Optimal\n")
    bad = empty.replace("Row     infeasibilities      0", "Row     infeasibilities      3")
    assert start_verdict(accepted) == "accepted"
    assert start_verdict(empty) == "accepted"  # presolve solved everything
    assert start_verdict(bad) == "rejected"
    assert start_verdict("") == "rejected"
