"""Tightened CIM formulations, the list-scheduling heuristic and the HiGHS warm start.

Every formulation and every tightening family alone must reach the faithful model's
optimum, which the brute-force oracle confirms; the heuristic is always feasible and
never below the optimum; a warm start is really used by HiGHS.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import time

import pyomo.environ as pyo
import pytest
from oracles import brute_force_makespan, random_instance

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.pipeline import build_model, solve
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.build import (
    FAITHFUL_FAMILIES,
    FAMILY_BUILDERS,
    FAMILY_COMPONENTS,
    FORMULATIONS,
    TIGHTENED_FAMILIES,
    TIGHTENING_FAMILIES,
    build_cim_model,
    formulation_families,
    set_family_active,
    start_values,
)
from placement.solvers.base import SolveOptions, SolveStatus
from placement.solvers.contrib import model_size
from placement.solvers.registry import BACKENDS

HIGHS = BACKENDS["highs"]


# The paper's model with HiGHS through the pipeline (keywords override both).
solve_cim = functools.partial(solve, formulation="faithful", solver="highs")


def solve_model(model, start=None, **options):
    """The HiGHS backend alone: result in the model's units."""
    return HIGHS.solve(model, SolveOptions(**options), start=start)

MS = 1e-3
SEEDS = list(range(36))


def branched(seed: int) -> CimInstance:
    """Random DAGs with parallel branches, 3..8 operators (brute force stays fast)."""
    rng = random.Random(5000 + seed)
    return random_instance(rng, 3 + seed % 6, edge_prob=(0.15, 0.3, 0.5)[seed % 3])


_OPTIMA: dict[int, float] = {}


def optimum(seed: int) -> float:
    if seed not in _OPTIMA:
        _OPTIMA[seed] = brute_force_makespan(branched(seed))[0]
    return _OPTIMA[seed]


def diamond() -> CimInstance:
    """a -> {b, c} -> d -> e: bottlenecks a, d, e; b and c parallel."""
    ops = [
        CimOperator("a", 1 * MS, 0.5 * MS, 2),
        CimOperator("b", 2 * MS, 0.5 * MS, 3),
        CimOperator("c", 3 * MS),
        CimOperator("d", 1 * MS, 0.2 * MS, 1),
        CimOperator("e", 1 * MS),
    ]
    edges = [CimEdge(u, v, 0.1 * MS) for u, v in
             (("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"))]
    return CimInstance.build(ops, edges, 4)


# --- structure (no solver) ------------------------------------------------------------


@pytest.mark.unit
def test_registry_is_complete():
    assert set(FAMILY_COMPONENTS) == set(FAMILY_BUILDERS)
    assert FORMULATIONS == {
        "faithful": FAITHFUL_FAMILIES,
        "bounded": (*FAITHFUL_FAMILIES, "host_serial", "energetic", "bottleneck"),
        "tightened": TIGHTENED_FAMILIES,
    }
    assert set(TIGHTENING_FAMILIES) <= set(TIGHTENED_FAMILIES)
    assert "ordering" not in TIGHTENED_FAMILIES  # dominated by the window rows
    assert formulation_families("tightened") == TIGHTENED_FAMILIES
    with pytest.raises(PlacementError, match="unknown CIM formulation 'tight'"):
        formulation_families("tight")


@pytest.mark.unit
def test_default_model_stays_faithful():
    m = build_cim_model(diamond())
    assert m.families == FAITHFUL_FAMILIES
    for family in TIGHTENING_FAMILIES:
        for name in FAMILY_COMPONENTS[family]:
            assert m.component(name) is None
    assert m.component("upper_bound") is None


@pytest.mark.unit
def test_tightened_model_rows():
    inst = diamond()
    m = build_cim_model(inst, families=TIGHTENED_FAMILIES, upper_bound=6 * MS)
    unit = pyo.value(m.time_unit)
    assert pyo.value(m.upper_bound) * unit == pytest.approx(6 * MS)
    assert m.component("order_uv") is None and len(m.order_uv_window) == 1
    assert list(m.BOTTLENECK_PAIRS) == [("a", "d"), ("d", "e")]
    # Energetic rows only where a segment between bottlenecks (a | b, c | d | e) holds
    # ancestors / descendants: d after {b, c} (from a's finish), a before {b, c} (to d's
    # start); the rest is implied by precedence and the bottleneck rows.
    assert sorted(m.energetic_head) == ["d"]
    assert sorted(m.energetic_tail) == ["a"]
    # Window big-M for (b, c): UB - tail_b - head_c with head_c = 0.5 ms (a on CIM),
    # tail_b = d (0.2 ms) + e (1 ms, host only) = 1.2 ms -> 4.3 ms.
    row = m.order_uv_window["b", "c"]
    coef = {id(v): c for v, c in _linear(row.body)}
    assert abs(coef[id(m.order["b", "c"])]) * unit == pytest.approx(4.3 * MS, rel=1e-6)
    assert pyo.value(m.big_m) * unit > 4.3 * MS


