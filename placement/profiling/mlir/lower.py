"""Progressive lowering with torch-mlir, and loop-nest extraction (Torch-PIM, Section 4.2).

Pipeline (the pass lists are the ones measured in shared/notes/mlir-lowering.md):

1. ONNX -> torch dialect with ``torch_mlir.extras.onnx_importer`` -> linalg on tensors
   (``lower_onnx``); a ``.mlir`` file given by the user starts here (``lower_mlir``).
2. Optionally ``linalg-fuse-elementwise-ops`` on tensors.
3. One-shot bufferization with function boundaries, results turned into out-params,
   ``refback-munge-memref-copy`` (copies become linalg ops, hence nests too).
4. Every linalg op gets a fused location whose metadata names its index and op name,
   then ``convert-linalg-to-parallel-loops``: the generated loops inherit the op's
   location, which is how a nest is traced back to its linalg op and ONNX node.

Each outermost ``scf.parallel`` of the result is one :class:`~placement.nests.LoopNest`.
Its operands are the memrefs loaded/stored inside it, resolved through view ops to the
allocation (``memref.alloc``, function argument or ``memref.get_global``) they live in.

ONNX specifics: nodes are renamed with :func:`~placement.onnx_names.node_names` before
import (the importer puts the node name in the location), and float initializers of at
least ``weight_arg_min_bytes`` become function arguments. Embedded as constants they
would cost JIT time and memory (the notes: a 64 MB constant costs 1 s and 0.8 GB).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from placement.errors import PlacementError
from placement.nests import LoopNest, NestOperand
from placement.onnxfile import node_names, read_onnx

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
TO_PARALLEL_LOOPS = "builtin.module(func.func(convert-linalg-to-parallel-loops), canonicalize, cse)"

# Metadata prefix of the fused location that tags each linalg op before it becomes loops.
_TAG = "placement.linalg"
# Ops that only re-describe a buffer: operands resolve through them to the allocation.
_VIEW_OPS = frozenset(
    {
        "memref.subview",
        "memref.expand_shape",
        "memref.collapse_shape",
        "memref.cast",
        "memref.reinterpret_cast",
        "memref.transpose",
        "memref.view",
        "memref.memory_space_cast",
        "memref.assume_alignment",
    }
)
_ELEM_BYTES = {
    "f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
    "i1": 1, "index": 8, "ui8": 1, "si8": 1, "ui16": 2, "si16": 2, "ui32": 4, "si32": 4,
    "ui64": 8, "si64": 8, "complex<f32>": 8, "complex<f64>": 16,
}  # fmt: skip
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
    weights: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # by arg name
    metadata: dict[str, Any] = field(default_factory=dict)

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
    model = read_onnx(path)
    graph = model.graph
    names = node_names(graph)
    op_types: dict[str, str] = {}
    for node, name in zip(graph.node, names, strict=True):
        node.name = name  # the importer uses it as the location of everything lowered from it
        op_types[name] = node.op_type
    graph.name = "forward"  # becomes the function name; ONNX graph names need not be symbols

    _check_static_inputs(graph, path)
    weights = _initializers_to_inputs(graph, weight_arg_min_bytes)
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:  # onnx raises several types for inconsistent models
        raise PlacementError(f"{path}: ONNX shape inference failed ({_first_line(exc)})") from None
    _check_static_values(model.graph, path)

    ctx = _context()
    with ctx:
        try:
            info = onnx_importer.ModelInfo(model)
            module = info.create_module(context=ctx)
            importer = onnx_importer.NodeImporter.define_function(info.main_graph, module.operation)
            importer.import_all()
        except Exception as exc:  # OnnxImportError, KeyError on unsupported types...
            raise PlacementError(
                f"{path}: torch-mlir cannot import the model ({_first_line(exc)})"
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
        nests=program["nests"],
        func_name="forward",
        args=program_args,
        source=path,
        source_kind="onnx",
        weights=weights,
        metadata={
            "fuse_elementwise": fuse_elementwise,
            "weight_arg_min_bytes": weight_arg_min_bytes,
            "import_to_linalg_seconds": imported - start,
            "lowering_seconds": time.perf_counter() - start,
        },
    )
    return lowered


def lower_mlir(path: str | Path, *, fuse_elementwise: bool = False) -> LoweredProgram:
    """Lower a user ``.mlir`` file at linalg-on-tensors level (same pipeline from bufferization)."""
    _require_torch_mlir()
    path = Path(path)
    start = time.perf_counter()
    if not path.exists():
        raise PlacementError(f"{path}: no such file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise PlacementError(f"{path}: cannot read ({_first_line(exc)})") from None
    ctx = _context()
    with ctx:
        try:
            module = ir.Module.parse(text)
        except Exception as exc:  # MLIRError carries the diagnostics
            raise PlacementError(f"{path}: not valid MLIR ({_mlir_error_line(exc)})") from None
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
        nests=program["nests"],
        func_name=func_name,
        args=program_args,
        source=path,
        source_kind="mlir",
        metadata={
            "fuse_elementwise": fuse_elementwise,
            "lowering_seconds": time.perf_counter() - start,
        },
    )


def insert_nest_markers(
    module: Any, func_name: str, enter: str = "placement_nest_enter",
    exit: str = "placement_nest_exit",
) -> int:  # fmt: skip
    """Wrap every outermost scf.parallel of ``func_name`` in ``enter(i)``/``exit(i)`` calls.

    ``i`` (i64) is the nest index, in the same program order as ``LoweredProgram.nests``.
    The callees are declared private with ``llvm.emit_c_interface`` so a JIT can resolve
    them through ``_mlir_ciface_<name>``. Returns the number of nests marked.
    """
    from torch_mlir.dialects import arith, func

    with module.context, ir.Location.unknown():
        body = module.body
        i64 = ir.IntegerType.get_signless(64)
        first = body.operations[0] if len(body.operations) else None
        ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(body)
        for name in (enter, exit):
            decl = func.FuncOp(name, ([i64], []), visibility="private", ip=ip)
            decl.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        target = _find_func(module, func_name)
        count = 0
        for op, _trips in _outermost_parallels(target):
            with ir.InsertionPoint(op):
                index = arith.ConstantOp(i64, count).result
                func.CallOp([], ir.FlatSymbolRefAttr.get(enter), [index])
                call_exit = func.CallOp([], ir.FlatSymbolRefAttr.get(exit), [index])
            call_exit.operation.move_after(op)
            count += 1
    return count


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
            raise PlacementError(f"{path}: input {value.name!r} is not a tensor")
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


def _initializers_to_inputs(graph: onnx.GraphProto, min_bytes: int) -> dict[str, np.ndarray]:
    """Turn large float initializers (and Constant nodes) into graph inputs; return values.

    Integer initializers stay constants: torch-mlir needs shapes, axes and indices as
    compile-time values, and they are small.
    """
    weights: dict[str, np.ndarray] = {}
    graph_inputs = {value.name for value in graph.input}
    keep = []
    for init in graph.initializer:
        array = numpy_helper.to_array(init)
        if (
            init.name not in graph_inputs
            and np.issubdtype(array.dtype, np.floating)
            and array.nbytes >= min_bytes
        ):
            weights[init.name] = array
            graph.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(array.shape))
            )
        else:
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
    line = _mlir_error_line(exc)
    illegal = re.search(r"failed to legalize operation '([^']+)'", line)
    if illegal:  # the op dump that follows is long and unreadable on one line
        line = f"cannot lower {illegal.group(1)}"
    line = re.sub(r'^"[^"]*":\s*', "", line)  # the location repeats the node name
    if node in op_types:
        return f"{path}: lowering node {node!r} ({op_types[node]}) failed: {line}"
    return f"{path}: lowering failed: {line}"


def _mlir_error_line(exc: BaseException) -> str:
    """The first meaningful line of an MLIRError (its first 'error:' diagnostic)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line.startswith("error:"):
            line = line[len("error:") :].strip()
            # Parsed text has no file name: '"-":2:23: msg' -> 'line 2:23: msg'.
            return re.sub(r'^"-":(\d+):(\d+):\s*', r"line \1:\2: ", line)
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__


