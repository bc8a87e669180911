"""Constant folding and static shape inference of an ONNX model, before it becomes a graph.

A node whose inputs are all constants (initializers, ``Constant`` outputs, outputs of
folded nodes), and ``Shape``/``Size`` of a tensor with a fully static shape, is
evaluated here (per node, with ``onnx.reference.ReferenceEvaluator``; ONNX Runtime for
ops it lacks) and is not an operator: no runtime would spend time on it. Shape
inference is then re-run with the folded values as initializers, which resolves e.g. a
``Reshape`` fed by ``Shape -> Gather -> Concat``. This also folds ``DequantizeLinear``
of a constant weight, so a QDQ ``Conv`` sees a constant weight. ONNX has no shape
functions for ONNX Runtime's ``com.microsoft`` ops (``QLinearAdd``, ``QGemm``, ...), so
tensors that ONNX inference leaves unknown are asked of ONNX Runtime's own inference
(one session, no run). Random ops are never folded (``NONDETERMINISTIC_OPS``).

Memory: inference runs on a skeleton of the model in which initializers above
:data:`~placement.weights.INLINE_MAX_BYTES` (weights: no shape depends on their values;
every tensor ``read_onnx(load_weights=False)`` leaves in its file is over it) are declared as
graph inputs of the same type instead of being copied, so a round costs the graph, not
the weights (:func:`weightless`). Initializers that are references to their files
(:mod:`placement.weights`) are read, when a node is folded, as memory-mapped arrays.
``max_bytes`` bounds what is folded: a node is folded only if none of its inputs and
outputs exceeds it (checked on the inferred shapes before evaluating, so a
large weight is never read, transposed or copied, and ``ConstantOfShape`` never
materializes a large tensor). The CIM ingestion folds without bound (a QDQ weight must
become a constant); the loop-nest lowering bounds it (its shape subgraphs only).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from placement.errors import PlacementError, first_line
from placement.onnxfile import NONDETERMINISTIC_OPS
from placement.weights import INLINE_MAX_BYTES, set_external_folder, tensor_array


def node_domain(node: onnx.NodeProto) -> str:
    return "" if node.domain in ("", "ai.onnx") else node.domain


@dataclass
class FoldedModel:
    """What folding and inference know about the model's tensors."""

    initializers: dict[str, onnx.TensorProto]
    sparse: dict[str, onnx.SparseTensorProto]  # constants, but never folded (no dense value)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # folded outputs
    folded: set[int] = field(default_factory=set)  # indices into graph.node
    types: dict[str, onnx.TypeProto] = field(default_factory=dict)
    too_large: set[int] = field(default_factory=set)  # constant, but over max_bytes
    base_dir: Path | None = None  # where initializers that are references are resolved

    def is_constant(self, name: str) -> bool:
        return name in self.initializers or name in self.values or name in self.sparse

    def value(self, name: str) -> np.ndarray:
        if name in self.values:
            return self.values[name]
        return tensor_array(self.initializers[name], self.base_dir)


def fold_and_infer(
    model: onnx.ModelProto, path: Path, *, max_bytes: int | None = None, ask_ort: bool = True
) -> FoldedModel:
    """Fold what is constant (within ``max_bytes`` per tensor, if given) and infer shapes.

    ``ask_ort``: complete the shapes ONNX inference leaves unknown with ONNX Runtime's.
    """
    graph = model.graph
    state = FoldedModel(
        initializers={t.name: t for t in graph.initializer},
        sparse={s.values.name: s for s in graph.sparse_initializer},
        base_dir=Path(path).parent,
    )
    state.types = _infer(weightless(model, state), path)
    # A Shape node may only become foldable once inference sees folded values
    # upstream; each round folds at least one node, so this terminates.
    while _fold_pass(model, state, max_bytes):
        state.types = _infer(weightless(model, state), path)
    if ask_ort:
        _fill_types_from_ort(model, state, path)
    return state