def _linear(expr):
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(expr)
    return list(zip(repn.linear_vars, repn.linear_coefs, strict=True))


@pytest.mark.unit
def test_window_family_without_bound_uses_heuristic():
    inst = diamond()
    m = build_model(inst, "tightened")
    ub = pyo.value(m.upper_bound) * pyo.value(m.time_unit)
    assert ub == pytest.approx(heuristic_schedule(inst).makespan, rel=1e-8)
    with pytest.raises(PlacementError, match="needs an upper bound"):
        build_cim_model(inst, families=(*FAITHFUL_FAMILIES, "window_big_m"))
    with pytest.raises(PlacementError, match="upper bound"):
        build_cim_model(inst, families=TIGHTENED_FAMILIES, upper_bound=float("nan"))


@pytest.mark.unit
def test_new_families_can_be_switched_off():
    m = build_cim_model(diamond(), families=TIGHTENED_FAMILIES, upper_bound=6 * MS)
    before = model_size(m).constraints
    set_family_active(m, "energetic", False)
    assert not m.energetic_head.active and not m.energetic_tail.active
    assert model_size(m).constraints == before - 2
    set_family_active(m, "energetic", True)
    assert model_size(m).constraints == before


# --- heuristic (no solver) ------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.unit
def test_heuristic_is_feasible_and_never_below_optimum(seed):
    inst = branched(seed)
    sched = heuristic_schedule(inst)
    check = verify_cim(inst, sched, claimed=sched.makespan)
    assert check.ok, check.violations
    assert sched.makespan >= optimum(seed) * (1 - 1e-9)
    assert sched.makespan <= inst.cpu_only_latency * (1 + 1e-9)  # all-host is a start


@pytest.mark.unit
def test_heuristic_is_mostly_optimal_on_small_graphs():
    hits = sum(
        heuristic_schedule(branched(s)).makespan <= optimum(s) * (1 + 1e-9) for s in SEEDS
    )
    assert hits >= 0.85 * len(SEEDS)  # measured: 34 of 36


@pytest.mark.unit
def test_heuristic_is_deterministic():
    inst = random_instance(random.Random(9), 30, edge_prob=0.1)
    a, b = heuristic_schedule(inst), heuristic_schedule(inst)
    assert a.makespan == b.makespan and a.on_host == b.on_host and a.start == b.start


@pytest.mark.unit
def test_heuristic_respects_budget_and_support():
    inst = dataclasses.replace(diamond(), crossbar_budget=0)
    sched = heuristic_schedule(inst)
    assert all(sched.on_host.values())
    assert sched.makespan == pytest.approx(inst.cpu_only_latency)
    wide = heuristic_schedule(dataclasses.replace(diamond(), crossbar_budget=100))
    assert not wide.on_host["b"]  # 2 ms on the host, 0.5 ms on CIM, in parallel with c
    assert wide.on_host["c"] and wide.on_host["e"]


@pytest.mark.slow
def test_heuristic_is_fast_on_yolo_sized_graphs():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from cim_formulations import dense_branched_instance

    inst = dense_branched_instance(250, 0)
    assert len(inst.parallel_pairs) > 2000
    tick = time.perf_counter()
    sched = heuristic_schedule(inst)
    assert time.perf_counter() - tick < 10.0  # about 3 s measured
    assert verify_cim(inst, sched).ok


# --- every formulation reaches the brute-force optimum (real HiGHS) --------------------


@pytest.mark.solver
@pytest.mark.parametrize("seed", SEEDS)
def test_formulations_match_brute_force(seed):
    inst = branched(seed)
    best = optimum(seed)
    # Warm start on the faithful model is covered by the warm-start tests below.
    runs = (("faithful", False), ("bounded", False), ("tightened", False), ("tightened", True))
    for formulation, warm in runs:
        placed = solve_cim(inst, rel_gap=0.0, formulation=formulation, warm_start=warm)
        res = placed.result
        assert res.status == SolveStatus.OPTIMAL, (formulation, warm, res.message)
        assert res.objective == pytest.approx(best, rel=1e-6), (formulation, warm)
        assert placed.schedule is not None
        assert placed.verification is not None and placed.verification.ok
        assert res.options["formulation"] == formulation
        if warm:
            assert res.options["start"] == "accepted"


def _family_alone(family: str, seeds: list[int]) -> None:
    for seed in seeds:
        inst = branched(seed)
        upper = heuristic_schedule(inst).makespan if family == "window_big_m" else None
        m = build_cim_model(inst, families=(*FAITHFUL_FAMILIES, family), upper_bound=upper)
        res = solve_model(m, rel_gap=0.0)
        assert res.status == SolveStatus.OPTIMAL, (seed, res.message)
        unit = pyo.value(m.time_unit)
        assert res.objective * unit == pytest.approx(optimum(seed), rel=1e-6), seed