def _find_func(module: Any, name: str) -> Any:
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
        if not isinstance(tensor_type, ir.RankedTensorType | ir.MemRefType):
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
    func_op = _find_func(module, func_name)
    linalg_ops = _tag_linalg_ops(func_op)
    _run(module, TO_PARALLEL_LOOPS, path, op_types)
    func_op = _find_func(module, func_name)
    nests = _extract_nests(func_op, linalg_ops, op_types, path)
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
    return {"text": text, "nests": nests, "results": results, "num_args": len(block.arguments)}


def _is_result_arg(func_op: Any, index: int) -> bool:
    if "arg_attrs" not in func_op.attributes:
        return False
    attrs = ir.ArrayAttr(func_op.attributes["arg_attrs"])
    return index < len(attrs) and "bufferize.result" in ir.DictAttr(attrs[index])


def _tag_linalg_ops(func_op: Any) -> list[str]:
    """Give each linalg op a fused location ``fused<"placement.linalg:<i>">[loc]``.

    convert-linalg-to-parallel-loops creates the loops at the op's location, so the tag
    survives on the scf.parallel (discardable attributes would not). Returns the op names.
    """
    names: list[str] = []
    for op in _walk(func_op):
        if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index"):
            with op.context:
                metadata = ir.StringAttr.get(f"{_TAG}:{len(names)}")
                op.location = ir.Location.fused([op.location], metadata)
            names.append(op.name)
    return names


