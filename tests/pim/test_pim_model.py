"""The PIM loop-nest placement model against brute force, a DP, the verifier and the rule."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from pathlib import Path

import pyomo.environ as pyo
import pytest
from pim_oracles import brute_force, hybrid_cost, nest, operand, random_instance, segment_dp

from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.models.pim_loopnest.build import build_pim_model
from placement.pim.instance import PimInstance
from placement.pim.pipeline import solve as solve_pim
from placement.pim.rules import rule_placement
from placement.pim.verifier import evaluate_placement, verify_pim
from placement.solvers.base import SolveOptions
from placement.solvers.registry import BACKENDS

SPEC = PimSpec()
GOLDEN = Path(__file__).resolve().parent.parent / "golden"
MODES = list(itertools.product(("upper_bound", "exact"), ("loop", "operator")))
KB = 1024


def chain(spec: PimSpec = SPEC) -> PimInstance:
    """arg0 -> [n0] -> a0 -> [n1] -> a1 -> [n2] -> arg1, 64 KiB each, one ONNX node for n0, n1."""
    ops = [
        (operand("arg0", 64 * KB, read=True, written=False, kind="argument"),
         operand("a0", 64 * KB, read=False, written=True)),
        (operand("a0", 64 * KB, read=True, written=False),
         operand("a1", 64 * KB, read=False, written=True)),
        (operand("a1", 64 * KB, read=True, written=False),
         operand("arg1", 64 * KB, read=False, written=True, kind="argument")),
    ]
    nests = tuple(nest(i, o, node="sm" if i < 2 else "out") for i, o in enumerate(ops))
    t_cpu = {"n000": 30e-6, "n001": 30e-6, "n002": 30e-6}
    t_pim = {"n000": 5e-6, "n001": 5e-6, "n002": 5e-6}
    return PimInstance(nests, t_cpu, spec, t_pim=t_pim)


# --- cost definitions, no solver --------------------------------------------------------


@pytest.mark.unit
def test_eq9_of_a_chain_by_hand():
    inst = chain()
    b = 64 * KB / SPEC.read_bandwidth  # B_rd = B_wb
    all_pim = {"n000": True, "n001": True, "n002": True}
    up = evaluate_placement(inst, all_pim, copy="upper_bound")
    assert up.n_region == 2 and up.host == 0.0 and up.pim == pytest.approx(15e-6)
    assert up.copy == pytest.approx(6 * b)  # Eq. 8: each nest one read and one write
    ex = evaluate_placement(inst, all_pim, copy="exact")
    assert ex.copy == pytest.approx(2 * b)  # arg0 in, arg1 out; a0, a1 never move
    assert ex.total == pytest.approx(15e-6 + 2 * b + 4e-6)
    split = {"n000": True, "n001": False, "n002": True}
    ex = evaluate_placement(inst, split, copy="exact")
    assert ex.n_region == 4 and ex.host == pytest.approx(30e-6)
    assert ex.copy == pytest.approx(4 * b)  # arg0 in, a0 out; a1 in, arg1 out
    none = evaluate_placement(inst, dict.fromkeys(all_pim, False), copy="exact")
    assert (none.total, none.n_region, none.copy) == (pytest.approx(90e-6), 0, 0.0)


@pytest.mark.unit
def test_exact_copy_loop_invariant_and_dead_values():
    w = operand("global:w", 100 * KB, read=True, written=False, kind="global")
    acc = operand("a0", 4 * KB, read=True, written=True)
    looped = nest(0, (w, acc), trip_count=10)
    dead = nest(1, (operand("a0", 4 * KB, read=False, written=True),))  # overwrites a0 unread
    inst = PimInstance((looped, dead), {"n000": 1e-3, "n001": 1e-3}, SPEC,
                       t_pim={"n000": 1e-6, "n001": 1e-6})
    only = {"n000": True, "n001": False}
    ex = evaluate_placement(inst, only, copy="exact")
    up = evaluate_placement(inst, only, copy="upper_bound")
    bw = SPEC.read_bandwidth
    # w is fetched once (no writer in a loop); a0 is written in the loop: 10 x in, and its
    # value is overwritten unread by n001, so never flushed
    assert ex.copy == pytest.approx((100 * KB + 10 * 4 * KB) / bw)
    assert up.copy == pytest.approx(10 * (100 * KB + 4 * KB) / bw + 10 * 4 * KB / bw)


@pytest.mark.unit
def test_oracle_and_verifier_agree_on_every_placement():
    """Lazy-simulation oracle vs the verifier's segment walk; exact <= upper bound."""
    for seed in range(25):
        inst = random_instance(seed, 7)
        for y in itertools.product((False, True), repeat=7):
            on = dict(zip((n.id for n in inst.nests), y, strict=True))
            ex = evaluate_placement(inst, on, copy="exact").total
            up = evaluate_placement(inst, on, copy="upper_bound").total
            assert ex == pytest.approx(hybrid_cost(inst, list(y), "exact"), rel=1e-12)
            assert up == pytest.approx(hybrid_cost(inst, list(y), "upper_bound"), rel=1e-12)
            assert ex <= up * (1 + 1e-12)