def _infer(model: onnx.ModelProto, path: Path) -> dict[str, onnx.TypeProto]:
    try:
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True, data_prop=True
        )
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        raise PlacementError(f"{path}: shape inference failed: {first_line(exc)}") from None
    except ValueError as exc:  # e.g. too large to serialize for inference
        raise PlacementError(f"{path}: shape inference failed: {first_line(exc)}") from None
    g = inferred.graph
    types = {vi.name: vi.type for vi in [*g.input, *g.value_info, *g.output]}
    for init in g.initializer:
        types.setdefault(init.name, helper.make_tensor_type_proto(init.data_type, init.dims))
    return types


def _fold_pass(model: onnx.ModelProto, state: FoldedModel, max_bytes: int | None) -> bool:
    """Fold every foldable node once, in topological order; True if any was folded."""
    opsets = {_opset_domain(o.domain): o.version for o in model.opset_import}
    changed = False
    for index, node in enumerate(model.graph.node):
        if index in state.folded or index in state.too_large:
            continue
        if node.op_type in NONDETERMINISTIC_OPS:
            continue
        if max_bytes is not None and _exceeds(node, state, max_bytes):
            if all(state.is_constant(name) for name in node_inputs(node)):
                state.too_large.add(index)  # stays an operator; not evaluated again
            continue
        outputs = _fold_value(node, state, opsets, model)
        if outputs is None:
            continue
        if max_bytes is not None and any(v.nbytes > max_bytes for v in outputs.values()):
            state.too_large.add(index)  # its output shape was not inferred beforehand
            continue
        state.values.update(outputs)
        state.folded.add(index)
        changed = True
    return changed


def _exceeds(node: onnx.NodeProto, state: FoldedModel, max_bytes: int) -> bool:
    """Whether an input or a (statically shaped) output of ``node`` is over ``max_bytes``."""
    if node_domain(node) == "" and node.op_type in ("Shape", "Size"):
        inputs: list[str] = []  # only the input's shape is read
    else:
        inputs = node_inputs(node)
    for name in inputs:
        if name in state.values and state.values[name].nbytes > max_bytes:
            return True
        if name in state.initializers and _tensor_bytes(state.initializers[name]) > max_bytes:
            return True
    for name in node.output:
        if name and (_type_bytes(state.types.get(name)) or 0) > max_bytes:
            return True
    return False


def _tensor_bytes(tensor: onnx.TensorProto) -> int:
    """Bytes of an initializer's data (0 for an undefined type: inference reports it)."""
    return math.prod(tensor.dims) * _itemsize(tensor.data_type)


def _type_bytes(type_proto: onnx.TypeProto | None) -> int | None:
    shape = static_shape(type_proto)
    if shape is None:
        return None
    return math.prod(shape) * _itemsize(type_proto.tensor_type.elem_type)


def _itemsize(elem_type: int) -> int:
    try:
        return helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    except (KeyError, ValueError, TypeError):  # undefined element type
        return 0


def _opset_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _fold_value(
    node: onnx.NodeProto, state: FoldedModel, opsets: dict[str, int], model: onnx.ModelProto
) -> dict[str, np.ndarray] | None:
    """Output values of ``node`` if it can be computed now, else None."""
    if node_domain(node) == "" and node.op_type in ("Shape", "Size"):
        shape = static_shape(state.types.get(node.input[0]))
        if shape is not None:  # from the type alone: a constant input is not read
            return {node.output[0]: _shape_value(node, shape)}
    inputs = node_inputs(node)
    if all(state.is_constant(name) for name in inputs):
        return _evaluate(node, inputs, state, opsets, model)
    return None


def _shape_value(node: onnx.NodeProto, shape: tuple[int, ...]) -> np.ndarray:
    if node.op_type == "Size":
        return np.array(math.prod(shape), dtype=np.int64)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    # ONNX clamps start/end like Python slicing does.
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return np.array(shape[start:end], dtype=np.int64)


