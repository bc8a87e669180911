"""``time_limit`` is one deadline: phases that cannot fit are skipped with the reason, and
the result is always a verified placement (never worse than the CPU-only schedule).

No wall-time assertions (the machines are shared): what is checked is what the solve
reports it did and that what it returns is valid.
"""

from __future__ import annotations

import random

import pytest
from oracles import block_structured_instance

from placement.cim.deadline import build_estimate
from placement.cim.frontier import floor_bound, trivial_bound
from placement.cim.pipeline import solve
from placement.cim.verifier import verify_cim
from placement.solvers.base import SolveStatus


@pytest.fixture(scope="module")
def large():
    """About 1,500 operators in 250 blocks, a tight budget."""
    return block_structured_instance(random.Random(11), 250, width=3, depth=2,
                                     budget_share=0.2)  # fmt: skip


@pytest.mark.solver
def test_a_model_too_big_to_build_in_time_is_skipped_with_its_reason(large):
    limit = 0.5
    assert build_estimate(large) > limit  # the premise: building alone would not fit
    placed = solve(large, method="monolithic", solver="highs", formulation="faithful",
                   time_limit=limit)  # fmt: skip
    phases = placed.result.options["phases"]
    skipped = [p for p in phases if "skipped" in p]
    assert skipped and skipped[0]["phase"] == "highs"
    assert "building the model alone takes about" in skipped[0]["skipped"]
    assert "skipped" in placed.result.message
    assert placed.result.status == SolveStatus.TIME_LIMIT
    assert placed.schedule is not None and placed.verification.ok
    assert placed.schedule.makespan <= large.cpu_only_latency * (1 + 1e-12)
    # no solver bound at all, yet a certified gap: the floor (the longest path, or the host
    # work the budget leaves, whichever is higher)
    assert placed.result.best_bound == pytest.approx(floor_bound(large))
    assert floor_bound(large) >= trivial_bound(large)
    assert 0.0 <= placed.result.gap < 1.0


@pytest.mark.solver
def test_a_decomposition_out_of_time_reports_a_verified_placement_and_a_bound(large):
    placed = solve(large, method="decomposition", time_limit=0.5)
    assert placed.schedule is not None and placed.verification.ok
    assert verify_cim(large, placed.schedule).ok
    result = placed.result
    assert result.best_bound is not None and 0 < result.best_bound <= result.objective
    assert result.gap is not None and result.gap < 1.0  # certified, never "unknown"
    if result.status != SolveStatus.OPTIMAL:
        assert "stopped:" in result.message
