"""Lowering with torch-mlir, nest extraction and per-nest JIT timing, on real small models."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_builders import const, model, rotate_half_model, save, tensor

from placement.errors import PlacementError

pytest.importorskip("torch_mlir")

from placement.blocks import basic_blocks  # noqa: E402
from placement.profiling.mlir.loops import nest_loops  # noqa: E402
from placement.profiling.mlir.lower import (  # noqa: E402
    find_func,
    lower_mlir,
    lower_onnx,
    new_context,
)
from placement.profiling.nest_timing import time_nests  # noqa: E402

MiB = 1 << 20
LLAMA_EXPORT = Path(__file__).resolve().parents[2] / "examples" / "llama_layer_tiny.onnx"
# What a PyTorch export computes on sizes only: folded, never a nest.
SHAPE_OPS = {"Shape", "Gather", "Range", "ConstantOfShape", "Equal", "Where", "Expand", "Less",
             "Squeeze", "Unsqueeze", "Constant", "Identity"}  # fmt: skip


def add_model(n: int = 1024):
    node = helper.make_node("Add", ["A", "B"], ["C"], name="add0")
    return model([node], [tensor("A", [n, n]), tensor("B", [n, n])], [tensor("C", [n, n])])


def softmax_model(rows: int = 64, cols: int = 512):
    node = helper.make_node("Softmax", ["X"], ["Y"], name="sm", axis=-1)
    return model([node], [tensor("X", [rows, cols])], [tensor("Y", [rows, cols])])


def gemv_model(k: int = 256, n: int = 512):
    w = const("W", np.random.default_rng(1).standard_normal((k, n)))
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    return model([node], [tensor("X", [1, k])], [tensor("Y", [1, n])], [w])


def unary_model(op_type: str, n: int = 4096):
    node = helper.make_node(op_type, ["X"], ["Y"], name=op_type.lower())
    return model([node], [tensor("X", [n])], [tensor("Y", [n])])


def gelu_erf_model(n: int = 4096):
    """Erf GELU as in placement.networks.workloads: 0.5 x (1 + erf(x / sqrt 2))."""
    nodes = [
        helper.make_node("Mul", ["X", "inv_sqrt2"], ["t0"], name="g_scale"),
        helper.make_node("Erf", ["t0"], ["t1"], name="g_erf"),
        helper.make_node("Add", ["t1", "one"], ["t2"], name="g_add"),
        helper.make_node("Mul", ["X", "t2"], ["t3"], name="g_mul"),
        helper.make_node("Mul", ["t3", "half"], ["Y"], name="g_half"),
    ]
    consts = [const("inv_sqrt2", 0.70710678), const("one", 1.0), const("half", 0.5)]
    return model(nodes, [tensor("X", [n])], [tensor("Y", [n])], consts)


def layernorm_model(rows: int = 128, hidden: int = 768):
    scale = const("scale", np.random.default_rng(2).standard_normal(hidden))
    bias = const("bias", np.random.default_rng(3).standard_normal(hidden))
    node = helper.make_node("LayerNormalization", ["X", "scale", "bias"], ["Y"], name="ln")
    return model(
        [node], [tensor("X", [rows, hidden])], [tensor("Y", [rows, hidden])], [scale, bias]
    )


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mlir")
    return {
        "add": save(add_model(), directory, "add.onnx"),
        "softmax": save(softmax_model(), directory, "softmax.onnx"),
        "gemv": save(gemv_model(), directory, "gemv.onnx"),
        "layernorm": save(layernorm_model(), directory, "layernorm.onnx"),
    }


# --------------------------------------------------------------------------- nests


@pytest.mark.integration
def test_elementwise_add_is_one_nest(models):
    program = lower_onnx(models["add"])
    assert len(program.nests) == 1
    nest = program.nests[0]
    assert (nest.id, nest.index, nest.trip_count) == ("n000", 0, 1)
    assert nest.n_iter == nest.n_total == 1024 * 1024
    assert (nest.onnx_node, nest.onnx_op_type, nest.linalg_op) == ("add0", "Add", "linalg.generic")
    assert nest.fetch_bytes == 2 * 4 * MiB
    assert nest.flush_bytes == 4 * MiB
    assert {op.kind for op in nest.operands} == {"argument"}
    assert [a.role for a in program.args] == ["input", "input", "output"]
    assert [a.name for a in program.args] == ["A", "B", "C"]
    # Dynamic op counts of the body: 2 loads, 1 addf, 1 store per element, nothing else.
    n = 1024 * 1024
    assert nest.body_ops == {"memref.load": 2 * n, "arith.addf": n, "memref.store": n}


@pytest.mark.integration
def test_softmax_reductions_count_in_n_total_only(models):
    program = lower_onnx(models["softmax"])
    nests = program.nests
    assert len(nests) >= 4
    assert [n.id for n in nests] == [f"n{i:03d}" for i in range(len(nests))]
    assert {n.onnx_op_type for n in nests} == {"Softmax"}
    reductions = [n for n in nests if n.n_total > n.n_iter]
    assert reductions, "max and sum reductions must appear as inner scf.for loops"
    for nest in reductions:
        assert nest.n_iter == 64 and nest.n_total == 64 * 512
    assert any(n.n_iter == n.n_total == 64 * 512 for n in nests)  # exp / sub / div
    # A temporary (row max or sum) is one allocation, shared by the nests that use it.
    allocs = {op.buffer for n in nests for op in n.operands if op.kind == "alloc"}
    assert allocs and all(b.startswith("alloc") for b in allocs)
    # exp appears in exactly one nest, once per element; reductions count their inner loop.
    with_exp = [n for n in nests if "math.exp" in n.body_ops]
    assert len(with_exp) == 1 and with_exp[0].body_ops["math.exp"] == 64 * 512
    for nest in reductions:
        assert nest.body_ops["memref.load"] >= 64 * 512  # every inner iteration loads
    for nest in nests:
        assert nest.body_ops and all(v > 0 for v in nest.body_ops.values())
        assert not any(k.startswith(("scf.", "affine.")) or k == "arith.constant"
                       for k in nest.body_ops)  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize("name", ["softmax", "gemv", "layernorm"])
def test_basic_blocks_are_those_convert_scf_to_cf_makes(models, name):
    """Every nest's blocks, in layout order and op for op, against the real lowering to cf."""
    from torch_mlir import ir
    from torch_mlir.passmanager import PassManager

    program = lower_onnx(models[name])
    assert "affine." not in program.module_text  # lower-affine would expand ops
    loops = nest_loops(program)
    with new_context():
        module = ir.Module.parse(program.module_text)
        PassManager.parse("builtin.module(convert-scf-to-cf)").run(module.operation)
        func_op = find_func(module, program.func_name)
        cf = [len(list(block.operations)) for block in func_op.regions[0].blocks]
    pos = 1  # the function's entry block, then per nest its blocks and the block after it
    for nest in program.nests:
        nb = basic_blocks(nest.id, loops[nest.id])
        assert cf[pos : pos + len(nb.blocks)] == [b.ops for b in nb.blocks], nest.id
        pos += len(nb.blocks) + 1
        # one body (the innermost segment) running once per innermost iteration
        assert len(nb.body) == 1 and nb.blocks[nb.body[0]].executions == nest.n_total
    assert pos == len(cf)