def _evaluate(
    node: onnx.NodeProto,
    inputs: list[str],
    state: FoldedModel,
    opsets: dict[str, int],
    model: onnx.ModelProto,
) -> dict[str, np.ndarray] | None:
    """Run one constant node: the ONNX reference first, ONNX Runtime for ops it lacks."""
    if any(name in state.sparse for name in inputs):
        return None
    feeds = {name: state.value(name) for name in inputs}
    results = _run_reference(node, feeds, opsets)
    if results is None:
        results = _run_ort(node, feeds, model)
    if results is None:
        return None
    outputs = {
        name: np.asarray(value) if isinstance(value, np.generic) else value  # numpy scalars
        for name, value in zip(node.output, results, strict=False)
        if name
    }
    if not all(isinstance(v, np.ndarray) for v in outputs.values()):
        return None  # sequences/maps cannot become initializers
    return outputs


def _run_reference(
    node: onnx.NodeProto, feeds: dict[str, np.ndarray], opsets: dict[str, int]
) -> list | None:
    from onnx.reference import ReferenceEvaluator

    try:
        explicit = {name: feeds[name] for name in node.input if name}
        return list(ReferenceEvaluator(node, opsets=opsets).run(None, explicit))
    except Exception:  # any failure just means "not foldable this way"
        return None


def _run_ort(
    node: onnx.NodeProto, feeds: dict[str, np.ndarray], model: onnx.ModelProto
) -> list | None:
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in feeds.items()]
    outputs = [onnx.ValueInfoProto(name=name) for name in node.output if name]
    single = helper.make_graph([node], "fold", [], outputs, inits)
    probe = helper.make_model(single, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        session = _ort_session(probe)
        values = session.run(None, {})
    except Exception:  # op unsupported by ONNX Runtime too: keep it as an operator
        return None
    by_name = dict(zip([o.name for o in outputs], values, strict=True))
    return [by_name.get(name) for name in node.output]


def _ort_session(model: onnx.ModelProto, path: Path | None = None):  # -> InferenceSession
    import onnxruntime as ort

    options = ort.SessionOptions()
    if path is not None:  # initializers that are references into the model's files
        set_external_folder(options, path)
    # Keep node/tensor names as in the file and skip work we do not need.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def strip_folded(model: onnx.ModelProto, state: FoldedModel) -> None:
    """Replace the folded nodes of ``model`` (in place) by initializers holding their values.

    Only values that a remaining node or a graph output reads are added (not the
    intermediates of a folded chain). The other nodes, their names and the weights are
    left as they are (nothing is copied).
    """
    graph = model.graph
    kept = [n for i, n in enumerate(graph.node) if i not in state.folded]
    if len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)
    read = {name for node in kept for name in node_inputs(node)}
    read.update(o.name for o in graph.output)
    graph.initializer.extend(
        numpy_helper.from_array(value, name) for name, value in state.values.items() if name in read
    )


def weightless(model: onnx.ModelProto, state: FoldedModel | None = None) -> onnx.ModelProto:
    """The (folded) model for the checker and shape inference: constants over
    INLINE_MAX_BYTES declared as graph inputs of their type, not copied."""
    if state is None:
        state = FoldedModel(initializers={}, sparse={})
    graph = model.graph
    skeleton = onnx.ModelProto(ir_version=model.ir_version)
    skeleton.opset_import.extend(model.opset_import)
    skeleton.functions.extend(model.functions)
    out = skeleton.graph
    out.name = graph.name
    out.node.extend(n for i, n in enumerate(graph.node) if i not in state.folded)
    out.output.extend(graph.output)
    out.value_info.extend(graph.value_info)
    out.sparse_initializer.extend(graph.sparse_initializer)
    stubs: dict[str, onnx.ValueInfoProto] = {}
    for init in graph.initializer:
        if _tensor_bytes(init) > INLINE_MAX_BYTES:
            stubs[init.name] = helper.make_tensor_value_info(
                init.name, init.data_type, list(init.dims)
            )
        else:
            out.initializer.append(init)
    for name, value in state.values.items():
        if value.nbytes > INLINE_MAX_BYTES:
            elem = helper.np_dtype_to_tensor_dtype(value.dtype)
            stubs[name] = helper.make_tensor_value_info(name, elem, list(value.shape))
        else:
            out.initializer.append(numpy_helper.from_array(value, name))
    out.input.extend(stubs.pop(v.name, v) for v in graph.input)
    out.input.extend(stubs.values())
    return skeleton


