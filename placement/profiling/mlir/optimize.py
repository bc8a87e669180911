"""The host optimization pipeline: the lowered program compiled as a compiler would.

Timing the loops exactly as ``convert-linalg-to-parallel-loops`` emits them (then
``ExecutionEngine(opt_level=2)``) gives host times 30-500x slower than ONNX Runtime:
matmuls walk their weight by column, float reductions cannot be vectorized (their
accumulator lives in memory and the adds may not be reordered), ``exp``/``erf``/``tanh``
are scalar libm calls. Any PIM speed-up measured against such a host is an artifact.
:func:`optimize_program` rewrites the program before it is timed, keeping every loop
nest a decision unit:

``interchange`` (linalg, transform dialect)
    For each linalg op with a reduction whose innermost loop is not the best unit-stride
    loop, the loops are permuted so that it is innermost (named ops are generalized
    first): ``linalg.matmul`` (i, j, k) -> (i, k, j), ``batch_matmul`` (b, i, j, k) ->
    (b, i, k, j), a depthwise convolution's output column innermost. The rule scores
    each loop of at least 8 iterations by the operands it walks with unit stride (+1)
    or a larger stride (-1) and keeps the current order on ties.
    ``transform.structured.interchange`` applies it, then
    ``convert-linalg-to-parallel-loops, canonicalize, cse`` as in the unoptimized
    lowering: a matmul becomes ``parallel(i){for k{parallel(j)}}``, and when ``i`` has
    one iteration (a GEMV) canonicalize drops it, leaving ``for k{parallel(j)}``.
``tile`` (linalg, transform dialect; :mod:`placement.profiling.mlir.tiling`)
    Cache tiling of the interchanged GEMMs whose weight does not fit in L2: k and j
    are tiled (sizes from the host's L1d and L2, e.g. 256 x 512 for a 48 KiB L1d and a
    1 MiB L2, :func:`~placement.profiling.mlir.tiling.tile_sizes_for`) and each block
    of the weight is packed into a contiguous buffer that stays in L2 while every row
    of A uses it: ``for k0{for j0{pack; parallel(i){for k{parallel(j)}}}}``. The tile
    loops carry the op's tag, so the outer ``scf.for`` is the nest's outermost loop. A
    GEMV (one row) or a weight already in L2 is left alone.
``math``
    ``math-expand-ops{ops=tanh}`` (tanh through exp), then every f32 ``math.exp`` and
    ``math.erf`` is replaced by an inlined polynomial (Cephes ``expf``, range reduction
    by ln 2, max error ~2 ulp in [-87.3, 88.7]; Abramowitz-Stegun 7.1.26 ``erf``, abs.
    error <= 1.5e-7), so loops calling them vectorize instead of calling libm.
``dead-stores``
    Stores into a buffer whose loaded values only ever flow back into that same buffer
    (the argmax a max-reduction carries along for ONNX Softmax) are erased; the loops
    stay (possibly empty: LLVM deletes them, and their nest times ~0).
``fastmath``
    ``reassoc, contract, arcp`` on float arithmetic: reductions may be reordered (LLVM
    then keeps the accumulator in a register and vectorizes), multiply-adds fuse,
    division by a loop invariant becomes a multiplication (what ONNX Runtime's kernels
    do too; outputs still agree within the check's tolerance).
``vector-width``
    ``prefer-vector-width=512`` on the functions: LLVM's x86 default is 256 bits even on
    AVX-512 hosts, which leaves compute-bound loops (exp, tanh) half their vector width.
``aligned-alloc``
    buffers are allocated with ``aligned_alloc`` instead of ``malloc`` plus pointer
    arithmetic (``finalize-memref-to-llvm{use-aligned-alloc=1}``, applied by the timer,
    :data:`placement.profiling.nest_timing.TO_LLVM_ALIGNED`): LLVM then knows the
    buffers do not alias and drops the run-time alias checks around short inner loops.

Every step is optional (``steps=``) so that what each buys can be measured
(benchmarks/pim_host_baseline.py; its results in benchmarks/README.md). What a nest *is*
does not change: its id, ONNX node, operands, ``N_iter``, ``N_total`` and trip count are
those extracted from the unoptimized lowering (the same linalg op, the same iteration
space, only the loop order and the code of the body differ). The timing markers then
wrap, per nest, the outermost loop of any kind (scf.parallel or scf.for) carrying the
nest's linalg tag
(``LoweredProgram.markers_at == "tagged-loop"``; the module records the tags in its
``placement.nest_tags`` attribute, so any caller of ``insert_nest_markers`` marks the
right loops); :func:`optimize_program` checks that every nest maps to exactly one
such loop. ``metadata["host_optimization"]`` of the
result says which steps ran, which nests were interchanged and into which loop order,
which were tiled with which tile sizes (per loop, 0 = not tiled) for which caches.

Tried and not kept (benchmarks/README.md): tiling + vectorizing matmuls with the
transform dialect (the accumulator tile is not hoisted out of the k loop on memrefs:
MLIR's ``hoist_redundant_vector_transfers`` refuses function-argument buffers that may
alias), ``ExecutionEngine(opt_level=3)`` and ``llvm.noalias`` arguments (no measurable
change).
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any

from placement.errors import PlacementError
from placement.profiling.cache_geometry import CacheGeometry
from placement.profiling.mlir.extract import loc_tag, sole_loops, walk_operations
from placement.profiling.mlir.lower import (
    TO_PARALLEL_LOOPS,
    LoweredProgram,
    find_func,
    new_context,
)
from placement.profiling.mlir.markers import set_module_nest_tags
from placement.profiling.mlir.passes import run_passes
from placement.profiling.mlir.tiling import (
    OPTIMIZATION_FAILED,
    indexing_results,
    iterator_kinds,
    loop_trips,
    run_transform,
    tile_for_cache,
)

VERSION = "host-compiled/2"  # /2: the tile step
STEPS = ("interchange", "tile", "math", "dead-stores", "fastmath", "vector-width", "aligned-alloc")
DEFAULT_STEPS = STEPS
FASTMATH = "reassoc,contract,arcp"
MIN_VECTOR_TRIPS = 8  # a loop shorter than this is not worth vectorizing along

_GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops))"
_EXPAND_TANH = "builtin.module(func.func(math-expand-ops{ops=tanh}))"
# No canonicalization inside the inliner: it would delete loops left empty by dead-stores,
# and every nest must keep its loop for its markers.
_INLINE = "builtin.module(inline{default-pipeline=}, symbol-dce)"
_FLOAT_OPS = frozenset(
    {
        "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.remf", "arith.negf",
        "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf", "math.fma",
    }
)  # fmt: skip
_VIEW_OPS = frozenset(
    {"memref.subview", "memref.expand_shape", "memref.collapse_shape", "memref.cast",
     "memref.reinterpret_cast"}
)  # fmt: skip
_EXP = "__placement_expf"
_ERF = "__placement_erff"

# Cephes expf: exp(x) = 2^k * p(r), k = floor(x log2 e + 1/2), r = x - k ln 2 (ln 2 split
# in two for exactness); 2^k built in the exponent bits. Inputs below -87.34 (2^k would be
# subnormal) give 0, above 88.72 give +inf; NaN stays NaN.
_EXPF = r"""
func.func private @__placement_expf(%x: f32) -> f32 {
  %hi = arith.constant 88.72283 : f32
  %lo = arith.constant -87.33654 : f32
  %log2e = arith.constant 1.44269504088896341 : f32
  %half = arith.constant 0.5 : f32
  %c1 = arith.constant 0.693359375 : f32
  %c2 = arith.constant -2.12194440e-4 : f32
  %p0 = arith.constant 1.9875691500e-4 : f32
  %p1 = arith.constant 1.3981999507e-3 : f32
  %p2 = arith.constant 8.3334519073e-3 : f32
  %p3 = arith.constant 4.1665795894e-2 : f32
  %p4 = arith.constant 1.6666665459e-1 : f32
  %p5 = arith.constant 5.0000001201e-1 : f32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %inf = arith.constant 0x7F800000 : f32
  %bias = arith.constant 127 : i32
  %shift = arith.constant 23 : i32
  %a = arith.minimumf %x, %hi : f32
  %xc = arith.maximumf %a, %lo : f32
  %t = math.fma %xc, %log2e, %half : f32
  %k = math.floor %t : f32
  %r0 = arith.mulf %k, %c1 : f32
  %r1 = arith.subf %xc, %r0 : f32
  %r2 = arith.mulf %k, %c2 : f32
  %r = arith.subf %r1, %r2 : f32
  %q0 = math.fma %p0, %r, %p1 : f32
  %q1 = math.fma %q0, %r, %p2 : f32
  %q2 = math.fma %q1, %r, %p3 : f32
  %q3 = math.fma %q2, %r, %p4 : f32
  %q4 = math.fma %q3, %r, %p5 : f32
  %rr = arith.mulf %r, %r : f32
  %q5 = math.fma %q4, %rr, %r : f32
  %y = arith.addf %q5, %one : f32
  %ki = arith.fptosi %k : f32 to i32
  %kb = arith.addi %ki, %bias : i32
  %bits = arith.shli %kb, %shift : i32
  %p2k = arith.bitcast %bits : i32 to f32
  %v = arith.mulf %y, %p2k : f32
  %under = arith.cmpf olt, %x, %lo : f32
  %v1 = arith.select %under, %zero, %v : f32
  %over = arith.cmpf ogt, %x, %hi : f32
  %v2 = arith.select %over, %inf, %v1 : f32
  return %v2 : f32
}
"""
# Abramowitz & Stegun 7.1.26: erf(|x|) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1/(1+p|x|).
_ERFF = r"""
func.func private @__placement_erff(%x: f32) -> f32 {
  %one = arith.constant 1.0 : f32
  %p = arith.constant 0.3275911 : f32
  %a1 = arith.constant 0.254829592 : f32
  %a2 = arith.constant -0.284496736 : f32
  %a3 = arith.constant 1.421413741 : f32
  %a4 = arith.constant -1.453152027 : f32
  %a5 = arith.constant 1.061405429 : f32
  %ax = math.absf %x : f32
  %d = math.fma %p, %ax, %one : f32
  %t = arith.divf %one, %d : f32
  %s0 = math.fma %a5, %t, %a4 : f32
  %s1 = math.fma %s0, %t, %a3 : f32
  %s2 = math.fma %s1, %t, %a2 : f32
  %s3 = math.fma %s2, %t, %a1 : f32
  %s4 = arith.mulf %s3, %t : f32
  %x2 = arith.mulf %ax, %ax : f32
  %nx2 = arith.negf %x2 : f32
  %e = func.call @__placement_expf(%nx2) : (f32) -> f32
  %m = arith.mulf %s4, %e : f32
  %y = arith.subf %one, %m : f32
  %r = math.copysign %y, %x : f32
  return %r : f32
}
"""


def optimize_program(
    program: LoweredProgram,
    steps: tuple[str, ...] | list[str] = DEFAULT_STEPS,
    caches: CacheGeometry | None = None,
) -> LoweredProgram:
    """``program`` with its module optimized for the host (module docstring).

    ``caches``: the L1d and L2 the ``tile`` step sizes its tiles for (default: this
    host's, from sysfs).

    The nests, arguments and weights are those of ``program``; the result's
    ``module_text`` is the optimized loop program (no markers) and its ``markers_at`` is
    ``"tagged-loop"``. Raises PlacementError when the program carries no linalg text
    (built by hand) or the optimized program no longer maps onto the nests.
    """
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise PlacementError(f"unknown optimization step(s) {', '.join(unknown)}; known: {STEPS}")
    if not program.linalg_text or len(program.nest_tags) != len(program.nests):
        raise PlacementError(
            f"{program.source}: the lowered program carries no tagged linalg text;"
            " lower it again (lower_onnx / lower_mlir) to optimize it"
        )
    from torch_mlir import ir

    start = time.perf_counter()
    record: dict[str, Any] = {"version": VERSION, "steps": [s for s in STEPS if s in steps]}
    tag_to_nest = {tag: n.id for tag, n in zip(program.nest_tags, program.nests, strict=True)}
    with new_context():
        module = ir.Module.parse(program.linalg_text)
        if "interchange" in steps:
            try:
                record["interchanged"] = _interchange(module, tag_to_nest)
            except PlacementError as exc:  # keep the lowering's loop order, say why
                record["interchanged"] = {}
                record["interchange_failed"] = str(exc)
                module = ir.Module.parse(program.linalg_text)
        if "tile" in steps:
            before = module.operation.get_asm(enable_debug_info=True)
            try:
                record["tiled"] = tile_for_cache(module, tag_to_nest, caches)
            except PlacementError as exc:  # keep the untiled loops, say why
                record["tiled"] = {}
                record["tile_failed"] = str(exc)
                module = ir.Module.parse(before)
        run_passes(module, TO_PARALLEL_LOOPS, f"{program.source}: {OPTIMIZATION_FAILED}")
        if "math" in steps:
            record["math_rewritten"] = _rewrite_math(module, program)
        # After the inliner: it deletes loops that have become empty, and a nest must
        # keep its loop (the markers' anchor) even when nothing is left to compute.
        if "dead-stores" in steps:
            record["dead_stores_erased"] = _erase_dead_stores(module)
        if "fastmath" in steps:
            record["fastmath"] = _set_fastmath(module)
        if "vector-width" in steps:
            _prefer_vector_width(module, 512)
        func_op = find_func(module, program.func_name)
        record["outermost_loops"] = _check_mapping(func_op, program)
        set_module_nest_tags(module, program.nest_tags)
        text = module.operation.get_asm(enable_debug_info=True)
    record["seconds"] = time.perf_counter() - start
    metadata = dict(program.metadata, host_optimization=record)
    return replace(program, module_text=text, markers_at="tagged-loop", metadata=metadata)


# --------------------------------------------------------------------------- interchange


def _interchange(module: Any, tag_to_nest: dict[int, str]) -> dict[str, Any]:
    """Permute the loops of linalg ops whose innermost loop walks memory badly.

    The plan is made on a generalized copy (named ops carry no indexing maps to reason
    about); in ``module`` only the ops to permute are generalized and interchanged, by
    the transform dialect, matched through a unit attribute per permutation."""
    from torch_mlir import ir

    if not any(op.name.startswith("linalg.") and _has_reduction(op)
               for op in walk_operations(module.operation)):  # fmt: skip
        return {}
    copy = ir.Module.parse(module.operation.get_asm(enable_debug_info=True))
    run_passes(copy, _GENERALIZE, OPTIMIZATION_FAILED)
    plans: dict[int, tuple[list[int], list[str]]] = {}
    for op in walk_operations(copy.operation):
        if op.name != "linalg.generic":
            continue
        tag = loc_tag(op.location)
        plan = choose_interchange(op)
        if tag is not None and plan is not None:
            plans[tag] = plan
    if not plans:
        return {}
    groups: dict[tuple[int, ...], str] = {}
    chosen: dict[str, Any] = {}
    for op in walk_operations(module.operation):
        if not op.name.startswith("linalg."):
            continue
        tag = loc_tag(op.location)
        if tag is None or tag not in plans:
            continue
        perm, kinds = plans[tag]
        name = groups.setdefault(tuple(perm), f"placement_interchange_{len(groups)}")
        with module.context:
            op.attributes[name] = ir.UnitAttr.get()
        chosen[tag_to_nest.get(tag) or f"linalg#{tag}"] = {
            "linalg_op": op.name,
            "permutation": perm,
            "loop_order": [f"d{d}" for d in perm],
            "loops": _loop_shape(perm, kinds),
        }
    lines = []
    for index, (perm, name) in enumerate(groups.items()):
        lines.append(
            f"    %m{index} = transform.structured.match attributes{{{name}}} in %root"
            " : (!transform.any_op) -> !transform.any_op\n"
            f"    %g{index} = transform.structured.generalize %m{index}"
            " : (!transform.any_op) -> !transform.any_op\n"
            f"    %i{index} = transform.structured.interchange %g{index} iterator_interchange"
            f" = [{', '.join(map(str, perm))}] : (!transform.any_op) -> !transform.any_op\n"
        )
    run_transform(module, "".join(lines), "__placement_interchange")
    return chosen


def _has_reduction(op: Any) -> bool:
    from torch_mlir import ir

    if "iterator_types" in op.attributes:
        kinds = [str(x) for x in ir.ArrayAttr(op.attributes["iterator_types"])]
        return any("reduction" in k for k in kinds)
    # Named ops: matmuls and convolutions reduce; the rest (fill, copy, transpose,
    # broadcast, map) do not, and are left alone.
    return any(key in op.name for key in ("matmul", "matvec", "vecmat", "conv", "dot"))


def choose_interchange(op: Any) -> tuple[list[int], list[str]] | None:
    """(permutation, iterator kinds) for a linalg.generic, or None to keep its loop order.

    The innermost loop should walk as many operands as possible with unit stride: each
    loop of at least :data:`MIN_VECTOR_TRIPS` iterations scores +1 per operand whose
    last (contiguous) index is that loop plus a constant or another loop, -1 per operand
    it indexes elsewhere; the best loop moves innermost, the others keep their order.
    Only ops with a reduction are considered (a pure-parallel op's order is the
    lowering's; a reduction innermost is vectorized anyway under ``fastmath``).
    """
    kinds = iterator_kinds(op)
    if len(kinds) < 2 or "reduction" not in kinds:
        return None
    results = indexing_results(op)
    trips = loop_trips(op, results, len(kinds))

    def score(dim: int) -> int:
        name = re.compile(rf"\bd{dim}\b")
        total = 0
        for exprs in results:
            if not exprs:
                continue
            terms = [t.strip() for t in exprs[-1].split("+")]
            if f"d{dim}" in terms:
                total += 1
            elif any(name.search(e) for e in exprs):
                total -= 1
        return total

    innermost = len(kinds) - 1

    def usable(dim: int) -> bool:
        return (trips[dim] or 0) >= MIN_VECTOR_TRIPS

    best = innermost
    best_key = (score(innermost) if usable(innermost) else -(10**6), 1, trips[innermost] or 0)
    for dim in range(len(kinds) - 1):
        if not usable(dim):
            continue
        key = (score(dim), 0, trips[dim] or 0)
        if key > best_key:
            best, best_key = dim, key
    if best == innermost:
        return None
    perm = [d for d in range(len(kinds)) if d != best] + [best]
    return perm, kinds


def _loop_shape(perm: list[int], kinds: list[str]) -> str:
    """The loops convert-linalg-to-parallel-loops makes for this order, e.g.
    ``parallel(d0) for(d2) parallel(d1)`` (unit-trip loops are dropped later)."""
    groups: list[tuple[str, list[str]]] = []
    for d in perm:
        kind = "parallel" if kinds[d] == "parallel" else "for"
        if groups and groups[-1][0] == kind == "parallel":
            groups[-1][1].append(f"d{d}")
        else:
            groups.append((kind, [f"d{d}"]))
    return " ".join(f"{kind}({', '.join(dims)})" for kind, dims in groups)


# --------------------------------------------------------------------------- dead stores


def _erase_dead_stores(module: Any) -> int:
    """Erase the stores into buffers no result depends on; returns how many."""
    erased = 0
    for alloc in [op for op in walk_operations(module.operation)
                  if op.name in ("memref.alloc", "memref.alloca")]:  # fmt: skip
        stores = _dead_buffer_stores(alloc)
        for store in stores or ():
            store.erase()
            erased += 1
    return erased


def _owner(value: Any) -> Any:
    return value.operation if hasattr(value, "operation") else value


def _dead_buffer_stores(alloc: Any) -> list[Any] | None:
    """The stores into ``alloc`` if everything loaded from it flows only back into it."""
    views = [alloc.results[0]]
    stores, loads = [], []
    i = 0
    while i < len(views):
        value = views[i]
        i += 1
        for use in value.uses:
            user = _owner(use.owner)
            if user.name == "memref.store" and use.operand_number == 1:
                stores.append(user)
            elif user.name == "memref.load" and use.operand_number == 0:
                loads.append(user)
            elif user.name in _VIEW_OPS and use.operand_number == 0:
                views.append(user.results[0])
            elif user.name != "memref.dealloc":
                return None  # a call, a copy, a vector transfer, a return...: it is read
    if not stores:
        return None

    def into_this_buffer(value: Any) -> bool:
        return any(value == view for view in views)

    work = [load.results[0] for load in loads]
    visited = 0
    while work:
        value = work.pop()
        visited += 1
        if visited > 100_000:
            return None
        for use in value.uses:
            user = _owner(use.owner)
            if user.name == "memref.store":
                if use.operand_number == 0 and into_this_buffer(user.operands[1]):
                    continue
                return None
            if user.name.startswith(("arith.", "math.")) and len(user.regions) == 0:
                work.extend(user.results)
                continue
            return None  # a loop bound, a branch condition, a yield...: conservative
    return stores


# --------------------------------------------------------------------------- math


def _rewrite_math(module: Any, program: LoweredProgram) -> dict[str, int]:
    from torch_mlir import ir
    from torch_mlir.dialects import func

    before = _count(module, ("math.tanh",))
    run_passes(module, _EXPAND_TANH, OPTIMIZATION_FAILED)
    counts = {"math.tanh": before} if before else {}
    callees = {"math.exp": _EXP, "math.erf": _ERF}
    used: set[str] = set()
    with module.context, ir.Location.unknown():
        f32 = ir.F32Type.get()
        for op in list(walk_operations(module.operation)):
            callee = callees.get(op.name)
            if callee is None or op.results[0].type != f32:
                continue
            with ir.InsertionPoint(op), op.location:
                call = func.CallOp([f32], ir.FlatSymbolRefAttr.get(callee), [op.operands[0]])
            name = op.name
            op.results[0].replace_all_uses_with(call.results[0])
            op.erase()
            used.add(callee)
            counts[name] = counts.get(name, 0) + 1
        if used:
            library = ir.Module.parse(_EXPF + _ERFF)
            for op in list(library.body.operations):
                module.body.append(op.operation)
    if used:
        run_passes(module, _INLINE, OPTIMIZATION_FAILED)
    return counts


def _count(module: Any, names: tuple[str, ...]) -> int:
    return sum(1 for op in walk_operations(module.operation) if op.name in names)


# --------------------------------------------------------------------------- flags


def _set_fastmath(module: Any) -> str:
    from torch_mlir import ir

    with module.context:
        attr = ir.Attribute.parse(f"#arith.fastmath<{FASTMATH}>")
        for op in walk_operations(module.operation):
            if op.name in _FLOAT_OPS:
                op.attributes["fastmath"] = attr
    return FASTMATH


def _prefer_vector_width(module: Any, bits: int) -> None:
    from torch_mlir import ir

    with module.context:
        attr = ir.Attribute.parse(f'[["prefer-vector-width", "{bits}"]]')
        for op in module.body.operations:
            op = op.operation
            if op.name == "func.func" and len(op.regions[0].blocks):
                op.attributes["passthrough"] = attr


# --------------------------------------------------------------------------- checks


def _check_mapping(func_op: Any, program: LoweredProgram) -> dict[str, str]:
    """Every nest's tag names exactly one outermost loop; returns the nests whose
    outermost loop is no longer an scf.parallel, with its kind."""
    loops = sole_loops(func_op, program.nest_tags, lambda index, what: (
        f"{program.source}: internal error: after optimization nest"
        f" {program.nests[index].id} maps to {what}; profile with --host-times jit"))
    return {nest.id: loop.name for nest, loop in zip(program.nests, loops, strict=True)
            if loop.name != "scf.parallel"}  # fmt: skip
