"""Per-nest host times of a lowered program, measured in the MLIR JIT (Torch-PIM, Section 4.3).

Each nest of :class:`~placement.profiling.mlir.lower.LoweredProgram` is wrapped in
``placement_nest_enter(i)`` / ``placement_nest_exit(i)`` calls -- around its outermost
``scf.parallel`` for the unoptimized program, around the outermost loop of any kind
carrying its linalg tag for a program optimized by
:func:`~placement.profiling.mlir.optimize.optimize_program` (``program.markers_at``) --
the module is lowered to LLVM (pipeline 4 of shared/notes/mlir-lowering.md) and
JIT-compiled with ``ExecutionEngine(opt_level=2)``. A nest inside enclosing loops
accumulates over its invocations. Nests run single-threaded (scf.parallel becomes a
sequential loop).

Markers (``markers=``): ``"c"`` resolves them to C functions of a small shared library
built once with the system compiler (:mod:`placement.profiling.nest_markers`, ~50 ns per
enter/exit pair); ``"python"`` to ctypes callbacks reading ``time.perf_counter_ns``
(~0.6 µs per pair, the original method); ``"auto"`` (default) takes C and falls back to
Python when no compiler is available, with the reason in ``metadata["warnings"]``.

Marker overhead: a calibration function in the same module calls enter/exit back to back;
the part of a pair that falls between the two clock reads (``marker_in_nest_ns``) is
subtracted from every nest invocation, the full cost of a pair is reported as
``marker_pair_ns``. Both are in ``metadata``.

Cache state (``cache=``): ``"warm"`` runs back to back; ``"cold"`` flushes the last-level
cache before every run (:mod:`placement.profiling.cache_flush`), so each run starts with
the model's weights and inputs out of cache (nests later in a run still find what earlier
nests of the same run left).

Inputs are deterministic random arrays with the same rule as the ONNX Runtime profiler
(floats standard normal, wide integers 0/1, 8-bit integers full range); weights passed as
arguments get their ONNX values, so outputs can be compared with ONNX Runtime.
"""

from __future__ import annotations

import contextlib
import ctypes
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placement.errors import PlacementError
from placement.profiling.cache_flush import cache_metadata, make_flusher
from placement.profiling.memory import return_freed_memory
from placement.profiling.mlir.lower import ArgInfo, LoweredProgram, WeightFile, new_context
from placement.profiling.mlir.markers import mark_program
from placement.profiling.mlir.passes import run_passes
from placement.profiling.nest_markers import MAX_NESTS, MarkersUnavailable, load_c_markers

TO_LLVM = (
    "builtin.module(buffer-deallocation-pipeline, convert-bufferization-to-memref,"
    " func.func(convert-linalg-to-loops), lower-affine, convert-scf-to-cf,"
    " func.func(arith-expand), func.func(convert-math-to-llvm), convert-math-to-libm,"
    " expand-strided-metadata, finalize-memref-to-llvm, lower-affine,"
    " func.func(convert-arith-to-llvm), convert-index-to-llvm, convert-func-to-llvm,"
    " convert-cf-to-llvm, reconcile-unrealized-casts)"
)
# For programs optimized with the "aligned-alloc" step (placement.profiling.mlir.optimize).
TO_LLVM_ALIGNED = TO_LLVM.replace(
    "finalize-memref-to-llvm", "finalize-memref-to-llvm{use-aligned-alloc=1}"
)
ENTER = "placement_nest_enter"
EXIT = "placement_nest_exit"
CALIBRATE = "placement_calibrate"
CALIBRATION_PAIRS = 2000
MARKER_KINDS = ("auto", "c", "python")
OPT_LEVEL = 2

_MARKER = ctypes.CFUNCTYPE(None, ctypes.c_int64)
_C_MARKERS_LOCK = threading.Lock()


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
    markers: str = "auto",
    cache: str = "warm",
    compiler: str | None = None,
) -> NestTiming:
    """Measure each nest's host time: median over ``runs`` after ``warmup`` runs.

    ``markers``: "auto" | "c" | "python" (module docstring); ``compiler`` names the C
    compiler for the C markers (default ``$PLACEMENT_MARKER_CC`` or gcc); ``cache``:
    "warm" | "cold".
    """
    if runs < 1 or warmup < 0:
        raise PlacementError(f"runs must be >= 1 and warmup >= 0 (got {runs}, {warmup})")
    if markers not in MARKER_KINDS:
        raise PlacementError(f"markers must be one of {', '.join(MARKER_KINDS)}, got {markers!r}")
    flusher = make_flusher(cache)
    count = len(program.nests)
    warnings: list[str] = []
    state = _marker_state(count, markers, compiler, warnings)
    # The C markers count into one library's global arrays: one timing at a time per
    # process (threads of a sweep worker would otherwise add into each other's slots).
    with _C_MARKERS_LOCK if state.kind == "c" else contextlib.nullcontext():
        return _time_nests(program, state, runs, warmup, seed, check_against_onnx, progress,
                           flusher, warnings)  # fmt: skip


