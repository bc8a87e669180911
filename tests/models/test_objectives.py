"""Objectives beyond latency: the blocks of placement.models.cim_makespan.objectives solved by
placement.cim.objectives, against the brute-force oracle on random small instances.

Every objective (energy, period, crossbars, latency) alone, under bounds that bind, and
lexicographically, on the MIP formulations and on the CP-SAT route, must reach the
oracle's optimum; every result is verified (schedule, energy, bounds, stream).
"""

from __future__ import annotations

import random

import pyomo.environ as pyo
import pytest
from oracles import assignment_points, brute_force_objective, random_instance, with_energy

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.objectives import Objective, axis_values, solve, solve_objective
from placement.cim.objectives import build_model as build_objective_model
from placement.cim.pipeline import build_model
from placement.cim.schedule import all_host_schedule
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.objectives import (
    add_energy,
    add_period,
    axis_value,
    set_bound,
    set_objective,
)
from placement.solvers.base import SolveStatus
from placement.solvers.registry import get_backend

SEEDS = list(range(16))
REL = 1e-6  # the solves run at a relative gap of 1e-9; values agree far below this


def instance_for(seed: int) -> CimInstance:
    """Random DAGs of 3..7 operators with random energies (the oracle enumerates them)."""
    rng = random.Random(7100 + seed)
    base = random_instance(rng, 3 + seed % 5, edge_prob=(0.2, 0.4)[seed % 2])
    return with_energy(base, rng)


def binding_bounds(instance: CimInstance) -> dict[str, float]:
    """Per axis, a bound halfway between its minimum and its value at another axis's
    optimum, so that it binds whenever the two optima differ."""
    points = assignment_points(instance)
    lows = {a: min(p[a] for p in points) for a in ("latency", "energy", "period")}
    at_energy = min(points, key=lambda p: (p["energy"], p["latency"]))
    at_latency = min(points, key=lambda p: (p["latency"], p["energy"]))
    return {
        "latency": (lows["latency"] + at_energy["latency"]) / 2,
        "energy": (lows["energy"] + at_latency["energy"]) / 2,
        "period": (lows["period"] + at_latency["period"]) / 2,
    }


def cases(instance: CimInstance) -> list[Objective]:
    b = binding_bounds(instance)
    return [
        Objective("energy"),
        Objective("energy", bounds=(("latency", b["latency"]),), then=("latency",)),
        Objective("latency", bounds=(("energy", b["energy"]),)),
        Objective("latency", then=("energy",)),
        Objective("throughput", then=("latency",)),
        Objective("throughput", bounds=(("latency", b["latency"]),)),
        Objective("latency", bounds=(("period", b["period"]),)),
        Objective("crossbars", bounds=(("latency", b["latency"]),), then=("energy",)),
    ]


def check_against_oracle(instance: CimInstance, objective: Objective, placement) -> None:
    want = brute_force_objective(instance, objective.minimize, dict(objective.bounds),
                                 objective.then, rel=1e-9)  # fmt: skip
    if want is None:
        assert placement.result.status == SolveStatus.INFEASIBLE, objective.describe()
        assert placement.schedule is None
        return
    assert placement.schedule is not None and placement.verification.ok, objective.describe()
    assert placement.result.status == SolveStatus.OPTIMAL, placement.result.message
    for name in objective.stages:
        assert placement.values[name] == pytest.approx(want[name], rel=REL, abs=1e-12), (
            objective.describe(), name, placement.values, want)
    for name, bound in objective.bounds:
        assert placement.values[name] <= bound * (1 + 1e-9)


@pytest.mark.solver
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("formulation", ["faithful", "bounded", "tightened"])
def test_every_objective_reaches_the_brute_force_optimum_with_highs(seed, formulation):
    instance = instance_for(seed)
    for objective in cases(instance):
        placement = solve_objective(instance, objective, formulation=formulation,
                                    solver="highs", rel_gap=1e-9)  # fmt: skip
        check_against_oracle(instance, objective, placement)


@pytest.mark.solver
@pytest.mark.parametrize("seed", SEEDS[::2])
def test_every_objective_reaches_the_brute_force_optimum_with_cpsat_then_highs(seed):
    if get_backend("cpsat").unavailable_reason():
        pytest.skip("OR-Tools is not installed")
    instance = instance_for(seed)
    for objective in cases(instance):
        placement = solve_objective(instance, objective, formulation="tightened",
                                    solver="cpsat+highs", rel_gap=1e-9)  # fmt: skip
        check_against_oracle(instance, objective, placement)


@pytest.mark.solver
def test_bounds_no_placement_meets_are_an_answer_not_an_error():
    instance = instance_for(3)
    least = min(p["latency"] for p in assignment_points(instance))
    placement = solve_objective(instance, Objective("energy", bounds=(("latency", least / 2),)),
                                solver="highs")  # fmt: skip
    assert placement.result.status == SolveStatus.INFEASIBLE
    assert placement.schedule is None and placement.stages[0].status == SolveStatus.INFEASIBLE


