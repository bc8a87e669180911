"""Per-nest host times of a lowered program, measured in the MLIR JIT (Torch-PIM, Section 4.3).

Every outermost ``scf.parallel`` of :class:`~placement.profiling.mlir.lower.LoweredProgram`
is wrapped in ``placement_nest_enter(i)`` / ``placement_nest_exit(i)`` calls, the module
is lowered to LLVM (pipeline 4 of shared/notes/mlir-lowering.md) and JIT-compiled with
``ExecutionEngine(opt_level=2)``. The markers resolve to ctypes callbacks that read
``time.perf_counter_ns``; a nest inside enclosing loops accumulates over its invocations.
Nests run single-threaded (scf.parallel becomes a sequential loop).

Marker overhead: a calibration function in the same module calls enter/exit back to back;
the part of a pair that falls between the two clock reads (``marker_in_nest_ns``) is
subtracted from every nest invocation, the full cost of a pair is reported as
``marker_pair_ns``. Both are in ``metadata``.

Inputs are deterministic random arrays with the same rule as the ONNX Runtime profiler
(floats standard normal, wide integers 0/1, 8-bit integers full range); weights passed as
arguments get their ONNX values, so outputs can be compared with ONNX Runtime.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placement.errors import PlacementError
from placement.profiling.mlir.lower import LoweredProgram, insert_nest_markers, new_context

TO_LLVM = (
    "builtin.module(buffer-deallocation-pipeline, convert-bufferization-to-memref,"
    " func.func(convert-linalg-to-loops), lower-affine, convert-scf-to-cf,"
    " func.func(arith-expand), func.func(convert-math-to-llvm), convert-math-to-libm,"
    " expand-strided-metadata, finalize-memref-to-llvm, lower-affine,"
    " func.func(convert-arith-to-llvm), convert-index-to-llvm, convert-func-to-llvm,"
    " convert-cf-to-llvm, reconcile-unrealized-casts)"
)
ENTER = "placement_nest_enter"
EXIT = "placement_nest_exit"
CALIBRATE = "placement_calibrate"
CALIBRATION_PAIRS = 2000

_MARKER = ctypes.CFUNCTYPE(None, ctypes.c_int64)


@dataclass
class NestTiming:
    t_cpu: dict[str, float]  # nest id -> median seconds per program run (all invocations)
    total_seconds: float  # median wall time of one program run, markers included
    runs: int
    metadata: dict[str, Any] = field(default_factory=dict)
    max_abs_error: float | None = None  # vs ONNX Runtime, when checked


def time_nests(
    program: LoweredProgram,
    *,
    runs: int = 10,
    warmup: int = 3,
    seed: int = 0,
    check_against_onnx: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> NestTiming:
    """Measure each nest's host time: median over ``runs`` after ``warmup`` runs."""
    if runs < 1 or warmup < 0:
        raise PlacementError(f"runs must be >= 1 and warmup >= 0 (got {runs}, {warmup})")
    from torch_mlir.runtime.np_to_memref import get_ranked_memref_descriptor

    start = time.perf_counter()
    count = len(program.nests)
    engine, callbacks, state = _compile(program, count)
    compiled = time.perf_counter()

    arrays = program_arguments(program, seed)
    descriptors = [get_ranked_memref_descriptor(a) for a in arrays]
    pointers = [ctypes.pointer(ctypes.pointer(d)) for d in descriptors]
    packed = (ctypes.c_void_p * len(pointers))(*[ctypes.cast(p, ctypes.c_void_p) for p in pointers])
    entry = engine.lookup(program.func_name)
    calibrate = engine.lookup(CALIBRATE)
    no_args = (ctypes.c_void_p * 1)()

    # Calibrate: the in-nest share and the full cost of one enter/exit pair.
    acc, calls = state["acc"], state["calls"]
    pair_walls, in_nest = [], []
    for _ in range(5):
        acc[count] = 0
        t0 = time.perf_counter_ns()
        calibrate(no_args)
        pair_walls.append((time.perf_counter_ns() - t0) / CALIBRATION_PAIRS)
        in_nest.append(acc[count] / CALIBRATION_PAIRS)
    marker_pair_ns = statistics.median(pair_walls)
    marker_in_nest_ns = statistics.median(in_nest)

    per_nest: list[list[float]] = [[] for _ in range(count)]
    totals: list[float] = []
    invocations: list[int] = [0] * count
    for i in range(warmup + runs):
        for k in range(count + 1):
            acc[k] = 0
            calls[k] = 0
        t0 = time.perf_counter_ns()
        entry(packed)
        wall = time.perf_counter_ns() - t0
        if i < warmup:
            continue
        totals.append(wall * 1e-9)
        for k in range(count):
            corrected = max(0.0, acc[k] - calls[k] * marker_in_nest_ns)
            per_nest[k].append(corrected * 1e-9)
            invocations[k] = calls[k]
        if progress is not None:
            progress(i - warmup + 1, runs)
    del callbacks  # kept alive until here: the JIT code calls into them

    t_cpu = {nest.id: statistics.median(per_nest[k]) for k, nest in enumerate(program.nests)}
    total = statistics.median(totals)
    metadata: dict[str, Any] = {
        "method": "mlir-jit-markers/1",
        "opt_level": 2,
        "runs": runs,
        "warmup": warmup,
        "seed": seed,
        "jit_compile_seconds": compiled - start,
        "marker_pair_ns": marker_pair_ns,
        "marker_in_nest_ns": marker_in_nest_ns,
        "invocations_per_run": {n.id: invocations[k] for k, n in enumerate(program.nests)},
        "unattributed_seconds": max(0.0, total - sum(t_cpu.values())),
        "source": str(program.source),
    }
    timing = NestTiming(t_cpu=t_cpu, total_seconds=total, runs=runs, metadata=metadata)
    if check_against_onnx is not None:
        timing.max_abs_error = _check_outputs(program, arrays, Path(check_against_onnx))
    del engine
    return timing