def checkable(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model for the ONNX checker: :func:`weightless`, with every other field of the
    model and of its graph (metadata, training info, doc strings, ...) as in ``model``."""
    skeleton = weightless(model)
    _copy_other_fields(model, skeleton, {"graph", "ir_version", "opset_import", "functions"})
    done = {"name", "node", "output", "value_info", "sparse_initializer", "initializer", "input"}
    _copy_other_fields(model.graph, skeleton.graph, done)
    return skeleton


def _copy_other_fields(source, target, skip: set[str]) -> None:  # protobuf messages
    for descriptor, value in source.ListFields():
        if descriptor.name in skip:
            continue
        if hasattr(value, "extend"):  # a repeated field
            getattr(target, descriptor.name).extend(value)
        elif hasattr(value, "CopyFrom"):  # a message
            getattr(target, descriptor.name).CopyFrom(value)
        else:
            setattr(target, descriptor.name, value)


def _fill_types_from_ort(model: onnx.ModelProto, state: FoldedModel, path: Path) -> None:
    """Ask ONNX Runtime for tensors ONNX inference left without a static shape (contrib ops)."""
    kept = [n for i, n in enumerate(model.graph.node) if i not in state.folded]
    missing = [
        name
        for node in kept
        for name in [*node.input, *node.output]
        if name and not state.is_constant(name) and static_shape(state.types.get(name)) is None
    ]
    missing = list(dict.fromkeys(missing))
    if not missing:
        return
    probe = onnx.ModelProto()
    probe.CopyFrom(model)  # large weights are references: ORT reads them from their files
    strip_folded(probe, state)
    declared = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in missing if n not in declared)
    try:
        session = _ort_session(probe, path)
    except Exception:  # the shape errors later name the unresolved tensors
        return
    for meta in session.get_outputs():
        type_proto = _ort_type(meta.type, meta.shape)
        if meta.name in missing and type_proto is not None:
            state.types[meta.name] = type_proto


_ORT_ELEM_TYPES = {name.lower(): value for name, value in TensorProto.DataType.items()}


def _ort_type(ort_type: str, shape: object) -> onnx.TypeProto | None:
    """``tensor(uint8)`` and ``[1, 48, 32, 32]`` -> TypeProto, if static."""
    if not ort_type.startswith("tensor(") or not isinstance(shape, list):
        return None
    elem = _ORT_ELEM_TYPES.get(ort_type[len("tensor(") : -1])
    if not elem or not all(isinstance(d, int) for d in shape):
        return None
    return helper.make_tensor_type_proto(elem, shape)


def node_inputs(node: onnx.NodeProto) -> list[str]:
    """Distinct non-empty inputs, plus outer-scope tensors its subgraphs read."""
    names = [name for name in node.input if name]
    names.extend(_outer_scope_names(node))
    return list(dict.fromkeys(names))


def _outer_scope_names(node: onnx.NodeProto) -> list[str]:
    found: list[str] = []
    for graph in _subgraphs(node):
        local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
        for inner in graph.node:
            for name in node_inputs(inner):
                if name not in local:
                    found.append(name)
            local.update(inner.output)
    return found


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def static_shape(type_proto: onnx.TypeProto | None) -> tuple[int, ...] | None:
    if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
        return None
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = tensor.shape.dim
    if not all(d.WhichOneof("value") == "dim_value" for d in dims):
        return None
    return tuple(d.dim_value for d in dims)
