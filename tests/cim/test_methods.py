"""How ``cim.solve`` goes about an instance (``placement.cim.pipeline.plan_method``), the
decomposition followed by the whole model, and a Pyomo model of the user's own.

Oracles: the verifier on every placement; the brute force where it fits; the monolithic
optimum otherwise.
"""

from __future__ import annotations

import random

import pyomo.environ as pyo
import pytest
from oracles import block_structured_instance, brute_force_makespan, random_instance

from placement.cim import pipeline
from placement.cim.instance import CimInstance, CimOperator
from placement.cim.pipeline import build_model, plan_method, solve
from placement.errors import PlacementError
from placement.solvers.base import SolveStatus


def chain_of_blocks(blocks: int, budget_share: float, seed: int = 0) -> CimInstance:
    return block_structured_instance(random.Random(seed), blocks, width=3, depth=2,
                                     budget_share=budget_share)  # fmt: skip


@pytest.mark.unit
def test_auto_plans_by_size_blocks_and_budget():
    small = chain_of_blocks(4, 0.3)
    assert plan_method(small).method == "monolithic"
    assert "operators" in plan_method(small).why
    many = chain_of_blocks(60, 0.3)
    assert len(many.operators) >= pipeline.AUTO_DECOMPOSE_MIN_OPERATORS
    both = plan_method(many, time_limit=60)
    assert both.method == "decomposition+monolithic" and both.blocks is not None
    assert plan_method(many).method == "decomposition"  # no limit: it proves the optimum
    plenty = CimInstance.build(many.operators, many.edges, 10_000)
    assert plan_method(plenty, time_limit=60).method == "decomposition"
    assert "fits every" in plan_method(plenty, time_limit=60).why
    tiny_limit = plan_method(many, time_limit=0.01)
    assert tiny_limit.method == "decomposition" and "could not be searched" in tiny_limit.why
    # one long chain of branches: a single block
    one = random_instance(random.Random(3), 160, edge_prob=0.05)
    assert plan_method(one, time_limit=60).method == "monolithic"
    assert plan_method(many, "monolithic").why == "asked for"
    with pytest.raises(PlacementError, match="unknown method"):
        plan_method(many, "blocks")


@pytest.mark.solver
def test_the_whole_model_after_the_decomposition_keeps_the_better_of_each(monkeypatch):
    """The decomposition gets almost no time (its share shrunk): the whole model then
    starts from its placement; the result is verified, its bound no lower than either's."""
    inst = chain_of_blocks(60, 0.3, seed=5)
    monkeypatch.setattr(pipeline, "AUTO_DECOMPOSITION_SHARE", 0.002)
    monkeypatch.setattr(pipeline, "AUTO_WHOLE_MIN_GAP", 0.0)
    placed = solve(inst, time_limit=30)
    res = placed.result
    assert res.options["method"] == "decomposition+monolithic"
    assert placed.verification.ok and placed.schedule.makespan == res.objective
    parts = res.options["decomposition"]
    assert res.best_bound >= parts["lower_bound"] * (1 - 1e-12)
    assert "placement from the" in res.options["method_kept"]
    whole = solve(inst, method="monolithic", time_limit=30)
    if whole.result.status == SolveStatus.OPTIMAL:  # both certified: they must agree
        assert res.best_bound <= whole.result.objective * (1 + 1e-6)
        assert whole.result.best_bound <= res.objective * (1 + 1e-6)


@pytest.mark.solver
def test_a_model_of_your_own_is_solved_as_given_with_a_mip_solver():
    """More than 200 parallel pairs (where "auto" would pick cpsat+highs for the
    instance), a constraint of the user's: solved by HiGHS, the formulation read from the
    model, the placement obeying the extra row, verified."""
    inst = random_instance(random.Random(11), 24, edge_prob=0.08)
    assert len(inst.parallel_pairs) > pipeline.AUTO_MAX_PAIRS_FOR_BOUNDED
    model = build_model(inst, "tightened")
    first = next(op.name for op in inst.operators if op.supported)
    model.mine = pyo.Constraint(expr=model.host[first] == 1)  # keep it on the host
    placed = solve(inst, model=model, time_limit=60)
    res = placed.result
    assert res.solver == "highs" and res.options["formulation"] == "tightened"
    assert res.options["method"] == "monolithic" and placed.verification.ok
    assert placed.schedule.on_host[first] is True
    assert placed.schedule.makespan >= solve(inst, time_limit=60).schedule.makespan * (1 - 1e-6)


@pytest.mark.solver
def test_a_model_of_your_own_is_solved_whole_where_auto_would_decompose():
    """A graph "auto" splits (40 blocks competing for the budget): a model of the user's is
    still solved as given, whole, by the MIP solver "auto" picks for a model (HiGHS), and
    its row holds: an operator the unconstrained optimum offloads stays on the host."""
    inst = chain_of_blocks(40, 0.3, seed=9)
    assert plan_method(inst, time_limit=30).method != "monolithic"
    free = solve(inst, time_limit=30)
    assert free.result.options["method"] != "monolithic"
    moved = next(v for v, on_host in free.schedule.on_host.items() if not on_host)
    model = build_model(inst, "tightened")
    model.mine = pyo.Constraint(expr=model.host[moved] == 1)
    placed = solve(inst, model=model, time_limit=30)
    res = placed.result
    assert res.solver == "highs" and res.options["formulation"] == "tightened"
    assert res.options["method"] == "monolithic" and placed.verification.ok
    assert placed.schedule.on_host[moved] is True
    # the user's row only restricts: never better than the free optimum's bound
    assert placed.schedule.makespan >= (free.result.best_bound or 0.0) * (1 - 1e-6)


@pytest.mark.unit
def test_a_model_of_your_own_refuses_what_cannot_solve_it():
    inst = random_instance(random.Random(12), 8)
    model = build_model(inst, "bounded")
    with pytest.raises(PlacementError, match="MIP solver .* not 'cpsat'"):
        solve(inst, model=model, solver="cpsat")
    with pytest.raises(PlacementError, match="built as 'bounded'"):
        solve(inst, model=model, formulation="tightened")
    with pytest.raises(PlacementError, match="not built by placement.cim.build_model"):
        solve(inst, model=pyo.ConcreteModel())


@pytest.mark.solver
def test_a_custom_choice_of_families_is_solved_too():
    from placement.models.cim_makespan.build import FAITHFUL_FAMILIES, build_cim_model

    ops = [CimOperator("a", 3e-3, 1e-3, 2), CimOperator("b", 2e-3, 5e-4, 2),
           CimOperator("c", 1e-3)]  # fmt: skip
    inst = CimInstance.build(ops, [], 2)
    model = build_cim_model(inst, families=(*FAITHFUL_FAMILIES, "host_serial"))
    placed = solve(inst, model=model)
    assert placed.result.options["formulation"] == "custom"
    assert placed.result.objective == pytest.approx(brute_force_makespan(inst)[0], rel=1e-6)