def _walk(op: Any) -> Iterator[Any]:
    """Pre-order walk of the operations nested in ``op`` (not ``op`` itself)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield child
                yield from _walk(child)


def _outermost_parallels(func_op: Any) -> Iterator[tuple[Any, int | None]]:
    """Outermost scf.parallel ops in program order, with the trip count of enclosing loops.

    The trip count is None when an enclosing loop has non-constant bounds.
    """

    def visit(op: Any, trips: int | None) -> Iterator[tuple[Any, int | None]]:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name == "scf.parallel":
                        yield child, trips
                    elif child.name == "scf.for":
                        try:
                            inner = None if trips is None else trips * _for_trips(child)
                        except _DynamicBounds:
                            inner = None  # reported when a nest inside is counted
                        yield from visit(child, inner)
                    else:
                        yield from visit(child, trips)

    yield from visit(func_op, 1)


def _constant_index(value: Any) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation if hasattr(owner, "operation") else owner
    if owner.name not in ("arith.constant",):
        return None
    attr = owner.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


class _DynamicBounds(Exception):
    """A loop bound is not a constant (e.g. triangular loops): iterations cannot be counted."""


def _trip(lower: Any, upper: Any, step: Any) -> int:
    lb, ub, st = _constant_index(lower), _constant_index(upper), _constant_index(step)
    if lb is None or ub is None or st is None or st <= 0:
        raise _DynamicBounds
    return max(0, -(-(ub - lb) // st))


def _for_trips(op: Any) -> int:
    operands = op.operands
    return _trip(operands[0], operands[1], operands[2])


def _parallel_trips(op: Any) -> int:
    operands = list(op.operands)
    rank = len(op.regions[0].blocks[0].arguments)
    lbs, ubs, steps = operands[:rank], operands[rank : 2 * rank], operands[2 * rank : 3 * rank]
    return math.prod(_trip(lb, ub, st) for lb, ub, st in zip(lbs, ubs, steps, strict=True))


def _inner_work(op: Any) -> int:
    """Innermost iterations of one iteration of ``op``'s body (sibling loops add up)."""
    total = 0
    found = False
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if child.name == "scf.for":
                    total += _for_trips(child) * _inner_work(child)
                    found = True
                elif child.name == "scf.parallel":
                    total += _parallel_trips(child) * _inner_work(child)
                    found = True
                elif len(child.regions):
                    inner = _inner_work(child)
                    if inner > 1:
                        total += inner
                        found = True
    return total if found else 1


