"""Repeated layers: which nests the cache simulation counts, and which take the counters of
an identical earlier nest.

A stack of identical decoder layers lowers to the same block of loop nests again and
again. Simulating every copy under callgrind costs a full program run per copy for
counters that are the same up to cache noise: the nests of two layers are the same code
on buffers of the same shapes (the weights differ only in their values). So the
simulation (:func:`placement.profiling.simulated.simulate_nests`) may count one
representative of each repeated block and give its counters to the copies. This module
decides which (:func:`simulation_plan`):

* **Signatures.** Two nests are identical when their ONNX operator type, linalg op,
  ``N_iter``, ``N_total``, trip count, dynamic op counts and the MLIR text of their
  outermost loop (in the program that is simulated, with SSA value names numbered by
  first appearance, so that ``%alloc_59``/``%alloc_72`` and ``%arg3``/``%arg7`` compare
  equal) are.
* **Repeated layers.** For a period ``p`` of at least :data:`MIN_LAYER_NESTS` nests, a
  run of top-level nests (trip count 1) each identical to the nest ``p`` before it, at
  least ``2p`` long, is a stack of at least three identical layers: the first two are
  simulated, and every later nest takes the counters of the nest at the same place in
  the second layer. The second, not the first: "identical" nests run the same MLIR code
  but not always the same machine code path -- LLVM's vectorized loops check at run
  time that their buffers do not overlap, and the first layer's buffers sit elsewhere
  than the others' (a tiny LLaMA-style stack: its first layer's fill nests ran scalar,
  5,543 instructions, the later layers' vectorized, 568). Runs are taken longest first
  and may not overlap. Smaller repeats (the q/k/v projections of one layer) are not
  layers: they are simulated as they are.
* **Context.** Callgrind clears its simulated caches whenever its instrumentation is
  switched on, so the copies just before a counted nest are simulated anyway, uncounted
  being pointless: they are counted too. Walking back from the end of each run of
  copies, copies are simulated until their buffers (the distinct bytes they touch) add
  up to :data:`CONTEXT_LL_MULTIPLE` times the simulated last-level cache, which refills
  the cache as the full simulation would have left it (with LRU replacement, a set's
  content is its last ``assoc`` distinct lines; 4x the capacity gives every set about
  4 x ``assoc`` of them on uniformly spread addresses). Only the copies before that are
  skipped.
* **Warm cache.** With a warm cache the counted run starts with what the warm-up runs
  left: they are simulated (uncounted) -- wholly when no layer is skipped (exactly as
  before: with one of two warm-up runs simulated instead, resnet_tiny's warm LL read
  misses were 10 % higher, glibc placing buffers differently in the first run), else
  their last nests, back to the context's number of bytes. With a cold cache none of
  them is: callgrind's caches are empty when the counted run starts, the state a flush
  leaves (every line the program reads misses either way).

The result says which nests were counted, skipped and whose counters each skipped nest
took (``SimulationPlan.to_json``, recorded in the profile's simulation metadata).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from placement.nests import LoopNest

if TYPE_CHECKING:
    from placement.profiling.mlir.lower import LoweredProgram

#: Nests a block must have to be a repeated layer (a decoder layer lowers to 40-130;
#: sub-blocks repeated inside one, e.g. the rotary embedding of queries then keys, have
#: about 10 and stay simulated through the context rule anyway).
MIN_LAYER_NESTS = 8
#: The context before a counted nest that follows skipped copies, in multiples of the
#: simulated last-level cache's capacity (module docstring).
CONTEXT_LL_MULTIPLE = 4

# Per nest, what the simulation does with it in a run.
SKIP, CONTEXT, COUNT = 0, 1, 2

_SSA_NAME = re.compile(r"%[\w$.\-]+")
_NUMBER_SUFFIX = re.compile(r"(?<=^arg)\d+$|_\d+$")  # %arg19, %alloc_59: numbering only


@dataclass(frozen=True)
class Layers:
    """Nests ``start .. start + period * repeats - 1``: ``repeats`` identical layers of
    ``period`` nests; the nests from ``start + 2 * period`` on take the counters of the
    second layer's."""

    start: int
    period: int
    repeats: int

    @property
    def copies(self) -> range:
        return range(self.start + 2 * self.period, self.start + self.period * self.repeats)

    def representative(self, index: int) -> int:
        return self.start + self.period + (index - self.start) % self.period


