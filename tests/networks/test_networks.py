"""The paper's four benchmark networks: architecture, parameter counts, int8 export, caching.

What is compared, exactly:

* Parameters: ``parameter_count`` of the graph built with ``fold_bn=False``
  (explicit BatchNormalization, conv without bias) must EQUAL the published
  PyTorch count (torchvision docs; ultralytics ``model.info()``). The default,
  eval-mode graph folds each BN into its conv: the BN's weight and bias (2C)
  become one conv bias (C), so it must equal published minus the BN channels
  (the output channels of every conv except YOLO's three Detect convs, which
  have a real bias and no BN). Quantization keeps the count.
* Structure: convs by kernel size, depthwise convs, residual Adds (Adds of two
  activations), YOLO's Concats and its three Detect convs and output shape.
* int8: node counts of ONNX Runtime's QOperator export (pinned ORT), equal to
  the notes' real exports (34 / 75 / 67 / 245), every Conv a QLinearConv with
  int8 per-tensor weights and uint8 activations.
* Parallel pairs (set P of the ILP) on the ingested graphs: the notes' 9 / 20 /
  0 for the fp32 ResNets / MobileNetV2 (identity skips are direct edges, only
  downsample branches run in parallel); int8 graphs have fewer, because the
  quantizer fuses ReLU/Clip into QLinearConv.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.graph import OpGraph, load_graph
from placement.networks import (
    BUILDER_VERSION,
    NETWORKS,
    PUBLISHED_PARAMETERS,
    build_network,
    default_cache_dir,
    network_path,
    parameter_count,
    zoo,
)
from placement.networks.yolov5 import build_yolov5n

# Per network: convs by kernel size, depthwise convs, residual Adds, int8 nodes,
# parallel pairs of the ingested fp32 / int8 graphs.
EXPECTED = {
    "resnet18": dict(kernels={7: 1, 3: 16, 1: 3}, dw=0, res_adds=8, int8_nodes=34,
                     pairs_fp32=9, pairs_int8=6),
    "resnet50": dict(kernels={7: 1, 3: 16, 1: 36}, dw=0, res_adds=16, int8_nodes=75,
                     pairs_fp32=20, pairs_int8=12),
    "mobilenetv2": dict(kernels={3: 18, 1: 34}, dw=17, res_adds=10, int8_nodes=67,
                        pairs_fp32=0, pairs_int8=0),
    # YOLO pairs: the notes give "about 2,000-2,700" for YOLO-shaped graphs.
    "yolov5n": dict(kernels={6: 1, 3: 17, 1: 42}, dw=0, res_adds=7, int8_nodes=245,
                    pairs_fp32=1605, pairs_int8=1911),
}  # fmt: skip
CLASSIFIER_OUTPUT = [1, 1000]
YOLO_OUTPUT = [1, 3 * (80**2 + 40**2 + 20**2), 85]  # 25200 boxes of (xywh, obj, 80 classes)


@pytest.fixture(scope="module")
def fp32_models() -> dict[str, onnx.ModelProto]:
    return {name: build_network(name) for name in NETWORKS}


def _inits(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in model.graph.initializer}


def _convs(model: onnx.ModelProto, op_type: str = "Conv") -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == op_type]


def _weight_dims(model: onnx.ModelProto, node: onnx.NodeProto) -> list[int]:
    index = 3 if node.op_type == "QLinearConv" else 1
    return list(_inits(model)[node.input[index]].dims)


def _bn_channels(model: onnx.ModelProto) -> int:
    """Output channels of the convs that had a BatchNorm (all but YOLO's Detect convs)."""
    return sum(
        _weight_dims(model, n)[0] for n in _convs(model) if not n.name.startswith("/model/24/")
    )


def _parallel_pairs(graph: OpGraph) -> int:
    """|P| exactly as the CIM models see it (CimInstance.parallel_pairs)."""
    ops = [CimOperator(name, t_host=1.0) for name in graph.operators]
    edges = [CimEdge(u, v, 0.0) for u, v in graph.graph.edges]
    return len(CimInstance.build(ops, edges, crossbar_budget=0).parallel_pairs)


# ---------------------------------------------------------------------------
# fp32 graphs, no files (fast)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.unit
def test_unfolded_parameter_count_equals_published(name: str) -> None:
    assert parameter_count(build_network(name, fold_bn=False)) == PUBLISHED_PARAMETERS[name]


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.unit
def test_folded_bn_leaves_one_bias_per_channel(fp32_models, name: str) -> None:
    model = fp32_models[name]
    assert not [n for n in model.graph.node if n.op_type == "BatchNormalization"]
    bn = _bn_channels(model)
    assert parameter_count(model) == PUBLISHED_PARAMETERS[name] - bn
    # Relative deviation of the folded graph: 0.04 % (ResNet-18) to 0.5 % (MobileNetV2).
    assert bn / PUBLISHED_PARAMETERS[name] < 0.005


@pytest.mark.parametrize("name", NETWORKS)
@pytest.mark.unit
def test_layer_structure(fp32_models, name: str) -> None:
    model, want = fp32_models[name], EXPECTED[name]
    convs = _convs(model)
    kernels = Counter(_weight_dims(model, n)[2] for n in convs)
    assert dict(kernels) == want["kernels"]
    depthwise = [
        n for n in convs
        if onnx.helper.get_attribute_value(next(a for a in n.attribute if a.name == "group")) > 1
    ]  # fmt: skip
    assert len(depthwise) == want["dw"]
    inits = _inits(model)
    residual = [
        n for n in model.graph.node
        if n.op_type == "Add" and not any(i in inits for i in n.input)
    ]  # fmt: skip
    assert len(residual) == want["res_adds"]


@pytest.mark.parametrize("name", ["resnet18", "resnet50", "mobilenetv2"])
@pytest.mark.unit
def test_classifier_head(fp32_models, name: str) -> None:
    model = fp32_models[name]
    tail = [n.op_type for n in model.graph.node[-3:]]
    assert tail == ["GlobalAveragePool", "Flatten", "Gemm"]
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    (out,) = inferred.graph.output
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == CLASSIFIER_OUTPUT
    acts = Counter(n.op_type for n in model.graph.node if n.op_type in ("Relu", "Clip"))
    # ResNet: a ReLU after the stem, after each block's inner convs and after each Add.
    # MobileNetV2: ReLU6 after every conv but the 17 linear projections.
    assert acts == {"resnet18": {"Relu": 17}, "resnet50": {"Relu": 49},
                    "mobilenetv2": {"Clip": 35}}[name]  # fmt: skip


@pytest.mark.unit
def test_yolov5n_structure(fp32_models) -> None:
    model = fp32_models["yolov5n"]
    ops = Counter(n.op_type for n in model.graph.node)
    # SiLU = Sigmoid + Mul after each of the 57 Conv-BN-SiLU; 3 more Sigmoids in Detect.
    assert ops["Conv"] == 60 and ops["Sigmoid"] == 60
    assert ops["MaxPool"] == 3 and ops["Resize"] == 2  # SPPF; two nearest upsamplings
    concats = [n for n in model.graph.node if n.op_type == "Concat"]
    features = [n for n in concats if not n.name.startswith("/model.24/")]
    assert len(features) == 13  # 8 C3, 1 SPPF, 4 PAN neck; Detect adds 3 + 1
    assert len(concats) == 17
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in [*inferred.graph.value_info, *inferred.graph.output]
    }
    detect = [n for n in _convs(model) if n.name.startswith("/model/24/")]
    assert [shapes[n.output[0]] for n in detect] == [
        [1, 255, 80, 80], [1, 255, 40, 40], [1, 255, 20, 20]
    ]  # fmt: skip
    (out,) = model.graph.output
    assert shapes[out.name] == YOLO_OUTPUT