@pytest.mark.integration
def test_gemv_weight_is_an_argument(models):
    program = lower_onnx(models["gemv"])
    assert [(a.name, a.role) for a in program.args] == [
        ("X", "input"), ("W", "weight"), ("Y", "output"),
    ]  # fmt: skip
    assert "memref.get_global" not in program.module_text  # not embedded as a constant
    matmul = [n for n in program.nests if n.n_total == 256 * 512]
    assert len(matmul) == 1
    nest = matmul[0]
    assert nest.n_iter == 512 and nest.linalg_op == "linalg.matmul"
    weight = [op for op in nest.operands if op.shape == (256, 512)]
    assert len(weight) == 1 and weight[0].kind == "argument" and weight[0].read
    assert not weight[0].written and weight[0].nbytes == 256 * 512 * 4
    out = [op for op in nest.operands if op.shape == (1, 512)]
    assert out[0].read and out[0].written  # accumulated in place: one buffer, both flags
    assert program.weights["W"].shape == (256, 512)


@pytest.mark.integration
@pytest.mark.parametrize("external", [False, True])
def test_weights_stay_in_their_files_until_the_program_runs(tmp_path, external):
    # The lowering reads no weight: a weight argument is where its bytes are (the model
    # file, or its external data), read into an aligned array when the program runs.
    from placement.profiling.mlir.lower import WeightFile
    from placement.profiling.nest_timing import program_arguments

    model = gemv_model()
    want = onnx.numpy_helper.to_array(model.graph.initializer[0])
    path = save(model, tmp_path, "gemv.onnx", external_data="gemv.data" if external else None)
    program = lower_onnx(path)
    weight = program.weights["W"]
    assert isinstance(weight, WeightFile) and weight.shape == (256, 512)
    assert weight.path.name == ("gemv.data" if external else "gemv.onnx")
    args = program_arguments(program, seed=0)
    got = args[[a.name for a in program.args].index("W")]
    assert got.ctypes.data % 64 == 0 and got.flags.writeable
    np.testing.assert_array_equal(got, want)


