"""Progressive lowering with torch-mlir (Torch-PIM, Section 4.2).

Pipeline (the pass lists are the ones measured in shared/notes/mlir-lowering.md):

1. ONNX -> torch dialect with ``torch_mlir.extras.onnx_importer`` -> linalg on tensors
   (``lower_onnx``); a ``.mlir`` file given by the user starts here (``lower_mlir``).
2. Optionally ``linalg-fuse-elementwise-ops`` on tensors.
3. One-shot bufferization with function boundaries, results turned into out-params,
   ``refback-munge-memref-copy`` (copies become linalg ops, hence nests too).
4. Every linalg op gets a fused location whose metadata names its index and op name
   (:func:`~placement.profiling.mlir.extract.tag_linalg_ops`),
   then ``convert-linalg-to-parallel-loops``: the generated loops inherit the op's
   location, which is how a nest is traced back to its linalg op and ONNX node.

The loop nests of the result are read out by :mod:`placement.profiling.mlir.extract`.

ONNX specifics: nodes are renamed with :func:`~placement.onnxfile.node_names` before
import (the importer puts the node name in the location); constant-only nodes are folded
(:mod:`placement.folding`, up to ``FOLD_MAX_BYTES`` per tensor), which turns the shape
subgraphs of PyTorch exports (``Shape -> Gather -> Div -> Unsqueeze`` feeding a
``Slice``, ``Range``, causal masks) into the constants torch-mlir needs; the remaining
nodes keep their names. Float initializers of at least ``weight_arg_min_bytes`` become
function arguments. Embedded as constants they
would cost JIT time and memory (the notes: a 64 MB constant costs 1 s and 0.8 GB).

Weights are not read: the model is read with its large initializers left in their files
(``read_onnx(load_weights=False)``, :mod:`placement.weights`), and such a weight is a
:class:`WeightFile` (where its bytes are) in ``LoweredProgram.weights``; whoever runs the
program reads it then (``nest_timing.program_arguments``, the simulation's driver), so
the lowering holds no copy of the weights (the LLaMA-7B layer: 0.81 GB). A weight the
program would transpose or broadcast on every run is handed to it in the layout its
product reads (:mod:`placement.profiling.mlir.weight_layout`).
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.external_data_helper import ExternalDataInfo

from placement.errors import PlacementError, first_line
from placement.folding import fold_and_infer, strip_folded
from placement.nests import CONSTANT, TEMPORARY, LoopNest, NestOperand
from placement.onnxfile import NOT_NUMERIC_FIX, node_names, read_onnx
from placement.profiling.mlir.extract import (
    extract_nests,
    loc_tag,
    outermost_parallels,
    tag_linalg_ops,
)
from placement.profiling.mlir.passes import error_line
from placement.profiling.mlir.policy import check_user_module
from placement.profiling.mlir.weight_layout import WeightFile, fold_weight_layouts
from placement.weights import ITEMSIZE, inline, is_reference, tensor_array

try:  # torch-mlir is heavy; import errors surface as a PlacementError on first use
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d
    from torch_mlir.extras import onnx_importer
    from torch_mlir.passmanager import PassManager
except ImportError:  # pragma: no cover - exercised only without the wheel
    ir = None  # type: ignore[assignment]

ONNX_TO_LINALG = (
    "builtin.module(torch-onnx-to-torch-backend-pipeline,"
    " torch-backend-to-linalg-on-tensors-backend-pipeline)"
)
FUSE_ELEMENTWISE = "builtin.module(func.func(linalg-fuse-elementwise-ops), canonicalize, cse)"
BUFFERIZE = (
    "builtin.module(one-shot-bufferize{bufferize-function-boundaries"
    " function-boundary-type-conversion=identity-layout-map},"
    " buffer-results-to-out-params{hoist-static-allocs=true modify-public-functions=true"
    " add-result-attr=true},"
    " func.func(refback-munge-memref-copy))"
)
# Constant-only nodes are folded when no input or output exceeds this: the shape
# computations of an export, small tables and masks; never a weight matrix.
FOLD_MAX_BYTES = 1 << 20
TO_PARALLEL_LOOPS = "builtin.module(func.func(convert-linalg-to-parallel-loops), canonicalize, cse)"

_MLIR_TO_NUMPY = {
    "f64": "float64", "f32": "float32", "f16": "float16", "i64": "int64", "i32": "int32",
    "i16": "int16", "i8": "int8", "i1": "bool",
}  # fmt: skip


@dataclass(frozen=True)
class ArgInfo:
    """One argument of the lowered function, in call order."""

    name: str  # ONNX input / initializer / output name; for .mlir input the location or "argN"
    role: str  # "input" | "weight" | "output"
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name, e.g. "float32"


@dataclass
class LoweredProgram:
    """A bufferized program at parallel-loop level plus its nests and calling convention."""

    module_text: str  # bufferized, scf.parallel loops, no markers (see insert_nest_markers)
    nests: list[LoopNest]
    func_name: str
    args: tuple[ArgInfo, ...]  # all function arguments in order: inputs, weights, outputs
    source: Path
    source_kind: str  # "onnx" | "mlir"
    # By arg name: values held in memory (small ones, Constant nodes) or WeightFiles.
    weights: dict[str, np.ndarray | WeightFile] = field(default_factory=dict, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict)
    # The bufferized linalg program with its ops tagged, before convert-linalg-to-parallel-loops:
    # where placement.profiling.mlir.optimize starts from. Empty for programs built by hand.
    linalg_text: str = field(default="", repr=False)
    # Per nest (program order), the tag index of the linalg op it comes from (extract.py).
    nest_tags: tuple[int | None, ...] = ()
    # Where the timing markers go: "parallel" = around each outermost scf.parallel (the
    # nests as extracted, module_text unoptimized); "tagged-loop" = around the outermost
    # loop of any kind (scf.parallel or scf.for) carrying each nest's linalg tag, which is
    # how an optimized module_text (optimize.py) maps back to the same nests.
    markers_at: str = "parallel"

    @property
    def inputs(self) -> list[ArgInfo]:
        return [a for a in self.args if a.role == "input"]

    @property
    def weight_args(self) -> list[ArgInfo]:
        return [a for a in self.args if a.role == "weight"]

    @property
    def outputs(self) -> list[ArgInfo]:
        return [a for a in self.args if a.role == "output"]


# --------------------------------------------------------------------------- entry points


def lower_onnx(
    path: str | Path,
    *,
    fuse_elementwise: bool = False,
    weight_arg_min_bytes: int = 1024,
) -> LoweredProgram:
    """Lower an ONNX model to bufferized parallel loops and extract its loop nests."""
    _require_torch_mlir()
    path = Path(path)
    start = time.perf_counter()
    model = read_onnx(path, load_weights=False)  # large weights stay in their files
    graph = model.graph
    names = node_names(graph)
    op_types: dict[str, str] = {}
    for node, name in zip(graph.node, names, strict=True):
        node.name = name  # the importer uses it as the location of everything lowered from it
        op_types[name] = node.op_type
    graph.name = "forward"  # becomes the function name; ONNX graph names need not be symbols

    _check_static_inputs(graph, path)
    # Shape subgraphs (Shape -> Gather -> Div -> Unsqueeze -> Slice ends, Range, masks)
    # become constants: torch-mlir needs them as compile-time values.
    strip_folded(model, fold_and_infer(model, path, max_bytes=FOLD_MAX_BYTES, ask_ort=False))
    weights = _initializers_to_inputs(graph, weight_arg_min_bytes, path.parent)
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:  # onnx raises several types for inconsistent models
        raise PlacementError(f"{path}: ONNX shape inference failed ({first_line(exc)})") from None
    _check_static_values(model.graph, path)
    # Transposes and batch broadcasts of weights happen here, once, not in the program.
    layout_folds = fold_weight_layouts(model.graph, weights)

    ctx = _context()
    with ctx:
        try:
            info = onnx_importer.ModelInfo(model)
            module = info.create_module(context=ctx)
            importer = onnx_importer.NodeImporter.define_function(info.main_graph, module.operation)
            importer.import_all()
        except Exception as exc:  # OnnxImportError, KeyError on unsupported types...
            raise PlacementError(
                f"{path}: torch-mlir cannot import the model ({first_line(exc)})"
            ) from None
        _run(module, ONNX_TO_LINALG, path, op_types)
        imported = time.perf_counter()

        args = _onnx_arg_infos(model.graph, set(weights))
        program = _lower_linalg(
            module, path, op_types, fuse_elementwise=fuse_elementwise, func_name="forward"
        )
    program_args = _attach_outputs(args, model.graph, program)
    lowered = LoweredProgram(
        module_text=program["text"],
        nests=with_buffer_roles(program["nests"], program_args),
        linalg_text=program["linalg_text"],
        nest_tags=program["nest_tags"],
        func_name="forward",
        args=program_args,
        source=path,
        source_kind="onnx",
        weights=weights,
        metadata={
            "fuse_elementwise": fuse_elementwise,
            "weight_arg_min_bytes": weight_arg_min_bytes,
            "weight_layout_folds": layout_folds,
            "import_to_linalg_seconds": imported - start,
            "lowering_seconds": time.perf_counter() - start,
        },
    )
    return lowered


def lower_mlir(path: str | Path, *, fuse_elementwise: bool = False) -> LoweredProgram:
    """Lower a user ``.mlir`` file at linalg-on-tensors level (same pipeline from bufferization).

    The parsed file must pass :func:`~placement.profiling.mlir.policy.check_user_module`
    (no external functions, no LLVM, memref or other dialects) before any pass runs.
    """
    _require_torch_mlir()
    path = Path(path)
    start = time.perf_counter()
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise PlacementError(f"{path}: cannot read ({first_line(exc)})") from None
    ctx = _context()
    with ctx:
        try:
            module = ir.Module.parse(text)
        except Exception as exc:  # MLIRError carries the diagnostics
            raise PlacementError(f"{path}: not valid MLIR ({error_line(exc)})") from None
        check_user_module(module, path)  # a program: nothing outside it may be reached
        func_op = _main_func(module, path)
        func_name = ir.StringAttr(func_op.attributes["sym_name"]).value
        args = _mlir_arg_infos(func_op, path)
        program = _lower_linalg(
            module, path, {}, fuse_elementwise=fuse_elementwise, func_name=func_name
        )
    program_args = args + tuple(
        ArgInfo(f"result{i}", "output", a.shape, a.dtype) for i, a in enumerate(program["results"])
    )
    return LoweredProgram(
        module_text=program["text"],
        nests=with_buffer_roles(program["nests"], program_args),
        linalg_text=program["linalg_text"],
        nest_tags=program["nest_tags"],
        func_name=func_name,
        args=program_args,
        source=path,
        source_kind="mlir",
        metadata={
            "fuse_elementwise": fuse_elementwise,
            "lowering_seconds": time.perf_counter() - start,
        },
    )


def with_buffer_roles(nests: list[LoopNest], args: tuple[ArgInfo, ...]) -> list[LoopNest]:
    """``nests`` with every operand's :attr:`~placement.nests.NestOperand.role`: an argument
    ``argN`` takes the role of the function's N-th argument (input, weight or output), a
    global is a constant, an allocation a temporary."""
    roles = {f"arg{i}": a.role for i, a in enumerate(args)}

    def role(op: NestOperand) -> str:
        if op.kind == "argument":
            return roles[op.buffer]
        return CONSTANT if op.kind == "global" else TEMPORARY

    return [
        replace(n, operands=tuple(replace(op, role=role(op)) for op in n.operands)) for n in nests
    ]


def new_context() -> Any:
    """An MLIR context with the torch dialect (and so the torch/refback passes) registered."""
    _require_torch_mlir()
    return _context()


# --------------------------------------------------------------------------- ONNX preparation


def _check_static_inputs(graph: onnx.GraphProto, path: Path) -> None:
    initializers = {init.name for init in graph.initializer}
    for value in graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            kind = value.type.WhichOneof("value") or "value of unknown type"
            raise PlacementError(
                f"{path}: input {value.name!r} is a {kind.removesuffix('_type')}, not a"
                f" tensor: {NOT_NUMERIC_FIX}"
            )
        if tensor_type.elem_type == onnx.TensorProto.STRING:
            raise PlacementError(
                f"{path}: input {value.name!r} is a string tensor: {NOT_NUMERIC_FIX}"
            )
        if not tensor_type.HasField("shape"):
            raise PlacementError(
                f"{path}: input {value.name!r} has an unknown shape; "
                "export the model with static input shapes"
            )
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in tensor_type.shape.dim]  # fmt: skip
        if any(not isinstance(d, int) for d in dims):
            raise PlacementError(
                f"{path}: input {value.name!r} has a dynamic shape {dims}; "
                "export the model with static input shapes"
            )


def _check_static_values(graph: onnx.GraphProto, path: Path) -> None:
    """Reject data-dependent intermediate shapes before torch-mlir sees them.

    torch-mlir 20261001 crashes (SIGSEGV, not an error) lowering e.g. Unique with a
    dynamic result, so such models must be stopped here.
    """
    producers = {out: node for node in graph.node for out in node.output}
    for value in list(graph.value_info) + list(graph.output):
        if not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tensor_type.shape.dim):
            continue
        node = producers.get(value.name)
        where = f"node {node.name!r} ({node.op_type})" if node is not None else "the graph"
        raise PlacementError(
            f"{path}: {where} produces {value.name!r} with a dynamic or data-dependent shape; "
            "only static shapes can be lowered"
        )


def _initializers_to_inputs(
    graph: onnx.GraphProto, min_bytes: int, base_dir: Path
) -> dict[str, np.ndarray | WeightFile]:
    """Turn large float initializers (and Constant nodes) into graph inputs; return values.

    Integer initializers stay constants: torch-mlir needs shapes, axes and indices as
    compile-time values, and they are small. An initializer left in its file becomes a
    :class:`WeightFile` (not read); one that stays a constant is read into the protobuf
    (the importer needs its values).
    """
    weights: dict[str, np.ndarray | WeightFile] = {}
    graph_inputs = {value.name for value in graph.input}
    keep = []
    for init in graph.initializer:
        dtype = _numpy_dtype(init.data_type)
        if (
            init.name not in graph_inputs
            and dtype is not None
            and np.issubdtype(dtype, np.floating)
            and int(np.prod(init.dims, dtype=np.int64)) * dtype.itemsize >= min_bytes
        ):
            weights[init.name] = _weight_value(init, base_dir)
            graph.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
            )
        else:
            if is_reference(init):
                inline(init, base_dir)
            keep.append(init)
    if len(keep) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(keep)
    nodes = []
    for node in graph.node:
        if node.op_type == "Constant" and not node.domain and len(node.attribute) == 1:
            attr = node.attribute[0]
            if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                array = numpy_helper.to_array(attr.t)
                if np.issubdtype(array.dtype, np.floating) and array.nbytes >= min_bytes:
                    name = node.output[0]
                    weights[name] = array
                    graph.input.append(
                        onnx.helper.make_tensor_value_info(
                            name, attr.t.data_type, list(array.shape)
                        )
                    )
                    continue
        nodes.append(node)
    if len(nodes) != len(graph.node):
        del graph.node[:]
        graph.node.extend(nodes)
    return weights


def _numpy_dtype(data_type: int) -> np.dtype | None:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type))
    except (KeyError, TypeError, ValueError):  # UNDEFINED and types numpy has no dtype for
        return None


def _weight_value(tensor: onnx.TensorProto, base_dir: Path) -> np.ndarray | WeightFile:
    """Where a weight's values are: its file (a plain raw reference, :class:`WeightFile`)
    or, for data in the protobuf or stored otherwise, the values themselves."""
    if is_reference(tensor):
        info = ExternalDataInfo(tensor)
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
        shape = tuple(int(d) for d in tensor.dims)
        length = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        plain = tensor.data_type in ITEMSIZE and sys.byteorder == "little"
        if plain and info.length in (None, length) and length > 0:
            return WeightFile(base_dir / info.location, int(info.offset or 0), shape, dtype.name)
    return tensor_array(tensor, base_dir)


def _onnx_arg_infos(graph: onnx.GraphProto, weight_names: set[str]) -> tuple[ArgInfo, ...]:
    initializers = {init.name for init in graph.initializer}
    args = []
    for value in graph.input:
        if value.name in initializers:
            continue  # an input with a default: the importer makes it a constant
        tensor_type = value.type.tensor_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)).name
        shape = tuple(d.dim_value for d in tensor_type.shape.dim)
        role = "weight" if value.name in weight_names else "input"
        args.append(ArgInfo(value.name, role, shape, dtype))
    return tuple(args)


def _attach_outputs(
    args: tuple[ArgInfo, ...], graph: onnx.GraphProto, program: dict[str, Any]
) -> tuple[ArgInfo, ...]:
    outputs = []
    for value, result in zip(graph.output, program["results"], strict=False):
        tensor_type = value.type.tensor_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)).name
        outputs.append(ArgInfo(value.name, "output", result.shape, dtype))
    if len(args) + len(outputs) != program["num_args"]:
        raise PlacementError(
            f"internal error: lowered function has {program['num_args']} arguments, "
            f"expected {len(args)} inputs/weights + {len(outputs)} outputs"
        )
    return args + tuple(outputs)


# --------------------------------------------------------------------------- MLIR helpers


def _require_torch_mlir() -> None:
    if ir is None:
        raise PlacementError("torch-mlir is not installed (pip install torch-mlir==20261001)")


def _context() -> Any:
    ctx = ir.Context()
    torch_d.register_dialect(ctx)  # also registers the torch-* and refback-* passes
    return ctx


def _run(module: Any, pipeline: str, path: Path, op_types: dict[str, str]) -> None:
    """Run a pass pipeline; failures become one-line PlacementErrors naming the culprit."""
    try:
        PassManager.parse(pipeline).run(module.operation)
    except Exception as exc:
        raise PlacementError(_pass_failure(exc, path, op_types)) from None


def _pass_failure(exc: BaseException, path: Path, op_types: dict[str, str]) -> str:
    text = str(exc)
    # An ONNX op without a conversion survives as torch.operator "onnx.<Op>".
    match = re.search(r'name = "onnx\.([A-Za-z0-9_]+)"', text)
    loc = re.search(r'error: (?:loc\()?"([^"]*)"', text)
    node = loc.group(1) if loc else ""
    if match and "legalize" in text:
        op = match.group(1)
        where = f" (node {node!r})" if node in op_types else ""
        return f"{path}: ONNX operator {op}{where} is not supported by torch-mlir"
    line = error_line(exc)
    illegal = re.search(r"failed to legalize operation '([^']+)'", line)
    if illegal:  # the op dump that follows is long and unreadable on one line
        line = f"cannot lower {illegal.group(1)}"
    line = re.sub(r'^"[^"]*":\s*', "", line)  # the location repeats the node name
    if node in op_types:
        return f"{path}: lowering node {node!r} ({op_types[node]}) failed: {line}"
    return f"{path}: lowering failed: {line}"


def find_func(module: Any, name: str) -> Any:
    """The operation of ``func.func @name`` in ``module``."""
    for op in module.body.operations:
        if op.operation.name == "func.func" and _sym_name(op) == name:
            return op.operation
    raise PlacementError(f"internal error: function @{name} not found in the lowered module")


def _sym_name(op: Any) -> str:
    return ir.StringAttr(op.operation.attributes["sym_name"]).value


def _main_func(module: Any, path: Path) -> Any:
    """The one public function with a body: the program to lower."""
    candidates = []
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or len(op.regions[0].blocks) == 0:
            continue
        if "sym_visibility" in op.attributes:
            if ir.StringAttr(op.attributes["sym_visibility"]).value == "private":
                continue
        candidates.append(op)
    if len(candidates) != 1:
        names = ", ".join("@" + _sym_name(op) for op in candidates) or "none"
        raise PlacementError(
            f"{path}: expected exactly one public func.func with a body, found {names}"
        )
    return candidates[0]


def _mlir_arg_infos(func_op: Any, path: Path) -> tuple[ArgInfo, ...]:
    args = []
    for index, arg in enumerate(func_op.regions[0].blocks[0].arguments):
        name = _loc_name(arg.location) or f"arg{index}"
        tensor_type = arg.type
        if not isinstance(tensor_type, ir.RankedTensorType):
            raise PlacementError(
                f"{path}: argument {name!r} has type {tensor_type}; expected a ranked tensor"
            )
        if not tensor_type.has_static_shape:
            raise PlacementError(
                f"{path}: argument {name!r} has a dynamic shape {tensor_type}; "
                "only static shapes can be lowered"
            )
        elem = str(tensor_type.element_type)
        dtype = _MLIR_TO_NUMPY.get(elem)
        if dtype is None:
            raise PlacementError(f"{path}: argument {name!r} has unsupported element type {elem}")
        args.append(ArgInfo(name, "input", tuple(tensor_type.shape), dtype))
    return tuple(args)


def _loc_name(loc: Any) -> str:
    if isinstance(loc, ir.NameLoc):
        return loc.name_str
    return ""


def _lower_linalg(
    module: Any, path: Path, op_types: dict[str, str], *, fuse_elementwise: bool, func_name: str
) -> dict[str, Any]:
    if fuse_elementwise:
        _run(module, FUSE_ELEMENTWISE, path, op_types)
    _run(module, BUFFERIZE, path, op_types)
    func_op = find_func(module, func_name)
    linalg_ops = tag_linalg_ops(func_op)
    linalg_text = module.operation.get_asm(enable_debug_info=True)
    _run(module, TO_PARALLEL_LOOPS, path, op_types)
    func_op = find_func(module, func_name)
    nests = extract_nests(func_op, linalg_ops, op_types, path)
    tags = tuple(loc_tag(op.location) for op, _trips in outermost_parallels(func_op))
    block = func_op.regions[0].blocks[0]
    results = []
    for index, arg in enumerate(block.arguments):
        if _is_result_arg(func_op, index):
            memref = ir.MemRefType(arg.type)
            elem = str(memref.element_type)
            results.append(
                ArgInfo("", "output", tuple(memref.shape), _MLIR_TO_NUMPY.get(elem, elem))
            )
    text = module.operation.get_asm(enable_debug_info=True)
    return {
        "text": text, "nests": nests, "results": results, "num_args": len(block.arguments),
        "linalg_text": linalg_text, "nest_tags": tags,
    }  # fmt: skip


def _is_result_arg(func_op: Any, index: int) -> bool:
    if "arg_attrs" not in func_op.attributes:
        return False
    attrs = ir.ArrayAttr(func_op.attributes["arg_attrs"])
    return index < len(attrs) and "bufferize.result" in ir.DictAttr(attrs[index])