@pytest.mark.unit
def test_yolov5n_v60_export_variant() -> None:
    """v6.0's exporter: Slices + Sub in the decoding and the raw heads as extra outputs."""
    model = build_yolov5n(export="v6.0")
    assert len(model.graph.node) == 245
    assert len(model.graph.output) == 4
    assert parameter_count(model) == parameter_count(build_network("yolov5n"))
    with pytest.raises(ValueError, match="export"):
        build_yolov5n(export="v5.0")


@pytest.mark.unit
def test_build_is_deterministic() -> None:
    a = build_network("yolov5n").SerializeToString()
    assert build_network("yolov5n").SerializeToString() == a
    assert build_network("yolov5n", seed=1).SerializeToString() != a


@pytest.mark.unit
def test_unknown_network() -> None:
    with pytest.raises(ValueError, match="unknown network"):
        build_network("vgg16")
    with pytest.raises(ValueError, match="unknown network"):
        network_path("vgg16", cache_dir=Path("unused"))


# ---------------------------------------------------------------------------
# Cache (fast: the 8 MB fp32 YOLO only)
# ---------------------------------------------------------------------------


@pytest.mark.unit
def test_default_cache_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLACEMENT_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("PLACEMENT_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "placement" / "networks"


@pytest.mark.unit
def test_network_path_generates_once_and_keys_by_version(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PLACEMENT_CACHE", str(tmp_path / "cache"))
    path = network_path("yolov5n", int8=False)
    assert path.parent == tmp_path / "cache"
    assert "yolov5n" in path.name and "fp32" in path.name and BUILDER_VERSION in path.name
    stamp = path.stat().st_mtime_ns
    assert network_path("yolov5n", int8=False) == path
    assert path.stat().st_mtime_ns == stamp  # served from the cache, not rewritten
    # A changed builder (version bump) regenerates under a new name.
    monkeypatch.setattr(zoo, "BUILDER_VERSION", "vTEST")
    other = network_path("yolov5n", int8=False)
    assert other != path and "vTEST" in other.name
    assert other.read_bytes() == path.read_bytes()
    # Atomic writes leave no temporary files behind.
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, other.name])
    assert onnx.load(str(path)).graph.name == "yolov5n"