@pytest.mark.integration
def test_small_initializers_stay_constants(tmp_path):
    path = save(gemv_model(k=4, n=8), tmp_path)  # 128 bytes, below the default threshold
    program = lower_onnx(path)
    assert [a.role for a in program.args] == ["input", "output"]
    assert all(op.kind in ("argument", "global") for n in program.nests for op in n.operands)


@pytest.mark.integration
def test_enclosing_loop_trip_count(tmp_path):
    axes = const("axes", [0], dtype=np.int64)
    node = helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)
    path = save(model([node], [tensor("X", [64, 512])], [tensor("Y", [512])], [axes]), tmp_path)
    nests = lower_onnx(path).nests
    inner = [n for n in nests if n.trip_count > 1]
    assert len(inner) == 1
    assert (inner[0].trip_count, inner[0].n_iter, inner[0].n_total) == (64, 512, 512)
    # Per invocation, like n_total: one load + add + store of the accumulator per element.
    assert inner[0].body_ops == {"memref.load": 1024, "arith.addf": 512, "memref.store": 512}
    assert inner[0].onnx_node == "ReduceSum_0"


@pytest.mark.integration
def test_layernorm_and_fusion_reduce_nests(models):
    plain = lower_onnx(models["layernorm"])
    fused = lower_onnx(models["layernorm"], fuse_elementwise=True)
    assert len(fused.nests) < len(plain.nests)
    assert {n.onnx_op_type for n in plain.nests} == {"LayerNormalization"}
    for program in (plain, fused):
        assert sum(n.n_total for n in program.nests) >= 128 * 768


@pytest.mark.parametrize("op_type, math_op", [("Tanh", "math.tanh"), ("Erf", "math.erf")])
@pytest.mark.integration
def test_transcendental_body_ops(tmp_path, op_type, math_op):
    nests = lower_onnx(save(unary_model(op_type), tmp_path)).nests
    assert len(nests) == 1
    assert nests[0].body_ops == {"memref.load": 4096, math_op: 4096, "memref.store": 4096}


@pytest.mark.integration
def test_gelu_erf_body_ops(tmp_path):
    nests = lower_onnx(save(gelu_erf_model(), tmp_path)).nests
    erf = [n for n in nests if "math.erf" in n.body_ops]
    assert len(erf) == 1 and erf[0].body_ops["math.erf"] == 4096
    assert erf[0].onnx_node == "g_erf"
    # The other nests are streaming: one arith op per element, no math.*.
    for nest in nests:
        if nest is not erf[0]:
            assert not any(k.startswith("math.") for k in nest.body_ops)
            assert sum(v for k, v in nest.body_ops.items() if k.startswith("arith.")) == 4096


SCF_SIBLINGS = """
func.func @f(%a: memref<4x8xf32>, %b: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %x = memref.load %b[%i] : memref<4xf32>
    %k = arith.addi %i, %c1 : index
    %k64 = arith.index_cast %k : index to i64
    scf.for %j = %c0 to %c8 step %c1 {
      %y = memref.load %a[%i, %j] : memref<4x8xf32>
      %z = arith.addf %x, %y : f32
      memref.store %z, %a[%i, %j] : memref<4x8xf32>
    }
    scf.for %p = %c0 to %c2 step %c1 {
      scf.for %q = %c0 to %c3 step %c1 {
        %e = math.exp %x : f32
      }
    }
    memref.store %x, %b[%i] : memref<4xf32>
    scf.reduce
  }
  return
}
"""


