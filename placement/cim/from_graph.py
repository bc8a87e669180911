"""From an ingested ONNX graph, a host profile and a CIM spec to a :class:`CimInstance`.

This is where the three sources of numbers meet: measured host latencies
(``T_host,v``), the analytical accelerator model (``T_acc,v``, ``N_crossbar,v``)
and the bus model (``T_transfer``).
"""

from __future__ import annotations

from collections.abc import Mapping

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.devices.cim import accelerator_latency, crossbars_needed, transfer_latency
from placement.errors import PlacementError
from placement.graph import OpGraph
from placement.hardware.cim import CimSpec


def host_latencies_for(graph: OpGraph, profiled: Mapping[str, float]) -> dict[str, float]:
    """Per-operator host latency; time of folded constant nodes goes to the operator using them.

    ONNX Runtime folds constant subgraphs too, so that time is normally zero; when
    it is not (optimizations disabled), charging it to the consumer keeps the
    per-operator sum equal to the profiled total.
    """
    missing = [name for name in graph.operators if name not in profiled]
    if missing:
        raise PlacementError(
            f"the host profile has no latency for operator {missing[0]!r}"
            f" ({len(missing)} missing): re-run 'placement profile' on this model"
        )
    latency = {name: float(profiled[name]) for name in graph.operators}
    first = next(iter(graph.operators))
    for name in graph.folded:
        t = float(profiled.get(name, 0.0))
        if t > 0.0:
            latency[graph.folded_consumers.get(name, first)] += t
    return latency


def cim_instance(graph: OpGraph, profiled: Mapping[str, float], spec: CimSpec) -> CimInstance:
    """Build the ILP's data. Raises if the budget cannot hold any CIM-capable operator."""
    t_host = host_latencies_for(graph, profiled)
    operators = []
    for name, op in graph.operators.items():
        if op.cim is None:
            operators.append(CimOperator(name, t_host[name], None, 0, op.op_type))
            continue
        t_acc = accelerator_latency(op.cim.n_mvm, op.n_in, op.n_out, spec).total
        xbars = crossbars_needed(op.cim.rows, op.cim.cols, spec)
        operators.append(CimOperator(name, t_host[name], t_acc, xbars, op.op_type))
    _check_budget(graph, operators, spec)
    edges = [
        CimEdge(src, dst, transfer_latency(graph.operators[src].n_out, spec))
        for src, dst, _tensors in graph.edges
    ]
    return CimInstance.build(operators, edges, spec.crossbars)


def _check_budget(graph: OpGraph, operators: list[CimOperator], spec: CimSpec) -> None:
    capable = [op for op in operators if op.supported]
    if not capable:
        raise PlacementError(
            f"{graph.path}: no operator can run on the CIM accelerator (it maps Conv, Gemm and"
            " MatMul with a constant weight, also int8 QLinear/QDQ forms): nothing to place"
        )
    smallest = min(capable, key=lambda op: op.crossbars)
    if smallest.crossbars > spec.crossbars:
        raise PlacementError(
            f"a budget of {spec.crossbars} crossbars fits no operator: the smallest CIM-capable"
            f" one, {smallest.name!r}, needs {smallest.crossbars}; raise --crossbars"
        )
