"""Small ONNX models for tests, built with onnx.helper (no files needed beyond tmp_path).

Each ``*_model`` function returns an unsaved ``onnx.ModelProto``; :func:`save`
writes it. Weights are zeros unless values matter: ingestion only looks at
shapes, and zeros keep the models tiny to build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8

Shape = Sequence[int | str] | None


def tensor(name: str, shape: Shape, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    """A graph input/output of this shape; strings are symbolic dims, None unknown ones."""
    return helper.make_tensor_value_info(name, elem, shape)


def result(name: str, rank: int, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    """A graph output of known rank whose dims inference fills in (the checker wants a shape)."""
    return helper.make_tensor_value_info(name, elem, [None] * rank)


def const(
    name: str, value: np.ndarray | Sequence | float | int, dtype=np.float32
) -> onnx.TensorProto:
    """An initializer."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto] = (),
    opsets: dict[str, int] | None = None,
    name: str = "test",
) -> onnx.ModelProto:
    """A model importing the default domain at OPSET plus ``opsets`` (domain -> version)."""
    imports = [helper.make_opsetid("", OPSET)]
    imports += [helper.make_opsetid(d, v) for d, v in (opsets or {}).items()]
    graph = helper.make_graph(list(nodes), name, list(inputs), list(outputs), list(initializers))
    return helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION)


def save(
    proto: onnx.ModelProto,
    directory: Path,
    filename: str = "model.onnx",
    external_data: str | None = None,
) -> Path:
    """Write ``proto``; with ``external_data``, tensors of 1 KiB or more go to that file."""
    path = Path(directory) / filename
    if external_data:
        onnx.save(proto, str(path), save_as_external_data=True, location=external_data,
                  size_threshold=1024)  # fmt: skip
    else:
        onnx.save(proto, str(path))
    return path


def save_all(
    builders: dict[str, Callable[[], onnx.ModelProto]], directory: Path
) -> dict[str, Path]:
    """Build and save each model as ``<name>.onnx``; name -> path."""
    return {name: save(build(), directory, f"{name}.onnx") for name, build in builders.items()}


