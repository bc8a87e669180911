"""The analytical T_pim never beats the device: a property test on random nests for every
PIM preset (``placement/hardware/presets/pim-*.toml``).

The floors are recomputed here from the nest and the preset's constants, not from the
model's terms: bytes touched over the aggregate bank bandwidth of the cores used, and
instructions (the preset's cost table over the body, or ``instr_per_iter`` per innermost
iteration) over cores x clock x issue width.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.devices.pim import t_pim_breakdown, t_pim_min
from placement.hardware.pim import PimSpec, load_pim_hardware, pim_preset_names
from placement.nests import LoopNest, NestOperand

pytestmark = pytest.mark.unit

PRESETS = pim_preset_names()
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i8": 1, "i32": 4, "i64": 8}
# Every kind of the cost table: loads/stores and integer ops, float add/compare/convert,
# multiply, fma, integer and float division, transcendentals, bit-level math.
BODY_OPS = (
    "memref.load", "memref.store", "arith.addi", "arith.muli", "arith.select", "arith.negf",
    "arith.addf", "arith.subf", "arith.cmpf", "arith.maximumf", "arith.sitofp", "arith.truncf",
    "math.floor", "arith.mulf", "math.fma", "arith.divsi", "arith.remui", "arith.floordivsi",
    "arith.divf", "arith.remf", "math.exp", "math.tanh", "math.erf", "math.log", "math.sqrt",
    "math.rsqrt", "math.powf", "math.absf", "math.copysign",
)  # fmt: skip
# The model's terms are sums and quotients of doubles: the floors may differ from them in
# the last bits (a few ulp), never more.
ROUNDING = 1e-12


@st.composite
def nests(draw: st.DrawFn) -> LoopNest:
    """A loop nest as the lowering makes them: parallel and reduction extents, operands whose
    shapes are made of those extents (any element type, read and/or written), a trip count,
    and a measured body (op counts per invocation, multiples of the iteration counts) or
    none (priced with ``instr_per_iter``)."""
    extent = st.one_of(st.integers(1, 16), st.integers(1, 4096))
    parallel = draw(st.lists(extent, min_size=1, max_size=3))
    reduction = draw(st.lists(extent, min_size=0, max_size=2))
    n_iter = math.prod(parallel)
    n_total = n_iter * math.prod(reduction)
    dims = parallel + reduction
    operands = []
    for k in range(draw(st.integers(0, 4))):
        shape = tuple(draw(st.lists(st.sampled_from(dims), min_size=0, max_size=3)))
        elem = draw(st.sampled_from(sorted(ELEMENT_BYTES)))
        read, written = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
        nbytes = math.prod(shape) * ELEMENT_BYTES[elem]
        operands.append(NestOperand(f"b{k}", "alloc", shape, elem, nbytes, read, written))
    body: dict[str, int] = {}
    if draw(st.booleans()):
        for name in draw(st.lists(st.sampled_from(BODY_OPS), min_size=1, max_size=8,
                                  unique=True)):  # fmt: skip
            body[name] = n_total * draw(st.integers(0, 3)) + n_iter * draw(st.integers(0, 2))
    trips = draw(st.one_of(st.integers(0, 4), st.sampled_from([7, 64, 1000, 12345])))
    return LoopNest(
        id="n000", index=0, onnx_node="", onnx_op_type="", linalg_op="linalg.generic",
        n_iter=n_iter, n_total=n_total, trip_count=trips, operands=tuple(operands),
        body_ops=body,
    )  # fmt: skip


def floors(nest: LoopNest, spec: PimSpec, cores: int) -> tuple[float, float]:
    """(bytes floor, instructions floor) of ``nest`` on ``cores`` cores, over all
    invocations, on the cores that have work."""
    used = min(cores, nest.n_iter)
    touched = nest.trip_count * sum(op.nbytes * (op.read + op.written) for op in nest.operands)
    if nest.body_ops:
        count = sum(n * spec.op_instructions(op) for op, n in nest.body_ops.items())
    else:
        count = spec.instr_per_iter * nest.n_total
    instructions = count * nest.trip_count
    return (
        touched / (used * spec.bank_bandwidth_per_core),
        instructions / (used * spec.clock * spec.issue_width),
    )


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(nest=nests(), cores=st.one_of(st.integers(1, 4096), st.sampled_from([32, 64, 128])))
def test_t_pim_never_below_the_physical_floor(preset, nest, cores):
    spec = load_pim_hardware(preset).pim
    t = t_pim_breakdown(nest, spec, cores)
    memory_floor, compute_floor = floors(nest, spec, cores)
    assert t.memory >= memory_floor * (1 - ROUNDING)
    assert t.compute >= compute_floor * (1 - ROUNDING)
    assert t.sync >= 0.0
    assert t.total >= max(memory_floor, compute_floor) * (1 - ROUNDING)
    # with all the device's cores (the floor as usually stated) and C1's bound
    every_core = (memory_floor, compute_floor)
    if nest.n_iter > 0:
        scale = min(cores, nest.n_iter) / cores
        every_core = (memory_floor * scale, compute_floor * scale)
    assert t.total >= max(every_core) * (1 - ROUNDING)
    assert t.total >= t_pim_min(nest, spec, cores) * (1 - ROUNDING)
    assert math.isfinite(t.total)


def test_every_pim_preset_is_property_tested():
    assert {"pim-icelake", "pim-upmem"} <= set(PRESETS)