def _time_nests(
    program: LoweredProgram,
    state: _MarkerState,
    runs: int,
    warmup: int,
    seed: int,
    check_against_onnx: Path | None,
    progress: Callable[[int, int], None] | None,
    flusher: Any,
    warnings: list[str],
) -> NestTiming:
    from torch_mlir.runtime.np_to_memref import get_ranked_memref_descriptor

    start = time.perf_counter()
    count = len(program.nests)
    engine, callbacks = jit_with_markers(program, state.enter, state.exit, calibration=True)
    entry = engine.lookup(program.func_name)  # LLVM compiles here
    calibrate = engine.lookup(CALIBRATE)
    compiled = time.perf_counter()
    return_freed_memory()  # the compiler's, before the weights are read

    arrays = program_arguments(program, seed)
    descriptors = [get_ranked_memref_descriptor(a) for a in arrays]
    pointers = [ctypes.pointer(ctypes.pointer(d)) for d in descriptors]
    packed = (ctypes.c_void_p * len(pointers))(*[ctypes.cast(p, ctypes.c_void_p) for p in pointers])
    no_args = (ctypes.c_void_p * 1)()

    # Calibrate: the in-nest share and the full cost of one enter/exit pair.
    acc, calls = state.acc, state.calls
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
        state.zero(count + 1)
        if flusher is not None:
            flusher.flush()
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
        "markers": state.kind,
        "markers_at": program.markers_at,
        "compiled": "host_optimization" in program.metadata,
        "opt_level": OPT_LEVEL,
        "runs": runs,
        "warmup": warmup,
        "seed": seed,
        "jit_compile_seconds": compiled - start,
        "marker_pair_ns": marker_pair_ns,
        "marker_in_nest_ns": marker_in_nest_ns,
        "invocations_per_run": {n.id: invocations[k] for k, n in enumerate(program.nests)},
        "unattributed_seconds": max(0.0, total - sum(t_cpu.values())),
        "source": str(program.source),
        **cache_metadata(flusher),
        "warnings": warnings,
    }
    if state.library is not None:
        metadata["marker_library"] = str(state.library)
    timing = NestTiming(t_cpu=t_cpu, total_seconds=total, runs=runs, metadata=metadata)
    # The weights and the JIT go before ONNX Runtime loads the model for the check: the
    # two copies of the weights are never alive at once.
    kept = [None if a.role == "weight" else x for a, x in zip(program.args, arrays, strict=True)]
    del engine, entry, calibrate, packed, pointers, descriptors, arrays
    return_freed_memory()
    if check_against_onnx is not None:
        checked = time.perf_counter()
        timing.max_abs_error = check_outputs(program, kept, Path(check_against_onnx))
        metadata["output_check_seconds"] = time.perf_counter() - checked
    return timing


# --------------------------------------------------------------------------- compilation


def jit_with_markers(
    program: LoweredProgram,
    enter: Any,
    exit_: Any,
    *,
    calibration: bool = False,
) -> tuple[Any, Any]:
    """JIT ``program`` with ``enter(k)``/``exit_(k)`` called around nest ``k``.

    ``enter``/``exit_`` are Python callables (wrapped in ctypes callbacks here) or ctypes
    function pointers to C functions (``CFUNCTYPE(None, c_int64)`` instances, used as
    they are). Returns the engine and the callbacks, which the caller must keep alive
    while the JIT code runs. With ``calibration`` the module also gets
    ``placement_calibrate()`` (marker pairs with no work, as nest ``len(nests)``).
    Markers go where ``program.markers_at`` says (see the module docstring).
    """
    from torch_mlir import ir
    from torch_mlir.execution_engine import ExecutionEngine

    count = len(program.nests)
    ctx = new_context()
    with ctx:
        module = ir.Module.parse(program.module_text)
        mark_program(module, program, ENTER, EXIT)
        if calibration:
            _add_calibration(module, count)
        run_passes(module, llvm_pipeline(program), f"{program.source}: lowering to LLVM failed")
        engine = ExecutionEngine(module, opt_level=OPT_LEVEL)
    callbacks = tuple(f if isinstance(f, _MARKER) else _MARKER(f) for f in (enter, exit_))
    engine.register_runtime(ENTER, callbacks[0])
    engine.register_runtime(EXIT, callbacks[1])
    return engine, callbacks


