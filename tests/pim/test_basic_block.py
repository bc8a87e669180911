"""Basic-block granularity: blocks by hand, the verifier against a simulated run, and the
model's optimum against brute force at all three granularities."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pyomo.environ as pyo
import pytest
from pim_oracles import (
    PARTITIONED_SPEC,
    BlockOracle,
    brute_force,
    nest,
    operand,
    random_block_instance,
)

from placement.blocks import Loop, Segment, basic_blocks
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.models.pim_loopnest.build import build_pim_model
from placement.pim.instance import PimInstance
from placement.pim.pipeline import solve as solve_pim
from placement.pim.pipeline import solve_for_cores
from placement.pim.verifier import evaluate_blocks, evaluate_placement, verify_pim
from placement.solvers.base import SolveOptions
from placement.solvers.registry import BACKENDS

KB = 1024
SPEC = PimSpec()
COPIES = ("upper_bound", "exact", "shared", "partitioned")


def on_machine(inst, copy: str):
    """``inst`` on a partitioned machine for ``copy="partitioned"`` (same switch cost)."""
    if copy != "partitioned":
        return inst
    spec = dataclasses.replace(PARTITIONED_SPEC, t_sw=inst.spec.t_sw)
    return dataclasses.replace(inst, spec=spec)


def reduction(rows: int = 4, cols: int = 16, body_ops: int = 9) -> Loop:
    """scf.parallel (i) { scf.for (k) { body } }, as linalg lowers a row reduction."""
    inner = Loop(cols, (Segment(body_ops, True),))
    return Loop(rows, (Segment(0, False), Segment(0, False)), (inner,))


# --- blocks by hand ---------------------------------------------------------------------


@pytest.mark.unit
def test_blocks_of_a_row_reduction_by_hand():
    nb = basic_blocks("n000", reduction())
    assert [b.id for b in nb.blocks] == [f"n000.bb{k}" for k in range(5)]
    assert [b.kind for b in nb.blocks] == ["header", "step", "header", "body", "step"]
    assert [b.executions for b in nb.blocks] == [5, 4, 68, 64, 4]  # header: t + 1 per entry
    assert [b.ops for b in nb.blocks] == [2, 1, 2, 11, 2]  # body: its 9 + increment, branch
    assert nb.body == (3,)
    edges = {(nb.blocks[e.src].kind + str(e.src), nb.blocks[e.dst].kind + str(e.dst)):
             (e.count, e.live_bytes) for e in nb.edges}  # fmt: skip
    assert edges == {
        ("header0", "step1"): (4, 8),  # i < 4: into the body of the i loop, i live
        ("step1", "header2"): (4, 16),  # enter the k loop: i and k = 0
        ("header2", "body3"): (64, 16),
        ("body3", "header2"): (64, 16),  # back edge with k + 1
        ("header2", "step4"): (4, 8),  # k loop done: i live
        ("step4", "header0"): (4, 8),  # back edge with i + 1
    }
    total = 5 * 2 + 4 * 1 + 68 * 2 + 64 * 11 + 4 * 2
    assert nb.shares[3] == pytest.approx(64 * 11 / total) and sum(nb.shares) == pytest.approx(1)
    assert Loop.from_json(reduction().to_json()) == reduction()


@pytest.mark.unit
def test_a_nest_without_memory_access_uses_its_deepest_segment_as_body():
    loop = Loop(2, (Segment(0, False), Segment(3, False)), (Loop(3, (Segment(1, False),)),))
    nb = basic_blocks("n007", loop)
    assert [b.kind for b in nb.blocks] == ["header", "step", "header", "body", "step"]
    with pytest.raises(ValueError, match="needs 2 segments"):
        Loop(2, (Segment(0, False),), (Loop(1, (Segment(0, True),)),))
    with pytest.raises(ValueError, match="trips must be"):
        Loop(-1, (Segment(0, True),))


def two_nests(t_sw: float = 2e-6) -> PimInstance:
    """arg0 -> [n000: row reduction] -> a0 -> [n001: elementwise] -> arg1."""
    n0 = nest(0, (operand("arg0", 256, read=True, written=False, kind="argument"),
                  operand("a0", 16, read=True, written=True)))  # fmt: skip
    n1 = nest(1, (operand("a0", 16, read=True, written=False),
                  operand("arg1", 16, read=False, written=True, kind="argument")))  # fmt: skip
    loops = {"n000": reduction(), "n001": Loop(4, (Segment(3, True),))}
    spec = dataclasses.replace(SPEC, t_sw=t_sw)
    return PimInstance((n0, n1), {"n000": 40e-6, "n001": 10e-6}, spec,
                       t_pim={"n000": 4e-6, "n001": 20e-6}, blocks=loops)  # fmt: skip


@pytest.mark.unit
def test_eq9_of_a_split_nest_by_hand():
    inst = two_nests()
    nb = inst.nest_blocks["n000"]
    on = {b: False for n in ("n000", "n001") for b in inst.nest_blocks[n].ids}
    on["n000.bb3"] = True  # only the reduction's body on PIM
    h = evaluate_blocks(inst, on, copy="upper_bound")
    share = nb.shares[3]
    assert h.pim == pytest.approx(4e-6 * share)
    assert h.host == pytest.approx(40e-6 * (1 - share) + 10e-6)
    # control enters and leaves the body 64 times each, with i and k (16 bytes)
    assert h.n_region == 128
    bw = SPEC.read_bandwidth  # = writeback bandwidth
    n0 = inst.nests[0]
    assert h.copy == pytest.approx((n0.fetch_bytes + n0.flush_bytes) / bw + 128 * 16 / bw)
    # whole nests cost what they cost at loop granularity
    for y in itertools.product((False, True), repeat=2):
        whole = {b: p for n, p in zip(("n000", "n001"), y, strict=True)
                 for b in inst.nest_blocks[n].ids}  # fmt: skip
        for copy in COPIES:
            at = on_machine(inst, copy)
            loop = evaluate_placement(at, dict(zip(("n000", "n001"), y, strict=True)), copy=copy)
            blocks = evaluate_blocks(at, whole, copy=copy)
            assert blocks.total == pytest.approx(loop.total, rel=1e-12)
            assert blocks.n_region == loop.n_region


@pytest.mark.unit
def test_verifier_rejects_bad_block_placements():
    inst = two_nests()
    ids = [b for n in ("n000", "n001") for b in inst.nest_blocks[n].ids]
    v = verify_pim(inst, dict.fromkeys(ids[:-1], False), granularity="basic-block")
    assert not v.ok and "block 'n001.bb1' has no decision" in v.violations[0]
    v = verify_pim(inst, {**dict.fromkeys(ids, False), "n001": True}, granularity="basic-block")
    assert "unknown block 'n001'" in v.violations[0]
    two_bodies = Loop(2, (Segment(1, True), Segment(1, True)), (Loop(2, (Segment(1, False),)),))
    inst = dataclasses.replace(inst, blocks={"n000": two_bodies, "n001": reduction()})
    on = {b: False for n in ("n000", "n001") for b in inst.nest_blocks[n].ids}
    on["n000.bb1"] = True
    v = verify_pim(inst, on, granularity="basic-block")
    assert not v.ok and "body blocks 'n000.bb1' and 'n000.bb4'" in v.violations[0]


@pytest.mark.unit
def test_basic_blocks_are_required_and_checked():
    inst = dataclasses.replace(two_nests(), blocks=None)
    with pytest.raises(PlacementError, match="needs the nests' basic blocks"):
        build_pim_model(inst, granularity="basic-block")
    with pytest.raises(PlacementError, match="nest 'n001' has no basic blocks"):
        dataclasses.replace(inst, blocks={"n000": reduction()})
    with pytest.raises(PlacementError, match="unknown nest 'zz'"):
        dataclasses.replace(inst, blocks={"n000": reduction(), "n001": reduction(),
                                          "zz": reduction()})  # fmt: skip


@pytest.mark.unit
def test_verifier_equals_the_simulated_run_on_every_placement():
    for seed in range(12):
        base = random_block_instance(seed, 4, max_units=10)
        for copy in COPIES:
            inst = on_machine(base, copy)
            oracle = BlockOracle(inst)
            for choice in itertools.product((False, True), repeat=len(oracle.units)):
                y = {b: c for unit, c in zip(oracle.units, choice, strict=True) for b in unit}
                want = oracle.cost(y, copy)
                got = evaluate_blocks(inst, y, copy=copy).total
                assert got == pytest.approx(want, rel=1e-12), (seed, copy)


# --- solver -----------------------------------------------------------------------------


@pytest.mark.solver
def test_model_objective_equals_the_verifier_at_fixed_block_placements():
    rng = random.Random(5)
    for seed in range(4):
        base = random_block_instance(50 + seed, 5, t_sw=1e-8, max_units=16)
        for copy in COPIES:
            inst = on_machine(base, copy)
            m = build_pim_model(inst, copy=copy, granularity="basic-block")
            oracle = BlockOracle(inst)
            choice = [rng.random() < 0.5 for _ in oracle.units]
            y = {b: c for unit, c in zip(oracle.units, choice, strict=True) for b in unit}
            for b, v in y.items():
                owner = m.block_owner[b]
                (m.pim[owner] if owner is not None else m.block_pim[b]).fix(int(v))
            res = BACKENDS["highs"].solve(m, SolveOptions(rel_gap=0.0))
            assert res.status.has_solution
            got = res.objective * pyo.value(m.time_unit)
            assert got == pytest.approx(oracle.cost(y, copy), rel=1e-7)


@pytest.mark.solver
def test_model_matches_brute_force_at_all_three_granularities():
    splits = 0
    for seed in range(14):
        base = random_block_instance(seed, 4)
        for copy in COPIES:
            inst = on_machine(base, copy)
            oracle = BlockOracle(inst)
            best = {}
            for gran in ("basic-block", "loop", "operator"):
                p = solve_pim(inst, copy=copy, granularity=gran, rel_gap=0.0)
                if gran == "basic-block":
                    want, _ = oracle.brute_force(copy)
                    splits += bool(p.split_nests)
                else:
                    want, _ = brute_force(inst, copy, gran)
                assert p.verification is not None and p.verification.ok
                assert p.hybrid is not None
                assert p.hybrid.total == pytest.approx(want, rel=1e-7), (seed, copy, gran)
                assert p.result.objective == pytest.approx(want, rel=1e-7)
                best[gran] = p.hybrid.total
            # finer granularity is never worse: every loop placement is a block placement
            assert best["basic-block"] <= best["loop"] * (1 + 1e-9) <= best["operator"] * (1 + 2e-9)
    assert splits >= 3  # the cases exercise placements that split nests


@pytest.mark.solver
def test_costly_crossings_are_tied_without_changing_the_optimum():
    inst = random_block_instance(3, 4, t_sw=30e-6)  # 30 us: most edges cost more than CPU-only
    m = build_pim_model(inst, granularity="basic-block")
    assert len(m.TIED) > 0
    for copy in COPIES:
        at = on_machine(inst, copy)
        p = solve_pim(at, copy=copy, granularity="basic-block", rel_gap=0.0)
        assert p.hybrid.total == pytest.approx(BlockOracle(at).brute_force(copy)[0], rel=1e-7)


@pytest.mark.solver
def test_result_documents_carry_blocks_and_crossings():
    inst = two_nests(t_sw=1e-9)
    inst = dataclasses.replace(inst, t_pim={"n000": 4e-6, "n001": 5e-6})
    [r] = solve_for_cores(inst, [32], "exact", "basic-block", compare=True)
    doc = r.placement.to_json()
    assert doc["granularity"] == "basic-block"
    assert set(doc["block_decisions"]) == {f"n000.bb{k}" for k in range(5)} | {"n001.bb0",
                                                                              "n001.bb1"}
    between, inside = r.placement.crossings
    assert doc["crossings"] == {"between_nests": between, "inside_nests": inside}
    assert between + inside == r.placement.hybrid.n_region
    assert list(r.by_granularity) == ["loop", "operator", "basic-block"]
    assert r.by_granularity["basic-block"] is r.placement
    assert "block_decisions" not in r.by_granularity["loop"].to_json()
