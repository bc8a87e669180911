"""ONNX ingestion: Eq. 1 inputs, constant folding, edges of the example, one-line errors."""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx_builders import (
    conv_model,
    gemm_model,
    matmul_model,
    model,
    qdq_conv_model,
    qlinear_conv_model,
    result,
    save,
    shape_reshape_model,
    tensor,
)

from placement.errors import PlacementError
from placement.graph import CimMapping, OpGraph, load_graph
from placement.io import file_sha256

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FP32 = EXAMPLES / "resnet_tiny.onnx"
INT8 = EXAMPLES / "resnet_tiny_int8.onnx"


def load(proto: onnx.ModelProto, tmp_path: Path) -> OpGraph:
    return load_graph(save(proto, tmp_path))


def only_op(graph: OpGraph):
    (op,) = graph.operators.values()
    return op


# --- Eq. 1 inputs (M_v, N_v, N_mvm,v), computed by hand ----------------------


@pytest.mark.unit
def test_conv_64_to_128_3x3_at_56x56(tmp_path: Path) -> None:
    op = only_op(load(conv_model(64, 128, (3, 3), (56, 56)), tmp_path))
    assert op.cim == CimMapping(rows=128, cols=64 * 9, n_mvm=56 * 56, groups=1, weight="W")
    assert op.n_in == 64 * 56 * 56  # weight and bias are constants, not loads
    assert op.n_out == 128 * 56 * 56
    assert [c.name for c in op.constants] == ["W", "B"]


@pytest.mark.unit
def test_depthwise_conv_is_one_block_diagonal_matrix(tmp_path: Path) -> None:
    graph = load(conv_model(32, 32, (3, 3), (10, 10), batch=2, stride=2, groups=32), tmp_path)
    # 32 blocks of 1 x 9: rows = C_out, cols = C_in/g * 3 * 3 * g, 2 images of 5x5 outputs.
    assert only_op(graph).cim == CimMapping(
        rows=32, cols=288, n_mvm=2 * 5 * 5, groups=32, weight="W"
    )


@pytest.mark.unit
def test_conv1d_uses_products_of_kernel_and_output_dims(tmp_path: Path) -> None:
    op = only_op(load(conv_model(4, 8, (5,), (20,), pad=0), tmp_path))
    assert op.cim == CimMapping(rows=8, cols=4 * 5, n_mvm=16, groups=1, weight="W")


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "trans_a", "trans_b"),
    [((4, 16), (16, 10), 0, 0), ((4, 16), (10, 16), 0, 1), ((16, 4), (10, 16), 1, 1)],
)
@pytest.mark.unit
def test_gemm_respects_transposes(tmp_path: Path, a_shape, b_shape, trans_a, trans_b) -> None:
    graph = load(gemm_model(a_shape, b_shape, trans_a=trans_a, trans_b=trans_b), tmp_path)
    assert only_op(graph).cim == CimMapping(rows=10, cols=16, n_mvm=4, groups=1, weight="B")


@pytest.mark.unit
def test_matmul_constant_right_operand(tmp_path: Path) -> None:
    op = only_op(load(matmul_model((2, 3, 16), (16, 8)), tmp_path))
    assert op.cim == CimMapping(rows=8, cols=16, n_mvm=2 * 3, groups=1, weight="W")


@pytest.mark.unit
def test_matmul_constant_left_operand(tmp_path: Path) -> None:
    op = only_op(load(matmul_model((2, 16, 5), (8, 16), weight_left=True), tmp_path))
    # W (8, 16) @ X (2, 16, 5): each of the 2*5 columns of X is one input vector.
    assert op.cim == CimMapping(rows=8, cols=16, n_mvm=10, groups=1, weight="W")


@pytest.mark.unit
def test_matmul_with_3d_constant_is_not_cim_capable(tmp_path: Path) -> None:
    graph = load(matmul_model((2, 3, 16), (2, 16, 8)), tmp_path)
    assert only_op(graph).cim is None
    assert graph.cim_capable() == []


@pytest.mark.unit
def test_qlinear_conv_weight_is_input_3(tmp_path: Path) -> None:
    op = only_op(load(qlinear_conv_model(8, 16, 3, 6), tmp_path))
    assert op.cim == CimMapping(rows=16, cols=72, n_mvm=36, groups=1, weight="W")
    assert [t.elem_type for t in op.inputs] == ["UINT8"]
    assert op.inputs[0].nbytes == 8 * 6 * 6


