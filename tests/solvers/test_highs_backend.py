"""The HiGHS backend (``placement.solvers.highs``): its status mapping, its one-line errors,
the problem it hands HiGHS (the same as Pyomo's own HiGHS interface builds), its thread
pool and its reading of the MIP-start log."""

from __future__ import annotations

import sys

import highspy
import pyomo.environ as pyo
import pytest
from test_cim_model import fork  # the hand-counted fork (12 columns, 5 binaries, 14 rows)

from placement.cim.instance import CimInstance
from placement.cim.pipeline import solve
from placement.errors import PlacementError
from placement.models.cim_makespan.build import build_cim_model
from placement.solvers.base import ModelSize, SolveOptions, SolveResult, SolveStatus
from placement.solvers.contrib import ResultBuilder, model_columns
from placement.solvers.highs import start_verdict, status_of, to_highs
from placement.solvers.registry import BACKENDS

HIGHS = BACKENDS["highs"]


def solve_cim(instance: CimInstance, **options):
    """The paper's model with HiGHS through the pipeline."""
    return solve(instance, **{"formulation": "faithful", "solver": "highs", **options})


def solve_model(model, start=None, **options):
    """The HiGHS backend alone: result in the model's units."""
    return HIGHS.solve(model, SolveOptions(**options), start=start)


# --- status mapping and one-line errors -----------------------------------------------


def mapped(status, has_solution, incumbent=None, bound=None) -> SolveResult:
    """HiGHS's model status through the backend's mapping (no solve)."""
    builder = ResultBuilder("highs", build_cim_model(fork()), SolveOptions())
    return status_of(status, has_solution, incumbent, bound, builder, 0.25,
                     f"HiGHS: {status.name}")  # fmt: skip


@pytest.mark.unit
def test_status_time_limit_with_incumbent():
    res = mapped(highspy.HighsModelStatus.kTimeLimit, True, 100.0, 80.0)
    assert res.status == SolveStatus.TIME_LIMIT
    assert (res.objective, res.best_bound, res.gap) == (100.0, 80.0, pytest.approx(0.2))
    assert res.solve_seconds == 0.25 and res.build_seconds == 0.0  # the pipeline's to fill
    assert res.size == ModelSize(12, 5, 14)


@pytest.mark.unit
def test_status_time_limit_without_incumbent():
    res = mapped(highspy.HighsModelStatus.kTimeLimit, False, None, 80.0)
    assert res.status == SolveStatus.TIME_LIMIT_NO_SOLUTION
    assert res.objective is None and res.gap is None


@pytest.mark.parametrize(
    ("status", "has_solution", "expected"),
    [
        ("kInfeasible", False, SolveStatus.INFEASIBLE),
        ("kUnboundedOrInfeasible", False, SolveStatus.ERROR),
        ("kOptimal", False, SolveStatus.ERROR),
        ("kIterationLimit", True, SolveStatus.ERROR),
        ("kSolveError", False, SolveStatus.ERROR),
        ("kInterrupt", True, SolveStatus.ERROR),
    ],
)
@pytest.mark.unit
def test_status_never_upgraded(status, has_solution, expected):
    res = mapped(getattr(highspy.HighsModelStatus, status), has_solution, 1.0, 0.5)
    assert res.status == expected
    if expected == SolveStatus.ERROR:
        assert status in res.message


@pytest.mark.solver
def test_a_model_highs_cannot_take_becomes_an_error():
    m = build_cim_model(fork())
    m.curved = pyo.Constraint(expr=m.makespan * m.makespan >= 1.0)  # not linear
    res = solve_model(m)
    assert res.status == SolveStatus.ERROR and res.message.startswith("HiGHS failed:")


@pytest.mark.unit
def test_highs_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "highspy", None)  # import highspy fails
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


# --- the problem handed to HiGHS -------------------------------------------------------


def every_kind_of_row() -> pyo.ConcreteModel:
    """Ranged, equality and one-sided rows; free, bounded, fixed, integer and binary columns;
    a constant in the objective; maximized."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-3, 7))
    m.y = pyo.Var(domain=pyo.Integers, bounds=(0, 9))
    m.z = pyo.Var(domain=pyo.Binary)
    m.free = pyo.Var()
    m.fixed = pyo.Var(initialize=2.5)
    m.fixed.fix()
    m.ranged = pyo.Constraint(expr=pyo.inequality(1, m.x + 2 * m.y - m.z, 11.5))
    m.equal = pyo.Constraint(expr=m.free == m.x - m.fixed)
    m.upper = pyo.Constraint(expr=m.y + 4 * m.z <= 6 + m.fixed)
    m.lower = pyo.Constraint(expr=m.x >= -m.fixed)
    m.goal = pyo.Objective(expr=m.x + 1.5 * m.y + 3 * m.z + m.free + 4 + m.fixed,
                           sense=pyo.maximize)  # fmt: skip
    return m


@pytest.mark.parametrize("build", [every_kind_of_row, lambda: build_cim_model(fork())])
@pytest.mark.solver
def test_same_optimum_and_solution_as_pyomos_own_highs_interface(build):
    from pyomo.contrib.solver.common.factory import SolverFactory

    ours, theirs = build(), build()
    res = solve_model(ours)
    SolverFactory("highs").solve(theirs)
    assert res.status == SolveStatus.OPTIMAL
    expected = pyo.value(next(theirs.component_data_objects(pyo.Objective, active=True)))
    got = pyo.value(next(ours.component_data_objects(pyo.Objective, active=True)))
    assert res.objective == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(expected, rel=1e-9)  # the solution is in the variables
    for c in ours.component_data_objects(pyo.Constraint, active=True):  # and it is feasible
        body = pyo.value(c.body)
        assert c.lower is None or body >= pyo.value(c.lower) - 1e-6, c.name
        assert c.upper is None or body <= pyo.value(c.upper) + 1e-6, c.name


@pytest.mark.solver
def test_a_model_whose_columns_are_all_fixed_is_solved_as_its_constant():
    m = every_kind_of_row()
    m.x.fix(1.0)
    m.y.fix(1)
    m.z.fix(0)
    m.free.fix(-1.5)
    res = solve_model(m)
    assert res.status == SolveStatus.OPTIMAL
    assert res.objective == res.best_bound == pytest.approx(1 + 1.5 - 1.5 + 4 + 2.5)
    m.impossible = pyo.Constraint(expr=m.x >= 2)
    assert solve_model(m).status == SolveStatus.INFEASIBLE


@pytest.mark.parametrize("build", [every_kind_of_row, lambda: build_cim_model(fork())])
@pytest.mark.unit
def test_columns_in_the_order_pyomos_own_highs_interface_creates_them(build):
    from pyomo.contrib.solver.common.factory import SolverFactory

    model = build()
    theirs = SolverFactory("highs")
    theirs.set_instance(model)
    by_id = {id(v): v for v in model.component_data_objects(pyo.Var)}
    created = sorted(theirs._pyomo_var_to_solver_var_map.items(), key=lambda item: item[1])
    expected = [by_id[i].name for i, _ in created if not by_id[i].fixed]
    assert [v.name for v in model_columns(model)] == expected
    assert [v.name for v in to_highs(model).columns] == expected