# --------------------------------------------------------------------------- compilation


def jit_with_markers(
    program: LoweredProgram,
    enter: Callable[[int], None],
    exit_: Callable[[int], None],
    *,
    calibration: bool = False,
) -> tuple[Any, Any]:
    """JIT ``program`` with ``enter(k)``/``exit_(k)`` called around nest ``k``.

    Returns the engine and the ctypes callbacks, which the caller must keep
    alive while the JIT code runs. With ``calibration`` the module also gets
    ``placement_calibrate()`` (marker pairs with no work, as nest ``len(nests)``).
    """
    from torch_mlir import ir
    from torch_mlir.execution_engine import ExecutionEngine
    from torch_mlir.passmanager import PassManager

    count = len(program.nests)
    ctx = new_context()
    with ctx:
        module = ir.Module.parse(program.module_text)
        marked = insert_nest_markers(module, program.func_name, ENTER, EXIT)
        if marked != count:
            raise PlacementError(
                f"internal error: {marked} nests marked, the program lists {count}"
            )
        for op in module.body.operations:
            op = op.operation
            if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == (
                program.func_name
            ):
                op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        if calibration:
            _add_calibration(module, count)
        try:
            PassManager.parse(TO_LLVM).run(module.operation)
        except Exception as exc:
            raise PlacementError(
                f"{program.source}: lowering to LLVM failed ({_line(exc)})"
            ) from None
        engine = ExecutionEngine(module, opt_level=2)
    callbacks = (_MARKER(enter), _MARKER(exit_))
    engine.register_runtime(ENTER, callbacks[0])
    engine.register_runtime(EXIT, callbacks[1])
    return engine, callbacks


def _compile(program: LoweredProgram, count: int) -> tuple[Any, Any, Any]:
    # Plain Python lists: the callbacks are the hot path (~0.4 us per pair).
    acc = [0] * (count + 1)
    calls = [0] * (count + 1)
    starts = [0] * (count + 1)
    clock = time.perf_counter_ns

    def enter(k: int) -> None:
        starts[k] = clock()

    def exit_(k: int) -> None:
        acc[k] += clock() - starts[k]
        calls[k] += 1

    engine, callbacks = jit_with_markers(program, enter, exit_, calibration=True)
    return engine, callbacks, {"acc": acc, "calls": calls}