@pytest.mark.unit
def test_qdq_conv_sees_folded_constant_weight(tmp_path: Path) -> None:
    graph = load(qdq_conv_model(8, 16, 3, 6), tmp_path)
    assert list(graph.operators) == ["q_x", "dq_x", "conv"]
    assert graph.folded == ("dq_w",)
    assert graph.folded_consumers == {"dq_w": "conv"}
    conv = graph.operators["conv"]
    assert conv.cim == CimMapping(rows=16, cols=72, n_mvm=36, groups=1, weight="W_dq")
    assert [c.name for c in conv.constants] == ["W_dq"]
    assert [c.elem_type for c in conv.constants] == ["FLOAT"]


# --- constant folding -------------------------------------------------------


@pytest.mark.unit
def test_shape_gather_concat_feeding_reshape_is_folded(tmp_path: Path) -> None:
    graph = load(shape_reshape_model(), tmp_path)
    assert list(graph.operators) == ["relu", "reshape"]
    assert graph.folded == ("idx_const", "shape", "gather", "concat")
    assert set(graph.folded_consumers.values()) == {"reshape"}
    reshape = graph.operators["reshape"]
    assert reshape.outputs[0].shape == (2, 12)
    assert [c.name for c in reshape.constants] == ["target"]
    assert graph.edges == [("relu", "reshape", ("R",))]


@pytest.mark.unit
def test_shape_of_a_shape_that_only_folding_makes_static(tmp_path: Path) -> None:
    # ONNX data propagation stops at Sqrt, so Y1's shape (and Shape(Y1)) is only
    # known after a first round of folding: this needs the fold/infer loop.
    h = helper.make_node
    nodes = [
        h("Relu", ["X"], ["R"], name="relu"),
        h("Shape", ["R"], ["s"], name="shape1"),
        h("Cast", ["s"], ["sf"], to=TensorProto.FLOAT, name="cast1"),
        h("Sqrt", ["sf"], ["sq"], name="sqrt"),
        h("Mul", ["sq", "sq"], ["m"], name="mul"),
        h("Cast", ["m"], ["si"], to=TensorProto.INT64, name="cast2"),
        h("ReduceProd", ["si"], ["p"], keepdims=1, name="prod"),
        h("Reshape", ["R", "p"], ["Y1"], name="reshape1"),
        h("Shape", ["Y1"], ["s2"], name="shape2"),
        h("Concat", ["one", "s2"], ["t2"], axis=0, name="concat"),
        h("Reshape", ["Y1", "t2"], ["Y"], name="reshape2"),
    ]
    one = onnx.numpy_helper.from_array(np.array([1], dtype=np.int64), "one")
    graph = load(model(nodes, [tensor("X", (2, 3, 4))], [result("Y", 2)], [one]), tmp_path)
    assert list(graph.operators) == ["relu", "reshape1", "reshape2"]
    assert graph.operators["reshape2"].outputs[0].shape == (1, 12)
    assert graph.folded_consumers["shape2"] == "reshape2"


@pytest.mark.unit
def test_constant_nodes_are_not_operators(tmp_path: Path) -> None:
    scale = helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])
    nodes = [
        helper.make_node("Constant", [], ["c"], name="const", value=scale),
        helper.make_node("Mul", ["X", "c"], ["Y"], name="mul"),
    ]
    graph = load(model(nodes, [tensor("X", (3,))], [result("Y", 1)]), tmp_path)
    assert list(graph.operators) == ["mul"]
    assert graph.folded == ("const",)
    assert graph.operators["mul"].n_in == 3
    assert graph.operators["mul"].index == 1


@pytest.mark.unit
def test_repeated_input_counts_once_and_empty_outputs_are_ignored(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Add", ["X", "X"], ["Y"]),
        helper.make_node("Dropout", ["Y"], ["Z", ""]),
    ]
    graph = load(model(nodes, [tensor("X", (3,))], [result("Z", 1)]), tmp_path)
    assert list(graph.operators) == ["Add_0", "Dropout_1"]  # names from onnxfile.node_names
    assert graph.operators["Add_0"].n_in == 3
    assert graph.operators["Dropout_1"].n_out == 3


