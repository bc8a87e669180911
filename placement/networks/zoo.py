"""The CIM paper's four benchmark networks: build (fp32), quantize (int8 QOperator), cache.

The networks are generated from their published architectures by this
package (no downloads, no torch) and cached on disk, never committed:

* :func:`build_network` returns the fp32 model (BN folded, as an eval-mode
  PyTorch export), deterministic for a given seed.
* :func:`network_path` returns the path of the cached ONNX file, generating it
  on first use. The int8 file is ONNX Runtime's static QOperator quantization
  of the fp32 file: uint8 activations, int8 per-tensor weights (U8S8), MinMax
  calibration on a few fixed-seed random inputs, so it is deterministic too.

Cache file names carry the network, the precision and :data:`BUILDER_VERSION`
(bump it whenever a builder changes the graph or weights) and, for int8, the
ONNX Runtime version (the quantizer's output depends on it), so stale files are
never reused. Files are written to a temporary name in the cache directory and
renamed into place, so a crashed or concurrent generation never leaves a
truncated file under the final name.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

from placement.networks.mobilenet import build_mobilenetv2
from placement.networks.resnet import build_resnet18, build_resnet50
from placement.networks.yolov5 import build_yolov5n

NETWORKS = ("resnet18", "resnet50", "mobilenetv2", "yolov5n")
BUILDER_VERSION = "v1"
PUBLISHED_PARAMETERS = {
    # torchvision model docs / ultralytics model.info(): trainable parameters of the
    # PyTorch model (conv/linear weights and biases, BatchNorm weight and bias).
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "mobilenetv2": 3_504_872,
    "yolov5n": 1_872_157,
}
CALIBRATION_SAMPLES = 4  # MinMax ranges only need a few inputs; YOLO calibration dominates time
CALIBRATION_SEED = 1

_BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet18": build_resnet18,
    "resnet50": build_resnet50,
    "mobilenetv2": build_mobilenetv2,
    "yolov5n": build_yolov5n,
}

# Weights and biases as PyTorch counts them, by op type: input indices of the
# constant learnable tensors (quantized forms included; scales and zero points excluded).
_PARAM_INPUTS = {
    "Conv": (1, 2),
    "ConvTranspose": (1, 2),
    "Gemm": (1, 2),
    "MatMul": (1,),
    "BatchNormalization": (1, 2),  # scale and bias; running statistics are buffers
    "QLinearConv": (3, 8),
    "QGemm": (3, 6),
    "QLinearMatMul": (3,),
    "ConvInteger": (1,),
    "MatMulInteger": (1,),
}


def build_network(name: str, *, seed: int = 0, fold_bn: bool = True) -> onnx.ModelProto:
    """The fp32 network ``name`` (one of :data:`NETWORKS`), batch 1, deterministic weights.

    ``fold_bn=False`` keeps BatchNormalization nodes (a training-style export)
    so that :func:`parameter_count` equals PyTorch's count exactly.
    """
    try:
        builder = _BUILDERS[name]
    except KeyError:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}") from None
    return builder(seed=seed, fold_bn=fold_bn)


def default_cache_dir() -> Path:
    """``$PLACEMENT_CACHE`` if set, else ``~/.cache/placement/networks``."""
    env = os.environ.get("PLACEMENT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "placement" / "networks"


def cache_file_name(name: str, *, int8: bool) -> str:
    if not int8:
        return f"{name}-fp32-{BUILDER_VERSION}.onnx"
    import onnxruntime

    return f"{name}-int8-{BUILDER_VERSION}-ort{onnxruntime.__version__}.onnx"


def network_path(name: str, *, int8: bool = True, cache_dir: Path | None = None) -> Path:
    """Path of the cached ONNX file of ``name``; generated (and cached) on first use."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}")
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = cache_dir / cache_file_name(name, int8=int8)
    if path.is_file():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    if int8:
        fp32 = network_path(name, int8=False, cache_dir=cache_dir)
        with tempfile.TemporaryDirectory(dir=cache_dir, prefix=f".{name}-") as tmp:
            tmp_out = Path(tmp) / path.name
            quantize_int8(fp32, tmp_out)
            os.replace(tmp_out, path)  # atomic within one file system
    else:
        model = build_network(name)
        fd, tmp_name = tempfile.mkstemp(dir=cache_dir, prefix=f".{name}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(model.SerializeToString())
            os.chmod(tmp_name, 0o644)  # mkstemp makes it 0600; the cache may be shared
            os.replace(tmp_name, path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
    return path


class _CalibrationReader:
    """A few fixed-seed random inputs: deterministic calibration ranges."""

    def __init__(self, model_path: Path, n: int, seed: int) -> None:
        model = onnx.load(str(model_path), load_external_data=False)
        (inp,) = model.graph.input
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        rng = np.random.default_rng(seed)
        # Classifiers take ImageNet-normalized input (about N(0, 1)); YOLO takes [0, 1] pixels.
        if inp.name == "images":
            draws = [rng.random(shape, dtype=np.float32) for _ in range(n)]
        else:
            draws = [rng.standard_normal(shape, dtype=np.float32) for _ in range(n)]
        self._batches = iter([{inp.name: d} for d in draws])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._batches, None)

    def rewind(self) -> None:  # part of the CalibrationDataReader protocol; one pass suffices
        pass


def quantize_int8(
    fp32_path: Path, int8_path: Path, *, samples: int = CALIBRATION_SAMPLES
) -> None:
    """ONNX Runtime static quantization, QOperator format, U8S8, per-tensor, MinMax."""
    # Imported here so that building fp32 models does not load the quantization tool.
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    root = logging.getLogger()
    level = root.level
    # The quantizer logs advice to pre-process the model on every call; these
    # models (static shapes, no fusable patterns left) need none.
    root.setLevel(logging.ERROR)
    try:
        quantize_static(
            str(fp32_path),
            str(int8_path),
            _CalibrationReader(fp32_path, samples, CALIBRATION_SEED),
            quant_format=QuantFormat.QOperator,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=False,
            calibrate_method=CalibrationMethod.MinMax,
        )
    finally:
        root.setLevel(level)


def parameter_count(model: onnx.ModelProto) -> int:
    """Elements of the learnable constant tensors: weights and biases of Conv/Gemm/MatMul
    (and their QLinear/QGemm/Integer forms) and BatchNormalization scale and bias.

    This is PyTorch's ``sum(p.numel() for p in model.parameters())`` for an
    unfolded graph. Folding a BN into a conv replaces its two C-vectors by one
    conv bias, so a folded graph counts C fewer per folded BN; quantization
    does not change the count (int8 weights, int32 biases, same shapes).
    Grids, anchors, shapes, scales and zero points are not parameters.
    """
    inits = {t.name: t for t in model.graph.initializer}
    seen: set[str] = set()
    total = 0
    for node in model.graph.node:
        for index in _PARAM_INPUTS.get(node.op_type, ()):
            if index < len(node.input) and node.input[index] in inits:
                name = node.input[index]
                if name not in seen:  # a weight shared by two nodes counts once
                    seen.add(name)
                    total += int(np.prod(inits[name].dims, dtype=np.int64))
    return total