# Loop and index bookkeeping left out of LoopNest.body_ops (see placement.nests).
_BOOKKEEPING_OPS = frozenset(
    {
        "scf.yield",
        "scf.reduce",
        "scf.reduce.return",
        "scf.condition",
        "arith.constant",
        "arith.index_cast",
        "arith.index_castui",
        "memref.dim",
    }
)


def _is_bookkeeping(op: Any) -> bool:
    name = op.name
    if name in _BOOKKEEPING_OPS or name in _VIEW_OPS or name.startswith("affine."):
        return True
    results = list(op.results)
    return bool(results) and all(isinstance(r.type, ir.IndexType) for r in results)


def _count_ops(ops: Any, times: int, counts: dict[str, int]) -> None:
    """Add to ``counts`` the ops of ``ops`` (one block), each executed ``times`` times.

    The same recursion as :func:`_inner_work`: an inner scf.for / scf.parallel
    multiplies by its trip count, sibling loops add up. Other region ops (the
    reduction region of ``scf.reduce``, ``scf.execute_region`` ...) run once per
    execution of the op holding them.
    """
    for op in ops:
        op = op.operation
        name = op.name
        if name == "scf.for":
            _count_regions(op, times * _for_trips(op), counts)
        elif name == "scf.parallel":
            _count_regions(op, times * _parallel_trips(op), counts)
        elif name == "scf.if":
            # One branch runs per execution and which one is not known statically:
            # count the branch with more ops (an upper estimate), plus the branch itself.
            counts[name] = counts.get(name, 0) + times
            branches = []
            for region in op.regions:
                branch: dict[str, int] = {}
                for block in region.blocks:
                    _count_ops(block.operations, times, branch)
                branches.append(branch)
            heaviest = max(branches, key=lambda c: sum(c.values()), default={})
            for key, value in heaviest.items():
                counts[key] = counts.get(key, 0) + value
        else:
            if not _is_bookkeeping(op):
                counts[name] = counts.get(name, 0) + times
            if len(op.regions):
                _count_regions(op, times, counts)


def _count_regions(op: Any, times: int, counts: dict[str, int]) -> None:
    for region in op.regions:
        for block in region.blocks:
            _count_ops(block.operations, times, counts)


def _body_ops(op: Any) -> dict[str, int]:
    """Dynamic op counts of one invocation of the outermost scf.parallel ``op``."""
    counts: dict[str, int] = {}
    _count_regions(op, _parallel_trips(op), counts)
    return dict(sorted(counts.items()))


def _loc_info(loc: Any) -> tuple[int | None, str]:
    """(linalg tag index, first name found) from a possibly fused/nested location."""
    tag: int | None = None
    name = ""
    stack = [loc]
    while stack:
        current = stack.pop(0)
        if isinstance(current, ir.FusedLoc):
            metadata = current.metadata  # a plain Attribute: downcast by hand
            text = ir.StringAttr(metadata).value if _is_string_attr(metadata) else ""
            if text.startswith(_TAG + ":") and tag is None:
                tag = int(text.split(":", 1)[1])
            stack.extend(current.locations)
        elif isinstance(current, ir.NameLoc):
            if not name:
                name = current.name_str
        elif isinstance(current, ir.CallSiteLoc):
            stack.append(current.callee)
    return tag, name


def _is_string_attr(attr: Any) -> bool:
    try:
        ir.StringAttr(attr)
    except (ValueError, TypeError):
        return False
    return True


