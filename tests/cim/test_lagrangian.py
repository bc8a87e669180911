"""The bounds of the decomposition that need no frontier walk (``placement.cim.frontier``,
``placement.cim.combine``, ``placement.cim.priced``).

Oracles: the brute force over every placement (tests/oracles.py), priced or not, on each
block and on the whole instance; the verifier on every placement; a scan over prices for
the dual's maximum.
"""

from __future__ import annotations

import math
import random

import pytest
from oracles import (
    block_structured_instance,
    brute_force_makespan,
    median_price,
    random_cost,
    random_instance,
)

from placement.cim import combine
from placement.cim.combine import (
    RestCosts,
    best_combination,
    certified_bound,
    dual,
    exit_devices,
    priced_path,
)
from placement.cim.frontier import (
    HOST,
    Frontier,
    block_instance,
    floor_bound,
    host_work_floor,
    split,
)
from placement.cim.instance import CimInstance, CimOperator
from placement.cim.priced import priced_makespan, solve_priced
from placement.cim.schedule import CrossbarCost, asap_schedule
from placement.cim.verifier import verify_cim
from placement.models.cim_makespan.build import (
    TIGHTENED_FAMILIES,
    build_cim_model,
    price_crossbars,
    start_values,
)


def exact_block_solver(sub: CimInstance, limit, starts=(), price=None):
    best, on_host, order = brute_force_makespan(sub, price=price or 0.0)
    return asap_schedule(sub, on_host, order), best


def frontiers_of(inst: CimInstance) -> tuple[list, dict]:
    blocks, _ = split(inst)
    frontiers, entries = {}, [None]
    for k, block in enumerate(blocks):
        exits = exit_devices(inst, block)
        for e in entries:
            for x in exits:
                frontiers[k, e, x] = Frontier.start(inst, block, e, x)
        entries = exits
    return blocks, frontiers


def small_budget_instance(seed: int) -> CimInstance:
    rng = random.Random(seed)
    inst = block_structured_instance(rng, 3, width=3, depth=2, budget_share=1.0)
    ops = [CimOperator(op.name, op.t_host, op.t_acc, rng.choice([1, 2, 3, 5]))
           if op.supported else op for op in inst.operators]  # fmt: skip
    total = sum(op.crossbars for op in ops if op.supported)
    return CimInstance.build(ops, inst.edges, rng.randint(0, total))


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(8))
def test_the_host_work_floor_never_exceeds_the_optimum(seed):
    inst = random_instance(random.Random(seed), 7, edge_prob=0.3)
    names = [op.name for op in inst.operators]
    top = sum(op.crossbars for op in inst.operators if op.supported)
    floors = host_work_floor(inst, names, top)
    for budget in range(top + 1):
        limited = CimInstance.build(inst.operators, inst.edges, budget)
        assert floors[budget] <= brute_force_makespan(limited)[0] * (1 + 1e-12)
    assert floor_bound(inst) <= brute_force_makespan(inst)[0] * (1 + 1e-12)


@pytest.mark.unit
def test_the_host_work_floor_is_a_knapsack():
    # host 5 + 4 + 3 + 1 (unsupported); crossbars 2, 2, 3: the best 4 crossbars take 9 off
    ops = [CimOperator("a", 5.0, 1.0, 2), CimOperator("b", 4.0, 1.0, 2),
           CimOperator("c", 3.0, 1.0, 3), CimOperator("d", 1.0)]  # fmt: skip
    inst = CimInstance.build(ops, [], 7)
    floors = host_work_floor(inst, "abcd", 7)
    expected = [13, 13, 8, 8, 4, 4, 4, 1]
    assert floors.tolist() == pytest.approx(expected, rel=1e-9)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_a_priced_bound_holds_at_every_budget(seed):
    """f(r) >= v - p r for the brute-force priced optimum v, at every r, and the frontier's
    lower bound stays below f everywhere once priced bounds are in it."""
    inst = small_budget_instance(seed)
    block = max(split(inst)[0], key=lambda b: len(b.operators))
    front = Frontier.start(inst, block, HOST, HOST)
    truth = [brute_force_makespan(block_instance(inst, block, HOST, HOST, r))[0]
             for r in range(front.top + 1)]  # fmt: skip
    slopes = [(truth[0] - truth[r]) / r for r in range(1, front.top + 1)] or [0.0]
    for price in (0.0, min(slopes), max(slopes), 0.5 * (min(slopes) + max(slopes))):
        front.learn(front.sums[-1], exact_block_solver, None, price)
        value = front.priced[-1].value
        assert value == pytest.approx(min(t + price * r for r, t in enumerate(truth)), rel=1e-9)
    for room in range(front.top + 1):
        assert front.lower(room) <= truth[room] * (1 + 1e-9)
        assert front.upper(room) >= truth[room] * (1 - 1e-9)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(8))
