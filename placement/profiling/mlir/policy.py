"""What a user's ``.mlir`` may contain: linalg on tensors, nothing that reaches outside it.

A ``.mlir`` file is a program: profiling compiles it and runs it in this process (nest
timing, the cache simulation). :func:`check_user_module` therefore admits only what the
ONNX lowering itself produces at linalg-on-tensors level, and is called on the parsed
file before any pass runs. Refused, with the first offender's line:

* operations of any dialect but :data:`ACCEPTED_DIALECTS`: ``llvm`` (``llvm.call``,
  inline assembly), ``memref``/``bufferization`` (raw buffers, ``reinterpret_cast``,
  globals), ``gpu``, ``async``, ``transform``, ``omp``, ``vector``, ...; of ``builtin``
  only the top-level module, of ``func`` only ``func.func``/``func.return``/``func.call``;
* a ``func.func`` without a body: an external declaration, which the JIT links to any
  symbol of the process (libc's ``system`` included), and a call of a function the file
  does not define;
* attributes in the ``llvm``, ``bufferize`` and ``placement`` namespaces and
  ``library_call`` (``convert-func-to-llvm`` forwards the first to LLVM; ``bufferize.result``
  marks the out-parameters the profiler allocates and ``placement.*`` the loops it times),
  and on ``func.func`` anything but its name, signature, visibility and argument/result
  attributes (the rest would become LLVM function attributes: sections, personalities);
* values of other types than integers, floats, ``index`` and ranked tensors of them
  (no memref, vector, ``!llvm.ptr``, complex, sparse encodings);
* a tensor larger than this machine's memory (its allocation would fail and the compiled
  program write through a null pointer);
* symbols named ``placement_*`` or ``_mlir_*``: the profiler's timing markers, inserted
  after this check (``markers.mark_program``), and the JIT's C interfaces.

What the check cannot do is make the program memory safe: MLIR compiles without bounds
checks, so a ``tensor.extract`` at a data-dependent index outside its tensor is undefined
behaviour, and an ``scf.while`` may never end. Profile only ``.mlir`` files you would run.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.profiling.mlir.extract import walk_operations

try:  # torch-mlir is heavy; import errors surface as a PlacementError on first use
    from torch_mlir import ir
except ImportError:  # pragma: no cover - exercised only without the wheel
    ir = None  # type: ignore[assignment]

# The dialects of torch-mlir's linalg-on-tensors output that the lowering compiles
# (torch-mlir's backend contract also allows complex, ml_program and tm_tensor, which
# the pipeline to LLVM does not handle).
ACCEPTED_DIALECTS = ("linalg", "tensor", "arith", "math", "scf", "cf", "affine", "func")
_FUNC_OPS = frozenset({"func.func", "func.return", "func.call"})
_FUNC_ATTRS = frozenset({"sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs"})
_RESERVED_NAMESPACES = ("llvm", "bufferize", "placement")
_RESERVED_SYMBOLS = ("placement_", "_mlir_")
_REFUSAL = "a .mlir input may contain only linalg-on-tensors code that calls nothing outside it"


def check_user_module(module: Any, path: str | Path, memory_bytes: int | None = None) -> None:
    """Raise a one-line :class:`PlacementError` unless ``module`` keeps to the module doc.

    ``memory_bytes``: the largest tensor allowed (default: this machine's memory).
    """
    path = Path(path)
    limit = physical_memory() if memory_bytes is None else memory_bytes
    top = module.operation
    _check_attributes(top, path)
    defined = set()
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and len(op.regions[0].blocks) > 0:
            defined.add(_symbol(op))
    for op in walk_operations(top):
        _check_operation(op, path, defined)
        _check_attributes(op, path)
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    _check_type(arg.type, op, path, limit, "takes an argument")
        for result in op.results:
            _check_type(result.type, op, path, limit, "makes a value")


def physical_memory() -> int | None:
    """This machine's memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _check_operation(op: Any, path: Path, defined: set[str]) -> None:
    name = op.name
    dialect = name.split(".", 1)[0]
    if name == "builtin.module":
        _fail(path, op, "a nested builtin.module is not accepted; give one module")
    if dialect not in ACCEPTED_DIALECTS or (dialect == "func" and name not in _FUNC_OPS):
        _fail(path, op, f"operation {name} is not accepted ({_REFUSAL}: "
                        f"{', '.join(ACCEPTED_DIALECTS)})")  # fmt: skip
    if name == "func.func":
        symbol = _symbol(op)
        if len(op.regions[0].blocks) == 0:
            _fail(path, op, f"func.func @{symbol} has no body: external functions are not"
                            f" accepted (compiled, it would call whatever @{symbol} the"
                            " process has)")  # fmt: skip
        if symbol.startswith(_RESERVED_SYMBOLS):
            _fail(path, op, f"the name @{symbol} is reserved (placement_* and _mlir_* are the"
                            " profiler's timing markers and the JIT's interfaces)")  # fmt: skip
        if op.parent.name != "builtin.module":
            _fail(path, op, f"func.func @{symbol} is not at the top level of the module")
    if name == "func.call":
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if callee not in defined:
            _fail(path, op, f"func.call @{callee} calls a function this file does not"
                            " define; external functions are not accepted")  # fmt: skip


def _check_attributes(op: Any, path: Path) -> None:
    for named in _named_attributes(op):
        name = named.name
        if op.name == "func.func" and name not in _FUNC_ATTRS:
            _fail(path, op, f"attribute {name!r} on func.func is not accepted (only its"
                            " name, signature, visibility and argument attributes)")  # fmt: skip
        _check_attribute_name(name, op, path)
        if op.name == "func.func" and name in ("arg_attrs", "res_attrs"):
            for entry in ir.ArrayAttr(named.attr):
                for inner in ir.DictAttr(entry):
                    _check_attribute_name(inner.name, op, path)


def _check_attribute_name(name: str, op: Any, path: Path) -> None:
    namespace = name.split(".", 1)[0] if "." in name else ""
    if namespace in _RESERVED_NAMESPACES or name == "library_call":
        _fail(path, op, f"attribute {name!r} on {op.name} is not accepted ({_REFUSAL})")


def _named_attributes(op: Any) -> list[Any]:
    attributes = op.attributes
    return [attributes[i] for i in range(len(attributes))]


def _check_type(value_type: Any, op: Any, path: Path, limit: int | None, what: str) -> None:
    if _is_scalar(value_type):
        return
    if isinstance(value_type, ir.RankedTensorType) and value_type.encoding is None:
        element = value_type.element_type
        if _is_scalar(element):
            _check_size(value_type, element, op, path, limit)
            return
    _fail(path, op, f"{op.name} {what} of type {value_type}; a .mlir input may use only"
                    " integers, floats, index and ranked tensors of them")  # fmt: skip


def _is_scalar(value_type: Any) -> bool:
    return isinstance(value_type, ir.IntegerType | ir.IndexType | ir.FloatType)


def _check_size(tensor: Any, element: Any, op: Any, path: Path, limit: int | None) -> None:
    if limit is None:
        return
    dims = [d for d in tensor.shape if d >= 0]  # dynamic sizes are negative
    bits = 64 if isinstance(element, ir.IndexType) else element.width
    size = math.prod(dims) * max(bits, 8) // 8
    if size > limit:
        _fail(path, op, f"{op.name} makes a {tensor} of {_size(size)}, more than this"
                        f" machine's {_size(limit)} of memory")  # fmt: skip


def _size(size: int) -> str:
    for scale, unit in ((1e18, "EB"), (1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB")):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} bytes"


def _symbol(op: Any) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _fail(path: Path, op: Any, message: str) -> None:
    raise PlacementError(f"{path}: {_line(op)}{message}")


def _line(op: Any) -> str:
    """``line L:C: `` of the op in the file (parsed text is named "-"), else nothing."""
    match = re.search(r'"[^"]*":(\d+):(\d+)', str(op.location))
    return f"line {match.group(1)}:{match.group(2)}: " if match else ""
