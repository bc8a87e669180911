"""ONNX model -> operator DAG with static shapes and CIM (crossbar) mappings.

:func:`load_graph` turns an ONNX file into an :class:`OpGraph`: one
:class:`Operator` per node that does real work at run time, the data edges
between them, and for every CIM-capable operator the numbers of the paper's
Eq. 1 (weight matrix ``M_v x N_v``) and ``N_mvm,v`` (Section IV-A2).

Ingestion steps, and why:

* The model is read with its large weights left in their files
  (:mod:`placement.weights`): only their shapes and types matter here, and a
  model's memory should be its weights once (ONNX Runtime's), not a multiple.
* The ONNX checker and strict shape inference (with data propagation) run
  first, so that a malformed model fails here with one line, not in a solver.
* Constant folding and static shape inference (:mod:`placement.folding`): a
  node whose value is known before run time is not an operator (no runtime
  would spend time on it); a ``DequantizeLinear`` of a constant weight folds,
  so a QDQ ``Conv`` sees a constant weight and is CIM-capable.
* The placement needs element counts, so every tensor an operator reads or
  writes must have a static shape; anything else is a one-line error that
  names the tensor, the operator and the fix.

CIM mapping (im2col, paper Section IV-A2), ``rows = M_v``, ``cols = N_v``:

* ``Conv``/``QLinearConv``/``ConvInteger`` with constant weight
  ``W (C_out, C_in/g, k_1, ..., k_d)``: ``rows = C_out``,
  ``cols = C_in/g * prod(k) * g = C_in * prod(k)``,
  ``n_mvm = N * prod(output spatial dims)``. Decision for grouped and
  depthwise convolutions: the ``g`` groups are mapped as ONE block-diagonal
  matrix (``g`` blocks of ``C_out/g x C_in/g*prod(k)``), so the crossbar count
  of Eq. 1 covers the whole block-diagonal matrix and most cells stay idle,
  as the paper notes for depthwise convolutions. 1-D and 3-D convolutions use
  the product of the kernel and of the output spatial dims.
* ``Gemm``/``QGemm`` (com.microsoft) with constant ``B``: ``rows =`` output
  features, ``cols = K`` (``transA``/``transB`` respected), ``n_mvm =`` rows of
  ``A``. With a constant ``A`` instead (weight on the left): ``rows = M``,
  ``cols = K``, ``n_mvm =`` columns of ``B``.
* ``MatMul``/``QLinearMatMul``/``MatMulInteger`` with a constant right operand
  ``B (K, N)``: ``rows = N``, ``cols = K``, ``n_mvm = prod(A.shape[:-1])``;
  with a constant left operand ``W (M, K)`` and activation ``X (..., K, N)``:
  ``rows = M``, ``cols = K``, ``n_mvm = numel(X) / K``. A 1-D constant is
  promoted as ONNX does (``(K,) -> (K, 1)`` on the right, ``(1, K)`` on the
  left); a constant of more than 2 dims is not CIM-capable.

``Operator.inputs`` holds each distinct activation tensor once (``Add(x, x)``
loads ``x`` once); tensors that a subgraph (``If``/``Loop``/``Scan`` body)
reads from the outer scope count as inputs of the node that owns it.
Sub-byte element types (int4, ...) count as one byte per element.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import onnx
from onnx import TensorProto, helper

from placement.errors import PlacementError, first_line
from placement.folding import (
    FoldedModel,
    checkable,
    fold_and_infer,
    node_domain,
    node_inputs,
    static_shape,
)
from placement.io import file_sha256
from placement.onnxfile import NOT_NUMERIC_FIX, node_names, read_onnx

# ---------------------------------------------------------------------------
# Public data types
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    elem_type: str  # onnx TensorProto type name, e.g. "FLOAT", "UINT8", "INT8"
    elem_bytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.elem_bytes


@dataclass(frozen=True)
class CimMapping:
    """How an operator maps onto crossbars after im2col (paper Eq. 1)."""

    rows: int  # M_v
    cols: int  # N_v
    n_mvm: int  # N_mvm,v: number of input vectors applied to the crossbars
    groups: int  # 1 unless grouped/depthwise conv (mapped block-diagonally)
    weight: str  # name of the constant weight tensor


@dataclass(frozen=True)
class Operator:
    name: str  # from onnxfile.node_names
    op_type: str
    domain: str  # "" for the default domain
    index: int  # position in graph.node of the original model
    inputs: tuple[TensorInfo, ...]  # activation (non-constant) inputs
    constants: tuple[TensorInfo, ...]  # weights, biases, scales, zero points, folded values
    outputs: tuple[TensorInfo, ...]
    cim: CimMapping | None  # None: not CIM-capable

    @property
    def n_in(self) -> int:
        """N_in,v: elements loaded (activations only)."""
        return sum(t.numel for t in self.inputs)

    @property
    def n_out(self) -> int:
        """N_out,v: elements stored."""
        return sum(t.numel for t in self.outputs)


@dataclass
class OpGraph:
    name: str  # model file stem
    path: str
    sha256: str
    operators: dict[str, Operator]  # topological (graph.node) order
    edges: list[tuple[str, str, tuple[str, ...]]]  # (producer, consumer, tensors carried)
    folded: tuple[str, ...]  # original nodes folded away as constant-only
    folded_consumers: dict[str, str]  # folded node -> first operator consuming its value
    graph: nx.DiGraph = field(repr=False)  # nodes = operator names, edge attribute `tensors`

    def cim_capable(self) -> list[str]:
        """Names of the operators the accelerator can run, in topological order."""
        return [name for name, op in self.operators.items() if op.cim is not None]


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

KNOWN_DOMAINS = ("", "ai.onnx", "com.microsoft", "ai.onnx.ml")


def load_graph(path: str | Path) -> OpGraph:
    """Read, check, constant-fold and shape an ONNX model into an :class:`OpGraph`."""
    path = Path(path)
    model = read_onnx(path, load_weights=False)  # weights stay in their files
    names = node_names(model.graph)
    _check_nodes(model, names, path)
    _check_model(model, path)
    state = fold_and_infer(model, path)
    operators = _build_operators(model, names, state, path)
    if not operators:
        raise PlacementError(
            f"{path}: no operators left after constant folding (every node computes a constant)"
        )
    edges = _edges(model, names, state)
    dag = _dag(operators, edges, path)
    folded = tuple(names[i] for i in sorted(state.folded))
    return OpGraph(
        name=path.stem,
        path=str(path),
        sha256=file_sha256(path),
        operators=operators,
        edges=edges,
        folded=folded,
        folded_consumers=_folded_consumers(model, names, state),
        graph=dag,
    )


# ---------------------------------------------------------------------------
# Validation before inference
# ---------------------------------------------------------------------------


def _check_nodes(model: onnx.ModelProto, names: list[str], path: Path) -> None:
    """Empty graph, unknown domains and op types, cycles: clearer messages than the checker's."""
    if not model.graph.node:
        raise PlacementError(f"{path}: the graph has no nodes")
    _check_order(model.graph, names, path)
    local_functions = {(f.domain, f.name) for f in model.functions}
    for node, name in zip(model.graph.node, names, strict=True):
        domain = node_domain(node)
        if domain not in KNOWN_DOMAINS:
            hint = (
                " (a model-local function: inline it with onnx.inliner.inline_local_functions)"
                if (node.domain, node.op_type) in local_functions
                else ""
            )
            raise PlacementError(
                f"{path}: node '{name}' ({node.op_type}) is in unknown domain '{node.domain}'"
                f"{hint}; supported domains: the ONNX default domain, ai.onnx.ml, com.microsoft"
            )
        if not _op_known(node.op_type, domain):
            where = "ONNX" if domain == "" else domain
            raise PlacementError(
                f"{path}: node '{name}' has op_type '{node.op_type}', unknown to {where}"
            )