@pytest.mark.solver
@pytest.mark.parametrize("family", TIGHTENING_FAMILIES)
def test_each_family_alone_preserves_optimum(family):
    _family_alone(family, SEEDS[::3])  # 12 graphs of every size and density


@pytest.mark.slow
@pytest.mark.parametrize("family", TIGHTENING_FAMILIES)
def test_each_family_alone_preserves_optimum_all_seeds(family):
    _family_alone(family, SEEDS)


# --- warm start (real HiGHS) ----------------------------------------------------------


def medium() -> CimInstance:
    # 40 operators, 546 parallel pairs: faithful HiGHS has no incumbent within 2 s.
    return random_instance(random.Random(5), 40, edge_prob=0.08)


@pytest.mark.solver
@pytest.mark.parametrize("formulation", list(FORMULATIONS))
def test_warm_start_incumbent_never_worse_than_heuristic(formulation):
    inst = medium()
    heur = heuristic_schedule(inst)
    placed = solve_cim(inst, time_limit=2.0, formulation=formulation, warm_start=True)
    res = placed.result
    assert res.options["start"] == "accepted"
    # Within its share of the 2 s deadline the heuristic may stop early: never better
    # than the same deterministic search run to its end, and the result never worse.
    ran = res.options["heuristic_makespan"]
    assert ran >= heur.makespan * (1 - 1e-12)
    assert res.status.has_solution and placed.schedule is not None
    assert res.objective <= ran * (1 + 1e-9)
    assert placed.verification is not None and placed.verification.ok


@pytest.mark.solver
def test_start_is_visible_in_highs_log_at_time_zero():
    import io

    inst = medium()
    m = build_cim_model(inst)
    heur = heuristic_schedule(inst)
    log = io.StringIO()
    res = solve_model(m, time_limit=0.5, start=start_values(m, inst, heur), tee=[log])
    assert res.options["start"] == "accepted"
    text = log.getvalue()
    assert "MIP start solution is feasible" in text
    unit = pyo.value(m.time_unit)
    assert res.objective * unit <= heur.makespan * (1 + 1e-9)
    # Without a start the same short solve reports no such line.
    res0 = solve_model(build_cim_model(inst), time_limit=0.5)
    assert "start" not in res0.options


@pytest.mark.solver
def test_heuristic_is_reported_when_highs_ends_without_better(monkeypatch):
    real = HIGHS.solve

    def no_incumbent(model, options, *, start=None):
        res = real(model, options, start=start)
        return dataclasses.replace(res, status=SolveStatus.TIME_LIMIT_NO_SOLUTION,
                                   objective=None, gap=None)

    monkeypatch.setattr(HIGHS, "solve", no_incumbent)
    inst = branched(4)
    placed = solve_cim(inst, warm_start=True)
    assert placed.schedule is not None
    assert placed.result.objective == pytest.approx(heuristic_schedule(inst).makespan)
    assert "heuristic schedule reported" in placed.result.message
    assert placed.verification is not None and placed.verification.ok
    # The reported start is proven optimal only when HiGHS's bound reaches it.
    res = placed.result
    if res.status == SolveStatus.OPTIMAL:
        assert res.gap is not None and res.gap <= 1e-4 and "proven by the bound" in res.message
    else:
        assert res.status == SolveStatus.TIME_LIMIT


@pytest.mark.unit
def test_start_values_cover_every_variable():
    inst = diamond()
    m = build_model(inst, "tightened")  # upper bound from the heuristic
    heur = heuristic_schedule(inst)
    values = start_values(m, inst, heur)
    for var in m.component_data_objects(pyo.Var):
        assert var in values
    # The start satisfies every row of the tightened model (checked by Pyomo, not HiGHS).
    for var, val in values.items():
        var.set_value(val, skip_validation=True)
    for con in m.component_data_objects(pyo.Constraint, active=True):
        body = pyo.value(con.body)
        lo, hi = con.lb, con.ub
        assert lo is None or body >= lo - 1e-6, con.name
        assert hi is None or body <= hi + 1e-6, con.name


@pytest.mark.unit
def test_auto_formulation_follows_the_graph_shape():
    from placement.cim.pipeline import AUTO_MAX_PAIRS_FOR_BOUNDED, auto_formulation

    chain = random_instance(random.Random(1), 40, edge_prob=1.0)  # all i -> j: a total order
    assert len(chain.parallel_pairs) <= AUTO_MAX_PAIRS_FOR_BOUNDED
    assert auto_formulation(chain) == "bounded"
    wide = medium()
    assert len(wide.parallel_pairs) > AUTO_MAX_PAIRS_FOR_BOUNDED
    assert auto_formulation(wide) == "tightened"


@pytest.mark.solver
def test_auto_reports_the_formulation_it_chose():
    placed = solve_cim(branched(SEEDS[0]), formulation="auto")
    assert placed.result.options["formulation"] == "bounded"
    assert "heuristic_seconds" not in placed.result.options  # no heuristic on the bounded path