@pytest.mark.unit
def test_body_ops_of_nested_and_sibling_loops():
    from placement.profiling.mlir import extract
    from placement.profiling.mlir import lower as lowering

    with lowering.new_context():
        module = lowering.ir.Module.parse(SCF_SIBLINGS)
        func = lowering.find_func(module, "f")
        [(nest, trips)] = list(extract.outermost_parallels(func))
        assert trips == 1
        n_total = extract.parallel_trips(nest) * extract.inner_work(nest)
        ops = extract.count_body_ops(nest)
    assert n_total == 4 * (8 + 2 * 3)
    # 4 x (1 load + 1 store) + 4 x 8 x (load, addf, store) + 4 x 2 x 3 exp; the index
    # arithmetic (addi on index, index_cast), constants and scf.reduce are not counted.
    assert ops == {"memref.load": 4 + 32, "arith.addf": 32, "memref.store": 4 + 32,
                   "math.exp": 24}  # fmt: skip


@pytest.mark.integration
def test_body_ops_of_scf_if_counts_the_heavier_branch(tmp_path):
    path = tmp_path / "masked.mlir"
    path.write_text(MASKED_EXP)
    nests = {n.onnx_node: n for n in lower_mlir(path).nests}
    masked = nests["masked"]
    assert (masked.n_iter, masked.n_total) == (8, 128)
    assert masked.body_ops == {
        "memref.load": 256, "arith.cmpi": 128, "scf.if": 128, "math.exp": 128,
        "arith.mulf": 128, "arith.addf": 128, "memref.store": 128,
    }  # fmt: skip


