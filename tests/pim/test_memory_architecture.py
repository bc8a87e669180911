"""The memory architecture in the PIM copy accounting: shared and partitioned devices.

Closed forms per kind of buffer (weight, model input under a warm or cold cache, a
temporary, the output), the model against a brute force over every placement (and every
set of resident weights), the verifier against the oracle's third formulation, and the
hardware files' checks.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
from pim_oracles import (
    PARTITIONED_SPEC,
    SMALL_CACHE_SPEC,
    brute_force,
    hybrid_cost,
    nest,
    operand,
    random_instance,
    resident_sets,
)

from placement.devices.pim import COPY_MODES, resolve_copy
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec, load_pim_hardware, pim_spec_from_table
from placement.pim.instance import PimInstance
from placement.pim.pipeline import solve
from placement.pim.verifier import evaluate_placement, verify_pim

MB = 1 << 20
SHARED = PimSpec(host_cache=8.0 * MB)  # B_rd = B_wb = 16.754 GB/s, as the paper's host
B = SHARED.read_bandwidth


def _instance(spec: PimSpec, nests, cache="warm") -> PimInstance:
    t_cpu = {n.id: 1e-3 for n in nests}
    t_pim = {n.id: 1e-4 for n in nests}
    return PimInstance(tuple(nests), t_cpu, spec, t_pim=t_pim, cache=cache)


def _copy(inst: PimInstance, on_pim: dict[str, bool], copy: str, **kw) -> float:
    return evaluate_placement(inst, on_pim, copy=copy, **kw).copy


# --- shared memory: closed forms --------------------------------------------------------


def _decoder(cache: str, spec: PimSpec = SHARED) -> PimInstance:
    """x (input, 1 MB) and W (weight, 4 MB) -> [n0] -> h (temporary) -> [n1] -> y (output)."""
    x = operand("arg0", MB, read=True, written=False, kind="argument", role="input")
    w = operand("arg1", 4 * MB, read=True, written=False, kind="argument", role="weight")
    h_out = operand("alloc0", 2 * MB, read=False, written=True)
    h_in = operand("alloc0", 2 * MB, read=True, written=False)
    y = operand("arg2", MB, read=False, written=True, kind="argument", role="output")
    return _instance(spec, [nest(0, (x, w, h_out)), nest(1, (h_in, y))], cache)


@pytest.mark.unit
def test_shared_weights_never_move_and_a_cold_input_is_clean():
    inst = _decoder("cold")
    # n0 on PIM reads x (clean: written back before the run) and W (never written): free.
    # It writes h; the host's n1 reads it: a re-read of 2 MB. n1 writes y on the host.
    assert _copy(inst, {"n000": True, "n001": False}, "shared") == pytest.approx(2 * MB / B)
    # Everything on PIM: the caller re-reads y (1 MB) after the program, nothing else.
    assert _copy(inst, {"n000": True, "n001": True}, "shared") == pytest.approx(MB / B)
    assert _copy(inst, {"n000": False, "n001": False}, "shared") == 0.0


@pytest.mark.unit
def test_shared_warm_input_is_written_back_once():
    inst = _decoder("warm")
    assert _copy(inst, {"n000": True, "n001": True}, "shared") == pytest.approx(2 * MB / B)
    # n1 on PIM reads h, which the host wrote: h's dirty lines are written back first.
    assert _copy(inst, {"n000": False, "n001": True}, "shared") == pytest.approx(
        2 * MB / B + MB / B  # write-back of h, the caller's re-read of y
    )


@pytest.mark.unit
def test_shared_cost_is_bounded_by_the_host_cache():
    small = dataclasses.replace(SHARED, host_cache=0.5 * MB)
    inst = _decoder("cold", small)
    assert _copy(inst, {"n000": True, "n001": False}, "shared") == pytest.approx(0.5 * MB / B)


@pytest.mark.unit
def test_shared_value_pays_once_per_write_not_per_segment():
    # x (input, warm) read by n0, n2, n4 on PIM with host nests between that do not touch it.
    x = operand("arg0", MB, read=True, written=False, kind="argument", role="input")
    t = [operand(f"alloc{i}", 1024, read=False, written=True) for i in range(5)]
    nests = [nest(i, (x, t[i]) if i % 2 == 0 else (t[i],)) for i in range(5)]
    inst = _instance(SHARED, nests, "warm")
    y = {n.id: n.index % 2 == 0 for n in nests}
    assert _copy(inst, y, "shared") == pytest.approx(MB / B)
    assert _copy(inst, y, "exact") == pytest.approx(3 * MB / B)  # fetched by every segment


@pytest.mark.unit
def test_every_accounting_costs_at_most_eq8_at_the_same_bandwidths():
    for seed in range(30):
        inst = random_instance(seed, 8)
        rng = random.Random(seed)
        for _ in range(5):
            y = {n.id: rng.random() < 0.5 for n in inst.nests}
            bound = _copy(inst, y, "upper_bound")
            for copy in ("exact", "shared"):
                assert _copy(inst, y, copy) <= bound * (1 + 1e-12), (seed, copy)


# --- partitioned memory: closed forms ---------------------------------------------------


@pytest.mark.unit
def test_partitioned_weights_are_resident_and_loaded_once():
    spec = dataclasses.replace(PARTITIONED_SPEC, bank_capacity_per_core=None)
    inst = _decoder("warm", spec)
    up, down = spec.link_to_pim_bandwidth, spec.link_to_host_bandwidth
    h = evaluate_placement(inst, {"n000": True, "n001": False}, copy="partitioned")
    assert h.copy == pytest.approx(MB / up + 2 * MB / down)  # x in, h back; W resident
    assert h.load == pytest.approx(4 * MB / up)  # W, once at model load, not in the total
    assert h.total == pytest.approx(h.host + h.pim + h.copy + h.switch)
    exact = evaluate_placement(inst, {"n000": True, "n001": False}, copy="exact")
    assert exact.load == 0.0


@pytest.mark.solver
def test_partitioned_banks_too_small_keep_the_weight_that_saves_most():
    # Two weights read by PIM nests n0 and n2, a host nest between them; banks for one.
    w_big = operand("arg0", 3 * MB, read=True, written=False, kind="argument", role="weight")
    w_small = operand("arg1", 2 * MB, read=True, written=False, kind="argument", role="weight")
    outs = [operand(f"alloc{i}", 1024, read=False, written=True) for i in range(3)]
    nests = [nest(0, (w_big, outs[0])), nest(1, (outs[1],)), nest(2, (w_big, w_small, outs[2]))]
    spec = dataclasses.replace(PARTITIONED_SPEC, bank_capacity_per_core=3.5 * MB)
    inst = dataclasses.replace(
        _instance(spec, nests, "cold"), n_cores=1, t_pim={"n000": 1e-4, "n001": 1.0, "n002": 1e-4}
    )  # n001 stays on the host
    y = {"n000": True, "n001": False, "n002": True}
    best = solve(inst)
    want, _ = brute_force(inst, "partitioned", "loop")
    assert best.hybrid.total == pytest.approx(want, rel=1e-9)
    assert best.on_pim == y and best.resident == frozenset({"arg0"})  # saves two fetches
    assert best.hybrid.load == pytest.approx(3 * MB / spec.link_to_pim_bandwidth)
    with_both = verify_pim(inst, y, copy="partitioned", resident={"arg0", "arg1"})
    assert not with_both.ok and "more than the 3.5 MiB" in with_both.violations[0]


# --- the model against the brute force, the verifier against the oracle ------------------

SPECS = {
    "shared": [PimSpec(), SMALL_CACHE_SPEC],
    "partitioned": [PARTITIONED_SPEC],
    "exact": [PimSpec()],
    "upper_bound": [PimSpec()],
}


@pytest.mark.unit
@pytest.mark.parametrize("copy", COPY_MODES)
def test_verifier_matches_the_oracle(copy):
    rng = random.Random(7)
    for seed, spec in itertools.product(range(25), SPECS[copy]):
        inst = random_instance(seed, 7, spec)
        for cores in (1, 4, 32):
            at = inst.with_cores(cores)
            # partitioned: any set of resident weights the banks hold, given to both
            choices = resident_sets(at) if copy == "partitioned" else [None]
            for _ in range(4):
                y = [rng.random() < 0.5 for _ in at.nests]
                resident = rng.choice(choices)
                got = evaluate_placement(
                    at, {n.id: v for n, v in zip(at.nests, y, strict=True)}, copy=copy,
                    resident=resident,
                )  # fmt: skip
                want = hybrid_cost(at, y, copy, resident)
                assert got.total == pytest.approx(want, rel=1e-9), (seed, cores, resident)


@pytest.mark.unit
def test_the_verifiers_own_residents_fit_the_banks():
    for seed in range(25):
        inst = random_instance(seed, 7, PARTITIONED_SPEC)
        weights = {op.buffer: op.nbytes for n in inst.nests for op in n.operands
                   if op.buffer_role in ("weight", "constant")}  # fmt: skip
        for cores in (1, 4, 32):
            at = inst.with_cores(cores)
            y = {n.id: True for n in at.nests}
            h = evaluate_placement(at, y, copy="partitioned")
            capacity = PARTITIONED_SPEC.bank_capacity_per_core * cores
            assert h.load * PARTITIONED_SPEC.link_to_pim_bandwidth <= capacity * (1 + 1e-12)
            if sum(weights.values()) <= capacity:  # all fit: all resident, all loaded
                want = sum(weights.values()) / PARTITIONED_SPEC.link_to_pim_bandwidth
                assert h.load == pytest.approx(want)


@pytest.mark.solver
@pytest.mark.parametrize("copy", ["shared", "partitioned"])
@pytest.mark.parametrize("granularity", ["loop", "operator"])
def test_model_matches_brute_force(copy, granularity):
    for seed, spec in itertools.product(range(8), SPECS[copy]):
        inst = random_instance(100 + seed, 7, spec)
        for cores in (1, 2, 32):  # partitioned: 1-2 cores' banks hold some of the weights
            at = inst.with_cores(cores)
            placed = solve(at, copy=copy, granularity=granularity, rel_gap=0.0)
            want, _ = brute_force(at, copy, granularity)
            assert placed.verification is not None and placed.verification.ok
            assert placed.hybrid.total == pytest.approx(want, rel=1e-7), (seed, cores)
            assert placed.result.objective == pytest.approx(want, rel=1e-7)


# --- accounting choice and bad input ----------------------------------------------------


@pytest.mark.unit
def test_auto_is_the_presets_architecture_and_eq8_without_one():
    assert resolve_copy("auto", load_pim_hardware("pim-icelake").pim) == "shared"
    assert resolve_copy("auto", load_pim_hardware("pim-upmem").pim) == "partitioned"
    legacy = pim_spec_from_table(
        {k: v for k, v in PimSpec().to_file_units().items()
         if k not in ("memory", "host_cache_mib")}, "old.toml",
    )  # fmt: skip
    assert legacy.memory is None and resolve_copy("auto", legacy) == "upper_bound"
    with pytest.raises(PlacementError, match="needs the host-PIM link"):
        resolve_copy("partitioned", PimSpec())
    with pytest.raises(PlacementError, match="needs the host's cache size"):
        resolve_copy("shared", legacy)
    with pytest.raises(PlacementError, match="unknown copy accounting 'fast'"):
        resolve_copy("fast", PimSpec())


@pytest.mark.unit
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"memory": "hybrid"}, "'pim.memory' must be one of shared, partitioned"),
        ({"memory": "shared", "host_cache_mib": None}, "needs 'pim.host_cache_mib'"),
        ({"memory": "partitioned", "host_cache_mib": None}, "needs 'pim.link_to_pim_gbps'"),
        ({"link_to_pim_gbps": 5.0}, "'pim.link_to_pim_gbps' does not apply"),
        ({"host_cache_mib": -1.0}, "'pim.host_cache_mib' must be positive"),
    ],
)
def test_bad_memory_keys_are_one_line_errors(change, message):
    table = PimSpec().to_file_units()
    for key, value in change.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    with pytest.raises(PlacementError, match=message) as err:
        pim_spec_from_table(table, "hw.toml")
    assert str(err.value).startswith("hw.toml: ") and "\n" not in str(err.value)


@pytest.mark.solver
def test_a_model_is_solved_as_built_and_contradicting_options_are_refused():
    from placement.pim import build_model

    inst = random_instance(3, 6)
    model = build_model(inst, copy="exact")
    placed = solve(inst, model=model)
    assert placed.copy == "exact"
    with pytest.raises(PlacementError, match="copy='upper_bound' contradicts the model"):
        solve(inst, model=build_model(inst, copy="exact"), copy="upper_bound")
    with pytest.raises(PlacementError, match="granularity='operator' contradicts the model"):
        solve(inst, model=build_model(inst), granularity="operator")
