"""The tightened model with ordering rows added as violated (``placement.cim.lazy_ordering``).

Oracles: the brute force over every placement and host sequence (tests/oracles.py); the
verifier on every schedule; the HiGHS route on the whole tightened model.
"""

from __future__ import annotations

import random

import pytest
from oracles import block_structured_instance, brute_force_makespan, random_instance

from placement.cim.deadline import Deadline
from placement.cim.lazy_ordering import overlapping_pairs, relaxed_model, solve_lazy_ordering
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.pipeline import solve
from placement.cim.schedule import all_host_schedule
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
