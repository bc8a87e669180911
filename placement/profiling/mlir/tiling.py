"""Cache tiling of GEMMs: the ``tile`` step of the host optimization pipeline (optimize.py).

After the interchange a matmul runs ``parallel(i){for k{parallel(j)}}``: every row of A
streams the whole weight B through the caches, so for a weight larger than the private
L2 every row re-reads it from the L3 or DRAM (N = 2,048: 16 MiB per row).
:func:`tile_for_cache` tiles such ops with ``transform.structured.tile_using_for`` over
k and j (and any batch dimension of the weight by 1), keeping the interchanged order
inside the tile so the inner j loop still vectorizes, and packs each ``Tk x Tj`` block
of B into a contiguous buffer (``transform.structured.promote``: one copy of B in all)
that stays in L2 while all rows of A use it::

    for k0 (step Tk) { for j0 (step Tj) { pack B block; parallel(i) { for k { parallel(j) } } } }

Packing matters: a block read in place has rows a power-of-two stride apart, which map
to a fraction of the L2's sets (at N = 2,048 a 512-wide block uses a quarter of them:
32 lines per set in a 16-way cache) and evict each other. Simulated (callgrind, 1 MiB
16-way L2, N = 1,024): L2 read misses 4,104 MiB untiled, 352 MiB tiled in place,
28.9 MiB tiled and packed (B once + A twice + C four times: 28 MiB by hand).

The tile loops carry the linalg op's location (its tag), so the outermost one is the
nest's outermost loop, which the timing markers wrap once; the packing buffer is freed
by the JIT's ``buffer-deallocation-pipeline`` (the dealloc promote emits is removed:
that pipeline refuses explicit ones).

Which ops (:func:`plan_tiles`): a ``linalg.generic`` (the interchange generalizes the
matmuls it permutes; a named op is left alone) whose innermost loop ``j`` is parallel,
with an input ``W`` indexed ``[..., k, j]`` (``k`` a reduction), reused by outer
parallel loops that do not index it (at least :data:`MIN_REUSE` iterations: a GEMV,
reused once, is left alone), and whose ``k x j`` block is larger than half the L2.

Tile sizes from the host's caches (``host_cache_geometry`` of
:mod:`placement.profiling.cache_geometry`, without the simulation's overrides): ``Tj``
the largest power of two whose row of W takes at most 1/16 of L1d (W's and the output's
row are re-read every k step, beside A and the prefetch streams), ``Tk`` the largest
power of two with ``Tk x Tj`` elements of W in half the L2 (the other half for the rows
of A and of the output streaming through). With a 48 KiB L1d and a 1 MiB L2 that is
``Tk = 256, Tj = 512``; how the rule was chosen (the sizes timed against each other) is
in benchmarks/README.md.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

from placement.profiling.cache_geometry import Cache, CacheGeometry, host_cache_geometry
from placement.profiling.mlir.extract import loc_tag, walk_operations
from placement.profiling.mlir.passes import run_passes

MIN_REUSE = 8  # outer iterations reusing the weight block; below this tiling cannot pay
OPTIMIZATION_FAILED = "host optimization failed"


@dataclass(frozen=True)
class TilePlan:
    """Tile sizes per loop of one linalg.generic (0 = not tiled) and the weight they keep."""

    tile_sizes: tuple[int, ...]
    weight_operand: int  # index of W among the op's operands
    block_bytes: int  # Tk x Tj elements of W


def iterator_kinds(op: Any) -> list[str]:
    """``"parallel"`` or ``"reduction"`` per loop of a linalg.generic."""
    from torch_mlir import ir

    kinds = [str(x) for x in ir.ArrayAttr(op.attributes["iterator_types"])]
    return ["reduction" if "reduction" in k else "parallel" for k in kinds]


def indexing_results(op: Any) -> list[list[str]]:
    """Per operand of a linalg.generic, its indexing map's result expressions as text."""
    from torch_mlir import ir

    maps = [ir.AffineMapAttr(a).value for a in ir.ArrayAttr(op.attributes["indexing_maps"])]
    return [[str(r) for r in m.results] for m in maps]


def loop_trips(op: Any, results: list[list[str]], loops: int) -> list[int | None]:
    """Trip count per loop, from the static sizes of operand dimensions a loop indexes alone."""
    trips: list[int | None] = [None] * loops
    for value, exprs in zip(op.operands, results, strict=False):
        shape = getattr(value.type, "shape", None)
        if shape is None:
            continue
        for size, expr in zip(shape, exprs, strict=False):
            if re.fullmatch(r"d\d+", expr) and size is not None and size >= 0:
                trips[int(expr[1:])] = size
    return trips


