"""Host profiling with ONNX Runtime: attribution of fused kernels, profile files, errors."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import networkx as nx
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from placement.errors import PlacementError
from placement.io import file_sha256
from placement.onnxfile import node_names
from placement.profiling.host_profile import HostProfile
from placement.profiling.ort.attribution import attribute
from placement.profiling.ort.measure import plain_inference_seconds, profile_model
from placement.profiling.ort.session import session_options
from placement.profiling.ort.trace import event_shares, per_node_times, split_runs

FAST = {"runs": 3, "warmup": 1, "min_seconds": 0}
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------- models


def _init(name: str, shape: list[int], scale: float = 0.1) -> onnx.TensorProto:
    return numpy_helper.from_array((_RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _save(tmp: Path, name: str, nodes, inputs, outputs, inits, opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp / f"{name}.onnx"
    onnx.save(model, path)
    return path


def _residual_nodes(c: int) -> tuple[list, list]:
    """conv-relu, conv-BN-relu, conv + residual add + relu, unnamed conv, concat, head."""
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w0", "b0"], ["c0"], name="conv0", pads=[1, 1, 1, 1]),
        n("Relu", ["c0"], ["r0"], name="relu0"),
        n("Conv", ["r0", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "s", "bb", "mm", "vv"], ["bn1"], name="bn1"),
        n("Relu", ["bn1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        n("Add", ["c2", "r0"], ["a"], name="add"),
        n("Relu", ["a"], ["r2"], name="relu2"),
        n("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1]),  # unnamed: "Conv_8"
        n("Concat", ["c3", "r2"], ["cat"], name="concat", axis=1),
        n("GlobalAveragePool", ["cat"], ["gap"], name="gap"),
        n("Flatten", ["gap"], ["fl"], name="flatten"),
        n("Gemm", ["fl", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    inits = [
        _init("w0", [c, c, 3, 3]), _init("b0", [c]), _init("w1", [c, c, 3, 3]), _init("b1", [c]),
        _init("w2", [c, c, 3, 3]), _init("b2", [c]), _init("w3", [c, c, 3, 3]),
        _init("s", [c]), _init("bb", [c]), _init("mm", [c]),
        numpy_helper.from_array(np.ones(c, np.float32), "vv"),
        _init("wf", [10, 2 * c]), _init("bf", [10]),
    ]  # fmt: skip
    return nodes, inits


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("models")
    c, hw = 8, 8
    f32 = TensorProto.FLOAT
    paths: dict[str, Path] = {}

    nodes, inits = _residual_nodes(c)
    paths["residual"] = _save(
        tmp, "residual", nodes,
        [helper.make_tensor_value_info("x", f32, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", f32, [1, 10])], inits,
    )  # fmt: skip

    n = helper.make_node
    paths["matmul"] = _save(
        tmp, "matmul",
        [
            n("MatMul", ["x", "w1"], ["m1"], name="mm1"),
            n("Add", ["m1", "b1"], ["a1"], name="bias1"),
            n("Relu", ["a1"], ["r"], name="act"),
            n("Gemm", ["r", "w2", "b2"], ["g"], name="gemm"),
            n("MatMul", ["g", "w3"], ["y"], name="mm2"),
        ],
        [helper.make_tensor_value_info("x", f32, [4, 16])],
        [helper.make_tensor_value_info("y", f32, [4, 8])],
        [_init("w1", [16, 32]), _init("b1", [32]), _init("w2", [32, 16]), _init("b2", [16]),
         _init("w3", [16, 8])],
    )  # fmt: skip

    # Removed nodes: a Constant, a foldable Mul, an Identity; duplicate and empty names.
    paths["removed"] = _save(
        tmp, "removed",
        [
            n("Constant", [], ["k"], name="const", value=numpy_helper.from_array(
                np.array(2.0, np.float32))),
            n("Mul", ["k", "half"], ["scale"], name="fold_me"),
            n("Identity", ["x"], ["xi"], name="ident"),
            n("Mul", ["xi", "scale"], ["m"], name="dup"),
            n("Relu", ["m"], ["r"], name="dup"),
            n("Sigmoid", ["r"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", f32, [2, 16])],
        [helper.make_tensor_value_info("y", f32, [2, 16])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")],
    )  # fmt: skip
    return paths


@pytest.fixture(scope="module")
def int8_model(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    quantization = pytest.importorskip("onnxruntime.quantization")
    tmp = tmp_path_factory.mktemp("int8")
    shape = [1, 8, 8, 8]

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.data = iter([{"x": rng.random(shape, dtype=np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.data, None)

    out = tmp / "residual_int8.onnx"
    quantization.quantize_static(
        str(models["residual"]), str(out), Reader(),
        quant_format=quantization.QuantFormat.QOperator,
        activation_type=quantization.QuantType.QUInt8,
        weight_type=quantization.QuantType.QInt8,
    )  # fmt: skip
    return out


def _names(path: Path) -> list[str]:
    return node_names(onnx.load(str(path)).graph)


def _check_profile(profile: HostProfile, path: Path) -> None:
    """Every original node present; times conserved; kernel shares are complete."""
    assert list(profile.latencies) == _names(path)
    assert all(v >= 0 and math.isfinite(v) for v in profile.latencies.values())
    assert math.isclose(sum(profile.latencies.values()), profile.kernel_total, rel_tol=1e-9)
    assert profile.model_sha256 == file_sha256(path)
    meta = profile.metadata
    for key in (
        "onnxruntime_version",
        "optimization",
        "intra_op_threads",
        "runs",
        "warmup",
        "cpu",
        "machine",
        "python",
        "date",
        "kernel_seconds",
        "attribution_rule",
    ):
        assert key in meta, key
    assert len(meta["run_kernel_seconds"]) == meta["runs"]
    for kernel, shares in meta["kernels"].items():
        assert math.isclose(sum(shares.values()), 1.0, rel_tol=1e-9), kernel
        assert set(shares) <= set(profile.latencies)


def _kernels_of(profile: HostProfile, node: str) -> set[str]:
    return {k for k, shares in profile.metadata["kernels"].items() if node in shares}


# --------------------------------------------------------------------------- attribution


@pytest.mark.parametrize("optimization", ["all", "extended", "basic", "disable"])
@pytest.mark.parametrize("model", ["residual", "matmul", "removed"])
@pytest.mark.integration
def test_every_node_covered_and_time_conserved(models, model, optimization):
    profile = profile_model(models[model], optimization=optimization, **FAST)
    _check_profile(profile, models[model])
    _check_fusion_notes(profile)
    assert profile.metadata["optimization"] == optimization


@pytest.mark.integration
def test_single_run_sum_equals_that_runs_kernel_time(models):
    # With one run the medians are that run's values: their sum must be its kernel total.
    profile = profile_model(models["residual"], runs=1, warmup=1, min_seconds=0)
    (total,) = profile.metadata["run_kernel_seconds"]
    assert total > 0
    assert math.isclose(sum(profile.latencies.values()), total, rel_tol=1e-9)
    assert math.isclose(profile.metadata["median_run_kernel_seconds"], total, rel_tol=1e-12)


def _optimized_graph(path: Path, optimization: str, tmp: Path) -> onnx.GraphProto:
    """The graph ORT runs for ``path`` on this host, with the names profile_model gives."""
    model = onnx.load(str(path))
    for node, name in zip(model.graph.node, node_names(model.graph), strict=True):
        node.name = name
    options = session_options(1, optimization)
    options.optimized_model_filepath = str(tmp / "optimized.onnx")
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return onnx.load(str(tmp / "optimized.onnx")).graph


def _check_layout_kernels(kernels: dict[str, dict[str, float]], optimized: onnx.GraphProto) -> int:
    """Every layout kernel ORT inserted (NCHWc reorders, NHWC transposes) is charged exactly as
    a kernel next to it in ORT's graph (its producer or a consumer): to the operator whose
    layout it converts, never elsewhere. Returns how many there were.

    ``optimized`` may come from another session than ``kernels``: ORT then gives the inserted
    nodes the same names, but not always to the same nodes (seen on an AVX-512 EPYC:
    ``ReorderOutput_token_11`` and ``_token_12`` swapped between two sessions of one
    model). So inserted kernels are matched to inserted nodes one to one (a bipartite
    matching), each to a node it may belong to, not by name."""
    nodes = [n for n in optimized.node if n.name in kernels]
    producer = {t: n.name for n in nodes for t in n.output}
    consumers: dict[str, list[str]] = {}
    for n in nodes:
        for t in n.input:
            consumers.setdefault(t, []).append(n.name)
    layout = [n for n in nodes if n.op_type in ("ReorderInput", "ReorderOutput", "Transpose")
              and n.name not in kernels[n.name]]  # inserted: not an original node of that name
    inserted = {n.name for n in layout}
    fits = nx.Graph()
    fits.add_nodes_from(("node", n.name) for n in layout)
    fits.add_nodes_from(("kernel", name) for name in inserted)
    for node in layout:
        neighbours = [producer[t] for t in node.input if t in producer]
        neighbours += [c for t in node.output for c in consumers.get(t, [])]
        assert neighbours, node.name
        allowed = [kernels[k] for k in neighbours if k not in inserted]
        for name in inserted:
            if kernels[name] in allowed:
                fits.add_edge(("node", node.name), ("kernel", name))
    matching = nx.bipartite.maximum_matching(fits, top_nodes=[("node", n.name) for n in layout])
    unmatched = [n.name for n in layout if ("node", n.name) not in matching]
    assert not unmatched, (unmatched, {name: kernels[name] for name in inserted})
    return len(layout)


def _check_fusion_notes(profile: HostProfile) -> None:
    """A node sharing a kernel with other nodes says so, with its share of the kernel."""
    for shares in profile.metadata["kernels"].values():
        if len(shares) > 1:
            for node in shares:
                assert "fused into" in profile.notes[node], node


@pytest.mark.integration
def test_conv_relu_fusion_and_layout_kernels_are_attributed(models, tmp_path):
    # What ORT does here depends on the CPU (x86 with AVX2 or AVX-512: NCHWc kernels named
    # '<tensor>_nchwc' with ReorderInput/ReorderOutput where the layout changes, the chain
    # reaching Concat and GlobalAveragePool or not by block size; ARM: FusedConv, no
    # reorders). Checked: what the attribution rule guarantees on any of them.
    profile = profile_model(models["residual"], optimization="all", **FAST)
    _check_profile(profile, models["residual"])
    lat, notes, kernels = profile.latencies, profile.notes, profile.metadata["kernels"]
    # Conv+Relu, Conv+BN+Relu: one kernel for every CPU execution provider, and said so.
    shared = _kernels_of(profile, "conv0") & _kernels_of(profile, "relu0")
    assert shared and "relu0" not in kernels
    assert lat["relu0"] > 0 and lat["conv0"] > lat["relu0"]
    assert "fused into" in notes["relu0"] and "conv0" in notes["relu0"]
    assert _kernels_of(profile, "bn1") == _kernels_of(profile, "conv1")
    assert _kernels_of(profile, "relu1") == _kernels_of(profile, "conv1")
    if "add" not in kernels:  # NCHWc fuses the residual Add + Relu into conv2 as a Sum input
        assert _kernels_of(profile, "add") == _kernels_of(profile, "conv2")
        assert _kernels_of(profile, "relu2") == _kernels_of(profile, "conv2")
    _check_fusion_notes(profile)
    optimized = _optimized_graph(models["residual"], "all", tmp_path)
    _check_layout_kernels(kernels, optimized)
    # x86 with AVX2 reorders the input for the first NCHWc conv (its reorder is that conv's);
    # with AVX-512 that conv read the NCHW input itself (no ReorderInput, seen on an EPYC)
    for reorder in (k for k in kernels if k.startswith("ReorderInput")):
        assert set(kernels[reorder]) == {"conv0", "relu0"}
    # The unnamed conv is keyed by node_names and found through its decorated kernel name.
    assert lat["Conv_8"] > 0
    assert all(lat[n] > 0 for n in ("conv0", "conv1", "conv2", "concat", "gap", "fc"))


def _nchwc_graphs(through_pool: bool) -> tuple[onnx.GraphProto, onnx.GraphProto]:
    """conv -> relu -> pool -> flatten, and the NCHWc graph ORT makes of it: the layout
    changes back after the conv (``through_pool=False``) or after the pool (True)."""
    n = helper.make_node
    original = _graph(
        [n("Conv", ["x", "w"], ["c"], name="conv"), n("Relu", ["c"], ["r"], name="relu"),
         n("GlobalAveragePool", ["r"], ["p"], name="pool"),
         n("Flatten", ["p"], ["y"], name="flatten")],
        ["x"], ["y"], [_init("w", [8, 8, 3, 3])],
    )  # fmt: skip
    nodes = [
        n("ReorderInput", ["x"], ["t0"], name="ReorderInput", domain="com.microsoft.nchwc"),
        n("Conv", ["t0", "w"], ["t1"], name="r_nchwc", domain="com.microsoft.nchwc"),
    ]
    if through_pool:
        nodes += [
            n("GlobalAveragePool", ["t1"], ["t2"], name="p_nchwc", domain="com.microsoft.nchwc"),
            n("ReorderOutput", ["t2"], ["p"], name="ReorderOutput", domain="com.microsoft.nchwc"),
        ]
    else:
        nodes += [
            n("ReorderOutput", ["t1"], ["r"], name="ReorderOutput", domain="com.microsoft.nchwc"),
            n("GlobalAveragePool", ["r"], ["p"], name="pool"),
        ]
    nodes.append(n("Flatten", ["p"], ["y"], name="flatten"))
    return original, _graph(nodes, ["x"], ["y"])


@pytest.mark.unit
@pytest.mark.parametrize("through_pool", [False, True])
def test_reorder_output_is_charged_to_the_node_whose_layout_it_converts(through_pool):
    # On an AVX2 host (block size 8) ORT's NCHWc chain of the residual model runs through
    # Concat and GlobalAveragePool, so its ReorderOutput converts the pool's output and is
    # the pool's, not a convolution's; with other block sizes the chain ends at a conv.
    original, optimized = _nchwc_graphs(through_pool)
    shapes = {"x": [1, 8, 8, 8], "c": [1, 8, 8, 8], "r": [1, 8, 8, 8], "p": [1, 8, 1, 1],
              "w": [8, 8, 3, 3], "y": [1, 8]}
    kernels = attribute(original, optimized, shapes).kernels
    conv_relu = set(kernels["r_nchwc"])
    assert conv_relu == {"conv", "relu"} and kernels["ReorderInput"] == kernels["r_nchwc"]
    if through_pool:
        assert kernels["ReorderOutput"] == kernels["p_nchwc"] == {"pool": 1.0}
    else:
        assert kernels["ReorderOutput"] == kernels["r_nchwc"]
        assert kernels["pool"] == {"pool": 1.0}
    assert _check_layout_kernels(kernels, optimized) == 2


@pytest.mark.integration
def test_extended_level_fusedconv_keeps_conv_name(models):
    profile = profile_model(models["residual"], optimization="extended", **FAST)
    assert _kernels_of(profile, "relu0") == {"conv0"}
    assert "FusedConv 'conv0'" in profile.notes["relu0"]


@pytest.mark.integration
def test_matmul_add_fusion(models):
    profile = profile_model(models["matmul"], optimization="all", **FAST)
    fused = _kernels_of(profile, "bias1")
    assert fused == _kernels_of(profile, "mm1")
    assert any("MatMulAddFusion" in k for k in fused)
    shares = profile.metadata["kernels"][next(iter(fused))]
    # Work estimate: 4x16x32 MACs for the MatMul vs 4x32 elements for Add and Relu.
    assert shares["mm1"] == pytest.approx(2048 / (2048 + 128 + 128))
    assert "MatMulAddFusion" in profile.notes["bias1"]


@pytest.mark.integration
def test_int8_qoperator_model(int8_model, tmp_path):
    profile = profile_model(int8_model, optimization="all", **FAST)
    _check_profile(profile, int8_model)
    names = set(profile.latencies)
    kernels = profile.metadata["kernels"]
    # NHWC QLinearConv kernels carry _token_N suffixes; each maps to its own conv.
    tokens = [k for k in kernels if "_token_" in k and not k.startswith("Transpose")]
    assert tokens
    for kernel in tokens:
        base = kernel.rsplit("_token_", 1)[0]
        assert base in names and base in kernels[kernel], kernel
    # Inserted NHWC layout Transposes are charged to the NHWC (QLinear) op they serve.
    _check_layout_kernels(kernels, _optimized_graph(int8_model, "all", tmp_path))
    graph = onnx.load(str(int8_model)).graph
    op_of = dict(zip(node_names(graph), (n.op_type for n in graph.node), strict=True))
    for kernel in (k for k in kernels if k.startswith("Transpose")):
        assert [op_of[n][:7] for n in kernels[kernel]] == ["QLinear"], kernel
    convs = [n for n in names if "conv" in n.lower() and "concat" not in n.lower()]
    assert all(profile.latencies[n] > 0 for n in convs)


@pytest.mark.integration
def test_disabled_optimization_maps_one_to_one(models, int8_model):
    for path in (models["residual"], models["matmul"], int8_model):
        profile = profile_model(path, optimization="disable", **FAST)
        names = _names(path)
        assert profile.metadata["kernels"] == {n: {n: 1.0} for n in names}
        assert profile.notes == {}


@pytest.mark.integration
def test_removed_nodes_get_zero_and_a_reason(models):
    profile = profile_model(models["removed"], optimization="all", **FAST)
    lat, notes = profile.latencies, profile.notes
    # node_names: duplicates and the unnamed node become <OpType>_<index>.
    assert list(lat) == ["const", "fold_me", "ident", "Mul_3", "Relu_4", "Sigmoid_5"]
    assert lat["const"] == 0.0 and "Constant" in notes["const"]
    assert lat["fold_me"] == 0.0 and "constant folding" in notes["fold_me"]
    assert lat["ident"] == 0.0 and "Identity elimination" in notes["ident"]
    assert lat["Mul_3"] > 0 and lat["Sigmoid_5"] > 0


@pytest.mark.integration
def test_progress_called_once_per_measured_run(models):
    calls: list[tuple[int, int]] = []
    profile_model(models["matmul"], runs=4, warmup=2, min_seconds=0,
                  progress=lambda i, n: calls.append((i, n)))  # fmt: skip
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


@pytest.mark.integration
def test_deterministic_attribution(models):
    # ORT numbers inserted kernels (ReorderOutput_token_N) differently from session to
    # session, so compare what each original node receives, not kernel names.
    def received(profile: HostProfile) -> dict[str, list[float]]:
        kernels = profile.metadata["kernels"].values()
        return {n: sorted(s[n] for s in kernels if n in s) for n in profile.latencies}

    a = profile_model(models["residual"], **FAST)
    b = profile_model(models["residual"], **FAST)
    assert received(a) == received(b)
    assert a.notes.keys() == b.notes.keys()


@pytest.mark.integration
def test_plain_inference_seconds(models):
    seconds = plain_inference_seconds(
        models["residual"], runs=3, warmup=1, intra_op_threads=1, optimization="all"
    )
    assert len(seconds) == 3 and all(s > 0 for s in seconds)


def _graph(nodes, inputs, outputs, inits=()) -> onnx.GraphProto:
    f32 = TensorProto.FLOAT
    return helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(i, f32, None) for i in inputs],
        [helper.make_tensor_value_info(o, f32, None) for o in outputs],
        list(inits),
    )  # fmt: skip


@pytest.mark.unit
def test_split_weights_are_macs_and_elements():
    n = helper.make_node
    original = _graph(
        [n("Conv", ["x", "w"], ["c"], name="conv"), n("Relu", ["c"], ["y"], name="relu")],
        ["x"], ["y"], [_init("w", [4, 2, 3, 3])],
    )  # fmt: skip
    optimized = _graph(
        [n("FusedConv", ["x", "w"], ["y"], name="conv", domain="com.microsoft")], ["x"], ["y"]
    )
    shapes = {"x": [1, 2, 5, 5], "c": [1, 4, 5, 5], "y": [1, 4, 5, 5], "w": [4, 2, 3, 3]}
    result = attribute(original, optimized, shapes)
    macs, elements = 100 * 18, 100
    assert result.kernels["conv"] == {
        "conv": pytest.approx(macs / (macs + elements)),
        "relu": pytest.approx(elements / (macs + elements)),
    }


@pytest.mark.unit
def test_unrelatable_kernels_fall_back_to_nearest_with_note():
    n = helper.make_node
    original = _graph(
        [n("Relu", ["x"], ["a"], name="first"), n("Sigmoid", ["a"], ["y"], name="second")],
        ["x"], ["y"],
    )  # fmt: skip
    # "Mystery" shares no tensor or name with the original graph.
    optimized = _graph(
        [
            n("Relu", ["x"], ["a"], name="first"),
            n("Mystery", [], ["z"], name="mystery"),
            n("Sigmoid", ["a"], ["y"], name="second"),
        ],
        ["x"], ["y"],
    )  # fmt: skip
    attribution = attribute(original, optimized, {})
    assert attribution.kernels["mystery"] == {"first": 1.0}  # nearest, earlier on ties
    assert "mystery" in attribution.notes["first"]

    # A profiled name missing from the saved graph: charged like its neighbour in run order.
    def event(name: str, ts: int, dur: int) -> dict:
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": {}}

    runs = [[event("first", 10, 4), event("ghost", 15, 2), event("second", 20, 3)]]
    charge = event_shares(attribution, runs)
    assert charge["ghost"] == {"first": 1.0}
    per_run, totals = per_node_times(["first", "second"], charge, runs)
    assert totals == [pytest.approx(9e-6)]
    assert per_run[0] == {"first": pytest.approx(6e-6), "second": pytest.approx(3e-6)}


@pytest.mark.unit
def test_warmup_runs_are_dropped():
    def session(ts: int, dur: int) -> dict:
        return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur}

    def node(ts: int) -> dict:
        return {"cat": "Node", "name": "k_kernel_time", "ts": ts, "dur": 1}

    events = [session(0, 50), node(5), node(6), session(100, 50), node(105), session(200, 50)]
    events += [node(210), node(211), node(212)]
    measured = split_runs(events, warmup=1, runs=2, path=Path("m.onnx"))
    assert [len(run) for run in measured] == [1, 3]
    with pytest.raises(PlacementError, match="3 runs, expected 4"):
        split_runs(events, warmup=2, runs=2, path=Path("m.onnx"))


# --------------------------------------------------------------------------- bad input


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


@pytest.mark.unit
def test_missing_and_corrupt_model(tmp_path):
    with pytest.raises(PlacementError, match="no such file") as exc:
        profile_model(tmp_path / "nope.onnx")
    _one_line(exc)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage\xff" * 10)
    with pytest.raises(PlacementError, match="bad.onnx") as exc:
        profile_model(bad)
    _one_line(exc)


@pytest.mark.integration
def test_unsupported_operator_reports_ort_message(tmp_path):
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"], name="weird")], "g",
        [helper.make_tensor_value_info("x", f32, [2])],
        [helper.make_tensor_value_info("y", f32, [2])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "unsupported.onnx"
    onnx.save(model, path)
    with pytest.raises(PlacementError, match="ONNX Runtime cannot load") as exc:
        profile_model(path, **FAST)
    assert "NoSuchOp" in _one_line(exc)


@pytest.mark.integration
def test_too_new_ir_version_is_explained(tmp_path):
    # onnx 1.23 writes IR version 14 by default; onnxruntime 1.31 reads up to 13.
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
        [helper.make_tensor_value_info("x", f32, [2])],
        [helper.make_tensor_value_info("y", f32, [2])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 14
    path = tmp_path / "new_ir.onnx"
    onnx.save(model, path)
    with pytest.raises(PlacementError, match="IR version: 14") as exc:
        profile_model(path, **FAST)
    assert ".cc:" not in _one_line(exc)


@pytest.mark.integration
def test_dynamic_input_is_rejected_by_name(tmp_path):
    f32 = TensorProto.FLOAT
    path = _save(
        tmp_path, "dynamic", [helper.make_node("Relu", ["tokens"], ["y"], name="r")],
        [helper.make_tensor_value_info("tokens", f32, ["batch", 4])],
        [helper.make_tensor_value_info("y", f32, ["batch", 4])], [],
    )  # fmt: skip
    with pytest.raises(PlacementError, match="'tokens'.*dynamic") as exc:
        profile_model(path, **FAST)
    _one_line(exc)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"optimization": "max"}, "unknown optimization level 'max'"),
        ({"runs": 0}, "runs must be an integer >= 1"),
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"intra_op_threads": 0}, "intra-op threads must be an integer >= 1"),
        ({"runs": 2.5}, "runs must be an integer"),
        ({"seed": -1}, "seed must be an integer >= 0"),
    ],
)
@pytest.mark.unit
def test_bad_options(models, kwargs, message):
    with pytest.raises(PlacementError, match=message) as exc:
        profile_model(models["matmul"], **kwargs)
    _one_line(exc)
    with pytest.raises(PlacementError, match=message):
        plain_inference_seconds(models["matmul"], **kwargs)


@pytest.mark.integration
def test_uint8_input_model(int8_model, tmp_path):
    # A graph whose input is already uint8 (quantized upstream) gets uint8 random data.
    model = onnx.load(str(int8_model))
    graph = model.graph
    quantize = next(node for node in graph.node if node.op_type == "QuantizeLinear")
    graph.node.remove(quantize)
    del graph.input[:]
    graph.input.append(
        helper.make_tensor_value_info(quantize.output[0], TensorProto.UINT8, [1, 8, 8, 8])
    )
    path = tmp_path / "u8_input.onnx"
    onnx.save(model, path)
    profile = profile_model(path, **FAST)
    _check_profile(profile, path)


# --------------------------------------------------------------------------- profile files


def _profile(sha: str = "a" * 64) -> HostProfile:
    return HostProfile(
        latencies={"conv": 1.5e-4, "relu": 0.0},
        model_sha256=sha,
        model_path="models/net.onnx",
        metadata={"onnxruntime_version": "1.31.1", "runs": 3},
        kernel_total=1.5e-4,
        notes={"relu": "fused into FusedConv 'conv'"},
    )


@pytest.mark.unit
def test_profile_round_trip(tmp_path):
    profile = _profile()
    path = tmp_path / "net.profile.json"
    profile.save(path)
    loaded = HostProfile.load(path)
    assert loaded == profile
    assert loaded.source == str(path)
    assert list(loaded.latencies) == ["conv", "relu"]  # order kept
    assert os.listdir(tmp_path) == ["net.profile.json"]  # no temp file left behind
    profile.save(path)  # overwrite in place
    assert HostProfile.load(path) == profile


@pytest.mark.integration
def test_measured_profile_round_trip(models, tmp_path):
    profile = profile_model(models["residual"], **FAST)
    path = tmp_path / "p.json"
    profile.save(path)
    assert HostProfile.load(path) == profile


@pytest.mark.unit
def test_profile_hash_mismatch_message(tmp_path):
    path = tmp_path / "net.profile.json"
    _profile().save(path)
    loaded = HostProfile.load(path)
    loaded.check_matches("a" * 64, "models/net.onnx")  # same model: fine
    with pytest.raises(PlacementError) as exc:
        loaded.check_matches("b" * 64, "other.onnx")
    text = _one_line(exc)
    assert str(path) in text and "models/net.onnx" in text and "other.onnx" in text
    assert "re-run `placement profile other.onnx -o other.profile.json`" in text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not a JSON profile file"),
        ("[]", "expected a JSON object"),
        ('{"format": "something-else"}', "'format' is not"),
        ('{"format": "placement-host-profile", "version": 99}', "version 99 is not supported"),
        ('{"format": "placement-host-profile", "version": 1}', "missing key 'model_path'"),
    ],
)
@pytest.mark.unit
def test_corrupt_profile_files(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(PlacementError, match=message) as exc:
        HostProfile.load(path)
    assert str(path) in _one_line(exc)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("latencies", {"conv": -1.0}, "latency of node 'conv'"),
        ("latencies", {"conv": "fast"}, "latency of node 'conv'"),
        ("latencies", {}, "'latencies' must be"),
        ("model_sha256", "xyz", "'model_sha256'"),
        ("kernel_total", None, "'kernel_total'"),
        ("notes", {"conv": 3}, "'notes'"),
        ("metadata", [], "'metadata'"),
    ],
)
@pytest.mark.unit
def test_profile_schema_errors(tmp_path, key, value, message):
    data = _profile().to_json()
    data[key] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlacementError, match=message) as exc:
        HostProfile.load(path)
    _one_line(exc)


@pytest.mark.unit
def test_profile_nan_and_missing_file(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_profile().to_json()).replace("0.00015", "NaN", 1))
    with pytest.raises(PlacementError, match="not a JSON profile file"):
        HostProfile.load(path)
    with pytest.raises(PlacementError, match="no such profile file"):
        HostProfile.load(tmp_path / "missing.json")
    with pytest.raises(PlacementError, match="is a directory"):
        HostProfile.load(tmp_path)
    with pytest.raises(PlacementError, match="cannot write profile"):
        _profile().save(tmp_path / "no" / "such" / "dir.json")


# --------------------------------------------------------------------------- examples


@pytest.mark.parametrize("name", ["resnet_tiny.onnx", "resnet_tiny_int8.onnx"])
@pytest.mark.integration
def test_examples(name):
    path = EXAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} not generated yet")
    profile = profile_model(path, runs=2, warmup=1, min_seconds=0)
    _check_profile(profile, path)
    assert profile.kernel_total > 0
