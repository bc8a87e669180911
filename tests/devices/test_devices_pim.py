"""The PIM analytical device model: C1 bound, T_pim, Eq. 8, Eq. 9.

The PIM presets and hardware files: ``tests/hardware/test_hardware_pim.py``.
"""

import dataclasses
import random

import pytest
from pim_oracles import nest, operand

from placement.devices.pim import (
    HybridTime,
    hybrid_time,
    instructions,
    instructions_per_iteration,
    speedup,
    sync_crossover_work,
    t_copy,
    t_pim,
    t_pim_breakdown,
    t_pim_min,
)
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.nests import LoopNest

pytestmark = pytest.mark.unit

SPEC = PimSpec()


# --- C1 bound and T_pim -----------------------------------------------------------------


def test_c1_lower_bound_hand_computed():
    n = nest(0, (), n_iter=1024, n_total=1 << 20)
    assert t_pim_min(n, SPEC) == pytest.approx(2**20 / (32 * 1e9))  # 32.768 us
    assert t_pim_min(n, SPEC, 128) == pytest.approx(2**20 / (128 * 1e9))
    looped = nest(0, (), n_iter=1024, n_total=1 << 20, trip_count=4)
    assert t_pim_min(looped, SPEC) == pytest.approx(4 * 2**20 / 32e9)  # all invocations
    assert t_pim_min(n, dataclasses.replace(SPEC, issue_width=2)) == pytest.approx(2**20 / 64e9)


def test_t_pim_hand_computed():
    # 100 parallel x 10 inner iterations; one 4000 B operand read and written in place.
    n = nest(0, (operand("a", 4000, read=True, written=True),), n_iter=100, n_total=1000)
    b = t_pim_breakdown(n, SPEC)
    assert b.cores_used == 32
    assert b.compute == pytest.approx(4 * 10 * 4 / 1e9)  # ceil(100/32)=4 x 10 x 4 instr
    assert b.memory == pytest.approx(8000 / (32 * 8e9))
    assert b.sync == pytest.approx(32 * 100e-9)  # 100 ns per participating core
    assert t_pim(n, SPEC) == pytest.approx(160e-9 + 31.25e-9 + 3200e-9)
    # fewer parallel iterations than cores: only 8 cores work
    small = nest(0, (), n_iter=8, n_total=80)
    assert t_pim_breakdown(small, SPEC).cores_used == 8
    assert t_pim_breakdown(small, SPEC).compute == pytest.approx(10 * 4e-9)
    # per-nest instruction estimate
    assert t_pim_breakdown(n, SPEC, instr_per_iter=1).compute == pytest.approx(40e-9)
    with pytest.raises(PlacementError, match="at least I_min"):
        t_pim(n, SPEC, instr_per_iter=0.5)
    # trip count multiplies everything
    looped = dataclasses.replace(n, trip_count=3)
    assert t_pim(looped, SPEC) == pytest.approx(3 * t_pim(n, SPEC))


def test_t_pim_never_below_the_c1_bound():
    rng = random.Random(7)
    for _ in range(300):
        n_iter = rng.randint(1, 5000)
        n = nest(0, (operand("a", rng.randint(1, 10**6), read=True, written=False),),
                 n_iter=n_iter, n_total=n_iter * rng.randint(1, 50), trip_count=rng.randint(1, 4))
        for cores in (32, 64, 128, 7):
            assert t_pim(n, SPEC, cores) >= t_pim_min(n, SPEC, cores)


def _with_body(n: LoopNest, **ops: int) -> LoopNest:
    return dataclasses.replace(n, body_ops={k.replace("_", ".", 1): v for k, v in ops.items()})


