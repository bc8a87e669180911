"""Simulated counters per loop nest: a cache simulation where the host has no usable PMU.

Torch-PIM's stage 2 (Section 4.4) reads two hardware signals per nest: the off-core
data reads (C3) and the store-bound share of the backend cycles (C4). On a machine
without a PMU (most VMs) neither exists. This module derives a stand-in for both from
a cache simulation of the same lowered program, run natively under Valgrind's
callgrind with ``--cache-sim=yes``:

1. The program that was timed (``LoweredProgram.module_text``: the lowered loops, or the
   host-optimized ones of :mod:`placement.profiling.mlir.optimize`) gets the nest
   markers of :func:`~placement.profiling.mlir.markers.mark_program` (at the same
   loops as the timing run), is lowered to LLVM with the timing run's pipeline
   (``nest_timing.llvm_pipeline``), compiled by MLIR's ExecutionEngine at ``opt_level=2`` with
   ``-avx512f`` on every function, and written out as an object file (the function
   renamed ``placement_program``). Valgrind 3.19 cannot decode AVX-512 (it stops with
   "unhandled instruction"), so the simulated code is the AVX2 version of the timed
   code: the same memory accesses, more instructions where loops are vectorized.
2. A small generated C driver links it, reads the arguments (the same deterministic
   inputs and weights as the timing run,
   :func:`~placement.profiling.nest_timing.program_arguments`; weights straight from the
   model's files, so the profiler holds none and writes none to disk), runs the program
   ``warmup`` times uncounted, then once counted. Its markers switch callgrind's event
   collection on at ``enter(k)`` and off at ``exit(k)`` and dump the events whenever
   the nest changes, so each nest accumulates over all of its invocations in one
   program run -- the same accounting as ``T_cpu``.
   Repeated layers (:mod:`placement.profiling.repeats`): when the plan skips nests, each
   nest's loop is guarded by a flag the driver sets per run, the skipped nests do not
   run, and they take the counters of their representative.
3. The cache geometry is always given explicitly (``--I1 --D1 --LL``): valgrind's own
   detection takes a VM's reported L3 (300 MB, not even a power-of-two set count here).

What "LL" is. The Table 1 event ``OFFCORE_REQUESTS.ALL_DATA_RD`` counts data reads
that leave the core, i.e. that miss the core's last *private* cache (the L2 on Intel
server cores); whether the L3 or DRAM then serves them, it does not say. So the
simulated LL is, by default, the largest cache private to CPU 0 in sysfs (this VM: the
2 MiB 16-way L2), and LL read misses x line size are the simulated off-core read bytes.
To simulate DRAM traffic instead (the paper's reading, "traffic past the last-level
cache"), give a per-core share of the L3 as LL (``PLACEMENT_SIM_CACHES``, below).

Counters produced per nest (names in :mod:`placement.profiling.counters`): instructions
(Ir), data reads/writes (Dr/Dw), L1d read/write misses (D1mr/D1mw), LL read/write
misses (DLmr/DLmw), and the off-core read/write bytes (DLmr/DLmw x LL line size). How
the rule turns them into C3 and C4 is in :mod:`placement.pim.rules`.

Geometry overrides: ``PLACEMENT_SIM_CACHES`` (:mod:`placement.profiling.cache_geometry`),
or the ``geometry`` argument of :func:`simulate_nests`.

Cost: ``warmup + 1`` = 3 runs under valgrind plus ~0.3 s to start it; with a plan that
skips nests, only the nests that run in each run. Measured on this VM: 10-100x the
native run time for the unoptimized loops (memory-bound ones at the low end), several
hundred times for vectorized code (valgrind emulates the AVX2 that runs natively as
AVX-512; valgrind alone, ``--tool=none``, already ~200x): 12-14 s for
examples/resnet_tiny.onnx, under 1 s for most single-operator workloads, 5-6 s for a
4096 x 4096 GEMV.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from placement.errors import PlacementError
from placement.machine import end_with_parent
from placement.profiling.cache_geometry import CacheGeometry, host_cache_geometry
from placement.profiling.counters import (
    SIM_D1_READ_MISSES,
    SIM_D1_WRITE_MISSES,
    SIM_DATA_READS,
    SIM_DATA_WRITES,
    SIM_INSTRUCTIONS,
    SIM_LL_READ_MISSES,
    SIM_LL_WRITE_MISSES,
    SIM_OFFCORE_READ_BYTES,
    SIM_OFFCORE_WRITE_BYTES,
    SIMULATED_EVENTS,
    check_simulator,
)
from placement.profiling.memory import return_freed_memory
from placement.profiling.repeats import COUNT, SimulationPlan, simulation_plan

if TYPE_CHECKING:
    from placement.profiling.mlir.lower import LoweredProgram

METHOD = "callgrind-cache-sim/1"
TARGET_FEATURES = ("-avx512f",)  # valgrind 3.19: no AVX-512 (SIGILL)
ENTER, EXIT = "placement_nest_enter", "placement_nest_exit"
ENTRY = "placement_program"  # the program's function, renamed in the object file
DEFAULT_WARMUP = 2  # see simulate_nests
DUMP_PREFIX = "placement-nest"
RUN_FLAGS = "placement_run_flags"  # per nest, whether it runs in this run (the driver's)
CALLGRIND_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
_EVENT_NAMES = {
    "Ir": SIM_INSTRUCTIONS,
    "Dr": SIM_DATA_READS,
    "Dw": SIM_DATA_WRITES,
    "D1mr": SIM_D1_READ_MISSES,
    "D1mw": SIM_D1_WRITE_MISSES,
    "DLmr": SIM_LL_READ_MISSES,
    "DLmw": SIM_LL_WRITE_MISSES,
}

# --------------------------------------------------------------------------- geometry


@dataclass
class Simulation:
    """Per-nest simulated counters (one program run, all invocations) and how they were got."""

    counters: dict[str, dict[str, float]]
    invocations: dict[str, int]
    geometry: CacheGeometry
    metadata: dict[str, Any]


def simulate_nests(
    program: LoweredProgram,
    *,
    geometry: CacheGeometry | None = None,
    warmup: int = DEFAULT_WARMUP,
    cold: bool = False,
    seed: int = 0,
    timeout: float | None = None,
    keep_dir: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    plan: SimulationPlan | None = None,
) -> Simulation:
    """Simulate ``program`` under callgrind and return its counters per nest.

    ``warmup`` uncounted runs first (the timing run's caches are warm too; two, because
    glibc's malloc hands the program's temporary buffers new addresses in the second run
    -- its mmap threshold adapts after the first free -- and only then settles; that
    needs the runs, not their nests: which nests run in them is the ``plan``'s);
    ``cold``: before the counted run, a buffer of twice the LL is written and read back
    (uncounted), as the timing run's cold-cache mode flushes the cache.
    ``plan``: which nests run and are counted, and which take the counters of a
    representative (:func:`~placement.profiling.repeats.simulation_plan`; default: every
    nest runs and is counted, and with a cold cache no nest runs in the warm-up runs).
    ``keep_dir``: build and run there and keep every file (for debugging).
    Raises :class:`~placement.profiling.counters.CountersUnavailable` when valgrind or gcc
    is missing and :class:`~placement.errors.PlacementError` when the simulation itself fails.
    """
    if warmup < 0:
        raise PlacementError(f"warmup must be >= 0 (got {warmup})")
    versions = check_simulator()
    geometry = geometry or host_cache_geometry()
    geometry.check()
    if plan is None:
        plan = simulation_plan(program, geometry.ll.size, warm=not cold, representatives=False)
    started = time.perf_counter()
    if keep_dir is not None:
        work = Path(keep_dir)
        work.mkdir(parents=True, exist_ok=True)
        return _simulate_in(program, work, geometry, warmup, cold, seed, timeout, versions,
                            started, progress, plan)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="placement-sim-") as tmp:
        return _simulate_in(program, Path(tmp), geometry, warmup, cold, seed, timeout,
                            versions, started, progress, plan)  # fmt: skip


def _simulate_in(
    program: LoweredProgram,
    work: Path,
    geometry: CacheGeometry,
    warmup: int,
    cold: bool,
    seed: int,
    timeout: float | None,
    versions: dict[str, str],
    started: float,
    progress: Callable[[int, int], None] | None,
    plan: SimulationPlan,
) -> Simulation:
    from placement.profiling import nest_timing

    count = len(program.nests)
    object_file = work / "program.o"
    # Only a plan that skips nests guards them: the guards change LLVM's code for some
    # loops (register allocation in the one big function), so a full simulation runs the
    # program exactly as compiled for the timing run, every nest in every run.
    guarded = not plan.is_full
    compile_object(program, object_file, guarded=guarded)
    return_freed_memory()  # the compiler's: the simulation's driver needs it now
    write_arguments(program, seed, work / "args.bin", work / "args.txt",
                    unread_arguments(program, plan) if guarded else frozenset())  # fmt: skip
    (work / "driver.c").write_text(driver_source(program, plan, guarded=guarded))
    binary = work / "program"
    _run_checked(
        ["gcc", "-O2", "-o", str(binary), str(work / "driver.c"), str(object_file), "-lm"],
        "compiling the simulation driver (gcc)", timeout=300,
    )  # fmt: skip
    built = time.perf_counter()
    if progress is not None:
        progress(0, 1)
    out_file = work / "callgrind.out"
    log_file = work / "valgrind.log"
    command = [
        "valgrind", "--tool=callgrind", "--cache-sim=yes", "--collect-atstart=no",
        "--dump-line=no", *geometry.options(), f"--callgrind-out-file={out_file}",
        f"--log-file={log_file}", str(binary), str(work / "args.txt"), str(warmup),
        str(2 * geometry.ll.size if cold else 0),
    ]  # fmt: skip
    try:
        # A profiler killed mid-simulation must not leave valgrind running for minutes.
        run = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                             check=False, preexec_fn=end_with_parent)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise PlacementError(f"the cache simulation did not finish within {timeout:g} s") from None
    log = log_file.read_text(errors="replace") if log_file.exists() else ""
    if run.returncode != 0:
        raise PlacementError(f"the cache simulation failed: {_valgrind_failure(log, run)}")
    simulated = time.perf_counter()
    calls = _parse_calls(run.stdout, count)
    per_index = _parse_dumps(work, out_file.name)
    line = geometry.ll.line
    counters: dict[str, dict[str, float]] = {}
    invocations: dict[str, int] = {}
    for k, nest in enumerate(program.nests):
        raw = per_index.get(k, dict.fromkeys(CALLGRIND_EVENTS, 0))
        row = {name: float(raw.get(ev, 0)) for ev, name in _EVENT_NAMES.items()}
        row[SIM_OFFCORE_READ_BYTES] = float(raw.get("DLmr", 0) * line)
        row[SIM_OFFCORE_WRITE_BYTES] = float(raw.get("DLmw", 0) * line)
        counters[nest.id] = {e: row[e] for e in SIMULATED_EVENTS}
        invocations[nest.id] = calls[k]
    for nest_id, first in plan.representative.items():  # the skipped copies
        counters[nest_id] = dict(counters[first])
        invocations[nest_id] = invocations[first]
    if progress is not None:
        progress(1, 1)
    metadata = {
        "method": METHOD,
        "tool": "valgrind --tool=callgrind --cache-sim=yes",
        "valgrind_version": versions["valgrind"],
        "gcc_version": versions["gcc"],
        "caches": geometry.to_json(),
        "warmup": warmup,
        "cache": "cold" if cold else "warm",
        "runs": 1,
        "seed": seed,
        "opt_level": nest_timing.OPT_LEVEL,
        "target_features": list(TARGET_FEATURES),
        "program": "host-optimized" if program.metadata.get("host_optimization") else "lowered",
        "statistic": "one counted program run after the warm-up runs (the simulation is"
        " deterministic); a nest accumulates over its invocations",
        "nests_guarded": guarded,
        "warm_up_runs": "every nest runs" if not guarded or all(plan.warm_up_run)
        else "the last nests run, as the counted run's cache context" if any(plan.warm_up_run)
        else "no nest runs" + (" (the cache is flushed after them)" if cold else ""),
        "nests": plan.to_json(),
        "invocations_per_run": invocations,
        "build_seconds": built - started,
        "simulation_seconds": simulated - built,
        "total_seconds": time.perf_counter() - started,
    }
    return Simulation(counters, invocations, geometry, metadata)


# --------------------------------------------------------------------------- compiling


def compile_object(program: LoweredProgram, path: Path, *, guarded: bool = False) -> None:
    """The program with nest markers as a native object file; its entry point is
    ``_mlir_ciface_placement_program`` (memref descriptors by pointer, outputs last).
    ``guarded``: each nest runs only when the driver's flag says so (:func:`guard_nests`)."""
    from torch_mlir import ir
    from torch_mlir.execution_engine import ExecutionEngine

    from placement.profiling import nest_timing
    from placement.profiling.mlir.lower import new_context
    from placement.profiling.mlir.markers import mark_program
    from placement.profiling.mlir.passes import run_passes

    to_llvm = nest_timing.llvm_pipeline(program)  # the timing run's pipeline and level
    opt_level = nest_timing.OPT_LEVEL

    with new_context():
        module = ir.Module.parse(program.module_text)
        if guarded:
            guard_nests(module, program)
            drop_asserts(module)
        # A fixed name for the program: its own (e.g. @main) could clash with the driver.
        mark_program(module, program, ENTER, EXIT, entry=ENTRY)
        run_passes(module, to_llvm, f"{program.source}: lowering to LLVM failed")
        features = ir.Attribute.parse(
            "#llvm.target_features<[" + ", ".join(f'"{f}"' for f in TARGET_FEATURES) + "]>"
        )
        for op in module.body.operations:
            if op.operation.name == "llvm.func":
                op.operation.attributes["target_features"] = features
        engine = ExecutionEngine(
            module, opt_level=opt_level, enable_object_dump=True, enable_pic=True
        )
    # The JIT resolves every symbol before it emits code; the driver defines the real markers.
    marker = ctypes.CFUNCTYPE(None, ctypes.c_int64)
    keep = (marker(lambda k: None), marker(lambda k: None))
    engine.register_runtime(ENTER, keep[0])
    engine.register_runtime(EXIT, keep[1])
    try:
        engine.lookup(ENTRY)
    except RuntimeError as exc:
        raise PlacementError(
            f"{program.source}: the JIT could not compile the program ({exc})"
        ) from None
    engine.dump_to_object_file(str(path))
    del engine, keep
    if not path.exists():
        raise PlacementError("internal error: the ExecutionEngine wrote no object file")


def unread_arguments(program: LoweredProgram, plan: SimulationPlan) -> frozenset[int]:
    """Positions of the function arguments that only nests which never run touch."""
    touched: set[int] = set()
    runs = zip(program.nests, plan.counted_run, plan.warm_up_run, strict=True)
    for nest, counted, warm in runs:
        if counted or warm:
            touched |= {int(op.buffer[3:]) for op in nest.operands
                        if op.kind == "argument" and op.buffer[3:].isdigit()}  # fmt: skip
    return frozenset(range(len(program.args))) - touched


def guard_nests(module: Any, program: LoweredProgram) -> None:
    """Wrap each nest's loop in ``scf.if`` on byte ``k`` of the public global
    ``placement_run_flags`` (the driver sets it before each run; the nest markers,
    inserted after this, go inside the guard, around the loop). A load and a branch, not a
    call: a call would make LLVM spill registers around it, changing the code of the
    loops (resnet_tiny: data reads of a convolution -21 %)."""
    from torch_mlir import ir
    from torch_mlir.dialects import arith, memref, scf

    from placement.profiling.mlir.markers import nest_loop_ops

    loops = nest_loop_ops(module, program)
    with module.context, ir.Location.unknown():
        i8 = ir.IntegerType.get_signless(8)
        flags_type = ir.MemRefType.get([max(1, len(loops))], i8)
        memref.GlobalOp(RUN_FLAGS, flags_type, sym_visibility="public",
                        initial_value=ir.UnitAttr.get(),
                        ip=ir.InsertionPoint(module.body.operations[0]))  # fmt: skip
        for k, loop in enumerate(loops):
            with ir.InsertionPoint(loop):
                flags = memref.GetGlobalOp(flags_type, RUN_FLAGS).result
                index = arith.ConstantOp(ir.IndexType.get(), k).result
                flag = memref.LoadOp(flags, [index]).result
                zero = arith.ConstantOp(i8, 0).result
                guard = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.ne, flag, zero).result)
            with ir.InsertionPoint(guard.then_block):
                scf.YieldOp([])
            loop.move_before(guard.then_block.operations[0])