@dataclass(frozen=True)
class SimulationPlan:
    """What the cache simulation does with each nest (program order), per run."""

    counted_run: tuple[int, ...]  # SKIP | COUNT per nest (simulated nests are counted)
    warm_up_run: tuple[int, ...]  # SKIP | CONTEXT per nest, for the warm-up runs (warm)
    representative: dict[str, str]  # nest id -> the nest whose counters it takes
    layers: tuple[Layers, ...]
    nest_ids: tuple[str, ...]
    context_bytes: int

    @property
    def skipped(self) -> list[str]:
        return [n for n, mode in zip(self.nest_ids, self.counted_run, strict=True)
                if mode == SKIP]  # fmt: skip

    @property
    def is_full(self) -> bool:
        """Whether every nest is counted (nothing is taken from a representative)."""
        return all(mode == COUNT for mode in self.counted_run)

    def summary(self) -> str:
        """One line: what was simulated and what was taken from representatives."""
        if self.is_full:
            return "every nest simulated"
        skipped = len(self.skipped)
        blocks = ", ".join(
            f"{b.repeats} x {b.period} nests from {self.nest_ids[b.start]}" for b in self.layers
        )
        return (
            f"repeated layers ({blocks}): {skipped} of {len(self.nest_ids)} nests took the"
            " counters of the identical nest in the second layer (representative-layer"
            " simulation), the others were simulated"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "method": "representative-layer/1" if not self.is_full else "full",
            "summary": self.summary(),
            "layers": [
                {"first_nest": self.nest_ids[b.start], "nests_per_layer": b.period,
                 "repeats": b.repeats}
                for b in self.layers
            ],  # fmt: skip
            "min_layer_nests": MIN_LAYER_NESTS,
            "context_bytes": self.context_bytes,
            "simulated_nests": len(self.nest_ids) - len(self.skipped),
            "skipped_nests": len(self.skipped),
            # nest id -> representative, only for the nests whose counters were copied
            "counters_from": {
                n: r for n, r in self.representative.items() if n != r and n in set(self.skipped)
            },
        }


def simulation_plan(
    program: LoweredProgram, ll_bytes: int, *, warm: bool, representatives: bool = True,
    signatures: list[str] | None = None,
) -> SimulationPlan:  # fmt: skip
    """The plan for simulating ``program`` with a last-level cache of ``ll_bytes`` (module
    docstring); ``representatives=False``: every nest counted. ``signatures``: the nests'
    :func:`nest_signatures` (computed here when needed and not given)."""
    nests = program.nests
    ids = tuple(n.id for n in nests)
    context_bytes = CONTEXT_LL_MULTIPLE * ll_bytes
    layers: list[Layers] = []
    if representatives and len(nests) >= 3 * MIN_LAYER_NESTS:
        layers = repeated_layers(signatures or nest_signatures(program), nests)
    counted = [COUNT] * len(nests)
    representative = {n.id: n.id for n in nests}
    for block in layers:
        for index in block.copies:
            counted[index] = SKIP
            representative[ids[index]] = ids[block.representative(index)]
    # Copies right before a counted nest are simulated for its cache context: count them.
    end = len(nests) - 1
    while end > 0:
        if counted[end] == COUNT and counted[end - 1] == SKIP:
            index, touched = end - 1, 0
            while index >= 0 and counted[index] == SKIP and touched < context_bytes:
                counted[index] = COUNT
                representative[ids[index]] = ids[index]
                touched += footprint(nests[index])
                index -= 1
            end = index
        else:
            end -= 1
    warm_up = [SKIP] * len(nests)
    if warm:
        if all(mode == COUNT for mode in counted):
            warm_up = [CONTEXT] * len(nests)
        else:
            touched = 0
            for index in range(len(nests) - 1, -1, -1):
                if touched >= context_bytes:
                    break
                warm_up[index] = CONTEXT
                touched += footprint(nests[index])
    return SimulationPlan(tuple(counted), tuple(warm_up), representative, tuple(layers), ids,
                          context_bytes)  # fmt: skip