def tile_sizes_for(d1: Cache, ll: Cache, elem_bytes: int = 4) -> tuple[int, int]:
    """(Tk, Tj) for this host's L1d and L2 (module docstring)."""
    tj = _pow2_at_most(d1.size // (16 * elem_bytes))
    tk = _pow2_at_most(ll.size // (2 * tj * elem_bytes))
    return max(tk, 1), max(tj, 1)


def _pow2_at_most(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def plan_tiles(op: Any, d1: Cache, ll: Cache) -> TilePlan | None:
    """The tiling of one linalg.generic, or None to leave it (module docstring)."""
    if op.name != "linalg.generic":
        return None
    kinds = iterator_kinds(op)
    loops = len(kinds)
    if loops < 3 or kinds[-1] != "parallel":
        return None
    results = indexing_results(op)
    trips = loop_trips(op, results, loops)
    j = loops - 1
    n_inputs = len(op.opview.inputs)
    for index in range(n_inputs):
        exprs = results[index]
        if len(exprs) < 2 or not all(re.fullmatch(r"d\d+", e) for e in exprs):
            continue
        dims = [int(e[1:]) for e in exprs]
        k = dims[-2]
        if dims[-1] != j or kinds[k] != "reduction":
            continue
        reuse = [d for d in range(loops) if kinds[d] == "parallel" and d not in dims]
        if not reuse or any(trips[d] is None for d in reuse + [j, k]):
            continue
        reused = 1
        for d in reuse:
            reused *= trips[d] or 1
        elem = _elem_bytes(op.operands[index].type)
        block = (trips[k] or 0) * (trips[j] or 0) * elem
        if reused < MIN_REUSE or 2 * block <= ll.size:
            continue
        tk, tj = tile_sizes_for(d1, ll, elem)
        sizes = [0] * loops
        for d in dims[:-2]:
            if kinds[d] == "parallel":
                sizes[d] = 1  # a batch dimension of W: one weight matrix at a time
        sizes[k] = min(tk, trips[k] or tk)
        sizes[j] = min(tj, trips[j] or tj)
        return TilePlan(tuple(sizes), index, sizes[k] * sizes[j] * elem)
    return None


def _elem_bytes(memref_type: Any) -> int:
    width = getattr(memref_type.element_type, "width", 32)
    return max(width // 8, 1)


def tile_for_cache(
    module: Any, tag_to_nest: dict[int, str], caches: CacheGeometry | None = None
) -> dict[str, Any]:
    """Tile the GEMM-like linalg.generic ops of ``module`` in place (module docstring)
    for ``caches`` (default: this host's); returns, per tiled nest, its tile sizes (per
    loop, 0 = not tiled), which operand is W, the size of its packed block kept in L2
    and the caches sized for."""
    from torch_mlir import ir

    geometry = caches or host_cache_geometry(overrides="")
    groups: dict[tuple[tuple[int, ...], int], str] = {}
    chosen: dict[str, Any] = {}
    tags: list[int] = []
    for op in walk_operations(module.operation):
        tag = loc_tag(op.location) if op.name == "linalg.generic" else None
        if tag is None:
            continue
        plan = plan_tiles(op, geometry.d1, geometry.ll)
        if plan is None:
            continue
        tags.append(tag)
        key = (plan.tile_sizes, plan.weight_operand)
        name = groups.setdefault(key, f"placement_tile_{len(groups)}")
        with module.context:
            op.attributes[name] = ir.UnitAttr.get()
        chosen[tag_to_nest.get(tag) or f"linalg#{tag}"] = {
            "tile_sizes": list(plan.tile_sizes),
            "weight_operand": plan.weight_operand,
            "weight_block_bytes": plan.block_bytes,
            "weight_packed": True,
            "l1d_bytes": geometry.d1.size,
            "l2_bytes": geometry.ll.size,
        }
    if not groups:
        return {}
    lines = []
    for index, ((sizes, weight), name) in enumerate(groups.items()):
        loops = sum(1 for s in sizes if s)
        handles = ", ".join(["!transform.any_op"] * (loops + 1))
        lines.append(
            f"    %m{index} = transform.structured.match attributes{{{name}}} in %root"
            " : (!transform.any_op) -> !transform.any_op\n"
            f"    %t{index}, %l{index}:{loops} = transform.structured.tile_using_for %m{index}"
            f" tile_sizes [{', '.join(map(str, sizes))}]"
            f" : (!transform.any_op) -> ({handles})\n"
            f"    %p{index} = transform.structured.promote %t{index}"
            f" {{operands_to_promote = [{weight}]}} : (!transform.any_op) -> !transform.any_op\n"
        )
    run_transform(module, "".join(lines), "__placement_tile")
    # The JIT's buffer-deallocation-pipeline refuses explicit deallocs and frees the
    # packed buffers itself.
    tiled = set(tags)
    for op in list(walk_operations(module.operation)):
        if op.name == "memref.dealloc" and loc_tag(op.location) in tiled:
            op.erase()
    return chosen


def run_transform(module: Any, body: str, entry: str) -> None:
    """Apply a transform-dialect sequence (``body``: the ops on ``%root``) to ``module``.

    ``entry`` names the sequence: the preloaded library stays in the context, so each
    transform run on one context needs its own name."""
    script = (
        "module attributes {transform.with_named_sequence} {\n"
        f"  transform.named_sequence @{entry}("
        "%root: !transform.any_op {transform.readonly}) {\n"
        + body
        + "    transform.yield\n  }\n}\n"
    )
    fd, path = tempfile.mkstemp(prefix="placement-transform-", suffix=".mlir")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(script)
        run_passes(
            module,
            f"builtin.module(transform-preload-library{{transform-library-paths={path}}},"
            f" transform-interpreter{{entry-point={entry}}})",
            OPTIMIZATION_FAILED,
        )
    finally:
        os.unlink(path)