def drop_asserts(module: Any) -> None:
    """Erase the program's run-time checks (``cf.assert``) of a guarded program: they check
    values, and the values after skipped nests are whatever their buffers held (torch-mlir
    asserts that a Reciprocal's operand is not zero with an ordered compare, so NaN in an
    unwritten buffer aborted an 8-layer stack). The checks are outside every nest, and what
    the nests count does not depend on values (the loops' bounds and addresses do not;
    the compiled program's exp/erf/tanh are branch-free polynomials; libm's, in the
    unoptimized program of ``--host-times jit``, are not)."""
    from placement.profiling.mlir.extract import walk_operations

    asserts = [op for op in walk_operations(module.operation) if op.name == "cf.assert"]
    for op in asserts:
        op.erase()


def write_arguments(
    program: LoweredProgram, seed: int, data: Path, manifest: Path,
    unused: frozenset[int] = frozenset(),
) -> None:  # fmt: skip
    """The driver's arguments: where each one's bytes are (``manifest``: ``offset nbytes
    path`` per argument, in call order). Weights left in their files are read by the
    driver from there; inputs, outputs and weights held in memory go to ``data``. A
    weight in ``unused`` (argument positions no nest that runs reads) is not read at all
    (offset -1): its buffer stays untouched, so it takes no memory."""
    from placement.profiling.mlir.lower import WeightFile
    from placement.profiling.nest_timing import random_inputs, weight_array

    feeds = random_inputs(program, seed)
    lines = []
    with open(data, "wb") as fh:
        for position, arg in enumerate(program.args):
            value = program.weights.get(arg.name) if arg.role == "weight" else None
            if value is not None and position in unused:
                nbytes = int(np.prod(arg.shape, dtype=np.int64)) * np.dtype(arg.dtype).itemsize
                lines.append(f"-1 {nbytes} -")
                continue
            if isinstance(value, WeightFile) and value.in_file_order:
                lines.append(f"{value.offset} {value.nbytes} {Path(value.path).absolute()}")
                continue
            if arg.role == "input":
                array = feeds[arg.name]
            elif arg.role == "weight":
                array = weight_array(program, arg)
            else:
                array = np.zeros(arg.shape, dtype=np.dtype(arg.dtype))
            lines.append(f"{fh.tell()} {array.nbytes} {data.absolute()}")
            fh.write(np.ascontiguousarray(array).tobytes())
    manifest.write_text("".join(line + "\n" for line in lines))