# --- the bundled examples -----------------------------------------------------


@pytest.fixture(scope="module")
def fp32() -> OpGraph:
    return load_graph(FP32)


@pytest.fixture(scope="module")
def int8() -> OpGraph:
    return load_graph(INT8)


@pytest.mark.unit
def test_example_operators(fp32: OpGraph) -> None:
    assert fp32.name == "resnet_tiny"
    assert fp32.sha256 == file_sha256(FP32)
    assert len(fp32.operators) == 23
    assert fp32.folded == ()
    convs = [n for n, op in fp32.operators.items() if op.op_type == "Conv"]
    assert len(convs) == 9
    assert fp32.cim_capable() == [*convs, "fc"]
    assert fp32.operators["fc"].cim == CimMapping(
        rows=10, cols=64, n_mvm=1, groups=1, weight="fc.weight"
    )
    assert fp32.operators["b3b_dwconv"].cim.groups == 64


@pytest.mark.unit
def test_example_edges_join_branches(fp32: OpGraph) -> None:
    producers = {
        dst: sorted(src for src, d, _ in fp32.edges if d == dst) for _, dst, _ in fp32.edges
    }
    assert producers["b1_add"] == ["b1_conv2", "stem_relu"]
    assert producers["b2_add"] == ["b2_conv2", "b2_skip"]
    assert producers["b3_concat"] == ["b3a_relu", "b3b_relu2"]
    assert fp32.graph.edges["b2_skip", "b2_add"]["tensors"] == ("b2_skip.out",)
    assert sorted(fp32.graph.edges) == sorted((s, d) for s, d, _ in fp32.edges)
    # Operators are in topological order.
    position = {name: i for i, name in enumerate(fp32.operators)}
    assert all(position[s] < position[d] for s, d, _ in fp32.edges)


@pytest.mark.unit
def test_example_has_parallel_conv_branches(fp32: OpGraph) -> None:
    def parallel(a: str, b: str) -> bool:
        return not nx.has_path(fp32.graph, a, b) and not nx.has_path(fp32.graph, b, a)

    assert parallel("b2_conv1", "b2_skip")
    assert parallel("b3a_conv", "b3b_dwconv")


@pytest.mark.unit
def test_int8_example_convs_are_cim_capable_qlinear_convs(fp32: OpGraph, int8: OpGraph) -> None:
    op_types = [op.op_type for op in int8.operators.values()]
    assert "Conv" not in op_types
    qconvs = [op for op in int8.operators.values() if op.op_type == "QLinearConv"]
    assert len(qconvs) == 9
    assert all(op.cim is not None for op in qconvs)
    assert int8.operators["fc_quant"].op_type == "QGemm"
    assert int8.operators["fc_quant"].domain == "com.microsoft"
    # Same matrices as the fp32 model, now on uint8 activations.
    for op in qconvs:
        fp = fp32.operators[op.name.removesuffix("_quant")].cim
        assert (op.cim.rows, op.cim.cols, op.cim.n_mvm, op.cim.groups) == (
            fp.rows, fp.cols, fp.n_mvm, fp.groups,
        )  # fmt: skip
        assert [t.elem_type for t in op.inputs] == ["UINT8"]


@pytest.mark.unit
def test_int8_example_contrib_ops_have_static_shapes(int8: OpGraph) -> None:
    # ONNX has no shape functions for com.microsoft ops; ONNX Runtime's fill the gap.
    assert int8.operators["b1_add_quant"].outputs[0].shape == (1, 48, 32, 32)
    assert int8.operators["b3_concat_quant"].outputs[0].shape == (1, 64, 16, 16)
    assert int8.operators["flatten"].outputs[0].shape == (1, 64)


@pytest.mark.integration
def test_example_script_is_reproducible(tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import make_example
    finally:
        sys.path.remove(str(EXAMPLES))
    make_example.main(["--out-dir", str(tmp_path)])
    for name in ("resnet_tiny.onnx", "resnet_tiny_int8.onnx"):
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), name
        assert (tmp_path / name).stat().st_size < 1_000_000


# --- one-line errors ------------------------------------------------------------


