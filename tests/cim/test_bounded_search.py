"""The local search that gives an objective stage its start (placement.cim.bounded_search),
against the brute-force oracle: what it returns is a valid schedule that meets the bounds,
never better than the optimum, and, where the list scheduler times assignments exactly (a
chain), at least as good as every feasible assignment one flip from its best seeds."""

from __future__ import annotations

import random

import pytest
from oracles import assignment_points, brute_force_objective, random_instance, with_energy

from placement.cim.bounded_search import bounded_schedule
from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.objectives import axis_values, meets
from placement.cim.schedule import CimSchedule, all_host_schedule, asap_schedule
from placement.cim.verifier import verify_cim

AXES = ("latency", "energy", "period", "crossbars")


def chain_instance(seed: int) -> CimInstance:
    """A chain of 3..7 operators with energies: one host operator at a time anyway, so a
    list schedule of an assignment is its optimal schedule."""
    rng = random.Random(5100 + seed)
    n = 3 + seed % 5
    ops = []
    for i in range(n):
        t_host = rng.uniform(1e-4, 1e-3)
        if rng.random() < 0.2:
            ops.append(CimOperator(f"op{i}", t_host))
        else:
            ops.append(CimOperator(f"op{i}", t_host, t_host * rng.uniform(0.2, 2.0),
                                   rng.randint(1, 4)))  # fmt: skip
    edges = [CimEdge(f"op{i}", f"op{i + 1}", ops[i].t_host * rng.uniform(0.0, 0.5))
             for i in range(n - 1)]  # fmt: skip
    total = sum(op.crossbars for op in ops if op.supported)
    base = CimInstance.build(ops, edges, rng.randint(total // 2, total))
    return with_energy(base, rng, host_w=(0.5, 2.0), acc_w=(0.05, 4.0))


def dag_instance(seed: int) -> CimInstance:
    rng = random.Random(5300 + seed)
    base = random_instance(rng, 3 + seed % 5, edge_prob=0.4, acc_factor_range=(0.2, 2.0))
    return with_energy(base, rng, host_w=(0.5, 2.0), acc_w=(0.05, 4.0))


def problem(instance: CimInstance, seed: int) -> tuple[str, dict[str, float]]:
    """An axis to minimize and a bound on another that a random assignment meets exactly."""
    rng = random.Random(seed)
    minimize, bounded = rng.sample(AXES, 2)
    point = rng.choice(assignment_points(instance))
    return minimize, {bounded: point[bounded]}


def schedule_of(instance: CimInstance, on_host: dict[str, bool]) -> CimSchedule:
    order = [op.name for op in instance.operators if on_host[op.name]]  # a chain, in order
    return asap_schedule(instance, on_host, order)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(24))
def test_a_found_schedule_is_valid_meets_the_bounds_and_is_never_below_the_optimum(seed):
    instance = dag_instance(seed)
    minimize, bounds = problem(instance, seed)
    found = bounded_schedule(instance, minimize, bounds, [all_host_schedule(instance)])
    best = brute_force_objective(instance, minimize, bounds)
    assert best is not None  # the bound is a point's own value
    if found is None:
        return
    assert verify_cim(instance, found, claimed=found.makespan).ok
    values = axis_values(instance, found)
    assert meets(values, bounds)
    assert values[minimize] >= best[minimize] * (1 - 1e-9) - 1e-15


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(24))
def test_on_a_chain_it_is_no_worse_than_any_feasible_neighbour_of_a_seed(seed):
    instance = chain_instance(seed)
    minimize, bounds = problem(instance, seed)
    points = assignment_points(instance)
    seed_point = random.Random(seed + 1).choice(points)
    seed_schedule = schedule_of(instance, seed_point["on_host"])
    found = bounded_schedule(instance, minimize, bounds, [seed_schedule])
    supported = [op.name for op in instance.operators if op.supported]
    neighbours = [p for p in points
                  if sum(p["on_host"][v] != seed_point["on_host"][v] for v in supported) <= 1
                  and meets(p, bounds)]  # fmt: skip
    if not neighbours:
        return
    assert found is not None, "a feasible assignment one flip away was missed"
    values = axis_values(instance, found)
    assert meets(values, bounds)
    assert values[minimize] <= min(p[minimize] for p in neighbours) * (1 + 1e-9) + 1e-15


@pytest.mark.unit
def test_bounds_nothing_meets_give_none():
    instance = dag_instance(3)
    least = min(p["energy"] for p in assignment_points(instance))
    assert bounded_schedule(instance, "latency", {"energy": least * 0.5},
                            [all_host_schedule(instance)]) is None  # fmt: skip


@pytest.mark.unit
def test_energy_without_an_energy_model_or_without_seeds_gives_none():
    plain = random_instance(random.Random(1), 5)
    assert bounded_schedule(plain, "energy", {}, [all_host_schedule(plain)]) is None
    assert bounded_schedule(dag_instance(1), "latency", {"energy": 1.0}, []) is None
