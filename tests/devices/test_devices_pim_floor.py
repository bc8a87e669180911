"""The analytical T_pim never beats the device: a property test on random nests for every
PIM preset (``placement/hardware/presets/pim-*.toml``), and the new ``pim-hbm`` preset's
T_pim checked by hand and against its published peak.

The floors are recomputed here from the nest and the preset's constants, not from the
model's terms: bytes touched over the aggregate bank bandwidth of the cores used, and
instructions (the preset's cost table over the body, or ``instr_per_iter`` per innermost
iteration) over cores x clock x issue width.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.devices.pim import t_pim, t_pim_breakdown, t_pim_min
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
    assert {"pim-icelake", "pim-upmem", "pim-hbm"} <= set(PRESETS)


# --- pim-hbm: one nest by hand, and a LLaMA-7B-sized GEMV against the device's peak -------

HBM = load_pim_hardware("pim-hbm").pim
#: Aquabolt-XL's PIM-side peak: 128 PCUs x 16 FP16 lanes x 2 B x 0.3 GHz = 1,228.8 GB/s
#: (the preset's sources); 1.2 TFLOPS = 128 x 16 x 2 FLOP (MAC) x 0.3 GHz.
HBM_INTERNAL_BANDWIDTH = 128 * 16 * 2 * 0.3e9
HBM_MAC_RATE = 128 * 16 * 0.3e9


def _operand(name: str, shape: tuple[int, ...], read: bool, written: bool) -> NestOperand:
    return NestOperand(name, "argument", shape, "f32", 4 * math.prod(shape), read, written)


def test_hbm_preset_constants_give_its_published_peak():
    assert (HBM.cores, HBM.issue_width) == (128, 16)
    assert HBM.clock == pytest.approx(0.3e9)
    assert HBM.cores * HBM.bank_bandwidth_per_core == pytest.approx(HBM_INTERNAL_BANDWIDTH)
    flops = HBM.cores * HBM.issue_width * HBM.clock * 2  # a MAC is two FLOP
    assert flops == pytest.approx(1.2288e12)  # ISSCC 2021 25.4: "1.2TFLOPS"
    assert HBM.memory == "shared"


def test_hbm_t_pim_closed_form_elementwise_add():
    # y = a + b over 2^20 fp32 elements (one parallel loop), lowered body: 2 loads, 1 addf,
    # 1 store per element. By hand, on pim-hbm's 128 PCUs at 300 MHz, 16 lanes:
    n = 1 << 20
    nest = LoopNest(
        id="n000", index=0, onnx_node="add", onnx_op_type="Add", linalg_op="linalg.generic",
        n_iter=n, n_total=n, trip_count=1,
        operands=(_operand("a", (n,), True, False), _operand("b", (n,), True, False),
                  _operand("y", (n,), False, True)),
        body_ops={"memref.load": 2 * n, "arith.addf": n, "memref.store": n},
    )  # fmt: skip
    # compute: 8192 elements per PCU x 4 instructions / (16 x 0.3e9) = 6.827 us
    compute = 8192 * 4 / (16 * 0.3e9)
    # memory: 3 x 4 MiB over 128 x 9.6 GB/s = 10.24 us
    memory = 3 * 4 * n / (128 * 9.6e9)
    # sync: one partial-result read per PCU, 4 ns each
    sync = 128 * 4e-9
    b = t_pim_breakdown(nest, HBM)
    assert b.cores_used == 128
    assert b.compute == pytest.approx(compute) and b.compute == pytest.approx(6.8267e-6, rel=1e-4)
    assert b.memory == pytest.approx(memory) and b.memory == pytest.approx(10.24e-6, rel=1e-9)
    assert b.sync == pytest.approx(sync)
    assert t_pim(nest, HBM) == pytest.approx(compute + memory + sync)


def test_hbm_gemv_of_llama_7b_size_against_the_device_peak():
    # y[1 x 11008] = x[1 x 4096] W[4096 x 11008], fp32 (LLaMA-7B's FFN), as the lowering
    # emits a MatMul (the workload "gemv" at 512 gives exactly this body): 11008 parallel
    # outputs, each a reduction over 4096 with loads of x, W and the accumulator, a mulf, an
    # addf and a store per step.
    rows, cols = 11008, 4096
    steps = rows * cols
    nest = LoopNest(
        id="n001", index=1, onnx_node="gemv", onnx_op_type="MatMul", linalg_op="linalg.matmul",
        n_iter=rows, n_total=steps, trip_count=1,
        operands=(_operand("W", (rows, cols), True, False), _operand("x", (cols,), True, False),
                  _operand("y", (rows,), True, True)),
        body_ops={"memref.load": 3 * steps, "arith.mulf": steps, "arith.addf": steps,
                  "memref.store": steps},
    )  # fmt: skip
    touched = 4 * (rows * cols + cols + 2 * rows)
    peak = touched / HBM_INTERNAL_BANDWIDTH  # 146.9 us: the bandwidth floor at 128 PCUs
    b = t_pim_breakdown(nest, HBM)
    assert b.memory == pytest.approx(peak)
    # compute: ceil(11008 / 128) = 86 rows x 4096 steps x 6 instructions / (16 x 0.3 GHz)
    assert b.compute == pytest.approx(86 * 4096 * 6 / (16 * 0.3e9))  # 440.3 us
    assert b.total == pytest.approx(peak + 86 * 4096 * 6 / 4.8e9 + 128 * 4e-9)
    # Above the peak (never below): 4.0x the bandwidth floor, 8.0x the floor of one MAC per
    # lane and cycle (73.4 us). The cost table charges 6 lane-slots per multiply-accumulate
    # (3 loads, mulf, addf, store) where the PCU's MAC takes 1, and the in-order terms add.
    assert b.total / peak == pytest.approx(4.0, abs=0.05)
    assert b.total / (steps / HBM_MAC_RATE) == pytest.approx(8.0, abs=0.05)
