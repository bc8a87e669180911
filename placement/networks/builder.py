"""A small graph builder over ``onnx.helper`` that writes graphs the way a PyTorch export does.

The benchmark networks must have the operator structure of a real
``torch.onnx.export`` in eval mode, because the placement works on operators
and the paper's operator counts come from such exports. What that means here:

* BatchNormalization is folded into the preceding Conv (the exporter's
  ``do_constant_folding`` in eval mode does this), so a ``Conv -> BN -> act``
  module becomes one ``Conv`` with a bias. ``fold_bn=False`` keeps an explicit
  ``BatchNormalization`` node instead (a training-mode style export); it exists
  so tests can count parameters exactly as PyTorch does (BN weight and bias
  are two trainable vectors, folding leaves one conv bias).
* SiLU becomes ``Sigmoid`` + ``Mul`` (ONNX has no SiLU before opset 24, and
  torch exports ``x * sigmoid(x)``); ReLU6 becomes ``Clip(0, 6)`` with constant
  min/max inputs; ``AdaptiveAvgPool2d(1)`` becomes ``GlobalAveragePool``;
  ``torch.flatten(x, 1)`` becomes ``Flatten``; ``nn.Linear`` becomes
  ``Gemm(transB=1)``; ``nn.Upsample(nearest)`` becomes ``Resize`` with constant
  scales. Shapes are static (batch 1), so reshape targets are constants.
* Node names follow torch 2.x (``/layer1/layer1.0/conv1/Conv``), tensors are
  ``<node>_output_0``, weights keep the PyTorch module path.

Weights are deterministic: one ``numpy`` generator per model, drawn in graph
order. He-normal conv weights keep activations in a sane range without BN
statistics, which is all the int8 calibration needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13  # what torchvision / YOLOv5 v6.0 exports typically used (v6.0 default: 12)
IR_VERSION = 8  # ONNX Runtime 1.31 accepts IR <= 13; 8 is what opset 13 exports carry
BN_EPS = 1e-5


class GraphBuilder:
    """Accumulates nodes and initializers; every method returns the output tensor name."""

    def __init__(self, name: str, *, seed: int = 0, fold_bn: bool = True) -> None:
        self.name = name
        self.fold_bn = fold_bn
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self._init_names: set[str] = set()
        self._shared: dict[tuple[str, bytes], str] = {}

    # -- tensors -----------------------------------------------------------

    def input(self, name: str, shape: Sequence[int]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def initializer(self, name: str, value: np.ndarray) -> str:
        if name in self._init_names:
            raise ValueError(f"initializer {name!r} defined twice")
        self._init_names.add(name)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def constant(self, value: np.ndarray | float | Sequence[int], dtype: type = np.float32) -> str:
        """A small shared constant (scalars, shapes, slice bounds), deduplicated by value."""
        arr = np.asarray(value, dtype=dtype)
        key = (str(arr.dtype) + str(arr.shape), arr.tobytes())
        if key not in self._shared:
            # torch names folded constants onnx::<Op>_<n>; a counter keeps them unique.
            self._shared[key] = self.initializer(f"onnx::Constant_{len(self._shared)}", arr)
        return self._shared[key]

    # -- nodes -------------------------------------------------------------

    def node(self, op_type: str, inputs: Sequence[str], name: str, **attrs: object) -> str:
        """One node named ``<name>/<op_type>`` (torch 2.x style) with a single output."""
        node_name = f"{name}/{op_type}"
        out = f"{node_name}_output_0"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=node_name, **attrs))
        return out

    def conv(
        self,
        x: str,
        c_in: int,
        c_out: int,
        k: int,
        *,
        name: str,
        stride: int = 1,
        pad: int | None = None,
        groups: int = 1,
        bn: bool = True,
        gain: float = math.sqrt(2.0),
    ) -> str:
        """``nn.Conv2d`` followed by ``nn.BatchNorm2d`` when ``bn`` (then the conv has no bias).

        ``name`` is the module path of the conv (``layer1.0.conv1``); ``gain``
        scales the He-normal init (small for the last conv of a residual branch).
        """
        pad = k // 2 if pad is None else pad
        fan_in = c_in // groups * k * k
        w = self.rng.standard_normal((c_out, c_in // groups, k, k), dtype=np.float32)
        w *= np.float32(gain / math.sqrt(fan_in))
        attrs = dict(
            dilations=[1, 1], group=groups, kernel_shape=[k, k], pads=[pad] * 4,
            strides=[stride, stride],
        )  # fmt: skip
        path = "/" + name.replace(".", "/")
        w_name = self.initializer(f"{name}.weight", w)
        if not bn:  # a plain conv with its own bias (Detect heads, ...)
            b = self.initializer(f"{name}.bias", self._bias(c_out))
            return self.node("Conv", [x, w_name, b], path, **attrs)
        if self.fold_bn:
            # Folded BN: the conv gains a bias (torch names it onnx::Conv_<n>; keep the path).
            b = self.initializer(f"{name}.bias_folded", self._bias(c_out))
            return self.node("Conv", [x, w_name, b], path, **attrs)
        y = self.node("Conv", [x, w_name], path, **attrs)
        return self.batchnorm(y, c_out, name=name)

    def batchnorm(self, x: str, c: int, *, name: str) -> str:
        """Identity-like statistics (mean 0, var 1) with a random affine part."""
        scale = (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32)
        inputs = [
            x,
            self.initializer(f"{name}.bn.weight", scale),
            self.initializer(f"{name}.bn.bias", self._bias(c)),
            self.initializer(f"{name}.bn.running_mean", np.zeros(c, np.float32)),
            self.initializer(f"{name}.bn.running_var", np.ones(c, np.float32)),
        ]
        return self.node(
            "BatchNormalization", inputs, "/" + name.replace(".", "/") + "_bn", epsilon=BN_EPS
        )

    def _bias(self, c: int) -> np.ndarray:
        return (0.05 * self.rng.standard_normal(c)).astype(np.float32)

    def relu(self, x: str, name: str) -> str:
        return self.node("Relu", [x], name)

    def relu6(self, x: str, name: str) -> str:
        # torch exports ReLU6 (hardtanh) as Clip with constant min/max inputs (opset >= 11).
        return self.node("Clip", [x, self.constant(0.0), self.constant(6.0)], name)

    def silu(self, x: str, name: str) -> str:
        s = self.node("Sigmoid", [x], name)
        return self.node("Mul", [x, s], name)

    def add(self, a: str, b: str, name: str) -> str:
        return self.node("Add", [a, b], name)

    def concat(self, xs: Sequence[str], name: str, axis: int = 1) -> str:
        return self.node("Concat", list(xs), name, axis=axis)

    def maxpool(self, x: str, k: int, stride: int, pad: int, name: str) -> str:
        return self.node(
            "MaxPool", [x], name, ceil_mode=0, dilations=[1, 1], kernel_shape=[k, k],
            pads=[pad] * 4, strides=[stride, stride],
        )  # fmt: skip

    def upsample_nearest(self, x: str, scale: int, name: str) -> str:
        # nn.Upsample(scale_factor, 'nearest') at opset 11-13: Resize(X, roi, scales).
        roi = self.constant(np.zeros(0, np.float32))
        scales = self.constant([1.0, 1.0, float(scale), float(scale)])
        return self.node(
            "Resize", [x, roi, scales], name, coordinate_transformation_mode="asymmetric",
            cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor",
        )  # fmt: skip

    def linear(self, x: str, c_in: int, c_out: int, *, name: str) -> str:
        """``nn.Linear`` as ``Gemm(transB=1)`` with torch's default uniform init."""
        bound = 1.0 / math.sqrt(c_in)
        w = self.rng.uniform(-bound, bound, (c_out, c_in)).astype(np.float32)
        b = self.rng.uniform(-bound, bound, c_out).astype(np.float32)
        inputs = [x, self.initializer(f"{name}.weight", w), self.initializer(f"{name}.bias", b)]
        return self.node("Gemm", inputs, "/" + name, alpha=1.0, beta=1.0, transB=1)

    # -- model -------------------------------------------------------------

    def build(self, outputs: Sequence[tuple[str, str, Sequence[int]]]) -> onnx.ModelProto:
        """Model with graph outputs ``(tensor, output name, shape)``; outputs get renamed."""
        rename = {tensor: out for tensor, out, _ in outputs}
        for node in self.nodes:
            for i, name in enumerate(node.input):
                if name in rename:
                    node.input[i] = rename[name]
            for i, name in enumerate(node.output):
                if name in rename:
                    node.output[i] = rename[name]
        graph = helper.make_graph(
            self.nodes,
            self.name,
            self.inputs,
            [
                helper.make_tensor_value_info(out, TensorProto.FLOAT, list(shape))
                for _, out, shape in outputs
            ],
            self.inits,
        )
        # No checker here: it serializes the whole model (0.5 s for ResNet-50), and
        # load_graph and the quantizer check every file anyway.
        return helper.make_model(
            graph,
            producer_name="placement.networks",
            opset_imports=[helper.make_opsetid("", OPSET)],
            ir_version=IR_VERSION,
        )