def footprint(nest: LoopNest) -> int:
    """The distinct bytes a nest touches: its buffers, each once."""
    return sum(op.nbytes for op in nest.operands)


def repeated_layers(signatures: list[str], nests: list[LoopNest]) -> list[Layers]:
    """The stacks of at least three identical layers of at least MIN_LAYER_NESTS nests
    (module docstring), longest first, not overlapping, in program order."""
    codes: dict[str, int] = {}
    seq = np.array([codes.setdefault(s, len(codes)) for s in signatures])
    top = np.array([n.trip_count == 1 for n in nests])
    candidates: list[Layers] = []
    for period in range(MIN_LAYER_NESTS, len(seq) // 3 + 1):
        # same[k]: nest k + period is identical to nest k, both at top level
        same = (seq[period:] == seq[:-period]) & top[period:] & top[:-period]
        edges = np.flatnonzero(np.diff(np.concatenate(([0], same.astype(np.int8), [0]))))
        for begin, end in zip(edges[::2], edges[1::2], strict=True):
            repeats = (end - begin) // period + 1  # whole layers from begin
            if repeats >= 3:
                candidates.append(Layers(int(begin), period, int(repeats)))
    chosen: list[Layers] = []
    taken = np.zeros(len(seq), dtype=bool)
    for block in sorted(candidates, key=lambda b: (-len(b.copies), b.start, b.period)):
        span = slice(block.start, block.start + block.period * block.repeats)
        if not taken[span].any():
            taken[span] = True
            chosen.append(block)
    return sorted(chosen, key=lambda b: b.start)


def nest_signatures(program: LoweredProgram) -> list[str]:
    """Per nest (program order), what makes two nests identical (module docstring)."""
    from torch_mlir import ir

    from placement.profiling.mlir.extract import outermost_parallels
    from placement.profiling.mlir.lower import find_func, new_context
    from placement.profiling.mlir.markers import _loops_of_tags

    with new_context():
        module = ir.Module.parse(program.module_text)
        function = find_func(module, program.func_name)
        if program.markers_at == "tagged-loop":
            loops = _loops_of_tags(function, program.nest_tags, program.func_name)
        else:
            loops = [op for op, _trips in outermost_parallels(function)]
        texts = [canonical_text(op.get_asm(enable_debug_info=False)) for op in loops]
    return [
        repr((n.onnx_op_type, n.linalg_op, n.n_iter, n.n_total, n.trip_count,
              sorted(n.body_ops.items()), text))
        for n, text in zip(program.nests, texts, strict=True)
    ]  # fmt: skip


def canonical_text(text: str) -> str:
    """``text`` with SSA value names numbered by first appearance per stem: ``%alloc_59``
    and ``%alloc_72`` become ``%alloc#0`` (``#1`` for the second one to appear), ``%58``
    ``%#0``, ``%arg19`` ``%arg#0``; constants keep the value in their name (``%c64``)."""
    numbers: dict[str, str] = {}
    stems: dict[str, int] = defaultdict(int)

    def rename(match: re.Match[str]) -> str:
        name = match.group(0)
        if name not in numbers:
            body = name[1:]
            stem = "" if body.isdigit() else _NUMBER_SUFFIX.sub("", body)
            numbers[name] = f"%{stem}#{stems[stem]}"
            stems[stem] += 1
        return numbers[name]

    return _SSA_NAME.sub(rename, text)
