"""The CIM makespan ILP (Eqs. 5-14): structure, closed forms, brute-force agreement, solve paths."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import random

import pyomo.environ as pyo
import pytest
from oracles import brute_force_makespan, random_instance

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.pipeline import solve
from placement.cim.schedule import asap_schedule
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.build import (
    FAITHFUL_FAMILIES,
    big_m_seconds,
    build_cim_model,
    set_family_active,
)
from placement.solvers.base import ModelSize, SolveResult, SolveStatus
from placement.solvers.contrib import model_size
from placement.solvers.registry import BACKENDS

HIGHS = BACKENDS["highs"]


# The paper's model with HiGHS through the pipeline (keywords override both).
solve_cim = functools.partial(solve, formulation="faithful", solver="highs")

MS = 1e-3


def fork() -> CimInstance:
    """a -> b, a -> c; b, c parallel; c unsupported. Small enough to count by hand."""
    return CimInstance.build(
        [
            CimOperator("a", 1e-4, 5e-5, 2),
            CimOperator("b", 2e-4, 5e-5, 3),
            CimOperator("c", 2e-4),
        ],
        [CimEdge("a", "b", 1e-5), CimEdge("a", "c", 1e-5)],
        5,
    )


def chain(n: int = 4, budget: int = 100) -> CimInstance:
    ops = [CimOperator(f"v{i}", (i + 1) * MS, 0.4 * (i + 1) * MS, 1) for i in range(n)]
    edges = [CimEdge(f"v{i}", f"v{i + 1}", 0.1 * MS) for i in range(n - 1)]
    return CimInstance.build(ops, edges, budget)


# --- structure (no solver) ------------------------------------------------------------


@pytest.mark.unit
def test_model_size_hand_count():
    # Columns: x_a, x_b (x_c fixed by Eq. 5, a constant) + s 3 + f 3 + z 2 + o 1 + T = 12;
    # binaries: x 2 + z 2 + o 1 = 5.
    # Rows: Eq. 6: 2 sinks (b, c); Eq. 7: 3; Eq. 8: 2; Eq. 9: 2 x 2; Eqs. 11-12: 2 x 1;
    # Eq. 14: 1 -> 14.
    m = build_cim_model(fork())
    assert list(m.P) == [("b", "c")]
    assert model_size(m) == ModelSize(variables=12, binaries=5, constraints=14)


@pytest.mark.unit
def test_unsupported_operator_is_fixed_on_host():
    m = build_cim_model(fork())
    assert m.host["c"].fixed and m.host["c"].value == 1  # Eq. 5
    assert not m.host["a"].fixed and not m.host["b"].fixed
    assert pyo.value(m.t_acc["c"]) == 0.0  # T_acc := 0 outside V_acc (Eq. 13)
    assert list(m.V_ACC) == ["a", "b"]


@pytest.mark.unit
def test_chain_has_no_ordering_variables():
    m = build_cim_model(chain())
    assert len(m.P) == 0 and len(m.order) == 0
    assert len(m.order_uv) == 0 and len(m.order_vu) == 0


@pytest.mark.unit
def test_big_m_and_scaling():
    inst = fork()
    # Eq. 13: max(1e-4, 5e-5) + max(2e-4, 5e-5) + max(2e-4, 0) + 1e-5 + 1e-5 = 5.2e-4 s.
    assert big_m_seconds(inst) == pytest.approx(5.2e-4)
    m = build_cim_model(inst)
    unit = pyo.value(m.time_unit)
    assert unit == pytest.approx(1e-8)  # M = 52000 model units, in [1e4, 1e5)
    assert 1e4 <= pyo.value(m.big_m) < 1e5
    assert pyo.value(m.t_host["b"]) * unit == pytest.approx(2e-4)
    assert pyo.value(m.t_transfer["a", "c"]) * unit == pytest.approx(1e-5)


@pytest.mark.unit
def test_zero_latency_instance_builds():
    inst = CimInstance.build([CimOperator("a", 0.0, 0.0, 1)], [], 1)
    m = build_cim_model(inst)
    assert pyo.value(m.time_unit) == 1.0 and pyo.value(m.big_m) == 0.0


@pytest.mark.unit
def test_families_can_be_chosen_and_switched():
    assert FAITHFUL_FAMILIES == ("makespan", "finish", "precedence", "transfer", "ordering",
                                 "budget")
    relaxed = build_cim_model(fork(), families=("makespan", "finish", "precedence", "transfer"))
    assert relaxed.component("order_uv") is None and relaxed.component("budget") is None
    m = build_cim_model(fork())
    set_family_active(m, "ordering", False)
    assert not m.order_uv.active and not m.order_vu.active
    assert model_size(m).constraints == 12
    assert model_size(m).variables == 11  # o_bc no longer appears anywhere
    set_family_active(m, "ordering", True)
    assert model_size(m).constraints == 14
    with pytest.raises(PlacementError, match="unknown CIM model family 'tight'"):
        build_cim_model(fork(), families=("makespan", "tight"))
    with pytest.raises(PlacementError, match="unknown CIM model family"):
        set_family_active(m, "nope", True)


@pytest.mark.unit
def test_no_budget_row_without_supported_operators():
    inst = CimInstance.build([CimOperator("a", MS), CimOperator("b", MS)], [], 3)
    m = build_cim_model(inst)
    assert m.component("budget") is None
    assert model_size(m).binaries == 1  # only o_ab


@pytest.mark.unit
def test_random_instances_are_varied():
    insts = [oracle_instance(seed) for seed in ORACLE_SEEDS]
    assert sum(1 for i in insts if i.parallel_pairs) >= 20
    assert sum(1 for i in insts if any(not op.supported for op in i.operators)) >= 10
    assert sum(1 for i in insts if i.crossbar_budget == 0) >= 1
    assert {len(i.operators) for i in insts} == set(range(2, 9))


# --- brute-force agreement (real HiGHS) -----------------------------------------------

ORACLE_SEEDS = list(range(42))


def oracle_instance(seed: int) -> CimInstance:
    rng = random.Random(1000 + seed)
    n_ops = 2 + seed % 7
    edge_prob = (0.2, 0.35, 0.6)[seed % 3]
    return random_instance(rng, n_ops, edge_prob=edge_prob)


@pytest.mark.solver
@pytest.mark.parametrize("seed", ORACLE_SEEDS)
def test_ilp_matches_brute_force(seed):
    inst = oracle_instance(seed)
    best, on_host, order = brute_force_makespan(inst)
    # The oracle's own evaluator agrees with the schedule module on its optimum.
    assert asap_schedule(inst, on_host, order).makespan == pytest.approx(best, rel=1e-9)

    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.result.status == SolveStatus.OPTIMAL
    assert placed.result.objective == pytest.approx(best, rel=1e-6)
    assert placed.schedule is not None
    assert placed.schedule.makespan == pytest.approx(best, rel=1e-6)
    check = verify_cim(inst, placed.schedule, claimed=placed.result.objective)
    assert check.ok, check.violations
    assert placed.verification is not None and placed.verification.ok


# --- closed forms (real HiGHS) --------------------------------------------------------


@pytest.mark.solver
def test_chain_solution_matches_oracle():
    inst = chain(5, budget=2)
    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.result.objective == pytest.approx(brute_force_makespan(inst)[0], rel=1e-6)
    assert placed.crossbars_used <= 2


@pytest.mark.solver
def test_budget_zero_puts_everything_on_host():
    rng = random.Random(7)
    inst = random_instance(rng, 7, edge_prob=0.3, unsupported_prob=0.0)
    inst = dataclasses.replace(inst, crossbar_budget=0)
    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.schedule is not None and all(placed.schedule.on_host.values())
    assert placed.schedule.makespan == pytest.approx(inst.cpu_only_latency, rel=1e-6)
    assert placed.speedup == pytest.approx(1.0, rel=1e-6)
    assert placed.crossbars_used == 0


@pytest.mark.solver
def test_free_accelerator_leaves_only_host_forced_work():
    # Zero-cost CIM and transfers, unlimited budget: the makespan is the host-only operators'
    # serial time, below CPU-only.
    rng = random.Random(11)
    base = random_instance(rng, 8, edge_prob=0.3, unsupported_prob=0.4)
    ops = [dataclasses.replace(op, t_acc=0.0) if op.supported else op for op in base.operators]
    edges = [dataclasses.replace(e, t_transfer=0.0) for e in base.edges]
    inst = CimInstance.build(ops, edges, sum(op.crossbars for op in ops))
    forced = math.fsum(op.t_host for op in ops if not op.supported)
    assert any(op.supported for op in ops) and forced > 0
    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.result.objective == pytest.approx(forced, rel=1e-6)
    assert placed.result.objective < inst.cpu_only_latency


@pytest.mark.solver
def test_two_independent_host_only_operators_run_serially():
    inst = CimInstance.build([CimOperator("a", 2 * MS), CimOperator("b", 3 * MS)], [], 10)
    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.result.objective == pytest.approx(5 * MS, rel=1e-9)
    assert placed.speedup == pytest.approx(1.0)


@pytest.mark.solver
def test_offloading_one_of_two_parallel_operators_wins():
    # Both fit alone, not together: one runs on CIM beside the other on the host.
    inst = CimInstance.build(
        [CimOperator("a", 1 * MS, 1 * MS, 4), CimOperator("b", 1 * MS, 1 * MS, 4)], [], 5
    )
    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.result.objective == pytest.approx(1 * MS, rel=1e-9)
    assert placed.schedule is not None
    assert sorted(placed.schedule.on_host.values()) == [False, True]
    assert placed.crossbars_used == 4
    assert placed.speedup == pytest.approx(2.0)


@pytest.mark.solver
def test_expensive_transfer_keeps_operator_on_host():
    # v is faster on CIM (0.9 ms vs 1 ms) but the round trip costs 0.5 ms each way.
    inst = CimInstance.build(
        [CimOperator("u", MS), CimOperator("v", MS, 0.9 * MS, 1), CimOperator("w", MS)],
        [CimEdge("u", "v", 0.5 * MS), CimEdge("v", "w", 0.5 * MS)],
        10,
    )
    placed = solve_cim(inst, rel_gap=0.0)
    assert placed.schedule is not None and all(placed.schedule.on_host.values())
    assert placed.result.objective == pytest.approx(3 * MS, rel=1e-9)


@pytest.mark.solver
def test_placement_json_is_serializable():
    placed = solve_cim(fork(), rel_gap=0.0)
    doc = json.loads(json.dumps(placed.to_json()))
    assert doc["result"]["status"] == "optimal"
    assert doc["makespan"] == pytest.approx(placed.schedule.makespan)
    assert doc["verification"]["ok"] is True
    assert doc["instance"]["parallel_pairs"] == 1


@pytest.mark.solver
def test_time_limit_incumbent_with_slack_makespan_is_tightened(monkeypatch):
    real = HIGHS.solve

    def slack_time_limit(model, options, *, start=None):
        res = real(model, options, start=start)
        model.makespan.set_value(model.makespan.value * 1.5)  # an incumbent with T > max f
        return dataclasses.replace(res, status=SolveStatus.TIME_LIMIT,
                                   objective=res.objective * 1.5, gap=0.4)

    monkeypatch.setattr(HIGHS, "solve", slack_time_limit)
    placed = solve_cim(fork(), rel_gap=0.0)
    assert placed.schedule is not None
    # Re-timed: the reported makespan is the schedule's own, and with the solver's bound
    # (the optimum) it is proven optimal although the solver stopped at its time limit.
    assert placed.result.objective == pytest.approx(placed.schedule.makespan)
    assert placed.result.status == SolveStatus.OPTIMAL
    assert "re-timed" in placed.result.message and "proven by the bound" in placed.result.message
    assert placed.verification is not None and placed.verification.ok
    assert placed.verification.recomputed_makespan == pytest.approx(placed.schedule.makespan)


@pytest.mark.slow
def test_larger_instance_under_time_limit_is_verified():
    # 40 operators, 546 parallel pairs: the faithful model does not close in seconds; HiGHS
    # found no incumbent within 2 s here and a worse-than-CPU-only one after 10 s.
    inst = random_instance(random.Random(5), 40, edge_prob=0.08)
    placed = solve_cim(inst, time_limit=5.0)
    res = placed.result
    assert res.status != SolveStatus.OPTIMAL or res.gap is not None
    assert res.solve_seconds < 5.0 + 3.0
    if res.status.has_solution:
        assert placed.verification is not None and placed.verification.ok
        assert res.gap is not None and res.best_bound is not None
        assert res.best_bound <= res.objective * (1 + 1e-9)
    else:
        assert res.status == SolveStatus.TIME_LIMIT_NO_SOLUTION and placed.schedule is None


# --- the pipeline's error paths (HiGHS replaced, no solve) ---------------------------


def canned(status: SolveStatus, message: str = "", objective=None) -> SolveResult:
    return SolveResult(status, "highs", objective, None, None, 0.0, 0.0, ModelSize(0, 0, 0),
                       message)


@pytest.mark.unit
def test_solve_cim_without_solution_returns_no_schedule(monkeypatch):
    monkeypatch.setattr(
        HIGHS, "solve", lambda m, o, start=None: canned(SolveStatus.TIME_LIMIT_NO_SOLUTION, "limit")
    )
    # Our own model: the solve started from the CPU-only schedule, which is reported.
    placed = solve_cim(fork(), time_limit=1.0)
    assert placed.schedule is not None and placed.verification.ok
    assert placed.result.status == SolveStatus.TIME_LIMIT
    assert "CPU-only schedule reported" in placed.result.message
    assert placed.speedup == pytest.approx(1.0) and placed.crossbars_used == 0
    # A model of the caller's (it may hold constraints the start violates): no schedule.
    placed = solve_cim(fork(), time_limit=1.0, model=build_cim_model(fork()))
    assert placed.schedule is None and placed.verification is None
    assert placed.speedup is None and placed.crossbars_used == 0
    assert json.loads(json.dumps(placed.to_json()))["schedule"] is None


@pytest.mark.unit
def test_solve_cim_rejects_a_wrong_solution(monkeypatch):
    # A solver claiming an impossible placement (HiGHS presolve bugs exist) must not pass.
    inst = fork()

    def wrong_optimal(model, options, start=None):
        for v in model.V:
            model.host[v].set_value(0 if v != "c" else 1)
            model.start[v].set_value(0.0)
            model.finish[v].set_value(0.0)
        model.makespan.set_value(0.0)
        return canned(SolveStatus.OPTIMAL, objective=0.0)

    monkeypatch.setattr(HIGHS, "solve", wrong_optimal)
    with pytest.raises(PlacementError, match=r"^verification failed: highs reported a makespan"
                       r" of 0 s, but its decisions take"):
        solve_cim(inst)

    def unsupported_on_cim(model, options, start=None):
        wrong_optimal(model, options)
        model.host["c"].set_value(0)  # c is not supported by the accelerator
        return canned(SolveStatus.OPTIMAL, objective=0.0)

    monkeypatch.setattr(HIGHS, "solve", unsupported_on_cim)
    with pytest.raises(PlacementError, match=r"^verification failed: .*\(\+\d+ more\)"):
        solve_cim(inst)