@pytest.mark.unit
def test_segment_dp_matches_brute_force():
    for seed in range(15):
        inst = random_instance(100 + seed, 8)
        for copy in ("upper_bound", "exact"):
            assert segment_dp(inst, copy) == pytest.approx(brute_force(inst, copy, "loop")[0])


@pytest.mark.unit
def test_verifier_rejects_bad_placements():
    inst = chain()
    v = verify_pim(inst, {"n000": True, "n001": True}, granularity="loop")
    assert not v.ok and "nest 'n002' has no decision" in v.violations[0]
    v = verify_pim(inst, {"n000": True, "n001": False, "n002": True}, granularity="operator")
    assert not v.ok and "ONNX node 'sm'" in v.violations[0]
    v = verify_pim(inst, {"n000": False, "n001": False, "n002": False}, claimed=1e-6)
    assert not v.ok and "differs from the recomputed" in v.violations[0]
    with pytest.raises(PlacementError, match="verification failed"):
        v.raise_if_failed()
    v = verify_pim(inst, {"n000": False, "n001": False, "n002": False, "zz": True})
    assert "unknown nest 'zz'" in v.violations[0]


@pytest.mark.unit
def test_bad_instances_and_options():
    n0 = nest(0, ())
    with pytest.raises(PlacementError, match="nest 'n000' has no T_cpu"):
        PimInstance((n0,), {}, SPEC)
    with pytest.raises(PlacementError, match="T_cpu must be a time"):
        PimInstance((n0,), {"n000": -1.0}, SPEC)
    with pytest.raises(PlacementError, match="n_cores must be a positive"):
        PimInstance((n0,), {"n000": 1.0}, SPEC, n_cores=0)
    with pytest.raises(PlacementError, match="program order"):
        PimInstance((nest(1, ()), dataclasses.replace(n0, id="x")), {"n001": 1, "x": 1}, SPEC)
    with pytest.raises(PlacementError, match="no loop nests"):
        PimInstance((), {}, SPEC)
    inst = chain()
    with pytest.raises(PlacementError, match="unknown copy accounting 'lazy'"):
        build_pim_model(inst, copy="lazy")
    with pytest.raises(PlacementError, match="unknown granularity 'bb'"):
        build_pim_model(inst, granularity="bb")


@pytest.mark.unit
def test_model_structure():
    inst = chain()
    m = build_pim_model(inst, copy="exact", granularity="operator")
    assert len(m.pim) == 3 and len(m.switch) == 4
    assert len(m.tie) == 1  # n001 tied to n000
    fetch = {(b, n) for kind, b, n in m.MOVES if kind == "fetch"}
    flush = {(b, n) for kind, b, n in m.MOVES if kind == "flush"}
    assert fetch == {("arg0", "n000"), ("a0", "n001"), ("a1", "n002")}
    assert flush == {("a0", "n000"), ("a1", "n001"), ("arg1", "n002")}
    assert inst.with_cores(128).n_cores == 128


# --- solver -----------------------------------------------------------------------------


def _fixed_objective(inst: PimInstance, y: dict[str, bool], copy: str) -> float:
    m = build_pim_model(inst, copy=copy)
    for k, v in y.items():
        m.pim[k].fix(int(v))
    res = BACKENDS["highs"].solve(m, SolveOptions(rel_gap=0.0))
    assert res.status.has_solution
    return res.objective * pyo.value(m.time_unit)


@pytest.mark.solver
def test_model_objective_equals_eq9_at_fixed_placements():
    rng = random.Random(3)
    for seed in range(4):
        inst = random_instance(200 + seed, 7)
        for _ in range(3):
            y = {n.id: rng.random() < 0.6 for n in inst.nests}
            for copy in ("upper_bound", "exact"):
                want = evaluate_placement(inst, y, copy=copy).total
                assert _fixed_objective(inst, y, copy) == pytest.approx(want, rel=1e-7)


@pytest.mark.solver
def test_model_matches_brute_force_in_every_mode():
    for seed in range(10):
        inst = random_instance(seed, 7)
        best = {}
        for copy, gran in MODES:
            p = solve_pim(inst, copy=copy, granularity=gran, rel_gap=0.0)
            want, _ = brute_force(inst, copy, gran)
            assert p.hybrid is not None and p.verification is not None and p.verification.ok
            assert p.hybrid.total == pytest.approx(want, rel=1e-7), (seed, copy, gran)
            assert p.result.objective == pytest.approx(want, rel=1e-7)
            best[copy, gran] = p.hybrid.total
        for copy in ("upper_bound", "exact"):  # loop granularity never worse than operator
            assert best[copy, "loop"] <= best[copy, "operator"] * (1 + 1e-9)
        for gran in ("loop", "operator"):  # exact copy never exceeds the upper bound
            assert best["exact", gran] <= best["upper_bound", gran] * (1 + 1e-9)