def test_the_dual_bounds_the_optimum_and_is_its_best_price(seed):
    inst = small_budget_instance(100 + seed)
    blocks, frontiers = frontiers_of(inst)
    for front in frontiers.values():  # exact priced knowledge at a few prices
        for price in (0.0, 1e-4, 1e-3):
            front.learn(front.sums[-1], exact_block_solver, None, price)
    best = brute_force_makespan(inst)[0]
    found = dual(inst, blocks, frontiers, Frontier.priced_lower)
    assert found.value <= best * (1 + 1e-9)

    def at(price: float) -> float:
        cost = priced_path(inst, blocks, frontiers, Frontier.priced_lower, price)[0]
        return cost - price * inst.crossbar_budget

    assert at(found.price) == pytest.approx(found.value, rel=1e-12, abs=1e-15)
    scan = [at(p) for p in [0.0, *(10.0 ** e for e in range(-7, 1))]]
    scan += [at(found.price * f) for f in (0.5, 0.9, 0.99, 1.01, 1.1, 2.0)]
    assert max(scan) <= found.value * (1 + 1e-9) + 1e-15


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_programs_in_coarse_units_stay_valid(seed, monkeypatch):
    """Counted in units of several crossbars, the certified program still bounds the
    optimum from below and the best combination still fits the budget."""
    inst = small_budget_instance(200 + seed)
    blocks, frontiers = frontiers_of(inst)
    for front in frontiers.values():
        front.learn(front.sums[-1], exact_block_solver, None)
        front.learn(front.sums[len(front.sums) // 2], exact_block_solver, None)
    best = brute_force_makespan(inst)[0]
    exact_lower = certified_bound(inst, blocks, frontiers)[0]
    exact_upper = best_combination(inst, blocks, frontiers)[0]
    monkeypatch.setattr(combine, "PROGRAM_MAX_STEPS", 10)  # forces units of several
    lower, _ = certified_bound(inst, blocks, frontiers)
    upper, picks = best_combination(inst, blocks, frontiers)
    assert lower <= exact_lower * (1 + 1e-12) and lower <= best * (1 + 1e-9)
    assert upper >= exact_upper * (1 - 1e-12)
    schedule = combine.assemble(inst, blocks, frontiers, picks)
    assert verify_cim(inst, schedule).ok
    assert schedule.makespan == pytest.approx(upper, rel=1e-9)


@pytest.mark.unit
def test_the_priced_objective_is_makespan_plus_price_times_crossbars():
    import pyomo.environ as pyo

    inst = small_budget_instance(7)
    sched = asap_schedule(inst, {op.name: True for op in inst.operators},
                          [op.name for op in inst.operators])  # fmt: skip
    m = build_cim_model(inst, families=TIGHTENED_FAMILIES, upper_bound=sched.makespan)
    price_crossbars(m, 2e-4)
    values = start_values(m, inst, sched)
    for var, val in values.items():
        var.set_value(val, skip_validation=True)
    assert not m.objective.active
    assert pyo.value(m.priced_objective) * pyo.value(m.time_unit) == pytest.approx(
        priced_makespan(inst, sched, 2e-4), rel=1e-9)


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(6))
def test_a_priced_solve_matches_the_brute_force(seed):
    inst = random_instance(random.Random(400 + seed), 7, edge_prob=0.3)
    price = median_price(inst)
    truth = brute_force_makespan(inst, price=price)[0]
    schedule, bound, _, status = solve_priced(inst, price, rel_gap=1e-9)
    assert verify_cim(inst, schedule).ok
    value = priced_makespan(inst, schedule, price)
    assert bound <= truth * (1 + 1e-7)
    assert value >= truth * (1 - 1e-9)
    assert status == "optimal" and value == pytest.approx(truth, rel=1e-6)
    assert math.isfinite(bound)


@pytest.mark.solver
@pytest.mark.parametrize("by_count", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_a_priced_cpsat_solve_matches_the_brute_force(seed, by_count):
    """The interval model with the priced objective (the price, or with ``by_count`` a
    cost by the count as an element constraint, rounded down to CP-SAT's time unit: a
    relaxation, so its bound stays valid) finds the brute-force priced optimum."""
    inst = random_instance(random.Random(420 + seed), 7, edge_prob=0.3)
    price = random_cost(random.Random(seed), inst) if by_count else median_price(inst)
    truth = brute_force_makespan(inst, price=price)[0]
    schedule, bound, _, status = solve_priced(inst, price, solver="cpsat", rel_gap=1e-7)
    assert verify_cim(inst, schedule).ok
    value = priced_makespan(inst, schedule, price)
    assert bound <= truth * (1 + 1e-9)
    assert status == "optimal" and value == pytest.approx(truth, rel=1e-6)


@pytest.mark.unit
def test_only_cpsat_takes_a_cost_by_the_count():
    inst = random_instance(random.Random(440), 5, edge_prob=0.3)
    with pytest.raises(ValueError, match="CP-SAT only"):
        solve_priced(inst, random_cost(random.Random(0), inst), solver="highs")


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_a_bound_priced_by_the_count_holds_at_every_budget(seed):
    """With the crossbars' cost by the count (never decreasing), f(r) >= v - cost(r) for
    the brute-force priced optimum v, at every r."""
    inst = small_budget_instance(300 + seed)
    block = max(split(inst)[0], key=lambda b: len(b.operators))
    front = Frontier.start(inst, block, HOST, HOST)
    truth = [brute_force_makespan(block_instance(inst, block, HOST, HOST, r))[0]
             for r in range(front.top + 1)]  # fmt: skip
    rng = random.Random(seed)
    for _ in range(3):
        cost = random_cost(rng, block_instance(inst, block, HOST, HOST, front.top))
        front.learn(front.sums[-1], exact_block_solver, None, cost)
        value = front.priced[-1].value
        assert value == pytest.approx(min(t + cost(r) for r, t in enumerate(truth)), rel=1e-9)
    for room in range(front.top + 1):
        assert front.lower(room) <= truth[room] * (1 + 1e-9)
        assert front.upper(room) >= truth[room] * (1 - 1e-9)


def _exact_everywhere(frontiers: dict) -> None:
    for front in frontiers.values():
        for budget in front.sums:
            front.learn(budget, exact_block_solver, None)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(8))
def test_what_the_rest_takes_bounds_the_whole_and_is_exact_over_exact_frontiers(seed,
                                                                                monkeypatch):
    """For every block: min over its frontiers and crossbar counts c of f(c) + what the
    rest takes at c is the brute-force optimum of the whole once every frontier is known
    exactly; with floors only, and counted in units of several crossbars, it stays below
    the optimum."""
    inst = small_budget_instance(500 + seed)
    best = brute_force_makespan(inst)[0]
    blocks, frontiers = frontiers_of(inst)

    def least(k: int) -> float:
        costs = RestCosts(inst, blocks, frontiers)
        return min(front.lower(c) + costs(key)(c)
                   for key, front in frontiers.items() if key[0] == k for c in front.sums)

    for k in range(len(blocks)):
        assert least(k) <= best * (1 + 1e-9)
    _exact_everywhere(frontiers)
    for k in range(len(blocks)):
        assert least(k) == pytest.approx(best, rel=1e-9)
    monkeypatch.setattr(combine, "PROGRAM_MAX_STEPS", 10)  # forces units of several
    for k in range(len(blocks)):
        assert least(k) <= best * (1 + 1e-9)


@pytest.mark.unit
def test_decompositions_priced_by_what_the_rest_takes_find_the_brute_force_optimum():
    """Closing rounds priced by what the rest takes (every block allowed) end at the
    brute-force optimum with a bound at it, on instances where they run."""
    from placement.cim.decompose import decompose

    by_rest, lines = 0, []
    for seed in range(10):
        inst = small_budget_instance(700 + seed)
        best = brute_force_makespan(inst)[0]
        done = decompose(inst, exact_block_solver, rel_gap=0.0, by_rest=lambda sub: True,
                         progress=lines.append)  # fmt: skip
        assert done.ended == "optimal"
        assert done.schedule.makespan == pytest.approx(best, rel=1e-9)
        assert done.lower_bound == pytest.approx(best, rel=1e-9)
        assert verify_cim(inst, done.schedule).ok
        by_rest += done.rest_priced_solves
    assert by_rest > 0, "no closing round was priced by what the rest takes"
    assert any("priced by what the rest takes" in line for line in lines)


@pytest.mark.unit
def test_a_decomposition_priced_by_what_the_rest_takes_is_not_handed_over():
    """Once a block has been priced by what the rest takes, ``hand_over`` is no longer
    asked: such decompositions end at the brute-force optimum even with a hand-over that
    would stop them from the third round on."""
    from placement.cim.decompose import HANDED_OVER, decompose

    kept = 0
    for seed in range(10):
        inst = small_budget_instance(710 + seed)
        asked: list[float] = []

        def hand_over(best: float, bound: float, asked: list[float] = asked) -> bool:
            asked.append(best)
            return len(asked) > 2  # before the third round

        done = decompose(inst, exact_block_solver, rel_gap=0.0, by_rest=lambda sub: True,
                         hand_over=hand_over)  # fmt: skip
        if done.rest_priced_solves:
            assert done.ended != HANDED_OVER
            assert done.schedule.makespan == pytest.approx(brute_force_makespan(inst)[0],
                                                           rel=1e-9)  # fmt: skip
            kept += done.rounds >= 3
        else:
            assert done.ended in (HANDED_OVER, "optimal")
    assert kept, "no decomposition went past the third round priced by what the rest takes"


@pytest.mark.unit
def test_a_cost_by_the_count_holds_its_last_value_beyond_it():
    cost = CrossbarCost((0.0, 1.0, 1.0, 3.0))
    assert [cost(c) for c in range(6)] == [0.0, 1.0, 1.0, 3.0, 3.0, 3.0]
