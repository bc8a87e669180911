"""ONNX files: reading them with one-line errors and contained external data (weights
left in their files on request), the memory check before reading, and the names of
their nodes.

Node names: ONNX allows empty and duplicate node names. Every stage (ingestion,
profiling, profile files, results) keys operators by the name :func:`node_names`
gives: the node's own name when it is non-empty and unique, otherwise
``<OpType>_<index>`` (the index in ``graph.node``), the same scheme ONNX Runtime uses
for unnamed nodes. Later clashes get a ``__<index>`` suffix.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

import onnx
from onnx.external_data_helper import (
    ExternalDataInfo,
    load_external_data_for_model,
)

from placement.errors import PlacementError, first_line
from placement.machine import available_memory
from placement.weights import (
    INLINE_MAX_BYTES,
    ITEMSIZE,
    embedded_as_references,
    inline,
    is_reference,
)

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


def read_onnx(path: str | Path, *, load_weights: bool = True) -> onnx.ModelProto:
    """Load an ONNX model (with external data) or raise a one-line PlacementError.

    External data is read only from files inside the model's directory
    (:func:`check_external_data`), checked before any of them is opened. A model whose
    files do not fit in the memory available is refused before anything is read
    (:func:`check_fits_in_memory`). ``load_weights=False``: initializers over
    :data:`~placement.weights.INLINE_MAX_BYTES` stay in their files as external-data
    references (for a single-file model, into the model file itself), so the weights
    are neither read nor copied (:mod:`placement.weights`); everything else is as loaded.
    """
    path = Path(path)
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    if path.is_dir():
        raise PlacementError(f"{path}: is a directory, expected an .onnx file")
    check_fits_in_memory(path, path.stat().st_size)
    try:
        model = _parse(path, load_weights)
        if not model.HasField("graph"):
            raise PlacementError(f"{path}: not a readable ONNX model (no graph)")
        files = check_external_data(model, path)
        if files:
            check_fits_in_memory(path, sum(f.stat().st_size for f in files | {path.resolve()}))
            if load_weights:
                load_external_data_for_model(model, str(path.parent))
            else:
                _load_small_external_data(model, path.parent)
    except PlacementError:
        raise
    except Exception as exc:  # protobuf raises a variety of types on garbage input
        raise PlacementError(f"{path}: not a readable ONNX model ({first_line(exc)})") from None
    return model


def _parse(path: Path, load_weights: bool) -> onnx.ModelProto:
    # A link to a file in another directory keeps its weights in the protobuf: ONNX Runtime
    # refuses external data that resolves outside the directory the model is named in.
    if not load_weights and path.resolve().parent == path.absolute().parent.resolve():
        split = embedded_as_references(path)
        if split is not None:
            try:
                return onnx.ModelProto.FromString(split)
            except Exception:  # parsed as usual below: the same error as a full load
                pass
    return onnx.load(str(path), load_external_data=False)


def _load_small_external_data(model: onnx.ModelProto, base_dir: Path) -> None:
    """Read the external tensors of up to INLINE_MAX_BYTES into the protobuf (shape
    inference reads small constants); larger ones stay references."""
    for _, tensor in _all_tensors(model):
        if is_reference(tensor) and _data_bytes(tensor) <= INLINE_MAX_BYTES:
            inline(tensor, base_dir)


def _data_bytes(tensor: onnx.TensorProto) -> int:
    length = ExternalDataInfo(tensor).length
    if length is not None:
        return int(length)
    return math.prod(tensor.dims) * ITEMSIZE.get(tensor.data_type, 1)


def available_memory_bytes() -> int | None:
    """The bytes this process may still use (:func:`placement.machine.available_memory`);
    None where it cannot be read."""
    found = available_memory()
    return None if found is None else found[0]


def check_fits_in_memory(path: str | Path, need_bytes: int, limit_bytes: int | None = None) -> None:
    """Refuse, in one line, a model whose files (``need_bytes``: the model file and its
    external data) exceed ``limit_bytes``, by default the memory available now
    (:func:`available_memory_bytes`; nothing is refused where it is unknown).

    Profiling holds the weights in memory once (ONNX Runtime's copy); a model larger
    than the memory would only end in swapping or the kernel's out-of-memory killer.
    """
    limit = available_memory_bytes() if limit_bytes is None else limit_bytes
    if limit is None or need_bytes <= limit:
        return
    what = "of memory available (MemAvailable)" if limit_bytes is None else "memory limit"
    raise PlacementError(
        f"{path}: the model takes {need_bytes / 1e9:.3g} GB with its weights, more than the"
        f" {limit / 1e9:.3g} GB {what}: it cannot be profiled here; free memory or use a"
        " machine with more"
    )


def check_external_data(model: onnx.ModelProto, path: str | Path) -> set[Path]:
    """Refuse external data outside the directory of the model file ``path``; return the
    real paths of the files it names (empty: no external data).

    ONNX resolves a tensor's ``location`` against the model's directory: an absolute
    location, ``..`` or a symbolic link could make loading a model read any file this
    user can read. Every location must name an existing file whose real path (links
    resolved) lies inside the model's real directory.
    """
    path = Path(path)
    base = path.absolute().parent.resolve()
    files: set[Path] = set()
    for kind, tensor in _all_tensors(model):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
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
        files.add(target)
    return files


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
