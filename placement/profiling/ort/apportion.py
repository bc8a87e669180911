"""ONNX Runtime's per-operator times split over the operator's loop nests (``--host-times ort``).

A nest profile's host time T_cpu per nest is, for ``ort``, its operator's ONNX Runtime
time apportioned by the nests' shares of the operator's compiled-JIT time
(:func:`apportion_ort`); the nest profile records how
(``host_times_detail.apportioning``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def apportion_ort(
    nests: Sequence[Any], compiled: Mapping[str, float], ort_times: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, Any]]:
    """Per nest, its ONNX operator's ONNX Runtime time times the nest's compiled share.

    ``compiled``: per nest id, its measured JIT time; ``ort_times``: per ONNX node name,
    ONNX Runtime's time. For every operator with nests, the nests' times sum to the
    operator's ONNX Runtime time (shares by compiled time; by ``N_total`` when all of an
    operator's nests measured 0). Nests with no ONNX operator (or one ONNX Runtime does
    not list) keep their compiled time. Returns the times and a record of what was done,
    including the ONNX Runtime time of operators with no nest (it stays on the host
    whatever the placement and is in no nest's T_cpu).
    """
    groups: dict[str, list[Any]] = {}
    for nest in nests:
        if nest.onnx_node and nest.onnx_node in ort_times:
            groups.setdefault(nest.onnx_node, []).append(nest)
    t_cpu: dict[str, float] = {}
    by_work: list[str] = []
    for node, group in groups.items():
        total = math.fsum(compiled[n.id] for n in group)
        if total > 0:
            weights = [compiled[n.id] for n in group]
        else:
            weights = [float(max(1, n.n_total)) for n in group]
            total = math.fsum(weights)
            by_work.append(node)
        for nest, weight in zip(group, weights, strict=True):
            t_cpu[nest.id] = ort_times[node] * weight / total
    kept = [n.id for n in nests if n.id not in t_cpu]
    for nid in kept:
        t_cpu[nid] = compiled[nid]
    without = {node: t for node, t in ort_times.items() if node not in groups}
    record = {
        "rule": "T_cpu(nest) = T_ort(operator) x T_compiled(nest) / sum of T_compiled over"
        " the operator's nests",
        "operators": len(groups),
        "shares_by_n_total": by_work,
        "nests_kept_compiled": kept,
        "operators_without_nests": without,
        "operators_without_nests_seconds": math.fsum(without.values()),
    }
    return {n.id: t_cpu[n.id] for n in nests}, record