@pytest.mark.solver
def test_a_model_of_your_own_composed_from_the_blocks():
    """The tutorial's way: the paper's model, the energy block, a latency bound, the
    energy objective; solved as built and verified, equal to the library's own solve."""
    instance = instance_for(5)
    bound = binding_bounds(instance)["latency"]
    model = build_model(instance, formulation="bounded")
    add_energy(model, instance)
    set_bound(model, "latency", bound)
    set_objective(model, "energy")
    objective = Objective("energy", bounds=(("latency", bound),))
    own = solve_objective(instance, objective, model=model, rel_gap=1e-9)
    library = solve_objective(instance, objective, solver="highs", rel_gap=1e-9)
    assert own.verification.ok and own.values["energy"] == pytest.approx(library.values["energy"])
    assert axis_value(model, "energy") == pytest.approx(own.values["energy"], rel=1e-6)
    assert pyo.value(model.makespan) * pyo.value(model.time_unit) <= bound * (1 + 1e-6)


@pytest.mark.solver
@pytest.mark.parametrize("seed", SEEDS[1::3])
def test_a_model_built_for_an_objective_reaches_the_brute_force_optimum(seed):
    """cim.build_model(objective=...) on every formulation, tightened included: its
    makespan cap cuts no optimum off, so the model solved as built is the oracle's."""
    instance = instance_for(seed)
    for objective in cases(instance):
        if objective.then:
            continue
        for formulation in ("faithful", "tightened"):
            model = build_objective_model(instance, formulation, objective=objective)
            placement = solve_objective(instance, objective, model=model, rel_gap=1e-9)
            check_against_oracle(instance, objective, placement)


@pytest.mark.solver
def test_a_latency_models_makespan_cap_is_refused_for_another_objective():
    """The tightened latency model caps T at the heuristic's makespan, which may cut an
    energy optimum off: solving it for energy without a latency bound within the cap is
    an error; with one, it is the oracle's optimum."""
    instance = instance_for(5)
    model = build_model(instance, formulation="tightened")
    add_energy(model, instance)
    set_objective(model, "energy")
    with pytest.raises(PlacementError, match="makespan cap"):
        solve_objective(instance, Objective("energy"), model=model)
    cap = pyo.value(model.upper_bound) * pyo.value(model.time_unit) / (1 + 1e-6)
    set_bound(model, "latency", cap)
    objective = Objective("energy", bounds=(("latency", cap),))
    check_against_oracle(instance, objective,
                         solve_objective(instance, objective, model=model, rel_gap=1e-9))
    with pytest.raises(PlacementError, match="one stage"):
        build_objective_model(instance, objective=Objective("energy", then=("latency",)))
    with pytest.raises(PlacementError, match="upper_bound"):
        build_objective_model(instance, upper_bound=1.0, objective="energy")


@pytest.mark.solver
def test_the_api_solve_keeps_todays_pipeline_for_latency():
    instance = instance_for(2)
    latency = solve(instance, solver="highs")
    assert not hasattr(latency, "objective")  # today's CimPlacement
    energy = solve(instance, objective="energy", solver="highs")
    assert energy.objective.minimize == "energy" and energy.verification.ok
    with pytest.raises(PlacementError, match="decomposition"):
        solve(instance, objective="energy", method="decomposition")


@pytest.mark.unit
def test_objectives_refuse_what_they_cannot_mean():
    with pytest.raises(PlacementError, match="unknown objective"):
        Objective("speed")
    with pytest.raises(PlacementError, match="twice"):
        Objective("energy", then=("energy",))
    with pytest.raises(PlacementError, match="finite number"):
        Objective("energy", bounds=(("latency", -1.0),))
    plain = CimInstance.build([CimOperator("a", 1e-3, 1e-4, 1)], [], 1)
    with pytest.raises(PlacementError, match="energy model"):
        solve_objective(plain, Objective("energy"))
    model = build_model(plain, formulation="faithful")
    with pytest.raises(PlacementError, match="no energy block"):
        set_bound(model, "energy", 1.0)
    with pytest.raises(PlacementError, match="energy model"):
        add_energy(model, plain)
    add_period(model)
    set_objective(model, "period")
    assert model.objective.expr is model.period


@pytest.mark.unit
def test_the_verifier_recomputes_the_energy_and_catches_a_wrong_claim():
    ops = [CimOperator("a", 2e-3, 1e-3, 1, e_host=4e-3, e_mvm=1e-4, e_internal=1e-5),
           CimOperator("b", 1e-3, None, 0, e_host=2e-3)]  # fmt: skip
    instance = CimInstance.build(ops, [CimEdge("a", "b", 5e-4, e_transfer=2e-5)], 1, 0.5)
    schedule = all_host_schedule(instance)
    assert axis_values(instance, schedule)["energy"] == pytest.approx(6e-3 + 0.5 * 3e-3)
    good = verify_cim(instance, schedule, claimed_energy=6e-3 + 0.5 * 3e-3)
    assert good.ok and good.recomputed_energy == pytest.approx(7.5e-3)
    bad = verify_cim(instance, schedule, claimed_energy=7e-3)
    assert not bad.ok and "claimed energy" in bad.violations[0]


@pytest.mark.unit
def test_energies_are_given_for_everything_or_nothing():
    with pytest.raises(PlacementError, match="everything or for nothing"):
        CimInstance.build([CimOperator("a", 1e-3, 1e-4, 1, e_host=1e-3)], [], 1)
    with pytest.raises(PlacementError, match="non-negative"):
        CimInstance.build([CimOperator("a", 1e-3, 1e-4, 1, e_host=-1.0, e_mvm=0.0,
                                       e_internal=0.0)], [], 1, 0.0)  # fmt: skip
