"""Pareto fronts by the epsilon-constraint method (placement.cim.pareto) against the brute
force: on random small instances the method finds exactly the nondominated points of
every pair and triple of axes, each proven, and says the front is complete."""

from __future__ import annotations

import random

import pytest
from oracles import brute_force_front, random_instance, with_energy

from placement.cim.objectives import axis_name
from placement.cim.pareto import (
    FrontState,
    StepOutcome,
    front_steps,
    nondominated,
    pareto_front,
    parse_axes,
)
from placement.errors import PlacementError

PAIRS = [("latency", "energy"), ("energy", "latency"), ("latency", "throughput"),
         ("energy", "crossbars"), ("throughput", "crossbars")]  # fmt: skip


def instance_for(seed: int):
    """3..6 operators; the accelerator's power ranges past the host's, so that offloading
    saves energy on some operators and time on others (fronts of several points)."""
    rng = random.Random(8300 + seed)
    base = random_instance(rng, 3 + seed % 4, edge_prob=0.35, acc_factor_range=(0.2, 2.0))
    return with_energy(base, rng, host_w=(0.5, 2.0), acc_w=(0.05, 4.0))


def front_values(front) -> list[dict[str, float]]:
    return [front.steps[i][1].values for i in front.points]


def same_points(found: list[dict[str, float]], want: list[dict[str, float]], names) -> bool:
    def key(p):
        return tuple(round(p[a], 12) for a in names)

    return sorted(map(key, found)) == sorted(map(key, want))


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("axes", PAIRS, ids="-".join)
def test_two_axis_fronts_are_the_brute_force_nondominated_points(seed, axes):
    instance = instance_for(seed)
    names = [axis_name(a) for a in axes]
    front = pareto_front(instance, axes, solver="highs", rel_gap=1e-9, rel_step=1e-5)
    assert front.complete, front.note
    want = brute_force_front(instance, names)
    assert same_points(front_values(front), want, names), (front_values(front), want)
    for i in front.points:
        placement = front.steps[i][1]
        assert placement.verification.ok and placement.result.status.value == "optimal"


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(4))
def test_a_three_axis_front_is_the_brute_force_nondominated_set(seed):
    instance = instance_for(seed)
    axes = ("latency", "energy", "crossbars")
    front = pareto_front(instance, axes, solver="highs", rel_gap=1e-9, rel_step=1e-5)
    assert front.complete, front.note
    want = brute_force_front(instance, list(axes))
    assert same_points(front_values(front), want, axes)


@pytest.mark.unit
def test_the_method_stops_below_a_proven_end_and_steps_by_whole_crossbars():
    state = FrontState()
    steps = front_steps(["latency", "crossbars"], state=state)
    first = next(steps)
    assert [s.role for s in first] == ["end", "end"]
    low = StepOutcome("optimal", {"latency": 1.0, "crossbars": 9.0}, True)
    high = StepOutcome("optimal", {"latency": 3.0, "crossbars": 5.0}, True)
    (step,) = steps.send([low, high])
    assert dict(step.objective.bounds) == {"crossbars": 8.0}
    mid = StepOutcome("optimal", {"latency": 2.0, "crossbars": 5.5}, True)
    with pytest.raises(StopIteration):
        steps.send([mid])  # 4.5 is below the proven minimum 5: nothing remains
    assert state.complete and [s.index for s in state.steps] == [0, 1, 2]


@pytest.mark.unit
def test_an_unproven_end_is_checked_by_one_more_solve():
    state = FrontState()
    steps = front_steps(["latency", "energy"], state=state)
    next(steps)
    low = StepOutcome("optimal", {"latency": 1.0, "energy": 2.0}, True)
    high = StepOutcome("time_limit", {"latency": 2.0, "energy": 1.0}, False)
    (step,) = steps.send([low, high])
    (again,) = steps.send([StepOutcome("optimal", {"latency": 2.0, "energy": 1.0}, True)])
    assert dict(again.objective.bounds)["energy"] < 1.0
    with pytest.raises(StopIteration):
        steps.send([StepOutcome("infeasible", None, False)])
    assert state.complete


@pytest.mark.unit
def test_axes_and_dominance():
    assert parse_axes("latency,energy") == ("latency", "energy")
    for bad, words in (("latency", "two or three"), ("latency,speed", "unknown axis"),
                       ("energy,energy", "twice"), ("a,b,c,d", "unknown")):  # fmt: skip
        with pytest.raises(PlacementError, match=words):
            parse_axes(bad)
    points = [{"latency": 1.0, "energy": 3.0}, {"latency": 2.0, "energy": 2.0},
              {"latency": 2.0, "energy": 2.0}, {"latency": 3.0, "energy": 3.0}]  # fmt: skip
    assert nondominated(points, ["latency", "energy"]) == [0, 1]
    assert nondominated(points, ["latency", "energy"], [True, False, True, True]) == [0, 2]
