"""The tightened model with ordering rows added as violated (``placement.cim.lazy_ordering``).

Oracles: the brute force over every placement and host sequence (tests/oracles.py), also
at a crossbar price; the verifier on every schedule; the HiGHS route on the whole
tightened model.
"""

from __future__ import annotations

import random

import pytest
from oracles import (
    block_structured_instance,
    brute_force_makespan,
    median_price,
    random_instance,
)

from placement.cim import priced
from placement.cim.blockwise import block_task
from placement.cim.deadline import Deadline
from placement.cim.frontier import CIM, HOST, block_instance, split
from placement.cim.lazy_ordering import overlapping_pairs, relaxed_model, solve_lazy_ordering
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.pipeline import solve
from placement.cim.schedule import all_host_schedule, priced_makespan
from placement.cim.verifier import verify_cim
from placement.models.common import solve_in_seconds
from placement.solvers.base import SolveOptions, SolveStatus
from placement.solvers.registry import get_backend

SEEDS = range(12)


def _instance(seed: int):
    return random_instance(random.Random(seed), 7, edge_prob=0.25, unsupported_prob=0.2)


@pytest.mark.solver
@pytest.mark.parametrize("seed", SEEDS)
def test_every_round_bounds_and_the_last_is_the_brute_force_optimum(seed):
    inst = _instance(seed)
    best = brute_force_makespan(inst)[0]
    result, schedule = solve_lazy_ordering(inst, SolveOptions(rel_gap=1e-9),
                                           all_host_schedule(inst), Deadline(None))  # fmt: skip
    assert result.status == SolveStatus.OPTIMAL
    assert schedule.makespan == pytest.approx(best, rel=1e-6)
    verify_cim(inst, schedule, claimed=schedule.makespan).raise_if_failed()
    rounds = result.options["lazy_round_bounds"]
    assert all(b is not None and b <= best * (1 + 1e-6) for b in rounds)
    assert result.best_bound == pytest.approx(max(rounds))


#: (blocks, seed) of ``block_structured_instance(width=3, depth=2)`` whose relaxation
#: without ordering rows is 0.7-3.5 % below the optimum (found by a scan of seeds 0-11).
TIGHT = [(1, 6), (1, 7), (2, 2), (2, 6)]


@pytest.mark.solver
@pytest.mark.parametrize(("blocks", "seed"), TIGHT)
def test_rows_added_where_the_relaxation_is_below_the_optimum(blocks, seed):
    """The relaxation alone is below the brute-force optimum here; the added rows close
    it (so the loop is not a no-op), every round's bound stays below it."""
    inst = block_structured_instance(random.Random(seed), blocks, width=3, depth=2)
    best = brute_force_makespan(inst)[0]
    result, schedule = solve_lazy_ordering(inst, SolveOptions(rel_gap=1e-9),
                                           all_host_schedule(inst), Deadline(None))  # fmt: skip
    rounds = result.options["lazy_round_bounds"]
    assert rounds[0] < best * (1 - 1e-3)
    assert result.options["lazy_pairs"] > 0 and len(rounds) >= 2
    assert all(b <= best * (1 + 1e-6) for b in rounds)
    assert result.status == SolveStatus.OPTIMAL
    assert schedule.makespan == pytest.approx(best, rel=1e-6)
    verify_cim(inst, schedule, claimed=schedule.makespan).raise_if_failed()


@pytest.mark.solver
def test_relaxation_overlaps_are_parallel_host_pairs():
    inst = _instance(3)
    m = relaxed_model(inst, all_host_schedule(inst).makespan)
    solve_in_seconds(m, get_backend("highs", mip=True), SolveOptions(), what="CIM",
                     item="operator")  # fmt: skip
    parallel = set(inst.parallel_pairs)
    for u, v in overlapping_pairs(m, parallel):
        assert (u, v) in parallel
        assert m.host[u].value > 0.5 and m.host[v].value > 0.5
        assert m.start[v].value < m.finish[u].value and m.start[u].value < m.finish[v].value


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(4))
def test_same_optimum_as_the_whole_tightened_model(seed):
    """On instances of 12 operators (beyond the brute force), against HiGHS on the whole
    tightened model, both proven."""
    inst = random_instance(random.Random(100 + seed), 12, edge_prob=0.2)
    whole = solve(inst, formulation="tightened", solver="highs", rel_gap=1e-9,
                  method="monolithic")  # fmt: skip
    assert whole.result.status == SolveStatus.OPTIMAL
    result, schedule = solve_lazy_ordering(inst, SolveOptions(rel_gap=1e-9),
                                           heuristic_schedule(inst), Deadline(None))  # fmt: skip
    assert result.status == SolveStatus.OPTIMAL
    assert schedule.makespan == pytest.approx(whole.result.objective, rel=1e-6)
    verify_cim(inst, schedule, claimed=schedule.makespan).raise_if_failed()