def test_t_pim_from_body_ops_hand_computed():
    size = 4096
    rw = (operand("x", 4 * size, read=True, written=False),
          operand("y", 4 * size, read=False, written=True))  # fmt: skip
    base = nest(0, rw, n_iter=size)
    add = _with_body(base, memref_load=2 * size, arith_addf=size, memref_store=size)
    tanh = _with_body(base, memref_load=size, math_tanh=size, memref_store=size)
    silu = _with_body(base, memref_load=size, arith_negf=size, math_exp=size,
                      arith_addf=size, arith_divf=size, memref_store=size)  # fmt: skip
    assert instructions(add, SPEC) == 4 * size  # 2 loads + addf + store
    assert instructions(tanh, SPEC) == 22 * size  # load + 20 (tanh) + store
    assert instructions(silu, SPEC) == 28 * size  # load, negf, 20 exp, addf, 4 divf, store
    assert instructions_per_iteration(silu, SPEC) == 28
    # ceil(4096 / 32) = 128 elements on the busiest core, at 1 GHz single-issue.
    assert t_pim_breakdown(add, SPEC).compute == pytest.approx(128 * 4e-9)
    assert t_pim_breakdown(tanh, SPEC).compute == pytest.approx(128 * 22e-9)
    assert t_pim_breakdown(silu, SPEC).compute == pytest.approx(128 * 28e-9)
    # Memory and sync terms do not depend on the body.
    assert t_pim_breakdown(tanh, SPEC).memory == t_pim_breakdown(add, SPEC).memory
    assert t_pim(tanh, SPEC) > t_pim(add, SPEC)
    for cores in (32, 64, 128):
        assert t_pim(tanh, SPEC, cores) > t_pim(add, SPEC, cores)
    # Without body_ops: the fixed instr_per_iter, as before.
    assert instructions(base, SPEC) == 4 * size
    assert t_pim_breakdown(base, SPEC).compute == pytest.approx(128 * 4e-9)
    # An explicit instr_per_iter overrides the measured body.
    assert t_pim_breakdown(tanh, SPEC, instr_per_iter=2).compute == pytest.approx(128 * 2e-9)
    # The cost table is configurable.
    slow = dataclasses.replace(SPEC, transcendental_instr=100)
    assert t_pim_breakdown(tanh, slow).compute == pytest.approx(128 * 102e-9)
    assert t_pim_breakdown(add, slow).compute == t_pim_breakdown(add, SPEC).compute


def test_t_pim_from_body_ops_with_reductions_and_trips():
    # softmax-like row sum: 64 rows x 512, loads of x and of the accumulator, one
    # addf and one store per inner iteration, plus one store per row (the init).
    rows, cols = 64, 512
    n = nest(0, (operand("x", 4 * rows * cols, read=True, written=False),),
             n_iter=rows, n_total=rows * cols, trip_count=3)  # fmt: skip
    n = _with_body(n, memref_load=2 * rows * cols, arith_addf=rows * cols,
                   memref_store=rows * cols + rows)  # fmt: skip
    per_invocation = 4 * rows * cols + rows
    assert instructions(n, SPEC) == pytest.approx(3 * per_invocation)
    # 64 rows on 32 cores: 2 rows per core, each row costs per_invocation / 64.
    assert t_pim_breakdown(n, SPEC).compute == pytest.approx(3 * 2 * per_invocation / 64 / 1e9)
    assert t_pim(n, SPEC) >= t_pim_min(n, SPEC)


def test_t_pim_with_body_ops_never_below_the_c1_bound():
    rng = random.Random(11)
    kinds = ["memref.load", "memref.store", "arith.addf", "arith.divf", "math.tanh"]
    for _ in range(300):
        n_iter = rng.randint(1, 5000)
        n_total = n_iter * rng.randint(1, 50)
        # Counts may be tiny (bookkeeping-only bodies count nothing): I_min still applies.
        body = {k: rng.randint(0, 3 * n_total) for k in rng.sample(kinds, rng.randint(1, 5))}
        n = nest(0, (operand("a", rng.randint(1, 10**6), read=True, written=False),),
                 n_iter=n_iter, n_total=n_total, trip_count=rng.randint(1, 4))  # fmt: skip
        n = dataclasses.replace(n, body_ops=body)
        assert instructions_per_iteration(n, SPEC) >= SPEC.i_min
        for cores in (32, 64, 128, 7):
            assert t_pim(n, SPEC, cores) >= t_pim_min(n, SPEC, cores)
    empty = dataclasses.replace(nest(0, (), n_iter=100), body_ops={"memref.store": 0})
    assert instructions_per_iteration(empty, SPEC) == SPEC.i_min


