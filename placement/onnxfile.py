"""ONNX files: reading them with one-line errors and contained external data, and the
names of their nodes.

Node names: ONNX allows empty and duplicate node names. Every stage (ingestion,
profiling, profile files, results) keys operators by the name :func:`node_names`
gives: the node's own name when it is non-empty and unique, otherwise
``<OpType>_<index>`` (the index in ``graph.node``), the same scheme ONNX Runtime uses
for unnamed nodes. Later clashes get a ``__<index>`` suffix.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import onnx
from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_model

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
    """Load an ONNX model (with external data) or raise a one-line PlacementError.

    External data is read only from files inside the model's directory
    (:func:`check_external_data`), checked before any of them is opened.
    """
    path = Path(path)
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    if path.is_dir():
        raise PlacementError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = onnx.load(str(path), load_external_data=False)
        if not model.HasField("graph"):
            raise PlacementError(f"{path}: not a readable ONNX model (no graph)")
        if check_external_data(model, path):
            load_external_data_for_model(model, str(path.parent))
    except PlacementError:
        raise
    except Exception as exc:  # protobuf raises a variety of types on garbage input
        raise PlacementError(f"{path}: not a readable ONNX model ({first_line(exc)})") from None
    return model


def check_external_data(model: onnx.ModelProto, path: str | Path) -> int:
    """Refuse external data outside the directory of the model file ``path``; return how
    many tensors have external data.

    ONNX resolves a tensor's ``location`` against the model's directory: an absolute
    location, ``..`` or a symbolic link could make loading a model read any file this
    user can read. Every location must name an existing file whose real path (links
    resolved) lies inside the model's real directory.
    """
    path = Path(path)
    base = path.absolute().parent.resolve()
    count = 0
    for kind, tensor in _all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        count += 1
        location = ExternalDataInfo(tensor).location
        what = f"{path}: the external data of {kind} at {location!r}"
        if not location or "\0" in location:
            raise PlacementError(f"{what} is not a file name")
        if PurePosixPath(location).is_absolute() or PureWindowsPath(location).anchor:
            raise PlacementError(
                f"{what} is an absolute path: refused, external data must be a file in the"
                " model's directory"
            )
        target = (base / location).resolve()
        if not target.is_relative_to(base):
            raise PlacementError(
                f"{what} resolves to {target}, outside the model's directory {base}: refused"
            )
        if not target.is_file():
            raise PlacementError(f"{what} is missing (looked for {target})")
    return count


def _all_tensors(model: onnx.ModelProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    """Every tensor of the model that can hold data: initializers (dense and sparse) and
    tensor attributes, in the graph, its subgraphs and the model's functions."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        yield from _node_tensors(function.node)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    for tensor in graph.initializer:
        yield f"initializer {tensor.name!r}", tensor
    for sparse in graph.sparse_initializer:
        yield f"initializer {sparse.values.name!r}", sparse.values
        yield f"initializer {sparse.values.name!r} (indices)", sparse.indices
    yield from _node_tensors(graph.node)


def _node_tensors(nodes: Iterable[onnx.NodeProto]) -> Iterator[tuple[str, onnx.TensorProto]]:
    for node in nodes:
        for attr in node.attribute:
            sparse = [attr.sparse_tensor] if attr.HasField("sparse_tensor") else []
            sparse += list(attr.sparse_tensors)
            tensors = ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
            tensors += [t for s in sparse for t in (s.values, s.indices)]
            for tensor in tensors:
                yield f"attribute {attr.name!r} of node {node.name or node.op_type!r}", tensor
            graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
            for graph in graphs:
                yield from _graph_tensors(graph)


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