MASKED_EXP = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @main(%a: tensor<8x16xf32> loc("a")) -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%a : tensor<8x16xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %le = arith.cmpi ule, %j, %i : index
    %v = scf.if %le -> f32 {
      %t = math.exp %x : f32
      %u = arith.mulf %t, %x : f32
      scf.yield %u : f32
    } else {
      scf.yield %zero : f32
    }
    %r = arith.addf %v, %o : f32
    linalg.yield %r : f32
  } -> tensor<8xf32> loc("masked")
  return %sum : tensor<8xf32>
}
"""


@pytest.mark.integration
def test_nests_round_trip_json(models):
    from placement.nests import LoopNest

    for nest in lower_onnx(models["softmax"]).nests:
        assert nest.body_ops
        assert LoopNest.from_json(nest.to_json()) == nest


# --------------------------------------------------------------------------- JIT timing


@pytest.mark.parametrize("name", ["add", "softmax", "gemv", "layernorm"])
@pytest.mark.integration
def test_jit_outputs_match_onnxruntime(models, name):
    program = lower_onnx(models[name])
    timing = time_nests(program, runs=3, warmup=1, check_against_onnx=models[name])
    assert set(timing.t_cpu) == {n.id for n in program.nests}
    assert all(t >= 0 for t in timing.t_cpu.values())
    assert timing.max_abs_error is not None and timing.max_abs_error < 1e-3
    # Medians per nest need not sum below the median run; allow for noise.
    assert sum(timing.t_cpu.values()) <= 1.5 * timing.total_seconds
    assert timing.metadata["marker_pair_ns"] > 0
    assert timing.runs == 3


@pytest.mark.integration
def test_nest_in_loop_is_timed_per_invocation(tmp_path):
    axes = const("axes", [0], dtype=np.int64)
    node = helper.make_node("ReduceSum", ["X", "axes"], ["Y"], keepdims=0)
    path = save(model([node], [tensor("X", [64, 512])], [tensor("Y", [512])], [axes]), tmp_path)
    program = lower_onnx(path)
    timing = time_nests(program, runs=2, warmup=0, check_against_onnx=path)
    calls = timing.metadata["invocations_per_run"]
    assert [calls[n.id] for n in program.nests] == [n.trip_count for n in program.nests]


@pytest.mark.integration
def test_progress_and_fused_program(models):
    program = lower_onnx(models["softmax"], fuse_elementwise=True)
    seen = []
    time_nests(
        program, runs=2, warmup=1, check_against_onnx=models["softmax"],
        progress=lambda done, total: seen.append((done, total)),
    )  # fmt: skip
    assert seen == [(1, 2), (2, 2)]


@pytest.mark.integration
def test_wrong_reference_is_reported(models):
    program = lower_onnx(models["softmax"])
    other = models["softmax"].with_name("other.onnx")
    node = helper.make_node("Relu", ["X"], ["Y"])
    relu = model([node], [tensor("X", [64, 512])], [tensor("Y", [64, 512])])
    save(relu, other.parent, other.name)
    with pytest.raises(PlacementError, match="differs from ONNX Runtime"):
        time_nests(program, runs=1, warmup=0, check_against_onnx=other)


# --------------------------------------------------------------------------- errors


@pytest.mark.integration
def test_unsupported_operator_is_named(tmp_path):
    node = helper.make_node("LpPool", ["X"], ["Y"], kernel_shape=[2, 2], p=3)
    path = save(model([node], [tensor("X", [1, 1, 4, 4])], [tensor("Y", [1, 1, 3, 3])]), tmp_path)
    with pytest.raises(PlacementError, match="LpPool") as info:
        lower_onnx(path)
    assert "\n" not in str(info.value)


@pytest.mark.unit
def test_dynamic_input_shape_names_the_input(tmp_path):
    node = helper.make_node("Relu", ["X"], ["Y"])
    path = save(model([node], [tensor("X", ["batch", 8])], [tensor("Y", ["batch", 8])]), tmp_path)
    with pytest.raises(PlacementError, match="input 'X' has a dynamic shape"):
        lower_onnx(path)


@pytest.mark.unit
def test_data_dependent_shape_is_rejected_before_torch_mlir(tmp_path):
    # torch-mlir crashes the process on such graphs, so this must be caught up front.
    node = helper.make_node("NonZero", ["X"], ["Y"], name="nz")
    out = helper.make_tensor_value_info("Y", TensorProto.INT64, [1, None])
    path = save(model([node], [tensor("X", [16])], [out]), tmp_path)
    with pytest.raises(PlacementError, match="'nz' \\(NonZero\\)"):
        lower_onnx(path)


@pytest.mark.unit
def test_slice_end_from_an_input_is_still_rejected(tmp_path):
    # Folding resolves sizes computed from static shapes, not sizes read from data.
    nodes = [helper.make_node("Slice", ["X", "zero", "end", "axes"], ["Y"], name="slice")]
    inits = [const("zero", [0], np.int64), const("axes", [0], np.int64)]
    inputs = [tensor("X", [16]), tensor("end", [1], TensorProto.INT64)]
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None])
    path = save(model(nodes, inputs, [out], inits), tmp_path)
    with pytest.raises(PlacementError, match="'slice' \\(Slice\\).*dynamic or data-dependent"):
        lower_onnx(path)


@pytest.mark.unit
def test_missing_file(tmp_path):
    with pytest.raises(PlacementError, match="no such file"):
        lower_onnx(tmp_path / "absent.onnx")
    with pytest.raises(PlacementError, match="no such file"):
        lower_mlir(tmp_path / "absent.mlir")


# --------------------------------------------------------------------------- .mlir input

LINALG_ADD_SCALE = """
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @main(%a: tensor<32x64xf32> loc("a"), %b: tensor<32x64xf32> loc("b")) -> tensor<32xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %s = linalg.generic {indexing_maps = [#map, #map, #map],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<32x64xf32>, tensor<32x64xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<32x64xf32> loc("add")
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e2 : tensor<32xf32>) -> tensor<32xf32>
  %sum = linalg.generic {indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}
      ins(%s : tensor<32x64xf32>) outs(%init : tensor<32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %o : f32
    linalg.yield %r : f32
  } -> tensor<32xf32> loc("rowsum")
  return %sum : tensor<32xf32>
}
"""


@pytest.mark.integration
def test_lower_mlir_file(tmp_path):
    path = tmp_path / "prog.mlir"
    path.write_text(LINALG_ADD_SCALE)
    program = lower_mlir(path)
    assert program.func_name == "main" and program.source_kind == "mlir"
    assert [(a.name, a.role, a.shape) for a in program.args] == [
        ("a", "input", (32, 64)), ("b", "input", (32, 64)), ("result0", "output", (32,)),
    ]  # fmt: skip
    by_node = {n.onnx_node: n for n in program.nests}
    assert by_node["add"].n_iter == by_node["add"].n_total == 32 * 64
    assert by_node["rowsum"].n_iter == 32 and by_node["rowsum"].n_total == 32 * 64
    for name in ("add", "rowsum"):  # the reduction's accumulator is loaded and stored
        assert by_node[name].body_ops == {
            "memref.load": 2 * 2048, "arith.addf": 2048, "memref.store": 2048,
        }  # fmt: skip
    assert all(n.onnx_op_type == "" for n in program.nests)
    # The sum of a + b is a temporary allocation, written by one nest, read by the next.
    temp = {op.buffer for op in by_node["add"].operands if op.written}
    rowsum = by_node["rowsum"].operands
    assert temp == {op.buffer for op in rowsum if op.read and op.kind == "alloc"}
    timing = time_nests(program, runs=2, warmup=1)
    assert set(timing.t_cpu) == {n.id for n in program.nests}
    assert timing.max_abs_error is None


@pytest.mark.unit
def test_malformed_mlir_gives_first_error_line(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(
        "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = arith.addf %a, %b : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n}\n"
    )
    expected = r"not valid MLIR \(line 2:\d+: use of undeclared"
    with pytest.raises(PlacementError, match=expected) as info:
        lower_mlir(path)
    assert "\n" not in str(info.value)


@pytest.mark.unit
def test_dynamic_mlir_argument(tmp_path):
    path = tmp_path / "dyn.mlir"
    path.write_text(
        "func.func @f(%a: tensor<?xf32>) -> tensor<?xf32> {\n  return %a : tensor<?xf32>\n}\n"
    )
    with pytest.raises(PlacementError, match="argument 'arg0' has a dynamic shape"):
        lower_mlir(path)


@pytest.mark.integration
def test_n_total_is_product_of_loop_extents(models):
    program = lower_onnx(models["gemv"])
    assert max(n.n_total for n in program.nests) == math.prod((256, 512))


# --------------------------------------------------------------------------- GPT-2 layer


def gpt2_layer_model(seq: int = 128, hidden: int = 768, heads: int = 12, mlp: int = 3072):
    """One GPT-2-small decoder layer (pre-LN, causal attention, erf GELU MLP)."""
    rng = np.random.default_rng(0)
    head = hidden // heads

    def w(name, *shape):
        return const(name, rng.standard_normal(shape) * 0.02)

    def i64(name, values):
        return const(name, values, dtype=np.int64)

    mask = np.triu(np.full((seq, seq), -1e4, dtype=np.float32), k=1)
    inits = [
        w("ln1_s", hidden), w("ln1_b", hidden), w("w_qkv", hidden, 3 * hidden),
        w("b_qkv", 3 * hidden), w("w_o", hidden, hidden), w("b_o", hidden),
        w("ln2_s", hidden), w("ln2_b", hidden), w("w_fc", hidden, mlp), w("b_fc", mlp),
        w("w_proj", mlp, hidden), w("b_proj", hidden), const("mask", mask),
        const("scale", 1.0 / np.sqrt(head)), const("half", 0.5), const("one", 1.0),
        const("rsqrt2", 1.0 / np.sqrt(2.0)), i64("split", [hidden] * 3),
        i64("heads_shape", [seq, heads, head]), i64("flat_shape", [seq, hidden]),
    ]  # fmt: skip
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln1_s", "ln1_b"], ["h1"], name="ln1", axis=-1),
        n("MatMul", ["h1", "w_qkv"], ["qkv0"], name="qkv"),
        n("Add", ["qkv0", "b_qkv"], ["qkv1"], name="qkv_bias"),
        n("Split", ["qkv1", "split"], ["q0", "k0", "v0"], name="split", axis=-1),
        n("Reshape", ["q0", "heads_shape"], ["q1"], name="q_reshape"),
        n("Reshape", ["k0", "heads_shape"], ["k1"], name="k_reshape"),
        n("Reshape", ["v0", "heads_shape"], ["v1"], name="v_reshape"),
        n("Transpose", ["q1"], ["q"], name="q_t", perm=[1, 0, 2]),
        n("Transpose", ["k1"], ["kt"], name="k_t", perm=[1, 2, 0]),
        n("Transpose", ["v1"], ["v"], name="v_t", perm=[1, 0, 2]),
        n("MatMul", ["q", "kt"], ["s0"], name="qk"),
        n("Mul", ["s0", "scale"], ["s1"], name="qk_scale"),
        n("Add", ["s1", "mask"], ["s2"], name="causal_mask"),
        n("Softmax", ["s2"], ["p"], name="softmax", axis=-1),
        n("MatMul", ["p", "v"], ["a0"], name="pv"),
        n("Transpose", ["a0"], ["a1"], name="a_t", perm=[1, 0, 2]),
        n("Reshape", ["a1", "flat_shape"], ["a2"], name="a_reshape"),
        n("MatMul", ["a2", "w_o"], ["o0"], name="out_proj"),
        n("Add", ["o0", "b_o"], ["o1"], name="out_bias"),
        n("Add", ["x", "o1"], ["r1"], name="residual1"),
        n("LayerNormalization", ["r1", "ln2_s", "ln2_b"], ["h2"], name="ln2", axis=-1),
        n("MatMul", ["h2", "w_fc"], ["f0"], name="fc"),
        n("Add", ["f0", "b_fc"], ["f1"], name="fc_bias"),
        n("Mul", ["f1", "rsqrt2"], ["g0"], name="gelu_scale"),
        n("Erf", ["g0"], ["g1"], name="gelu_erf"),
        n("Add", ["g1", "one"], ["g2"], name="gelu_add"),
        n("Mul", ["f1", "g2"], ["g3"], name="gelu_mul"),
        n("Mul", ["g3", "half"], ["g4"], name="gelu_half"),
        n("MatMul", ["g4", "w_proj"], ["m0"], name="proj"),
        n("Add", ["m0", "b_proj"], ["m1"], name="proj_bias"),
        n("Add", ["r1", "m1"], ["y"], name="residual2"),
    ]
    return model(nodes, [tensor("x", [seq, hidden])], [tensor("y", [seq, hidden])], inits)


@pytest.mark.slow
@pytest.mark.parametrize("seq", [1, 128])
def test_gpt2_layer_lowers_and_matches_onnxruntime(tmp_path, seq):
    path = save(gpt2_layer_model(seq=seq), tmp_path)
    program = lower_onnx(path)
    assert "w_fc" in program.weights and "memref.get_global" not in program.module_text
    fc = [n for n in program.nests if n.onnx_node == "fc" and n.linalg_op == "linalg.matmul"]
    assert len(fc) == 1 and fc[0].n_total == seq * 768 * 3072
    timing = time_nests(program, runs=2, warmup=1, check_against_onnx=path)
    assert timing.max_abs_error < 1e-3


# --------------------------------------------------------------------------- PyTorch exports


@pytest.mark.integration
def test_slice_chain_of_static_shapes_lowers(tmp_path):
    # Shape -> Gather -> Div -> Unsqueeze -> Slice and Shape -> Gather -> Mul -> Concat ->
    # Reshape: torch-mlir needs these as constants, and the folding makes them so.
    path = save(rotate_half_model((1, 2, 8, 16)), tmp_path)
    program = lower_onnx(path)
    kept = {"relu", "slice1", "slice2", "neg", "cat", "transpose", "merge"}
    assert {n.onnx_node for n in program.nests} - {""} <= kept
    assert {"relu", "neg"} <= {n.onnx_node for n in program.nests}
    timing = time_nests(program, runs=1, warmup=0, check_against_onnx=path)
    assert timing.max_abs_error == 0.0  # only data movement and a negation


@pytest.mark.integration
def test_pytorch_llama_export_lowers_and_matches_onnxruntime():
    """examples/llama_layer_tiny.onnx: torch.onnx.export of a LLaMA decoder layer
    (examples/export_llama_layer.py), before this folding rejected as dynamic."""
    program = lower_onnx(LLAMA_EXPORT)
    graph = onnx.load(str(LLAMA_EXPORT)).graph
    op_of = {n.name: n.op_type for n in graph.node}
    origins = {n.onnx_node for n in program.nests} - {""}
    assert origins <= set(op_of)  # the nests keep the export's node names
    assert not {op_of[name] for name in origins} & SHAPE_OPS
    for layer in ("q_proj", "k_proj", "v_proj", "o_proj"):
        assert f"/self_attn/{layer}/MatMul" in origins
    # rotate_half: its Slices are views read by the negation and the concatenation.
    assert {"/self_attn/Neg", "/self_attn/Concat_3", "/self_attn/Softmax", "/Add_1"} <= origins
    # The projections' weights are arguments, not constants of the program, in the layout
    # of the batch-1 product that reads them (weight_layout.py): no per-run copy nest.
    assert {a.shape for a in program.weight_args} >= {(1, 64, 64), (1, 64, 172), (1, 172, 64)}
    weights = {f"arg{i}" for i, a in enumerate(program.args) if a.role == "weight"}
    for nest in program.nests:
        if any(op.buffer in weights and op.nbytes >= 64 * 64 * 4 for op in nest.operands):
            assert nest.linalg_op == "linalg.batch_matmul"
    timing = time_nests(program, runs=1, warmup=0, check_against_onnx=LLAMA_EXPORT)
    assert timing.max_abs_error < 1e-4