def _extract_nests(
    func_op: Any, linalg_ops: list[str], op_types: dict[str, str], path: Path
) -> list[LoopNest]:
    buffers = _Buffers(func_op)
    nests = []
    for index, (op, trips) in enumerate(_outermost_parallels(func_op)):
        tag, name = _loc_info(op.location)
        try:
            if trips is None:
                raise _DynamicBounds
            n_iter = _parallel_trips(op)
            n_total = n_iter * _inner_work(op)
            body_ops = _body_ops(op)
        except _DynamicBounds:
            what = f"node {name!r} ({op_types[name]})" if name in op_types else "a loop nest"
            raise PlacementError(
                f"{path}: {what} lowers to loops with non-constant bounds; "
                "its iterations cannot be counted"
            ) from None
        accesses: dict[str, list[bool]] = {}
        for inner in _walk(op):
            for key, read, written in buffers.accesses(inner):
                flags = accesses.setdefault(key, [False, False])
                flags[0] |= read
                flags[1] |= written
        operands = tuple(
            NestOperand(**buffers.describe(key), read=flags[0], written=flags[1])
            for key, flags in accesses.items()
        )
        nests.append(
            LoopNest(
                id=f"n{index:03d}",
                index=index,
                onnx_node=name if (not op_types or name in op_types) else "",
                onnx_op_type=op_types.get(name, ""),
                linalg_op=linalg_ops[tag] if tag is not None and tag < len(linalg_ops) else "",
                n_iter=n_iter,
                n_total=n_total,
                trip_count=trips,
                operands=operands,
                body_ops=body_ops,
            )
        )
    return nests


class _Buffers:
    """Resolves memref values to the allocation they live in and names allocations."""

    def __init__(self, func_op: Any) -> None:
        self._arg_owner = func_op.regions[0].blocks[0]
        self._names: dict[Any, str] = {}  # allocation op -> "allocN"
        self._info: dict[str, dict[str, Any]] = {}
        self._count = 0
        for op in _walk(func_op):
            if op.name in ("memref.alloc", "memref.alloca"):
                self._names[op] = f"alloc{self._count}"
                self._count += 1
        self._allocs = list(self._names)

    def accesses(self, op: Any) -> list[tuple[str, bool, bool]]:
        name = op.name
        if name in _VIEW_OPS or name in ("memref.dim", "memref.dealloc"):
            return []
        if name == "memref.load":
            return [(self._resolve(op.operands[0]), True, False)]
        if name == "memref.store":
            return [(self._resolve(op.operands[1]), False, True)]
        if name == "memref.copy":
            return [(self._resolve(op.operands[0]), True, False),
                    (self._resolve(op.operands[1]), False, True)]  # fmt: skip
        # Anything else touching a memref (calls, atomics): count it as read and written.
        return [
            (self._resolve(value), True, True)
            for value in op.operands
            if isinstance(value.type, ir.MemRefType)
        ]

    def describe(self, key: str) -> dict[str, Any]:
        return self._info[key]

    def _resolve(self, value: Any) -> str:
        while True:
            owner = value.owner
            if isinstance(owner, ir.Block):
                if owner == self._arg_owner:
                    key, kind = f"arg{ir.BlockArgument(value).arg_number}", "argument"
                else:
                    key, kind = f"blockarg:{value.get_name()}", "alloc"
                break
            owner = owner.operation
            if owner.name in _VIEW_OPS:
                value = owner.operands[0]
                continue
            if owner.name in ("memref.alloc", "memref.alloca"):
                key, kind = self._alloc_name(owner), "alloc"
            elif owner.name == "memref.get_global":
                symbol = ir.FlatSymbolRefAttr(owner.attributes["name"]).value
                key, kind = f"global:{symbol}", "global"
            else:
                key, kind = f"{owner.name}:{value.get_name()}", "alloc"
            break
        if key not in self._info:
            memref = ir.MemRefType(value.type)
            elem = str(memref.element_type)
            shape = tuple(memref.shape)
            size = _ELEM_BYTES.get(elem)
            if size is None:
                width = getattr(memref.element_type, "width", 8)
                size = max(1, (width + 7) // 8)
            self._info[key] = {
                "buffer": key,
                "kind": kind,
                "shape": shape,
                "elem_type": elem,
                "nbytes": math.prod(shape) * size,
            }
        return key

    def _alloc_name(self, op: Any) -> str:
        for candidate, name in self._names.items():
            if candidate == op:
                return name
        return f"alloc?{len(self._names)}"
