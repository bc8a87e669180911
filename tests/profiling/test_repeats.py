"""Repeated layers (placement.profiling.repeats): which nests the cache simulation runs and
counts, and whose counters the others take. The simulation itself is checked against a
full one in test_simulated.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from placement.nests import LoopNest, NestOperand
from placement.profiling.repeats import (
    CONTEXT,
    COUNT,
    MIN_LAYER_NESTS,
    SKIP,
    canonical_text,
    repeated_layers,
    simulation_plan,
)

LL = 1000  # bytes of the simulated last-level cache in these plans


def nest(index: int, nbytes: int = 10, trip_count: int = 1) -> LoopNest:
    op = NestOperand(f"alloc{index}", "alloc", (nbytes // 4,), "f32", nbytes, True, True)
    return LoopNest(f"n{index:03d}", index, "", "", "linalg.generic", 1, 1, trip_count, (op,))


def program(codes: list[str], nbytes: list[int] | None = None,
            trips: list[int] | None = None) -> SimpleNamespace:  # fmt: skip
    sizes = nbytes or [10] * len(codes)
    trips = trips or [1] * len(codes)
    return SimpleNamespace(nests=[nest(i, sizes[i], trips[i]) for i in range(len(codes))])


def layer(tag: str = "L") -> list[str]:
    return [f"{tag}{i}" for i in range(10)]


@pytest.mark.unit
def test_canonical_text_renumbers_names_and_keeps_constant_values():
    a = canonical_text("%58 = memref.load %alloc_59[%c0, %arg19] ; store %58, %alloc_72[%c64]")
    b = canonical_text("%7 = memref.load %alloc_3[%c0, %arg2] ; store %7, %alloc_9[%c64]")
    assert a == b == "%#0 = memref.load %alloc#0[%c0#0, %arg#0] ; store %#0, %alloc#1[%c64#0]"
    # The same buffer twice is not two buffers; another constant is another value.
    assert canonical_text("f(%alloc_1, %alloc_1)") != canonical_text("f(%alloc_1, %alloc_2)")
    assert canonical_text("f(%c64)") != canonical_text("f(%c128)")


@pytest.mark.unit
def test_a_stack_of_identical_layers_is_found_from_where_the_layers_agree():
    # The first layer reads the model's input (its first nest differs), the last writes
    # the output (its last nest differs): the layers agree from nest 3 to nest 50.
    first = ["in", *layer()[1:]]
    codes = ["e0", "e1", *first, *layer(), *layer(), *layer(), *layer()[:-1], "out", "head"]
    progs = program(codes)
    (found,) = repeated_layers(codes, progs.nests)
    assert (found.start, found.period, found.stop) == (3, 10, 51)
    assert list(found.copies) == list(range(23, 51))
    assert found.representative(23) == 13 and found.representative(50) == 20


@pytest.mark.unit
def test_small_repeats_two_layers_and_nests_in_loops_are_not_layers():
    small = ["a", "b", "c"] * 6  # a block of 3 < MIN_LAYER_NESTS
    assert MIN_LAYER_NESTS > 3 and repeated_layers(small, program(small).nests) == []
    two = ["x", *layer(), *layer(), "y"]  # two layers: nothing to copy from a second one
    assert repeated_layers(two, program(two).nests) == []
    three = [*layer(), *layer(), *layer()]
    assert repeated_layers(three, program(three, trips=[2] * 30).nests) == []
    (found,) = repeated_layers(three, program(three).nests)
    assert list(found.copies) == list(range(20, 30))


@pytest.mark.unit
def test_plan_counts_two_layers_skips_the_rest_but_the_context():
    codes = [*layer(), *layer(), *layer(), *layer(), *layer(), "norm", "head"]
    prog = program(codes, nbytes=[100] * 50 + [100, 100])
    plan = simulation_plan(prog, LL, warm=False, signatures=codes)
    # Nests 20-49 are copies; the context before the counted "norm" is 4 x LL = 4,000
    # bytes: 40 nests of 100 bytes, more than the 30 copies, so every nest is counted.
    assert plan.is_full and plan.summary() == "every nest simulated"
    prog = program(codes, nbytes=[1000] * 50 + [100, 100])
    plan = simulation_plan(prog, LL, warm=False, signatures=codes)
    # 4 copies (4,000 bytes) before "norm" are the context: nests 46-49 counted.
    assert plan.counted_run == tuple([COUNT] * 20 + [SKIP] * 26 + [COUNT] * 6)
    assert plan.skipped == [f"n{i:03d}" for i in range(20, 46)]
    assert plan.representative["n020"] == "n010" and plan.representative["n045"] == "n015"
    assert plan.representative["n046"] == "n046"  # counted itself
    assert plan.warm_up_run == (SKIP,) * 52  # cold: nothing runs before the flush
    record = plan.to_json()
    assert record["skipped_nests"] == 26 and record["counters_from"]["n033"] == "n013"
    assert record["layers"] == [{"first_nest": "n000", "last_nest": "n049",
                                 "nests_per_layer": 10, "layers": 5.0}]  # fmt: skip


@pytest.mark.unit
def test_warm_plans_run_the_warm_up_runs_as_the_counted_run_needs():
    codes = [*layer(), *layer(), *layer(), *layer(), "head"]
    full = simulation_plan(program(codes), LL, warm=True, representatives=False,
                           signatures=codes)  # fmt: skip
    assert full.is_full and full.warm_up_run == (CONTEXT,) * 41  # every nest, as before
    # Skipping: the last nests back to 4 x LL bytes run in the warm-up runs.
    prog = program(codes, nbytes=[1000] * 40 + [1500])
    plan = simulation_plan(prog, LL, warm=True, signatures=codes)
    assert plan.warm_up_run == (SKIP,) * 37 + (CONTEXT,) * 4
    # ... but not a last nest that alone touches more: it would be simulated whole for
    # the few lines it leaves in the cache.
    prog = program(codes, nbytes=[1000] * 40 + [50_000])
    plan = simulation_plan(prog, LL, warm=True, signatures=codes)
    assert plan.warm_up_run == (SKIP,) * 41