def llvm_pipeline(program: LoweredProgram) -> str:
    """The pass pipeline to LLVM for ``program``: :data:`TO_LLVM`, with aligned_alloc
    for programs optimized with the ``aligned-alloc`` step."""
    steps = (program.metadata.get("host_optimization") or {}).get("steps") or ()
    return TO_LLVM_ALIGNED if "aligned-alloc" in steps else TO_LLVM


@dataclass
class _MarkerState:
    kind: str  # "c" | "python"
    enter: Any
    exit: Any
    acc: Any  # indexable: nanoseconds per nest slot
    calls: Any
    zero: Callable[[int], None]
    library: Any = None  # path of the C library


def _marker_state(count: int, kind: str, compiler: str | None, warnings: list[str]) -> _MarkerState:
    if kind in ("auto", "c"):
        if count + 1 > MAX_NESTS + 1:
            reason = f"{count} nests exceed the C markers' {MAX_NESTS} slots"
            if kind == "c":
                raise PlacementError(reason)
            warnings.append(f"{reason}; timing with Python callback markers")
        else:
            try:
                lib = load_c_markers(compiler)
            except MarkersUnavailable as exc:
                if kind == "c":
                    raise PlacementError(f"C nest markers unavailable: {exc.reason}") from None
                warnings.append(
                    f"C nest markers unavailable: {exc.reason}; timing with Python callback"
                    " markers instead (~0.6 us per nest invocation, partly subtracted)"
                )
            else:
                return _MarkerState("c", lib.enter, lib.exit, lib.acc, lib.calls, lib.zero,
                                    library=lib.path)  # fmt: skip
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

    def zero(n: int) -> None:
        for k in range(n):
            acc[k] = 0
            calls[k] = 0

    return _MarkerState("python", enter, exit_, acc, calls, zero)


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
    """The program's arguments in call order: random inputs, the weights (read from their
    files into 64-byte aligned arrays: the one copy of them this process holds), zeroed
    outputs."""
    feeds = random_inputs(program, seed)
    arrays = []
    for arg in program.args:
        if arg.role == "input":
            arrays.append(feeds[arg.name])
        elif arg.role == "weight":
            arrays.append(weight_array(program, arg))
        else:
            arrays.append(np.zeros(arg.shape, dtype=np.dtype(arg.dtype)))
    return arrays


def weight_array(program: LoweredProgram, arg: ArgInfo) -> np.ndarray:
    """The values of the weight argument ``arg`` (a new array for one left in its file)."""
    value = program.weights.get(arg.name)
    if value is None:
        raise PlacementError(f"internal error: no value for weight {arg.name!r}")
    if isinstance(value, WeightFile):
        value = value.read()
    return np.ascontiguousarray(value, dtype=np.dtype(arg.dtype))


def check_outputs(
    program: LoweredProgram, arrays: list[np.ndarray | None], onnx_path: Path
) -> float:
    """Run ONNX Runtime on the same inputs; return the max abs error or raise on mismatch.

    ``arrays``: the program's arguments after its run (only inputs and outputs are read;
    weights may be None). ONNX Runtime maps the model's large weights from their files
    (:func:`~placement.profiling.ort.session.create_session`), 1 intra-op thread."""
    import tempfile

    from placement.onnxfile import node_names, read_onnx
    from placement.profiling.ort.session import create_session, run_outputs, session_options

    model = read_onnx(onnx_path, load_weights=False)
    for node, name in zip(model.graph.node, node_names(model.graph), strict=True):
        node.name = name  # ORT refuses duplicate node names
    feeds = {
        arg.name: array
        for arg, array in zip(program.args, arrays, strict=True)
        if arg.role == "input"
    }
    with tempfile.TemporaryDirectory(prefix="placement-check-") as tmp:
        session = create_session(model, session_options(1, "all"), onnx_path, tmp)
        del model
        expected = run_outputs(session, [a.name for a in program.outputs], feeds, onnx_path)
        del session
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