@pytest.mark.unit
def test_int8_cache_name_carries_onnxruntime_version() -> None:
    import onnxruntime

    name = zoo.cache_file_name("resnet18", int8=True)
    assert "int8" in name and onnxruntime.__version__ in name
    assert name != zoo.cache_file_name("resnet18", int8=False)


@pytest.mark.parametrize("name", ["mobilenetv2", "yolov5n"])
@pytest.mark.unit
def test_small_fp32_networks_ingest(tmp_path: Path, name: str) -> None:
    graph = load_graph(network_path(name, int8=False, cache_dir=tmp_path))
    assert len(graph.operators) == len(build_network(name).graph.node)  # nothing to fold
    assert _parallel_pairs(graph) == EXPECTED[name]["pairs_fp32"]


# ---------------------------------------------------------------------------
# Generated files, fp32 and int8 (slow: about 10 s for all eight)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("networks")


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_int8_qoperator_export(cache: Path, name: str) -> None:
    fp32 = onnx.load(str(network_path(name, int8=False, cache_dir=cache)))
    int8 = onnx.load(str(network_path(name, cache_dir=cache)))
    assert len(int8.graph.node) == EXPECTED[name]["int8_nodes"]
    ops = Counter(n.op_type for n in int8.graph.node)
    assert ops["Conv"] == 0 and ops["QLinearConv"] == len(_convs(fp32))
    if name != "yolov5n":
        assert ops["QGemm"] == 1
    inits = _inits(int8)
    for node in _convs(int8, "QLinearConv"):
        x_zp, w, w_scale = (inits[node.input[i]] for i in (2, 3, 4))
        assert x_zp.data_type == TensorProto.UINT8  # activations uint8
        assert w.data_type == TensorProto.INT8  # weights int8
        assert list(w_scale.dims) == []  # per-tensor
    assert parameter_count(int8) == parameter_count(fp32)


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_generated_files_ingest(cache: Path, name: str) -> None:
    want = EXPECTED[name]
    fp32 = load_graph(network_path(name, int8=False, cache_dir=cache))
    int8 = load_graph(network_path(name, cache_dir=cache))
    n_cim = len(_convs(build_network(name))) + (0 if name == "yolov5n" else 1)  # + the Gemm
    assert len(fp32.cim_capable()) == len(int8.cim_capable()) == n_cim
    # int8: every node is an operator except YOLO's DequantizeLinear of the constant
    # exponent 2.0 of Pow, which ingestion folds.
    assert len(int8.operators) == want["int8_nodes"] - (name == "yolov5n")
    assert _parallel_pairs(fp32) == want["pairs_fp32"]
    assert _parallel_pairs(int8) == want["pairs_int8"]


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS)
def test_int8_runs_in_onnxruntime(cache: Path, name: str) -> None:
    import onnxruntime as ort

    path = network_path(name, cache_dir=cache)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    x = np.random.default_rng(0).random(inp.shape, dtype=np.float32)
    (out,) = session.run(None, {inp.name: x})
    assert list(out.shape) == (YOLO_OUTPUT if name == "yolov5n" else CLASSIFIER_OUTPUT)
    assert np.isfinite(out).all()


@pytest.mark.slow
def test_int8_generation_is_deterministic(cache: Path, tmp_path: Path) -> None:
    again = network_path("mobilenetv2", cache_dir=tmp_path)
    assert again.read_bytes() == network_path("mobilenetv2", cache_dir=cache).read_bytes()
    assert not [p for p in os.listdir(tmp_path) if not p.endswith(".onnx")]
