"""Analytical host model: ``T_host,v`` estimated from an operator's work and bytes.

The CIM paper measures ``T_host,v`` with ONNX Runtime on the target host (Section
IV-A1). When the target host is not at hand (the ``arm-a72`` and ``x86-ryzen`` presets
describe the paper's two hosts; this machine is neither), hardware with ``[host]
latency = "model"`` takes ``T_host,v`` from this roofline instead, an estimate::

    t_v = overhead + max(MACs_v / (peak_MAC/s(precision) x eff_class),
                         bytes_v / (memory_bandwidth x eff_memory))

* ``MACs_v``: for a CIM-capable operator (``Operator.cim``),
  ``n_mvm x rows x cols / groups``: a grouped or depthwise convolution is mapped
  block-diagonally (:mod:`placement.graph`), so only ``1/groups`` of the cells do work.
  For a MatMul/Gemm between two activations: output elements x ``K`` (the reduced
  dimension of the left operand). Anything else (elementwise, pooling, data movement,
  a convolution whose weight is not constant) has no MACs here: memory-bound.
* ``precision``: int8 kernels (:data:`INT8_OPS`, and Conv/MatMul/Gemm fed by a
  ``DequantizeLinear``, the QDQ form ONNX Runtime fuses into an int8 kernel) use the
  host's int8 MAC rate, everything else its fp32 rate.
* ``bytes_v``: every tensor the operator reads or writes once (activations, weights,
  biases, scales) -- no cache reuse, no re-reads.
* ``eff_class``: the fraction of the peak MAC rate an operator class reaches
  (:data:`OP_CLASSES`: dense convolution, grouped/depthwise convolution, MatMul/Gemm);
  ``eff_memory`` the fraction of the memory bandwidth any operator streams at;
  ``overhead`` a fixed cost per operator (kernel dispatch, threading bookkeeping).

The constants are the ``[host]`` keys of a hardware file
(:class:`~placement.hardware.base.HostModelSpec`): peaks from vendor data, efficiencies
fitted to ONNX Runtime profiles on a calibration host
(``benchmarks/host_model_calibration.py``) and carried to the target host as an
assumption -- that ONNX Runtime reaches the same fraction of peak there. Every result
built from it is labelled an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from placement.graph import Operator, OpGraph
from placement.hardware.base import HostModelSpec

#: Operator classes: the three compute classes with a fitted efficiency, and the rest.
OP_CLASSES = ("dense_conv", "grouped_conv", "matmul", "memory")
CLASS_LABELS = {
    "dense_conv": "dense conv",
    "grouped_conv": "depthwise/grouped conv",
    "matmul": "matmul/gemm",
    "memory": "elementwise/other",
}
#: (domain, op_type) of the int8 compute kernels.
INT8_OPS = frozenset(
    {
        ("", "QLinearConv"), ("", "ConvInteger"), ("", "QLinearMatMul"), ("", "MatMulInteger"),
        ("com.microsoft", "QGemm"), ("com.microsoft", "QLinearConv"),
        ("com.microsoft", "MatMulIntegerToFloat"), ("com.microsoft", "DynamicQuantizeMatMul"),
    }
)  # fmt: skip
_CONV_OPS = frozenset({"Conv", "QLinearConv", "ConvInteger"})
_MATMUL_OPS = frozenset(
    {"MatMul", "Gemm", "QLinearMatMul", "MatMulInteger", "QGemm", "MatMulIntegerToFloat",
     "DynamicQuantizeMatMul"}
)  # fmt: skip
# QDQ form: a float kernel between DequantizeLinear and QuantizeLinear runs as int8.
_QDQ_FUSABLE = frozenset({"Conv", "MatMul", "Gemm"})


@dataclass(frozen=True)
class OperatorWork:
    """What the host model charges one operator for: its class, precision, MACs, bytes."""

    op_class: str  # one of OP_CLASSES
    precision: str  # "int8" or "fp32" (the MAC rate used; irrelevant without MACs)
    macs: float  # multiply-accumulates (0 for memory-bound operators)
    nbytes: int  # bytes read and written once


@dataclass(frozen=True)
class HostEstimate:
    """One operator's estimated host latency and its parts, in seconds."""

    work: OperatorWork
    overhead: float
    compute: float  # MACs / (peak x efficiency)
    memory: float  # bytes / (bandwidth x efficiency)

    @property
    def total(self) -> float:
        return self.overhead + max(self.compute, self.memory)

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: the larger roofline term."""
        return "compute" if self.compute > self.memory else "memory"


def operator_work(op: Operator, *, int8: bool | None = None) -> OperatorWork:
    """The class, precision, MACs and bytes of ``op`` (module docstring).

    ``int8``: force the precision (``None``: int8 for :data:`INT8_OPS` only; use
    :func:`graph_work` to also recognise the QDQ form).
    """
    if int8 is None:
        int8 = (op.domain, op.op_type) in INT8_OPS
    precision = "int8" if int8 else "fp32"
    nbytes = sum(t.nbytes for t in (*op.inputs, *op.constants, *op.outputs))
    if op.cim is not None:
        m = op.cim
        macs = m.n_mvm * m.rows * m.cols / m.groups
        if op.op_type in _CONV_OPS:
            op_class = "grouped_conv" if m.groups > 1 else "dense_conv"
        else:
            op_class = "matmul"
        return OperatorWork(op_class, precision, float(macs), nbytes)
    k = _reduced_dim(op) if op.op_type in _MATMUL_OPS else None
    if k is not None:
        return OperatorWork("matmul", precision, float(op.n_out * k), nbytes)
    return OperatorWork("memory", precision, 0.0, nbytes)


def _reduced_dim(op: Operator) -> int | None:
    """K of a MatMul/Gemm whose left operand is an activation (the first input)."""
    if not op.inputs or not op.outputs:
        return None
    a, y = op.inputs[0].shape, op.outputs[0].shape
    if not a or not y:
        return None
    if op.op_type in ("Gemm", "QGemm") and len(a) == 2:
        return a[1] if a[0] == y[0] else a[0]  # (M, K), or (K, M) with transA
    return a[-1]


def graph_work(graph: OpGraph) -> dict[str, OperatorWork]:
    """:func:`operator_work` of every operator of ``graph``; Conv/MatMul/Gemm fed by a
    ``DequantizeLinear`` operator (QDQ form) count as int8."""
    out = {}
    for name, op in graph.operators.items():
        int8 = None
        if op.domain == "" and op.op_type in _QDQ_FUSABLE:
            producers = graph.graph.predecessors(name) if name in graph.graph else ()
            if any(graph.operators[p].op_type == "DequantizeLinear" for p in producers):
                int8 = True
        out[name] = operator_work(op, int8=int8)
    return out


def peak_macs(spec: HostModelSpec, precision: str) -> float:
    """Peak multiply-accumulates per second of one core at ``precision``."""
    per_cycle = spec.int8_macs_per_cycle if precision == "int8" else spec.fp32_macs_per_cycle
    return spec.clock * per_cycle


def efficiency(spec: HostModelSpec, op_class: str) -> float:
    """The fraction of the peak MAC rate ``op_class`` reaches (1 for memory-bound)."""
    return {
        "dense_conv": spec.eff_dense_conv,
        "grouped_conv": spec.eff_grouped_conv,
        "matmul": spec.eff_matmul,
    }.get(op_class, 1.0)


def estimate(work: OperatorWork, spec: HostModelSpec) -> HostEstimate:
    """The roofline of ``work`` on the host ``spec`` describes."""
    compute = 0.0
    if work.macs > 0:
        compute = work.macs / (peak_macs(spec, work.precision) * efficiency(spec, work.op_class))
    memory = work.nbytes / (spec.memory_bandwidth * spec.eff_memory)
    return HostEstimate(work, spec.overhead, compute, memory)


def estimate_graph(graph: OpGraph, spec: HostModelSpec) -> dict[str, HostEstimate]:
    """Every operator's estimate, in graph order."""
    return {name: estimate(work, spec) for name, work in graph_work(graph).items()}


def host_latencies(graph: OpGraph, spec: HostModelSpec) -> dict[str, float]:
    """``T_host,v`` of every operator of ``graph``, estimated (seconds)."""
    return {name: e.total for name, e in estimate_graph(graph, spec).items()}