def _check_order(graph: onnx.GraphProto, names: list[str], path: Path) -> None:
    """Each node must read only tensors defined before it (else: cyclic or unsorted graph)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined |= {s.values.name for s in graph.sparse_initializer}
    produced_by = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    for index, node in enumerate(graph.node):
        for tensor in node_inputs(node):
            if tensor in defined:
                continue
            if tensor in produced_by:
                producer = names[produced_by[tensor]]
                raise PlacementError(
                    f"{path}: node '{names[index]}' reads tensor '{tensor}' before node "
                    f"'{producer}' produces it: the graph is cyclic or not topologically sorted"
                )
            raise PlacementError(
                f"{path}: node '{names[index]}' reads tensor '{tensor}', which no node, graph "
                "input or initializer defines"
            )
        defined.update(out for out in node.output if out)




def _op_known(op_type: str, domain: str) -> bool:
    if domain in ("", "ai.onnx.ml"):
        return onnx.defs.has(op_type, domain)
    contrib = _ort_contrib_ops()
    return not contrib or op_type in contrib


_CONTRIB_OPS: set[str] | None = None


def _ort_contrib_ops() -> set[str]:
    """com.microsoft op types known to the installed ONNX Runtime (empty: cannot tell)."""
    global _CONTRIB_OPS
    if _CONTRIB_OPS is None:
        try:
            from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

            _CONTRIB_OPS = {
                s.name for s in ort_c.get_all_operator_schema() if s.domain == "com.microsoft"
            }
        except (ImportError, AttributeError, RuntimeError):  # build without schema export
            _CONTRIB_OPS = set()
    return _CONTRIB_OPS


def _check_model(model: onnx.ModelProto, path: Path) -> None:
    # The weights declared, not copied: the checker would serialize them, and it resolves
    # external data against the working directory when it is given a model in memory.
    try:
        onnx.checker.check_model(checkable(model), full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise PlacementError(f"{path}: invalid ONNX model: {first_line(exc)}") from None
    except ValueError as exc:  # e.g. models over 2 GB cannot be checked in memory
        raise PlacementError(f"{path}: cannot check the model: {first_line(exc)}") from None






# ---------------------------------------------------------------------------
# Tensor descriptions and the static-shape requirement
# ---------------------------------------------------------------------------




def _shape_text(type_proto: onnx.TypeProto) -> str:
    dims = [_dim_text(d) for d in type_proto.tensor_type.shape.dim]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def _dim_text(dim: onnx.TensorShapeProto.Dimension) -> str:
    if dim.WhichOneof("value") == "dim_value":
        return str(dim.dim_value)
    # unk__N are placeholders invented by shape inference, not names from the model.
    return "?" if not dim.dim_param or dim.dim_param.startswith("unk__") else dim.dim_param


def _elem_bytes(elem_type: int) -> int | None:
    if elem_type in (TensorProto.UNDEFINED, TensorProto.STRING):
        return None  # strings have no fixed size
    return max(1, helper.tensor_dtype_to_np_dtype(elem_type).itemsize)


def _tensor_info(name: str, shape: Iterable[int], elem_type: int) -> TensorInfo:
    return TensorInfo(
        name=name,
        shape=tuple(int(d) for d in shape),
        elem_type=TensorProto.DataType.Name(elem_type),
        elem_bytes=_elem_bytes(elem_type) or 0,
    )


def _constant_info(name: str, state: FoldedModel) -> TensorInfo:
    if name in state.values:
        value = state.values[name]
        return _tensor_info(name, value.shape, helper.np_dtype_to_tensor_dtype(value.dtype))
    if name in state.sparse:
        sparse = state.sparse[name]
        return _tensor_info(name, sparse.dims, sparse.values.data_type)
    init = state.initializers[name]
    return _tensor_info(name, init.dims, init.data_type)


def _elem(state: FoldedModel, name: str) -> int:
    type_proto = state.types.get(name)
    if type_proto is None or type_proto.WhichOneof("value") != "tensor_type":
        return TensorProto.UNDEFINED
    return type_proto.tensor_type.elem_type


def _activation_info(
    name: str, op_name: str | None, state: FoldedModel, graph_inputs: set[str], path: Path
) -> TensorInfo:
    """TensorInfo of an activation, or a one-line error saying what is wrong and how to fix it.

    ``op_name`` is the operator reading or writing it; None for an unread graph input.
    """
    type_proto = state.types.get(name)
    problem = _shape_problem(type_proto)
    kind = type_proto.WhichOneof("value") if type_proto is not None else None
    # No fixed input shape makes a map, sequence or optional a tensor, nor sizes a string.
    numeric = kind in (None, "tensor_type")
    fix = _shape_fix(name, type_proto, graph_inputs) if numeric else NOT_NUMERIC_FIX
    if problem is None and _elem_bytes(_elem(state, name)) is None:
        problem = f"has element type {TensorProto.DataType.Name(_elem(state, name))}"
        problem += ", whose size is unknown"
        fix = NOT_NUMERIC_FIX
    if problem is not None:
        owner = f"of operator '{op_name}'" if op_name else "(a graph input no operator reads)"
        raise PlacementError(f"{path}: tensor '{name}' {owner} {problem}: {fix}")
    return _tensor_info(name, static_shape(type_proto) or (), _elem(state, name))


def _shape_problem(type_proto: onnx.TypeProto | None) -> str | None:
    if type_proto is None or type_proto.WhichOneof("value") is None:
        return "has no known type or shape"
    kind = type_proto.WhichOneof("value")
    if kind != "tensor_type":
        return f"is a {kind.removesuffix('_type')}, not a tensor"
    if not type_proto.tensor_type.HasField("shape"):
        return "has unknown rank"
    if static_shape(type_proto) is None:
        return f"has dynamic shape {_shape_text(type_proto)}"
    return None


def _shape_fix(name: str, type_proto: onnx.TypeProto | None, graph_inputs: set[str]) -> str:
    if name not in graph_inputs:
        return (
            "its shape depends on data or could not be inferred, and placement needs static "
            "shapes: export the model with fixed input shapes and without data-dependent shapes"
        )
    fix = "export the model with a fixed input shape, or fix it with onnxruntime.tools."
    fix += "make_dynamic_shape_fixed"
    params = [
        d.dim_param
        for d in (type_proto.tensor_type.shape.dim if type_proto is not None else [])
        if d.WhichOneof("value") == "dim_param"
    ]
    if params:
        return fix + f" (e.g. --dim_param {params[0]} --dim_value 1)"
    return fix + f" (--input_name {name} --input_shape ...)"


# ---------------------------------------------------------------------------
# Operators, CIM mappings, edges
# ---------------------------------------------------------------------------


def _build_operators(
    model: onnx.ModelProto, names: list[str], state: FoldedModel, path: Path
) -> dict[str, Operator]:
    graph_inputs = {i.name for i in model.graph.input if i.name not in state.initializers}
    _check_graph_inputs(model, names, state, graph_inputs, path)
    operators: dict[str, Operator] = {}
    for index, node in enumerate(model.graph.node):
        if index in state.folded:
            continue
        name = names[index]
        operators[name] = _operator(node, name, index, state, graph_inputs, path)
    return operators


def _check_graph_inputs(
    model: onnx.ModelProto, names: list[str], state: FoldedModel, graph_inputs: set[str], path: Path
) -> None:
    """Report a dynamic graph input before the downstream tensors it makes dynamic.

    Unread inputs are checked too: running the model (profiling) must feed them.
    """
    first_consumer: dict[str, str] = {}
    for index, node in enumerate(model.graph.node):
        if index not in state.folded:
            for tensor in node_inputs(node):
                first_consumer.setdefault(tensor, names[index])
    for graph_input in model.graph.input:
        if graph_input.name in graph_inputs:
            consumer = first_consumer.get(graph_input.name)
            _activation_info(graph_input.name, consumer, state, graph_inputs, path)


def _operator(
    node: onnx.NodeProto,
    name: str,
    index: int,
    state: FoldedModel,
    graph_inputs: set[str],
    path: Path,
) -> Operator:
    tensors = node_inputs(node)
    inputs = tuple(
        _activation_info(t, name, state, graph_inputs, path)
        for t in tensors
        if not state.is_constant(t)
    )
    constants = tuple(_constant_info(t, state) for t in tensors if state.is_constant(t))
    outputs = tuple(
        _activation_info(t, name, state, graph_inputs, path)
        for t in dict.fromkeys(node.output)
        if t
    )
    by_name = {t.name: t for t in (*inputs, *constants, *outputs)}
    return Operator(
        name=name,
        op_type=node.op_type,
        domain=node_domain(node),
        index=index,
        inputs=inputs,
        constants=constants,
        outputs=outputs,
        cim=_cim_mapping(node, by_name, {c.name for c in constants}),
    )


# (domain, op_type) -> (activation input index, weight input index)
_CONV_LIKE = {("", "Conv"): (0, 1), ("", "QLinearConv"): (0, 3), ("", "ConvInteger"): (0, 1)}
_GEMM_LIKE = {("", "Gemm"): (0, 1), ("com.microsoft", "QGemm"): (0, 3)}
_MATMUL_LIKE = {
    ("", "MatMul"): (0, 1),
    ("", "QLinearMatMul"): (0, 3),
    ("", "MatMulInteger"): (0, 1),
}


def _cim_mapping(
    node: onnx.NodeProto, tensors: Mapping[str, TensorInfo], constants: set[str]
) -> CimMapping | None:
    key = (node_domain(node), node.op_type)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    def operand(position: int) -> tuple[TensorInfo | None, bool]:
        name = node.input[position] if position < len(node.input) else ""
        return tensors.get(name), name in constants

    if key in _CONV_LIKE:
        output = tensors.get(node.output[0]) if node.output else None
        return _conv_mapping(operand(_CONV_LIKE[key][1]), output, attrs.get("group", 1))
    if key in _GEMM_LIKE:
        a_pos, b_pos = _GEMM_LIKE[key]
        return _gemm_mapping(operand(a_pos), operand(b_pos), attrs)
    if key in _MATMUL_LIKE:
        a_pos, b_pos = _MATMUL_LIKE[key]
        return _matmul_mapping(operand(a_pos), operand(b_pos))
    return None


def _conv_mapping(
    weight: tuple[TensorInfo | None, bool], output: TensorInfo | None, groups: int
) -> CimMapping | None:
    w, w_const = weight
    if w is None or not w_const or len(w.shape) < 3 or output is None:
        return None
    # Block-diagonal mapping of the groups: cols = C_in/g * prod(k) * g (module docstring).
    return CimMapping(
        rows=w.shape[0],
        cols=w.shape[1] * math.prod(w.shape[2:]) * groups,
        n_mvm=output.shape[0] * math.prod(output.shape[2:]),
        groups=groups,
        weight=w.name,
    )


def _gemm_mapping(
    a: tuple[TensorInfo | None, bool], b: tuple[TensorInfo | None, bool], attrs: dict
) -> CimMapping | None:
    (a_t, a_const), (b_t, b_const) = a, b
    if a_t is None or b_t is None or len(a_t.shape) != 2 or len(b_t.shape) != 2:
        return None
    m, k = reversed(a_t.shape) if attrs.get("transA", 0) else a_t.shape
    k_b, n = reversed(b_t.shape) if attrs.get("transB", 0) else b_t.shape
    if b_const and not a_const:
        return CimMapping(rows=n, cols=k_b, n_mvm=m, groups=1, weight=b_t.name)
    if a_const and not b_const:  # weight on the left: Y^T = B^T A^T
        return CimMapping(rows=m, cols=k, n_mvm=n, groups=1, weight=a_t.name)
    return None


def _matmul_mapping(
    a: tuple[TensorInfo | None, bool], b: tuple[TensorInfo | None, bool]
) -> CimMapping | None:
    (a_t, a_const), (b_t, b_const) = a, b
    if a_t is None or b_t is None:
        return None
    if b_const and not a_const and len(b_t.shape) in (1, 2):
        k = b_t.shape[0]
        n = b_t.shape[1] if len(b_t.shape) == 2 else 1
        n_mvm = math.prod(a_t.shape[:-1])
        return CimMapping(rows=n, cols=k, n_mvm=n_mvm, groups=1, weight=b_t.name)
    if a_const and not b_const and len(a_t.shape) in (1, 2):
        k = a_t.shape[-1]
        m = a_t.shape[0] if len(a_t.shape) == 2 else 1
        return CimMapping(rows=m, cols=k, n_mvm=b_t.numel // k, groups=1, weight=a_t.name)
    return None


def _edges(
    model: onnx.ModelProto, names: list[str], state: FoldedModel
) -> list[tuple[str, str, tuple[str, ...]]]:
    """One edge per (producer, consumer) operator pair, carrying all tensors between them."""
    producer: dict[str, str] = {}
    carried: dict[tuple[str, str], list[str]] = {}
    for index, node in enumerate(model.graph.node):
        if index in state.folded:
            continue
        for tensor in node_inputs(node):
            source = producer.get(tensor)
            if source is not None and not state.is_constant(tensor):
                carried.setdefault((source, names[index]), []).append(tensor)
        for tensor in node.output:
            if tensor:
                producer[tensor] = names[index]
    return [(src, dst, tuple(tensors)) for (src, dst), tensors in carried.items()]


def _dag(
    operators: dict[str, Operator], edges: list[tuple[str, str, tuple[str, ...]]], path: Path
) -> nx.DiGraph:
    dag = nx.DiGraph()
    dag.add_nodes_from(operators)
    for src, dst, tensors in edges:
        dag.add_edge(src, dst, tensors=tensors)
    if not nx.is_directed_acyclic_graph(dag):
        cycle = " -> ".join(src for src, _ in nx.find_cycle(dag))
        raise PlacementError(f"{path}: the graph has a cycle through operators {cycle}")
    return dag


def _folded_consumers(
    model: onnx.ModelProto, names: list[str], state: FoldedModel
) -> dict[str, str]:
    """Folded node -> the first operator (in graph order) that uses its value, directly or not."""
    consumers: dict[str, list[int]] = {}
    for index, node in enumerate(model.graph.node):
        for tensor in node_inputs(node):
            consumers.setdefault(tensor, []).append(index)
    first: dict[int, int] = {}  # folded node index -> operator index
    for index in sorted(state.folded, reverse=True):  # consumers come later in graph order
        candidates = [
            user if user not in state.folded else first.get(user)
            for tensor in model.graph.node[index].output
            for user in consumers.get(tensor, [])
        ]
        candidates = [c for c in candidates if c is not None]
        if candidates:
            first[index] = min(candidates)
    return {names[i]: names[op] for i, op in sorted(first.items())}