def driver_source(program: LoweredProgram, plan: SimulationPlan, *, guarded: bool) -> str:
    """C source of the driver: reads the arguments, runs the program, says which nests
    run in each run and switches callgrind's collection for the counted ones, as ``plan``
    says."""
    count = len(program.nests)
    structs, params, inits = [], [], []
    for i, arg in enumerate(program.args):
        rank = len(arg.shape)
        dims = ""
        if rank:
            dims = f" int64_t sizes[{rank}]; int64_t strides[{rank}];"
        structs.append(
            f"typedef struct {{ void *allocated, *aligned; int64_t offset;{dims} }} m{i};"
        )
        params.append(f"m{i} *")
        strides = [int(np.prod(arg.shape[d + 1 :], dtype=np.int64)) for d in range(rank)]
        shape = ", ".join(str(d) for d in arg.shape)
        stride = ", ".join(str(s) for s in strides)
        body = f"buf[{i}], buf[{i}], 0" + (f", {{{shape}}}, {{{stride}}}" if rank else "")
        inits.append(f"  m{i} a{i} = {{{body}}};")
    nargs = len(program.args)
    call = "placement_entry(" + ", ".join(f"&a{i}" for i in range(nargs)) + ");"
    symbol = "_mlir_ciface_" + ENTRY
    # Byte k of the program's global: whether nest k runs (its loops are skipped otherwise).
    flags = (
        f"extern unsigned char {RUN_FLAGS}[];" if guarded
        else f"static unsigned char {RUN_FLAGS}[1];"  # unused: no guards
    )  # fmt: skip
    counted = ", ".join(str(m) for m in plan.counted_run) or "0"
    warm = ", ".join(str(m) for m in plan.warm_up_run) or "0"
    return f"""\
/* Generated by placement.profiling.simulated: runs the program under callgrind. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define NESTS {count}
#define NARGS {nargs}
#define COUNT {COUNT}
#define GUARDED {int(guarded)}
{chr(10).join(structs)}
extern void placement_entry({", ".join(params) or "void"}) __asm__("{symbol}");

/* Per nest and run: 0 does not run, 1 runs uncounted, 2 runs counted. */
static const unsigned char counted_run[NESTS + 1] = {{{counted}}};
static const unsigned char warm_up_run[NESTS + 1] = {{{warm}}};
static const unsigned char *plan = 0;
static int counting = 0, measuring = 0;
static long long current = -1;
static long long calls[NESTS + 1];

static void dump(long long k) {{
  char name[64];
  snprintf(name, sizeof name, "{DUMP_PREFIX} %lld", k);
  CALLGRIND_DUMP_STATS_AT(name);
}}

{flags}
static void run_plan(const unsigned char *runs) {{
  plan = runs;
  for (int k = 0; GUARDED && k < NESTS; k++) {RUN_FLAGS}[k] = runs[k] != 0;
}}

/* Collection is on exactly between enter(k) and exit(k) of a counted nest; the events
   are dumped (and zeroed) when another nest starts, so consecutive invocations of a
   nest add up. What runs while collecting (the end of enter, the start of exit) is
   counted with the nest: a few instructions per invocation. */
void _mlir_ciface_{ENTER}(int64_t k) {{
  if (!counting || plan[k] != COUNT) return;
  if (current >= 0 && current != k) dump(current);
  current = k;
  calls[k]++;
  measuring = 1;
  CALLGRIND_TOGGLE_COLLECT;
}}

void _mlir_ciface_{EXIT}(int64_t k) {{
  (void)k;
  if (!measuring) return;
  CALLGRIND_TOGGLE_COLLECT;
  measuring = 0;
}}

int main(int argc, char **argv) {{
  if (argc != 4) {{
    fprintf(stderr, "usage: %s MANIFEST WARMUP FLUSH_BYTES\\n", argv[0]);
    return 2;
  }}
  int warmup = atoi(argv[2]);
  size_t flush = (size_t)atoll(argv[3]);
  void *buf[NARGS + 1];
  FILE *manifest = fopen(argv[1], "r");
  if (!manifest) {{ perror(argv[1]); return 2; }}
  /* Nothing but the arguments is allocated here (the data is read with open/pread), so
     they get the addresses they get with any argument files: the simulated conflicts
     depend on them. */
  for (int i = 0; i < NARGS; i++) {{
    long long offset;
    size_t n;
    char path[4096];
    if (fscanf(manifest, "%lld %zu ", &offset, &n) != 2 || !fgets(path, sizeof path, manifest)) {{
      fprintf(stderr, "bad manifest line %d\\n", i);
      return 2;
    }}
    path[strcspn(path, "\\n")] = 0;
    size_t size = (n + 63) / 64 * 64;
    buf[i] = aligned_alloc(64, size ? size : 64);
    if (offset < 0) continue; /* read by no nest that runs: left untouched */
    int fd = open(path, O_RDONLY);
    size_t done = 0;
    while (buf[i] && fd >= 0 && done < n) {{
      ssize_t got = pread(fd, (char *)buf[i] + done, n - done, (off_t)offset + (off_t)done);
      if (got <= 0) break;
      done += (size_t)got;
    }}
    if (fd >= 0) close(fd);
    if (done != n) {{
      fprintf(stderr, "cannot read argument %d from %s\\n", i, path);
      return 2;
    }}
  }}
  fclose(manifest);
{chr(10).join(inits)}
  run_plan(warm_up_run);
  for (int r = 0; r < warmup; r++) {call}
  if (flush) {{ /* cold cache: evict everything, uncounted (collection is off) */
    volatile unsigned char *junk = malloc(flush);
    if (!junk) return 2;
    for (size_t i = 0; i < flush; i += 64) junk[i] = (unsigned char)i;
    unsigned sum = 0;
    for (size_t i = 0; i < flush; i += 64) sum += junk[i];
    if (sum == 1u) putchar(' ');
    free((void *)junk);
  }}
  run_plan(counted_run);
  counting = 1;
  {call}
  counting = 0;
  if (current >= 0) dump(current);
  for (int k = 0; k < NESTS; k++) printf("calls %d %lld\\n", k, calls[k]);
  return 0;
}}
"""