@pytest.mark.solver
def test_model_matches_the_dp_on_longer_programs():
    for seed in range(3):
        inst = random_instance(300 + seed, 30)
        for copy in ("upper_bound", "exact"):
            p = solve_pim(inst, copy=copy, rel_gap=0.0)
            assert p.hybrid is not None
            assert p.hybrid.total == pytest.approx(segment_dp(inst, copy), rel=1e-7)


@pytest.mark.solver
def test_rule_never_beats_the_optimum():
    for seed in range(6):
        inst = random_instance(400 + seed, 8)
        rule = rule_placement(inst, allow_estimates=True)
        on = {k: d.on_pim for k, d in rule.items()}
        for copy, gran in MODES:
            p = solve_pim(inst, copy=copy, granularity=gran, rel_gap=0.0)
            assert p.hybrid is not None
            if gran == "loop":
                assert p.hybrid.total <= evaluate_placement(inst, on, copy=copy).total * (1 + 1e-9)


@pytest.mark.solver
def test_closed_form_streaming_offloaded_tiny_stays():
    mb = 1 << 20
    big = nest(0, (operand("arg0", 64 * mb, read=True, written=False, kind="argument"),
                   operand("arg1", 64 * mb, read=True, written=False, kind="argument"),
                   operand("arg2", 64 * mb, read=False, written=True, kind="argument")),
               n_iter=16 * mb)
    # 8 parallel iterations: 8 cores, 0.8 us of synchronization (64 would cost 3.2 us on
    # 32 cores, more than the tiny nest's 1.2 us on the host)
    tiny = nest(1, (operand("arg2", 256, read=True, written=True, kind="argument"),), n_iter=8)
    # 192 MiB of streaming at ~6.7 GB/s on the host vs 12 ms of Eq. 8 copy + ~2 ms on PIM
    t_cpu = {big.id: 30e-3, tiny.id: 1.2e-6}
    counts = {big.id: {"offcore_requests.all_data_rd": 2 * 64 * mb / 64}}
    inst = PimInstance((big, tiny), t_cpu, SPEC, counters=counts)
    rule = rule_placement(inst)
    assert rule[big.id].on_pim and rule[tiny.id].reason.startswith("C1 failed")
    for copy in ("upper_bound", "exact"):
        # Next to the big PIM nest, the tiny one rides along in the same segment (no extra
        # switch): the model offloads it too, which the per-nest rule cannot see.
        p = solve_pim(inst, copy=copy)
        assert p.on_pim == {big.id: True, tiny.id: True}
        assert p.hybrid is not None and p.hybrid.n_region == 2
        assert p.speedup is not None and p.speedup > 1.5
        assert p.to_json()["decisions"] == {big.id: "pim", tiny.id: "pim"}
        rule_on = {k: d.on_pim for k, d in rule.items()}
        assert p.hybrid.total < evaluate_placement(inst, rule_on, copy=copy).total
        # Alone, the tiny nest cannot pay for two switches (4 us > 1.2 us): host.
        alone = PimInstance((dataclasses.replace(tiny, index=0),), {tiny.id: 1.2e-6}, SPEC)
        q = solve_pim(alone, copy=copy)
        assert q.on_pim == {tiny.id: False} and q.hybrid.n_region == 0
        assert q.speedup == pytest.approx(1.0)


@pytest.mark.solver
def test_operator_granularity_ties_nests():
    inst = chain()
    # make n001 bad on PIM: loop granularity splits the 'sm' node, operator cannot
    inst = dataclasses.replace(inst, t_pim={"n000": 5e-6, "n001": 500e-6, "n002": 5e-6})
    loop = solve_pim(inst, copy="exact", granularity="loop")
    op = solve_pim(inst, copy="exact", granularity="operator")
    assert loop.on_pim is not None and op.on_pim is not None
    assert loop.on_pim["n000"] != loop.on_pim["n001"] or not loop.on_pim["n000"]
    assert op.on_pim["n000"] == op.on_pim["n001"]
    assert loop.hybrid.total <= op.hybrid.total


@pytest.mark.unit
def test_negative_trip_count_is_refused(tmp_path):
    from placement.profiling.nest_profile import NestProfile

    acc = operand("a0", 4 * KB, read=True, written=True)
    with pytest.raises(PlacementError, match=r"^nest 'n000': trip count -1 is negative$"):
        nest(0, (acc,), trip_count=-1)
    assert nest(0, (acc,), trip_count=0).fetch_bytes == 0  # a loop that never runs
    # From a nest profile: one line naming the file and the nest.
    data = json.loads((GOLDEN / "resnet_tiny.nests.json").read_text())
    data["nests"][3]["trip_count"] = -2
    path = tmp_path / "bad.nests.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlacementError) as err:
        NestProfile.load(path)
    assert str(err.value) == (
        f"{path}: invalid nest profile: nest 'n003': trip count -2 is negative"
    )
