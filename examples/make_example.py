"""Generate the bundled example models, byte for byte reproducibly.

``resnet_tiny.onnx`` is a small fp32 CNN built with ``onnx.helper`` (no torch)
whose graph has the shapes the placement problem is about: a stem conv,
an identity residual block, a downsampling residual block whose 1x1 skip conv
runs in parallel with the main branch, an inception-like block of two conv
branches (one of them depthwise) joined by Concat, then GlobalAveragePool,
Flatten and a Gemm classifier. ``resnet_tiny_int8.onnx`` is the same network
quantized by ONNX Runtime to QOperator form (QLinearConv, QGemm, ...) with
uint8 activations and int8 weights (U8S8, the fast path on x86).

Usage: ``python examples/make_example.py [--out-dir examples]``
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INPUT_SHAPE = (1, 3, 32, 32)
NUM_CLASSES = 10
SEED = 20240501
OPSET = 17
IR_VERSION = 8  # old enough for any recent ONNX Runtime


class _Builder:
    """Accumulates nodes and initializers; weights come from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape: tuple[int, ...], fan_in: int) -> str:
        # He initialisation keeps activations in a sane range through the Relus,
        # which gives the int8 calibration meaningful ranges.
        value = self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def bias(self, name: str, size: int) -> str:
        value = self.rng.uniform(-0.1, 0.1, size).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def conv(
        self, name: str, x: str, c_in: int, c_out: int, k: int, stride: int = 1, groups: int = 1
    ) -> str:
        w = self.weight(f"{name}.weight", (c_out, c_in // groups, k, k), c_in // groups * k * k)
        b = self.bias(f"{name}.bias", c_out)
        pad = k // 2
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, w, b],
                [f"{name}.out"],
                name=name,
                kernel_shape=[k, k],
                pads=[pad] * 4,
                strides=[stride] * 2,
                group=groups,
            )
        )
        return f"{name}.out"

    def op(self, op_type: str, name: str, inputs: list[str], **attrs: object) -> str:
        self.nodes.append(helper.make_node(op_type, inputs, [f"{name}.out"], name=name, **attrs))
        return f"{name}.out"


def build_fp32() -> onnx.ModelProto:
    """The fp32 network: 23 operators, about 62 M multiply-accumulates (~1 ms on one core)."""
    b = _Builder(SEED)
    x = b.op("Relu", "stem_relu", [b.conv("stem_conv", "input", 3, 48, 3)])
    # Identity residual block.
    y = b.op("Relu", "b1_relu1", [b.conv("b1_conv1", x, 48, 48, 3)])
    y = b.conv("b1_conv2", y, 48, 48, 3)
    x = b.op("Relu", "b1_relu2", [b.op("Add", "b1_add", [y, x])])
    # Downsampling residual block: the 1x1 skip conv is a parallel branch.
    y = b.op("Relu", "b2_relu1", [b.conv("b2_conv1", x, 48, 64, 3, stride=2)])
    y = b.conv("b2_conv2", y, 64, 64, 3)
    skip = b.conv("b2_skip", x, 48, 64, 1, stride=2)
    x = b.op("Relu", "b2_relu2", [b.op("Add", "b2_add", [y, skip])])
    # Two parallel branches joined by Concat; branch b starts with a depthwise conv.
    a = b.op("Relu", "b3a_relu", [b.conv("b3a_conv", x, 64, 32, 1)])
    d = b.op("Relu", "b3b_relu1", [b.conv("b3b_dwconv", x, 64, 64, 3, groups=64)])
    d = b.op("Relu", "b3b_relu2", [b.conv("b3b_conv", d, 64, 32, 1)])
    x = b.op("Concat", "b3_concat", [a, d], axis=1)
    x = b.op("Flatten", "flatten", [b.op("GlobalAveragePool", "gap", [x])], axis=1)
    w = b.weight("fc.weight", (NUM_CLASSES, 64), 64)
    fc_b = b.bias("fc.bias", NUM_CLASSES)
    b.nodes.append(helper.make_node("Gemm", [x, w, fc_b], ["logits"], name="fc", transB=1))

    graph = helper.make_graph(
        b.nodes,
        "resnet_tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, INPUT_SHAPE)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, (1, NUM_CLASSES))],
        b.inits,
    )
    model = helper.make_model(
        graph,
        producer_name="placement-examples",
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


class _CalibrationReader:
    """Eight fixed-seed random inputs: deterministic calibration ranges."""

    def __init__(self, n: int = 8, seed: int = SEED + 1) -> None:
        rng = np.random.default_rng(seed)
        self._batches = iter(
            [{"input": rng.standard_normal(INPUT_SHAPE).astype(np.float32)} for _ in range(n)]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)

    def rewind(self) -> None:  # part of the CalibrationDataReader protocol; one pass suffices
        pass


def quantize_int8(fp32_path: Path, int8_path: Path) -> None:
    """QOperator int8 model: uint8 activations, int8 per-tensor weights (U8S8)."""
    # Imported here so that building the fp32 model does not need the quantization tool.
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    root = logging.getLogger()
    level = root.level
    # The quantizer logs advice to pre-process the model on every call; this
    # model needs none, so keep the script's output clean.
    root.setLevel(logging.ERROR)
    try:
        # The quantizer writes its augmented calibration model next to the output;
        # keep that scratch file out of the example directory.
        with tempfile.TemporaryDirectory() as tmp:
            tmp_out = Path(tmp) / int8_path.name
            quantize_static(
                str(fp32_path),
                str(tmp_out),
                _CalibrationReader(),
                quant_format=QuantFormat.QOperator,
                activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8,
                per_channel=False,
            )
            int8_path.write_bytes(tmp_out.read_bytes())
    finally:
        root.setLevel(level)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    fp32_path = args.out_dir / "resnet_tiny.onnx"
    int8_path = args.out_dir / "resnet_tiny_int8.onnx"
    onnx.save(build_fp32(), str(fp32_path))
    quantize_int8(fp32_path, int8_path)
    for path in (fp32_path, int8_path):
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
