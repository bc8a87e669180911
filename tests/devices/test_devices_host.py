"""The analytical host model (a roofline) on closed-form cases."""

from pathlib import Path

import pytest

from placement.devices.host import (
    OP_CLASSES,
    estimate,
    estimate_graph,
    graph_work,
    host_latencies,
    operator_work,
)
from placement.graph import CimMapping, Operator, TensorInfo, load_graph
from placement.hardware.base import HostModelSpec
from placement.hardware.cim import load_hardware

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"

# 1 GHz, 10 fp32 / 40 int8 MACs per cycle, 8 GB/s; 2 us per operator; round efficiencies.
SPEC = HostModelSpec(
    clock=1e9, fp32_macs_per_cycle=10, int8_macs_per_cycle=40, memory_bandwidth=8e9,
    overhead=2e-6, eff_dense_conv=0.5, eff_grouped_conv=0.1, eff_matmul=0.8, eff_memory=0.5,
)  # fmt: skip


def t(name: str, shape: tuple[int, ...], elem: str = "UINT8", size: int = 1) -> TensorInfo:
    return TensorInfo(name, shape, elem, size)


def op(op_type, inputs, outputs, constants=(), cim=None, domain="") -> Operator:
    return Operator("v", op_type, domain, 0, tuple(inputs), tuple(constants), tuple(outputs), cim)


def test_compute_bound_int8_conv():
    # QLinearConv 64 -> 128 channels, 3x3, 56x56 output: M_v = 128, N_v = 576, 3136 MVMs
    x, y = t("x", (1, 64, 56, 56)), t("y", (1, 128, 56, 56))
    w = t("w", (128, 64, 3, 3), "INT8")
    conv = op("QLinearConv", [x], [y], [w], CimMapping(128, 576, 3136, 1, "w"))
    work = operator_work(conv)
    assert (work.op_class, work.precision) == ("dense_conv", "int8")
    macs = 3136 * 128 * 576  # 231.2 M
    assert work.macs == macs
    assert work.nbytes == 64 * 56 * 56 + 128 * 56 * 56 + 128 * 64 * 9
    e = estimate(work, SPEC)
    assert e.compute == pytest.approx(macs / (40e9 * 0.5))  # 11.56 ms
    assert e.memory == pytest.approx(work.nbytes / (8e9 * 0.5))  # 0.17 ms
    assert e.bound == "compute"
    assert e.total == pytest.approx(2e-6 + macs / 20e9)
    # the same convolution in fp32 runs at the fp32 rate
    fp32 = operator_work(op("Conv", [x], [y], [w], CimMapping(128, 576, 3136, 1, "w")))
    assert fp32.precision == "fp32"
    assert estimate(fp32, SPEC).compute == pytest.approx(macs / (10e9 * 0.5))


def test_memory_bound_add():
    a, b = t("a", (1, 64, 56, 56), "FLOAT", 4), t("b", (1, 64, 56, 56), "FLOAT", 4)
    s = t("s", (1, 64, 56, 56), "FLOAT", 4)
    work = operator_work(op("Add", [a, b], [s]))
    assert (work.op_class, work.macs) == ("memory", 0.0)
    nbytes = 3 * 64 * 56 * 56 * 4  # two inputs read, one output written: 2.4 MB
    assert work.nbytes == nbytes
    e = estimate(work, SPEC)
    assert (e.compute, e.bound) == (0.0, "memory")
    assert e.total == pytest.approx(2e-6 + nbytes / (8e9 * 0.5))  # 2 us + 602 us


def test_depthwise_conv_is_charged_one_group_of_the_block_diagonal_macs():
    # depthwise 3x3 over 144 channels, 56x56: block-diagonal mapping M_v = 144,
    # N_v = 144 * 9 (graph.py), but each output channel uses only its own 9 weights
    x, y = t("x", (1, 144, 56, 56)), t("y", (1, 144, 56, 56))
    w = t("w", (144, 1, 3, 3), "INT8")
    dw = op("QLinearConv", [x], [y], [w], CimMapping(144, 144 * 9, 3136, 144, "w"))
    work = operator_work(dw)
    assert work.op_class == "grouped_conv"
    assert work.macs == 3136 * 144 * 9  # = n_mvm * rows * cols / groups, 4.06 M
    e = estimate(work, SPEC)
    assert e.compute == pytest.approx(3136 * 144 * 9 / (40e9 * 0.1))  # grouped efficiency
    assert e.total == pytest.approx(2e-6 + max(e.compute, e.memory))


def test_matmul_between_activations_is_output_elements_times_k():
    a, b = t("a", (8, 64, 32), "FLOAT", 4), t("b", (8, 32, 16), "FLOAT", 4)
    y = t("y", (8, 64, 16), "FLOAT", 4)
    work = operator_work(op("MatMul", [a, b], [y]))
    assert (work.op_class, work.precision) == ("matmul", "fp32")
    assert work.macs == 8 * 64 * 16 * 32
    assert estimate(work, SPEC).compute == pytest.approx(work.macs / (10e9 * 0.8))
    # Gemm with transA: A is (K, M) = (32, 64), output (64, 16)
    gemm = operator_work(op("Gemm", [t("a", (32, 64), "FLOAT", 4), t("b", (32, 16), "FLOAT", 4)],
                            [t("y", (64, 16), "FLOAT", 4)]))  # fmt: skip
    assert gemm.macs == 64 * 16 * 32


def test_the_example_model_with_a_preset():
    graph = load_graph(INT8)
    work = graph_work(graph)
    assert set(work) == set(graph.operators)
    assert work["b3b_dwconv_quant"].op_class == "grouped_conv"
    assert work["stem_conv_quant"].op_class == "dense_conv"
    assert work["fc_quant"].op_class == "matmul"  # com.microsoft QGemm
    assert {w.precision for n, w in work.items() if graph.operators[n].cim} == {"int8"}
    assert {w.op_class for w in work.values()} <= set(OP_CLASSES)
    spec = load_hardware("arm-a72").host.model
    assert spec is not None
    latencies = host_latencies(graph, spec)
    assert all(v >= spec.overhead for v in latencies.values())
    assert latencies == {k: e.total for k, e in estimate_graph(graph, spec).items()}
    # the same model on the x86 preset's host is faster, operator by operator
    x86 = load_hardware("x86-ryzen").host.model
    assert x86 is not None
    assert all(host_latencies(graph, x86)[k] < v for k, v in latencies.items())