def test_loop_nest_json_round_trips_body_ops_and_loads_old_json():
    n = nest(0, (operand("a", 4096, read=True, written=True),), n_iter=1024)
    measured = _with_body(n, memref_load=1024, math_tanh=1024, memref_store=1024)
    data = measured.to_json()
    assert data["body_ops"] == {"memref.load": 1024, "math.tanh": 1024, "memref.store": 1024}
    assert LoopNest.from_json(data) == measured
    old = {k: v for k, v in n.to_json().items() if k != "body_ops"}  # before the field
    loaded = LoopNest.from_json(old)
    assert loaded == n and loaded.body_ops == {}
    assert t_pim(loaded, SPEC) == t_pim(n, SPEC)
    assert hash(measured) == hash(n)  # still hashable; body_ops is compared, not hashed
    assert measured != n
    with pytest.raises(ValueError, match="body_ops"):
        LoopNest.from_json({**data, "body_ops": {"math.tanh": -1}})
    with pytest.raises(TypeError, match="body_ops"):
        LoopNest.from_json({**data, "body_ops": [1, 2]})


def test_sync_crossover_closed_form():
    # T(c) = W / c + c * t_sync while c divides N_iter; T(2c) > T(c) iff W < 2 c^2 t_sync.
    assert sync_crossover_work(SPEC, 64) == pytest.approx(2 * 64**2 * 100e-9)  # 819.2 us
    small = nest(0, (), n_iter=1 << 17)  # 131072 x 4 instructions: W = 524 us < 819 us
    assert t_pim(small, SPEC, 64) == pytest.approx(2048 * 4e-9 + 64 * 100e-9)  # 14.592 us
    assert t_pim(small, SPEC, 128) == pytest.approx(1024 * 4e-9 + 128 * 100e-9)  # 16.896 us
    assert t_pim(small, SPEC, 32) > t_pim(small, SPEC, 64)  # still gains from 32 to 64
    big = nest(0, (), n_iter=1 << 19)  # W = 2.1 ms: keeps speeding up
    assert t_pim(big, SPEC, 128) == pytest.approx(4096 * 4e-9 + 12.8e-6)
    assert t_pim(big, SPEC, 32) > t_pim(big, SPEC, 64) > t_pim(big, SPEC, 128)
    # Memory scales like compute, so W counts both; the sign of T(2c) - T(c) follows the
    # closed form for any single-core work W (c divides N_iter, no rounding).
    rng = random.Random(5)
    for _ in range(200):
        c = rng.choice((16, 32, 64))
        n_iter = 2 * c * rng.randint(1, 4000)
        nbytes = rng.randint(0, 1 << 22)
        n = nest(0, (operand("a", nbytes, read=True, written=False),), n_iter=n_iter)
        work = n_iter * 4 / 1e9 + nbytes / SPEC.bank_bandwidth_per_core
        slower = t_pim(n, SPEC, 2 * c) > t_pim(n, SPEC, c)
        if abs(work - sync_crossover_work(SPEC, c)) > 1e-12:
            assert slower == (work < sync_crossover_work(SPEC, c)), (c, n_iter, nbytes)


# --- Eq. 8 and Eq. 9 --------------------------------------------------------------------


def test_eq8_hand_computed():
    a = nest(0, (operand("x", 16384, read=True, written=False),
                 operand("y", 16384, read=False, written=True)))
    b = nest(1, (operand("y", 16384, read=True, written=True),), trip_count=2)
    spec = dataclasses.replace(SPEC, read_bandwidth=1e9, writeback_bandwidth=2e9)
    # fetch = 16384 + 2*16384, flush = 16384 + 2*16384
    assert t_copy([a, b], spec) == pytest.approx(49152 / 1e9 + 49152 / 2e9)
    assert t_copy([], spec) == 0.0


def test_eq9_hand_computed():
    h = hybrid_time(10e-6, 4e-6, 3e-6, 4, SPEC)
    assert h == HybridTime(host=10e-6, pim=4e-6, copy=3e-6, n_region=4, t_sw=2e-6)
    assert h.switch == pytest.approx(8e-6)
    assert h.total == pytest.approx(25e-6)
    assert speedup(50e-6, h.total) == pytest.approx(2.0)
    assert speedup(0.0, 0.0) == 1.0