def _add_calibration(module: Any, count: int) -> None:
    """``placement_calibrate()``: CALIBRATION_PAIRS back-to-back marker pairs for nest ``count``."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith, func, scf

    with ir.Location.unknown():
        index = ir.IndexType.get()
        i64 = ir.IntegerType.get_signless(64)
        fn = func.FuncOp(CALIBRATE, ([], []), ip=ir.InsertionPoint(module.body))
        fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        block = fn.add_entry_block()
        with ir.InsertionPoint(block):
            lower = arith.ConstantOp(index, 0).result
            upper = arith.ConstantOp(index, CALIBRATION_PAIRS).result
            step = arith.ConstantOp(index, 1).result
            loop = scf.ForOp(lower, upper, step)
            with ir.InsertionPoint(loop.body):
                k = arith.ConstantOp(i64, count).result
                func.CallOp([], ir.FlatSymbolRefAttr.get(ENTER), [k])
                func.CallOp([], ir.FlatSymbolRefAttr.get(EXIT), [k])
                scf.YieldOp([])
            func.ReturnOp([])


# --------------------------------------------------------------------------- data


def random_inputs(program: LoweredProgram, seed: int) -> dict[str, np.ndarray]:
    """Deterministic feeds for the program's inputs (same rule as the ONNX Runtime profiler)."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in program.inputs:
        dtype = np.dtype(arg.dtype)
        shape = arg.shape
        if dtype == np.bool_:
            value = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(size=shape).astype(dtype)
        elif dtype.itemsize == 1:  # 8-bit activations: the full range
            info = np.iinfo(dtype)
            value = rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
        else:  # wider integers are usually indices or ids: 0/1 are always valid
            value = rng.integers(0, 2, size=shape).astype(dtype)
        feeds[arg.name] = np.ascontiguousarray(value)
    return feeds


def program_arguments(program: LoweredProgram, seed: int) -> list[np.ndarray]:
    feeds = random_inputs(program, seed)
    arrays = []
    for arg in program.args:
        if arg.role == "input":
            arrays.append(feeds[arg.name])
        elif arg.role == "weight":
            value = program.weights.get(arg.name)
            if value is None:
                raise PlacementError(f"internal error: no value for weight {arg.name!r}")
            arrays.append(np.ascontiguousarray(value, dtype=np.dtype(arg.dtype)))
        else:
            arrays.append(np.zeros(arg.shape, dtype=np.dtype(arg.dtype)))
    return arrays


def _check_outputs(program: LoweredProgram, arrays: list[np.ndarray], onnx_path: Path) -> float:
    """Run ONNX Runtime on the same inputs; return the max abs error or raise on mismatch."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise PlacementError(
            f"{onnx_path}: ONNX Runtime cannot load the model ({_line(exc)})"
        ) from None
    feeds = {
        arg.name: array
        for arg, array in zip(program.args, arrays, strict=True)
        if arg.role == "input"
    }
    expected = session.run([a.name for a in program.outputs], feeds)
    got = [array for arg, array in zip(program.args, arrays, strict=True) if arg.role == "output"]
    worst = 0.0
    for arg, want, have in zip(program.outputs, expected, got, strict=True):
        want = np.asarray(want)
        if want.shape != have.shape:
            raise PlacementError(
                f"{onnx_path}: output {arg.name!r} has shape {have.shape} in the JIT, "
                f"{want.shape} in ONNX Runtime"
            )
        if np.issubdtype(want.dtype, np.floating):
            error = float(np.max(np.abs(have.astype(np.float64) - want), initial=0.0))
            # f32: reassociated reductions and libm vs MLAS differ in the last bits.
            scale = float(np.max(np.abs(want), initial=0.0))
            tolerance = 1e-4 * max(1.0, scale)
            ok = np.allclose(have, want, rtol=1e-3, atol=tolerance)
        else:
            error = float(np.max(np.abs(have.astype(np.int64) - want), initial=0))
            ok = error == 0
        worst = max(worst, error)
        if not ok:
            raise PlacementError(
                f"{onnx_path}: JIT output {arg.name!r} differs from ONNX Runtime "
                f"(max abs error {error:.3g})"
            )
    return worst


def _line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip().startswith("error:"):
            return line.strip()[len("error:") :].strip()
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(exc).__name__