def conv_model(
    c_in: int,
    c_out: int,
    kernel: Sequence[int],
    spatial_in: Sequence[int],
    *,
    batch: int = 1,
    stride: int = 1,
    pad: int | None = None,
    groups: int = 1,
) -> onnx.ModelProto:
    """X -> Conv(W, B) -> Y, any number of spatial dims; pad defaults to 'same' for odd kernels."""
    pad = kernel[0] // 2 if pad is None else pad
    w = const("W", np.zeros((c_out, c_in // groups, *kernel)))
    b = const("B", np.zeros(c_out))
    node = helper.make_node(
        "Conv", ["X", "W", "B"], ["Y"], name="conv", kernel_shape=list(kernel),
        pads=[pad] * (2 * len(kernel)), strides=[stride] * len(kernel), group=groups,
    )  # fmt: skip
    return model(
        [node], [tensor("X", (batch, c_in, *spatial_in))], [result("Y", 2 + len(kernel))], [w, b]
    )


def gemm_model(
    a_shape: Sequence[int], b_shape: Sequence[int], *, trans_a: int = 0, trans_b: int = 0
) -> onnx.ModelProto:
    """A (activation) x B (constant) + C via Gemm."""
    n = b_shape[0] if trans_b else b_shape[1]
    node = helper.make_node(
        "Gemm", ["A", "B", "C"], ["Y"], name="gemm", transA=trans_a, transB=trans_b
    )
    inits = [const("B", np.zeros(b_shape)), const("C", np.zeros(n))]
    return model([node], [tensor("A", a_shape)], [result("Y", 2)], inits)


def matmul_model(
    activation_shape: Sequence[int], weight_shape: Sequence[int], *, weight_left: bool = False
) -> onnx.ModelProto:
    """MatMul of an activation X and a constant W; ``weight_left`` computes W @ X."""
    operands = ["W", "X"] if weight_left else ["X", "W"]
    node = helper.make_node("MatMul", operands, ["Y"], name="matmul")
    inits = [const("W", np.zeros(weight_shape))]
    rank = max(len(activation_shape), len(weight_shape))
    return model([node], [tensor("X", activation_shape)], [result("Y", rank)], inits)


def qlinear_conv_model(c_in: int, c_out: int, k: int, hw: int) -> onnx.ModelProto:
    """QOperator int8 conv: uint8 activations, int8 weight at input index 3."""
    inits = [
        const("x_scale", 0.1), const("x_zp", 128, np.uint8),
        const("W", np.zeros((c_out, c_in, k, k)), np.int8),
        const("w_scale", 0.01), const("w_zp", 0, np.int8),
        const("y_scale", 0.2), const("y_zp", 128, np.uint8),
    ]  # fmt: skip
    node = helper.make_node(
        "QLinearConv",
        ["X", "x_scale", "x_zp", "W", "w_scale", "w_zp", "y_scale", "y_zp"],
        ["Y"], name="qconv", kernel_shape=[k, k], pads=[k // 2] * 4,
    )  # fmt: skip
    x = tensor("X", (1, c_in, hw, hw), TensorProto.UINT8)
    return model([node], [x], [result("Y", 4, TensorProto.UINT8)], inits)


def qdq_conv_model(c_in: int, c_out: int, k: int, hw: int) -> onnx.ModelProto:
    """QDQ conv: Q/DQ on the activation, DequantizeLinear of a constant int8 weight."""
    inits = [
        const("x_scale", 0.1), const("x_zp", 128, np.uint8),
        const("W_q", np.zeros((c_out, c_in, k, k)), np.int8),
        const("w_scale", 0.01), const("w_zp", 0, np.int8),
    ]  # fmt: skip
    nodes = [
        helper.make_node("QuantizeLinear", ["X", "x_scale", "x_zp"], ["X_q"], name="q_x"),
        helper.make_node("DequantizeLinear", ["X_q", "x_scale", "x_zp"], ["X_dq"], name="dq_x"),
        helper.make_node("DequantizeLinear", ["W_q", "w_scale", "w_zp"], ["W_dq"], name="dq_w"),
        helper.make_node(
            "Conv", ["X_dq", "W_dq"], ["Y"], name="conv", kernel_shape=[k, k], pads=[k // 2] * 4
        ),
    ]
    return model(nodes, [tensor("X", (1, c_in, hw, hw))], [result("Y", 4)], inits)


def shape_reshape_model() -> onnx.ModelProto:
    """Flatten all but the first dim the way exporters do: Shape -> Gather -> Concat -> Reshape."""
    nodes = [
        helper.make_node("Relu", ["X"], ["R"], name="relu"),
        helper.make_node(
            "Constant",
            [],
            ["idx"],
            name="idx_const",
            value=numpy_helper.from_array(np.array([0], dtype=np.int64)),
        ),  # fmt: skip
        helper.make_node("Shape", ["R"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "idx"], ["batch"], name="gather", axis=0),
        helper.make_node("Concat", ["batch", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["R", "target"], ["Y"], name="reshape"),
    ]
    inits = [const("minus_one", [-1], np.int64)]
    return model(nodes, [tensor("X", (2, 3, 4))], [result("Y", 2)], inits)


def rotate_half_model(shape: tuple[int, int, int, int] = (1, 2, 8, 16)) -> onnx.ModelProto:
    """The size arithmetic of a PyTorch export of LLaMA's attention, with static shapes.

    ``rotate_half``: ``x[..., : x.shape[-1] // 2]`` and ``x[..., x.shape[-1] // 2 :]``
    (Shape -> Gather -> Div -> Unsqueeze feeding the Slices' ends/starts), then the merge
    of the head dims ``view(bsz, seq, heads * head_dim)`` (Shape -> Gather -> Mul ->
    Unsqueeze -> Concat feeding a Reshape). Only ``relu``, the two ``Slice``, ``neg``,
    ``cat`` and ``merge`` compute on data.
    """

    def i64(name: str, value: object) -> onnx.TensorProto:
        return const(name, value, np.int64)

    nodes = [
        helper.make_node("Relu", ["X"], ["R"], name="relu"),
        helper.make_node("Shape", ["R"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "i_last"], ["dim"], name="gather_dim", axis=0),
        helper.make_node("Div", ["dim", "two"], ["half"], name="div"),
        helper.make_node("Unsqueeze", ["half", "axes0"], ["half_1d"], name="unsqueeze_half"),
        helper.make_node("Slice", ["R", "zero", "half_1d", "axes_last"], ["x1"], name="slice1"),
        helper.make_node("Slice", ["R", "half_1d", "big", "axes_last"], ["x2"], name="slice2"),
        helper.make_node("Neg", ["x2"], ["nx2"], name="neg"),
        helper.make_node("Concat", ["nx2", "x1"], ["rot"], name="cat", axis=-1),
        helper.make_node("Transpose", ["rot"], ["rot_t"], name="transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Shape", ["rot_t"], ["shape_t"], name="shape_t"),
        helper.make_node("Gather", ["shape_t", "i0"], ["bsz"], name="gather_bsz", axis=0),
        helper.make_node("Gather", ["shape_t", "i1"], ["seq"], name="gather_seq", axis=0),
        helper.make_node("Gather", ["shape_t", "i2"], ["heads"], name="gather_heads", axis=0),
        helper.make_node("Gather", ["shape_t", "i_last"], ["hd"], name="gather_hd", axis=0),
        helper.make_node("Mul", ["heads", "hd"], ["width"], name="mul"),
        helper.make_node("Unsqueeze", ["bsz", "axes0"], ["bsz_1d"], name="unsqueeze_bsz"),
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["seq_1d"], name="unsqueeze_seq"),
        helper.make_node("Unsqueeze", ["width", "axes0"], ["width_1d"], name="unsqueeze_width"),
        helper.make_node(
            "Concat", ["bsz_1d", "seq_1d", "width_1d"], ["target"], name="concat", axis=0
        ),
        helper.make_node("Reshape", ["rot_t", "target"], ["Y"], name="merge"),
    ]
    inits = [
        i64("i0", 0), i64("i1", 1), i64("i2", 2), i64("i_last", 3), i64("two", 2),
        i64("axes0", [0]), i64("zero", [0]), i64("big", [2**62]), i64("axes_last", [3]),
    ]  # fmt: skip
    b, h, s, d = shape
    return model(nodes, [tensor("X", shape)], [tensor("Y", (b, s, h * d))], inits)