# --------------------------------------------------------------------------- parsing


def _parse_calls(stdout: str, count: int) -> list[int]:
    calls = [0] * count
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "calls" and int(parts[1]) < count:
            calls[int(parts[1])] = int(parts[2])
    return calls


def parse_dump(text: str) -> tuple[int | None, dict[str, int]]:
    """(nest index or None, {event: count}) of one callgrind output file."""
    index = None
    events: list[str] = []
    values: list[int] = []
    for line in text.splitlines():
        if line.startswith("desc: Trigger: Client Request: " + DUMP_PREFIX):
            index = int(line.rsplit(" ", 1)[1])
        elif line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            values = [int(v) for v in line.split()[1:]]
    counts = {e: (values[i] if i < len(values) else 0) for i, e in enumerate(events)}
    return index, counts


def _parse_dumps(work: Path, stem: str) -> dict[int, dict[str, int]]:
    per_index: dict[int, dict[str, int]] = {}
    for path in sorted(work.glob(stem + "*")):
        index, counts = parse_dump(path.read_text(errors="replace"))
        if index is None:
            continue
        acc = per_index.setdefault(index, dict.fromkeys(CALLGRIND_EVENTS, 0))
        for event, value in counts.items():
            acc[event] = acc.get(event, 0) + value
    return per_index


# --------------------------------------------------------------------------- errors


def _run_checked(command: list[str], what: str, timeout: float) -> None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PlacementError(f"{what} failed: {exc}") from None
    if out.returncode != 0:
        lines = [ln for ln in out.stderr.splitlines() if "error" in ln.lower()] or [
            ln for ln in out.stderr.splitlines() if ln.strip()
        ]
        detail = lines[0].strip() if lines else f"exit code {out.returncode}"
        raise PlacementError(f"{what} failed: {detail}")


def _valgrind_failure(log: str, run: subprocess.CompletedProcess[str]) -> str:
    for pattern in ("unhandled instruction", "unrecognised instruction", "Process terminating",
                    "valgrind: "):  # fmt: skip
        for line in (log + "\n" + run.stderr).splitlines():
            if pattern in line:
                text = re.sub(r"^==\d+==\s*|^--\d+--\s*", "", line).strip()
                if "instruction" in pattern:
                    text += " (an instruction set extension valgrind cannot simulate)"
                return text
    tail = [ln for ln in run.stderr.splitlines() if ln.strip()]
    return tail[-1] if tail else f"exit code {run.returncode}"


