"""Stable, unique names for the nodes of an ONNX graph.

ONNX allows empty and duplicate node names. Every stage (ingestion, profiling,
profile files, results) keys operators by the name given here, so the rule
lives in one place: the node's own name when it is non-empty and unique,
otherwise ``<OpType>_<index>`` (the index in ``graph.node``), the same scheme
ONNX Runtime uses for unnamed nodes. Later clashes get a ``__<index>`` suffix.
"""

from __future__ import annotations

from collections import Counter

import onnx


def node_names(graph: onnx.GraphProto) -> list[str]:
    """Return one unique name per node of ``graph``, in ``graph.node`` order."""
    counts = Counter(node.name for node in graph.node if node.name)
    names: list[str] = []
    taken: set[str] = set()
    for index, node in enumerate(graph.node):
        name = node.name if node.name and counts[node.name] == 1 else f"{node.op_type}_{index}"
        if name in taken:
            name = f"{name}__{index}"
        taken.add(name)
        names.append(name)
    return names
