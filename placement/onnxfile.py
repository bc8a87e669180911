"""ONNX files: reading them with one-line errors, and the names of their nodes.

Node names: ONNX allows empty and duplicate node names. Every stage (ingestion,
profiling, profile files, results) keys operators by the name :func:`node_names`
gives: the node's own name when it is non-empty and unique, otherwise
``<OpType>_<index>`` (the index in ``graph.node``), the same scheme ONNX Runtime uses
for unnamed nodes. Later clashes get a ``__<index>`` suffix.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from placement.errors import PlacementError

# Random ops: folding one would freeze a single draw into a constant, so neither
# ONNX Runtime nor our ingestion folds them.
NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike"}
    | {"Multinomial", "Bernoulli"}
)

#: The fix for a map, sequence or string tensor in a model: no fixed input shape turns it
#: into a numeric tensor whose bytes are known, but the numeric part of the model can be
#: placed on its own.
NOT_NUMERIC_FIX = (
    "placement works on numeric tensors only; cut the model to its numeric part with"
    " onnx.utils.extract_model(path, out, input_names, output_names) and place that"
)


def read_onnx(path: str | Path) -> onnx.ModelProto:
    """Load an ONNX model (with external data) or raise a one-line PlacementError."""
    path = Path(path)
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    if path.is_dir():
        raise PlacementError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(str(path))
    except (DecodeError, ValueError, RuntimeError, OSError) as exc:
        raise PlacementError(f"{path}: not a readable ONNX model ({first_line(exc)})") from None
    except Exception as exc:  # protobuf raises a variety of types on garbage input
        raise PlacementError(f"{path}: not a readable ONNX model ({first_line(exc)})") from None
    if not model.HasField("graph"):
        raise PlacementError(f"{path}: not a readable ONNX model (no graph)")
    return model


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (or its type's name)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


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
