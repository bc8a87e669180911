"""Memory a model's run needs, estimated from its static shapes before anything is allocated.

Profiling feeds a model random inputs and runs it (ONNX Runtime, the MLIR JIT); a model
that declares an input of ``[1000000, 1000000]`` floats would ask for 4 TB, which ends
in a ``MemoryError`` traceback, or on a large machine in swapping for hours. So every
profiler checks its estimate first (:func:`check_model_memory`,
:func:`check_program_memory`) and refuses, in one line naming the tensor and its size,
a model that needs more than the limit.

Estimate: the run is taken step by step (ONNX nodes in graph order; loop nests in
program order). The random inputs are alive for the whole run and the outputs from the
step that writes them to the end (the runtime returns them); every other tensor (an
intermediate, or an allocation of the lowered program) from the step that writes it to
the last step that reads it, as an executor that frees each buffer after its last use
(ONNX Runtime's memory planner, MLIR's buffer deallocation) keeps it. The estimate is
the largest sum of live bytes over the steps. Weights are not counted: they are in the
model file, in memory once it is read. Tensors of unknown shape or element size count
zero (they are refused elsewhere).

Limit: ``memory_limit_gb`` (``--memory-limit GB``, 1 GB = 1e9 B), or by default
:data:`DEFAULT_FRACTION` of the memory available now: ``MemAvailable`` of
``/proc/meminfo``, or less where a cgroup (a container) allows less. Where neither can
be read (not Linux) there is no default limit and nothing is refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from placement.errors import PlacementError
from placement.machine import available_memory
from placement.onnxfile import node_names
from placement.units import fmt_bytes_si

#: The share of the available memory a run may take unless ``--memory-limit`` says more.
DEFAULT_FRACTION = 0.5


@dataclass(frozen=True)
class Tensor:
    """One buffer of a run: a graph input, output or intermediate (or allocation)."""

    role: str  # "input" | "output" | "intermediate"
    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy name, e.g. "float32"
    nbytes: int

    def describe(self) -> str:
        """``input 'x' [1000000, 1000000] float32``."""
        return f"{self.role} {self.name!r} [{', '.join(map(str, self.shape))}] {self.dtype}"


@dataclass(frozen=True)
class MemoryEstimate:
    """The peak of live bytes of a run and what is alive then."""

    peak_bytes: int
    step: str  # the step (node or nest) at the peak
    alive: tuple[Tensor, ...]  # the tensors alive at the peak, largest first
    largest: Tensor | None  # the largest tensor of the whole run (None: no tensors)


@dataclass(frozen=True)
class MemoryLimit:
    """How many bytes a run may take, and where that number comes from (for messages)."""

    bytes: float
    origin: str  # e.g. "half the available memory; raise it with --memory-limit"


def memory_limit(memory_limit_gb: float | None = None) -> MemoryLimit | None:
    """The limit of ``memory_limit_gb`` (checked), or the default; None: no limit known."""
    if memory_limit_gb is not None:
        value = memory_limit_gb
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlacementError(f"--memory-limit must be a number of GB, got {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise PlacementError(f"--memory-limit must be a positive number of GB, got {value}")
        return MemoryLimit(float(value) * 1e9, f"--memory-limit {value:g}")
    available = available_memory()
    if available is None:
        return None
    amount, what = available
    share = "half" if DEFAULT_FRACTION == 0.5 else f"{100 * DEFAULT_FRACTION:g} % of"
    return MemoryLimit(
        DEFAULT_FRACTION * amount, f"{share} {what}; raise it with --memory-limit GB"
    )


# --------------------------------------------------------------------------- estimates


def estimate(
    tensors: Sequence[Tensor], steps: Sequence[tuple[str, Iterable[str]]]
) -> MemoryEstimate:
    """The peak of live bytes when ``steps`` run in order, each touching the named tensors
    (inputs alive throughout, outputs from their first step to the end, others from their
    first step to their last; module docstring)."""
    by_name = {t.name: t for t in tensors}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for index, (_, names) in enumerate(steps):
        for name in names:
            if name in by_name:
                first.setdefault(name, index)
                last[name] = index
    end = max(len(steps) - 1, 0)
    spans: dict[str, tuple[int, int]] = {}
    for t in tensors:
        if t.role == "input":
            spans[t.name] = (0, end)
        elif t.name in first:
            spans[t.name] = (first[t.name], end if t.role == "output" else last[t.name])
    change = [0] * (end + 2)  # bytes that become alive (+) or are freed (-) at each step
    for name, (lo, hi) in spans.items():
        change[lo] += by_name[name].nbytes
        change[hi + 1] -= by_name[name].nbytes
    peak, at, live = 0, 0, 0
    for index in range(end + 1):
        live += change[index]
        if live > peak:
            peak, at = live, index
    alive = sorted(
        (by_name[n] for n, (lo, hi) in spans.items() if lo <= at <= hi), key=lambda t: -t.nbytes
    )
    largest = max((by_name[n] for n in spans), key=lambda t: t.nbytes, default=None)
    return MemoryEstimate(peak, steps[at][0] if steps else "", tuple(alive), largest)


def check_estimate(
    found: MemoryEstimate, limit: MemoryLimit | None, where: str, step_kind: str = "node"
) -> None:
    """A one-line PlacementError when ``found`` exceeds ``limit`` (None: no limit)."""
    if limit is None or found.peak_bytes <= limit.bytes:
        return
    allowed = f"more than the limit of {fmt_bytes_si(limit.bytes)} ({limit.origin})"
    big = found.largest
    if big is not None and big.nbytes > limit.bytes:
        raise PlacementError(
            f"{where}: {big.describe()} needs {fmt_bytes_si(big.nbytes)}, {allowed}"
        )
    top = found.alive[0]
    raise PlacementError(
        f"{where}: running the model needs {fmt_bytes_si(found.peak_bytes)} at once (at"
        f" {step_kind} {found.step!r}: {len(found.alive)} tensors alive, the largest"
        f" {top.describe()} of {fmt_bytes_si(top.nbytes)}), {allowed}"
    )


def onnx_estimate(model: onnx.ModelProto) -> MemoryEstimate:
    """The estimate of an ONNX model run by ONNX Runtime (shapes from ONNX inference)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # unknown domains, >2 GB: what the file declares
        inferred = model
    graph = inferred.graph
    constants = {t.name for t in graph.initializer}
    constants |= {s.values.name for s in graph.sparse_initializer}
    inputs = {i.name for i in graph.input}
    outputs = {o.name for o in graph.output}
    tensors: dict[str, Tensor] = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.name in constants or info.name in tensors:
            continue
        role = (
            "input" if info.name in inputs
            else "output" if info.name in outputs
            else "intermediate"
        )  # fmt: skip
        tensor = _onnx_tensor(info, role)
        if tensor is not None:
            tensors[info.name] = tensor
    steps = [
        (name, [*node.input, *node.output])
        for name, node in zip(node_names(graph), graph.node, strict=True)
    ]
    return estimate(list(tensors.values()), steps)