def error_of(path: Path) -> str:
    with pytest.raises(PlacementError) as info:
        load_graph(path)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.unit
def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in error_of(tmp_path / "absent.onnx")


@pytest.mark.unit
def test_garbage_bytes(tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x00\xffnot an onnx model\x13\x37" * 10)
    message = error_of(path)
    assert str(path) in message and "not a readable ONNX model" in message


@pytest.mark.unit
def test_dynamic_input_shape_names_tensor_operator_and_fix(tmp_path: Path) -> None:
    proto = conv_model(3, 8, (3, 3), (8, 8))
    proto.graph.input[0].CopyFrom(tensor("X", ("N", 3, 8, 8)))
    proto.graph.node[0].name = ""
    message = error_of(save(proto, tmp_path))
    assert "tensor 'X' of operator 'Conv_0' has dynamic shape (N, 3, 8, 8)" in message
    assert "make_dynamic_shape_fixed" in message and "--dim_param N" in message


@pytest.mark.unit
def test_data_dependent_shape_is_reported(tmp_path: Path) -> None:
    nodes = [helper.make_node("NonZero", ["X"], ["Y"], name="nz")]
    proto = model(nodes, [tensor("X", (3,))], [result("Y", 2, TensorProto.INT64)])
    message = error_of(save(proto, tmp_path))
    assert "tensor 'Y' of operator 'nz' has dynamic shape (1, ?)" in message
    assert "depends on data" in message


@pytest.mark.unit
def test_empty_graph(tmp_path: Path) -> None:
    proto = model([], [tensor("X", (1,))], [tensor("X", (1,))])
    assert "the graph has no nodes" in error_of(save(proto, tmp_path))


@pytest.mark.unit
def test_graph_of_constants_only(tmp_path: Path) -> None:
    value = helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value),
        helper.make_node("Neg", ["c"], ["Y"]),
    ]
    proto = model(nodes, [], [result("Y", 1)])
    assert "no operators left after constant folding" in error_of(save(proto, tmp_path))


@pytest.mark.unit
def test_unknown_domain(tmp_path: Path) -> None:
    node = helper.make_node("Foo", ["X"], ["Y"], name="foo", domain="my.domain")
    proto = model([node], [tensor("X", (1,))], [result("Y", 1)], opsets={"my.domain": 1})
    message = error_of(save(proto, tmp_path))
    assert "node 'foo' (Foo) is in unknown domain 'my.domain'" in message


@pytest.mark.unit
def test_unknown_default_domain_op_type(tmp_path: Path) -> None:
    node = helper.make_node("Frobnicate", ["X"], ["Y"])
    proto = model([node], [tensor("X", (1,))], [result("Y", 1)])
    assert "node 'Frobnicate_0' has op_type 'Frobnicate', unknown to ONNX" in error_of(
        save(proto, tmp_path)
    )


@pytest.mark.unit
def test_cyclic_graph(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Relu", ["Z"], ["Y"], name="a"),
        helper.make_node("Relu", ["Y"], ["Z"], name="b"),
    ]
    proto = model(nodes, [tensor("X", (1,))], [result("Y", 1)])
    message = error_of(save(proto, tmp_path))
    assert "node 'a' reads tensor 'Z' before node 'b' produces it" in message
    assert "cyclic" in message


@pytest.mark.unit
def test_checker_failure_names_the_file(tmp_path: Path) -> None:
    # Conv without its required weight input: caught by the ONNX checker.
    node = helper.make_node("Conv", ["X"], ["Y"], name="conv")
    path = save(model([node], [tensor("X", (1, 3, 4, 4))], [result("Y", 4)]), tmp_path)
    message = error_of(path)
    assert str(path) in message and "invalid ONNX model" in message


@pytest.mark.unit
def test_unread_dynamic_graph_input_is_reported(tmp_path: Path) -> None:
    # Profiling feeds every graph input, so an unread one must be static too.
    nodes = [helper.make_node("Relu", ["X"], ["Y"], name="relu")]
    inputs = [tensor("X", (2,)), tensor("unused", ("batch", 4))]
    message = error_of(save(model(nodes, inputs, [result("Y", 1)]), tmp_path))
    assert (
        "tensor 'unused' (a graph input no operator reads) has dynamic shape (batch, 4)" in message
    )
