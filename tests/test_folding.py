"""Constant folding of shape subgraphs and its size bound (placement.folding)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx_builders import const, model, rotate_half_model, tensor

from placement.folding import fold_and_infer, static_shape, strip_folded
from placement.onnxfile import node_names

MiB = 1 << 20
SHAPE_NODES = {
    "shape", "gather_dim", "div", "unsqueeze_half", "shape_t", "gather_bsz", "gather_seq",
    "gather_heads", "gather_hd", "mul", "unsqueeze_bsz", "unsqueeze_seq", "unsqueeze_width",
    "concat",
}  # fmt: skip
DATA_NODES = {"relu", "slice1", "slice2", "neg", "cat", "transpose", "merge"}


def folded_names(proto: onnx.ModelProto, state) -> set[str]:
    names = node_names(proto.graph)
    return {names[i] for i in state.folded}


@pytest.mark.parametrize("max_bytes", [None, MiB])
@pytest.mark.unit
def test_llama_style_slice_chain_folds(max_bytes):
    proto = rotate_half_model((1, 2, 8, 16))
    state = fold_and_infer(proto, Path("m.onnx"), max_bytes=max_bytes)
    assert folded_names(proto, state) == SHAPE_NODES
    # The Slice bounds and the Reshape target are the values the sizes give.
    assert state.value("half_1d").tolist() == [8]
    assert state.value("target").tolist() == [1, 8, 32]
    assert static_shape(state.types["x1"]) == (1, 2, 8, 8)
    assert static_shape(state.types["x2"]) == (1, 2, 8, 8)
    assert static_shape(state.types["Y"]) == (1, 8, 32)


@pytest.mark.unit
def test_strip_folded_keeps_the_data_nodes_and_their_names():
    proto = rotate_half_model()
    state = fold_and_infer(proto, Path("m.onnx"), max_bytes=MiB)
    strip_folded(proto, state)
    assert {n.name for n in proto.graph.node} == DATA_NODES
    # Only the values the remaining nodes read: no intermediate of the folded chains.
    original = {i.name for i in rotate_half_model().graph.initializer}
    added = {i.name for i in proto.graph.initializer} - original
    assert added == {"half_1d", "target"}
    onnx.checker.check_model(proto, full_check=True)
    # The stripped model computes what the original does (ONNX's reference evaluator).
    from onnx.reference import ReferenceEvaluator

    x = np.random.default_rng(0).standard_normal((1, 2, 8, 16)).astype(np.float32)
    (got,) = ReferenceEvaluator(proto).run(None, {"X": x})
    r = np.maximum(x, 0)
    want = np.concatenate([-r[..., 8:], r[..., :8]], axis=-1).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(got, want.reshape(1, 8, 32))


def big_constant_model() -> onnx.ModelProto:
    """A 1 MiB weight read by Transpose and by Shape (whose Gather ends a Range of 512
    positions), a ConstantOfShape of 4 MiB; each feeds an operator on the input."""
    nodes = [
        helper.make_node("Transpose", ["W"], ["w_t"], name="w_t"),
        helper.make_node("MatMul", ["X", "w_t"], ["Y"], name="mm"),
        helper.make_node(
            "ConstantOfShape", ["big_shape"], ["zeros"], name="zeros",
            value=numpy_helper.from_array(np.zeros(1, np.float32)),
        ),  # fmt: skip
        helper.make_node("Add", ["X", "zeros"], ["Z"], name="add"),
        helper.make_node("Shape", ["W"], ["w_shape"], name="w_shape"),
        helper.make_node("Gather", ["w_shape", "i0"], ["n"], name="w_rows", axis=0),
        helper.make_node("Range", ["r0", "n", "r1"], ["positions"], name="range"),
        helper.make_node("Cast", ["positions"], ["pos_f"], name="cast", to=1),
        helper.make_node("Add", ["X", "pos_f"], ["P"], name="add_pos"),
    ]
    inits = [
        const("W", np.ones((512, 512))), const("big_shape", [2048, 512], np.int64),
        const("i0", 0, np.int64), const("r0", 0, np.int64), const("r1", 1, np.int64),
    ]  # fmt: skip
    outs = [tensor("Y", (2048, 512)), tensor("Z", (2048, 512)), tensor("P", (2048, 512))]
    return model(nodes, [tensor("X", (2048, 512))], outs, inits)


@pytest.mark.unit
def test_size_bound_leaves_large_constants_as_operators():
    proto = big_constant_model()
    before = proto.SerializeToString()
    state = fold_and_infer(proto, Path("m.onnx"), max_bytes=64 * 1024)
    # Shape reads only the weight's type; Range (4 KiB) and Cast (2 KiB) are small.
    assert folded_names(proto, state) == {"w_shape", "w_rows", "range", "cast"}
    # Transpose(W) (1 MiB) and ConstantOfShape (4 MiB) stay operators, with static shapes.
    assert "w_t" not in state.values and "zeros" not in state.values
    assert static_shape(state.types["w_t"]) == (512, 512)
    assert static_shape(state.types["zeros"]) == (2048, 512)
    assert proto.SerializeToString() == before  # folding never edits the model it reads
    unbounded = fold_and_infer(proto, Path("m.onnx"))
    assert folded_names(proto, unbounded) == {"w_shape", "w_rows", "range", "cast", "w_t", "zeros"}


@pytest.mark.unit
def test_inference_sees_weights_it_does_not_copy():
    # A weight over the stub size is declared to inference, not copied into it: the shapes
    # after it are still inferred, and the ones that depend on a folded value too.
    proto = big_constant_model()
    state = fold_and_infer(proto, Path("m.onnx"), max_bytes=64 * 1024)
    assert static_shape(state.types["Y"]) == (2048, 512)
    assert static_shape(state.types["positions"]) == (512,)  # Range of the folded Shape(W)
    assert static_shape(state.types["P"]) == (2048, 512)
    assert state.value("positions").tolist() == list(range(512))