def _onnx_tensor(info: onnx.ValueInfoProto, role: str) -> Tensor | None:
    if info.type.WhichOneof("value") != "tensor_type":
        return None
    tensor = info.type.tensor_type
    if not tensor.HasField("shape") or tensor.elem_type in (
        TensorProto.UNDEFINED, TensorProto.STRING
    ):  # fmt: skip
        return None
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
    if any(d < 0 for d in dims):
        return None
    dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    size = max(1, dtype.itemsize)  # sub-byte types count a byte per element
    return Tensor(role, info.name, tuple(dims), dtype.name, math.prod(dims) * size)


def program_estimate(program: Any) -> MemoryEstimate:
    """The estimate of a lowered program (:class:`~placement.profiling.mlir.lower.
    LoweredProgram`) run in the MLIR JIT: its input and output arguments, and the
    allocations its nests touch, by nest."""
    tensors: list[Tensor] = []
    arguments: dict[int, str] = {}
    for position, arg in enumerate(program.args):
        if arg.role == "weight":
            continue
        nbytes = math.prod(arg.shape) * max(1, np.dtype(arg.dtype).itemsize)
        tensors.append(Tensor(arg.role, arg.name, tuple(arg.shape), arg.dtype, nbytes))
        arguments[position] = arg.name
    seen: set[str] = set()
    steps = []
    for nest in program.nests:
        touched = []
        for op in nest.operands:
            if op.kind == "argument":
                number = op.buffer.removeprefix("arg")  # "arg3": the function's 4th argument
                if number.isdigit() and int(number) in arguments:
                    touched.append(arguments[int(number)])
            elif op.kind == "alloc":
                touched.append(op.buffer)
                if op.buffer not in seen:
                    seen.add(op.buffer)
                    tensors.append(
                        Tensor("intermediate", op.buffer, tuple(op.shape), op.elem_type, op.nbytes)
                    )
        steps.append((nest.id, touched))
    return estimate(tensors, steps)


def return_freed_memory() -> None:
    """Give the memory this process has freed back to the system (glibc's ``malloc_trim``;
    nothing elsewhere). glibc keeps freed small blocks for reuse: after LLVM compiled a
    program of several hundred loop nests, ~0.5 GB of freed compiler memory stayed
    resident through the phases after it (a 12-layer GPT-2)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to trim
        pass


def check_model_memory(
    path: str | Path, model: onnx.ModelProto, memory_limit_gb: float | None = None
) -> None:
    """Refuse (one line) an ONNX model whose run would need more than the limit."""
    limit = memory_limit(memory_limit_gb)
    if limit is not None:
        check_estimate(onnx_estimate(model), limit, str(path))


def check_program_memory(program: Any, memory_limit_gb: float | None = None) -> None:
    """Refuse (one line) a lowered program whose JIT run would need more than the limit."""
    limit = memory_limit(memory_limit_gb)
    if limit is not None:
        check_estimate(program_estimate(program), limit, str(program.source), "nest")
