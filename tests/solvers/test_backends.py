"""Other solvers than HiGHS: the registry, the tightened model with a start, honest statuses
(a size-limited licence is not our failure). The same cases for every backend (the
brute-force optimum, error handling): ``test_cross_backend.py``."""

from __future__ import annotations

import random

import pytest
from backend_helpers import require_backend
from oracles import random_instance

from placement.cim.cpsat_route import rounded_instance, time_unit
from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.pipeline import solve
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.build import build_cim_model
from placement.solvers import gurobi
from placement.solvers.base import SolveOptions, SolveStatus
from placement.solvers.gurobi import LICENCE_LIMIT
from placement.solvers.registry import BACKENDS, get_backend, unavailable_reasons

AVAILABLE = unavailable_reasons()
N_RANDOM = 20


def solve_cim(instance: CimInstance, **options):
    """The paper's model with HiGHS: the reference optimum."""
    return solve(instance, **{"formulation": "faithful", "solver": "highs", **options})


def _instances(n: int = N_RANDOM, seed0: int = 100) -> list[CimInstance]:
    out = []
    for seed in range(seed0, seed0 + n):
        rng = random.Random(seed)
        out.append(random_instance(rng, rng.randint(3, 8)))
    return out


@pytest.mark.unit
def test_available_solvers_names_every_backend():
    assert set(AVAILABLE) == {"highs", "scip", "cbc", "gurobi"}
    assert AVAILABLE["highs"] is None
    for name, why in AVAILABLE.items():
        assert why is None or name in why  # a reason names the solver and how to install it


@pytest.mark.unit
def test_unknown_solver_is_a_clear_error():
    inst = _instances(1)[0]
    with pytest.raises(PlacementError, match="unknown solver 'nosuch'; known: highs, scip"):
        get_backend("nosuch")
    with pytest.raises(PlacementError, match="unknown solver 'nosuch'; known: auto, highs"):
        solve(inst, solver="nosuch")


@pytest.mark.unit
def test_unavailable_solver_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(BACKENDS["scip"], "unavailable_reason",
                        lambda: "scip is not available: pip install it")
    with pytest.raises(PlacementError, match="scip is not available: pip install"):
        BACKENDS["scip"].solve(build_cim_model(_instances(1)[0]), SolveOptions())


@pytest.mark.parametrize(
    "solver",
    [pytest.param("scip", marks=pytest.mark.solver), pytest.param("cbc", marks=pytest.mark.solver),
     pytest.param("gurobi", marks=pytest.mark.slow)],  # gurobi: licence checks
)
def test_tightened_with_start_on_other_solvers(solver):
    require_backend(solver)
    for inst in _instances(3, seed0=7):
        ref = solve_cim(inst, threads=1).result
        out = solve(inst, solver=solver, formulation="tightened", warm_start=True, threads=1,
                    time_limit=30)
        r, schedule = out.result, out.schedule
        assert r.status == SolveStatus.OPTIMAL, r.message
        assert schedule is not None and verify_cim(inst, schedule).ok
        assert r.objective == pytest.approx(ref.objective, rel=1e-4)


def _wide_instance(n: int) -> CimInstance:
    """A fork of n parallel operators: n(n-1)/2 ordering binaries, beyond 2,000 quickly."""
    ops = [CimOperator("src", 1e-4, 1e-5, 1), CimOperator("dst", 1e-4)]
    edges = []
    for i in range(n):
        ops.append(CimOperator(f"b{i}", 1e-4 * (1 + i % 3), 2e-5, 1))
        edges += [CimEdge("src", f"b{i}", 1e-6), CimEdge(f"b{i}", "dst", 1e-6)]
    return CimInstance.build(ops, edges, crossbar_budget=5)


@pytest.mark.solver
def test_gurobi_size_limit_is_reported_as_licence_limit():
    require_backend("gurobi")
    if gurobi.licence() != "LimitedLicense":
        pytest.skip("gurobi has a full licence here: no size limit to hit")
    model = build_cim_model(_wide_instance(70))  # 2,415 ordering binaries
    r = BACKENDS["gurobi"].solve(model, SolveOptions(time_limit=5))
    assert r.status == SolveStatus.ERROR
    assert r.options.get("licence_limit") is True
    assert r.message.startswith(LICENCE_LIMIT)


@pytest.mark.unit
def test_cpsat_rounding_is_down_and_fine():
    inst = _instances(1)[0]
    unit = time_unit(inst)
    assert unit <= 1e-9
    r = rounded_instance(inst, unit)
    for a, b in zip(inst.operators, r.operators, strict=True):
        assert b.t_host * unit <= a.t_host + 1e-18
        assert a.t_host - b.t_host * unit <= unit * (1 + 1e-9)


@pytest.mark.unit
def test_gurobi_without_scipy_is_unavailable_with_the_reason(monkeypatch):
    """Pyomo's gurobi_direct cannot compile a model without scipy: every solve would fail
    (the later ones with "'NoneType' object is not callable"), so the backend says why."""
    require_backend("gurobi")
    monkeypatch.setattr(gurobi, "scipy_available", lambda: False)
    reason = BACKENDS["gurobi"].unavailable_reason()
    assert reason is not None and "needs scipy" in reason and "pip install scipy" in reason