# --------------------------------------------------------------------------- priced


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(6))
def test_a_priced_loop_matches_the_brute_force(seed):
    """T + price x crossbars, against the brute force over every placement and host order
    at that price; every round's bound below the priced optimum."""
    inst = random_instance(random.Random(400 + seed), 7, edge_prob=0.3)
    price = median_price(inst)
    truth = brute_force_makespan(inst, price=price)[0]
    result, schedule = solve_lazy_ordering(inst, SolveOptions(rel_gap=1e-6),
                                           all_host_schedule(inst), Deadline(None),
                                           price=price)  # fmt: skip
    verify_cim(inst, schedule).raise_if_failed()
    assert result.status == SolveStatus.OPTIMAL
    assert result.objective == pytest.approx(priced_makespan(inst, schedule, price), rel=1e-12)
    assert result.objective == pytest.approx(truth, rel=1e-6)
    assert all(b <= truth * (1 + 1e-6) for b in result.options["lazy_round_bounds"])


#: (blocks, seed, exit device) of a block instance (its cuts as the zero-length entry and
#: exit operators of the decomposition) of ``block_structured_instance(width=3, depth=2)``
#: whose priced relaxation without ordering rows is 0.75-8.1 % below the priced optimum at
#: the median price (found by a scan of seeds 0-15 of 1-3 blocks).
PRICED_TIGHT = [(1, 7, CIM), (1, 13, CIM), (2, 1, CIM), (1, 9, CIM)]


@pytest.mark.solver
@pytest.mark.parametrize(("blocks", "seed", "exit_on"), PRICED_TIGHT)
def test_priced_rows_added_where_the_relaxation_is_below_the_optimum(blocks, seed, exit_on):
    inst = block_structured_instance(random.Random(seed), blocks, width=3, depth=2)
    block = max((b for b in split(inst)[0] if b.operators), key=lambda b: len(b.operators))
    sub = block_instance(inst, block, HOST, exit_on, inst.crossbar_budget)
    price = median_price(sub)
    truth = brute_force_makespan(sub, price=price)[0]
    result, schedule = solve_lazy_ordering(sub, SolveOptions(rel_gap=1e-6),
                                           all_host_schedule(sub), Deadline(None),
                                           price=price)  # fmt: skip
    rounds = result.options["lazy_round_bounds"]
    assert rounds[0] < truth * (1 - 1e-3)
    assert result.options["lazy_pairs"] > 0 and len(rounds) >= 2
    assert all(b <= truth * (1 + 1e-6) for b in rounds)
    verify_cim(sub, schedule).raise_if_failed()
    assert result.status == SolveStatus.OPTIMAL
    assert priced_makespan(sub, schedule, price) == pytest.approx(truth, rel=1e-6)


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(4))
def test_solve_priced_by_the_loop_or_the_whole_model_finds_the_optimum(seed, monkeypatch):
    """solve_priced by the loop (every instance at or above the pair count) and by the
    whole priced model agree with the brute force; other models never take the loop."""
    inst = random_instance(random.Random(500 + seed), 7, edge_prob=0.25)
    price = median_price(inst)
    truth = brute_force_makespan(inst, price=price)[0]
    for pairs in (0, 10**9):
        monkeypatch.setattr(priced, "LAZY_MIN_PAIRS", pairs)
        assert priced.lazy_ordering_pays(inst, "tightened", "highs") == (pairs == 0)
        schedule, bound, _, status = priced.solve_priced(inst, price, rel_gap=1e-6)
        verify_cim(inst, schedule).raise_if_failed()
        value = priced_makespan(inst, schedule, price)
        assert status == "optimal" and value == pytest.approx(truth, rel=1e-6)
        assert bound <= truth * (1 + 1e-6)
    monkeypatch.setattr(priced, "LAZY_MIN_PAIRS", 0)
    assert not priced.lazy_ordering_pays(inst, "bounded", "highs")
    assert not priced.lazy_ordering_pays(inst, "tightened", "cbc")


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(3))
def test_a_budget_block_solve_above_the_pair_count_takes_the_loop(seed, monkeypatch):
    """A decomposition's block solve at a budget (no price) on a tightened block at or
    above the pair count is the priced loop at price 0: the brute-force optimum within
    that budget, with a bound below it."""
    monkeypatch.setattr(priced, "LAZY_MIN_PAIRS", 0)
    prices = []

    def loop(*args, price=None, **kwargs):  # the real loop, its price noted
        prices.append(price)
        return solve_lazy_ordering(*args, price=price, **kwargs)

    monkeypatch.setattr(priced, "solve_lazy_ordering", loop)
    inst = block_structured_instance(random.Random(seed), 2, width=3, depth=2)
    block = max((b for b in split(inst)[0] if b.operators), key=lambda b: len(b.operators))
    sub = block_instance(inst, block, HOST, HOST, inst.crossbar_budget // 2)
    truth = brute_force_makespan(sub)[0]
    settings = {"formulation": "tightened", "solver": "highs", "rel_gap": 1e-6,
                "threads": None, "warm_start": None, "heuristic_pairs": 0}  # fmt: skip
    schedule, bound, _, status = block_task(solve, sub, None, [all_host_schedule(sub)],
                                            settings)  # fmt: skip
    verify_cim(sub, schedule).raise_if_failed()
    assert prices == [0.0]
    assert status == "optimal" and schedule.makespan == pytest.approx(truth, rel=1e-6)
    assert bound <= truth * (1 + 1e-6)
