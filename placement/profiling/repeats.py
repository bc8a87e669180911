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
  least ``2p`` long, is a stack of at least three identical layers (the first layer of a
  real stack often starts differently: it reads the model's input; the run starts where
  the layers agree, and the last layer may end differently): the first two are
  simulated, and every later nest takes the counters of the nest at the same place in
  the second layer. The second, not the first: "identical" nests run the same MLIR code
  but not always the same machine code path -- LLVM's vectorized loops check at run
  time that their buffers do not overlap, and the first layer's buffers sit elsewhere
  than the others' (a tiny LLaMA-style stack: its first layer's fill nests ran scalar,
  5,543 instructions, the later layers' vectorized, 568). Runs are taken longest first
  and may not overlap. Smaller repeats (the q/k/v projections of one layer) are not
  layers: they are simulated as they are.
* **Skipping.** A skipped nest does not run at all in the simulated program: every nest's
  loop is guarded by a flag the simulation's driver sets per run
  (:mod:`placement.profiling.simulated`). Running it uninstrumented would save little:
  valgrind's own translation runs this vectorized code ~200x slower than natively even
  with no tool (a 12-layer GPT-2 decode step: 13 s per run under ``--tool=none``, 66 ms
  natively). Its output buffers then keep what they held; the nests after it compute on
  those values, which changes nothing that is counted -- the loops' bounds and
  addresses do not depend on data -- except where code branches on values (libm's
  ``expf`` in the unoptimized program of ``--host-times jit`` has a slow path for large
  arguments; the compiled program inlines branch-free polynomials).
* **Context.** The caches before the first counted nest after skipped ones miss what
  those would have left, so copies just before a counted nest are run and counted too:
  walking back from the end of each run of copies, until their buffers (the distinct
  bytes they touch) add up to :data:`CONTEXT_LL_MULTIPLE` times the simulated last-level
  cache, which refills the cache as the full simulation would have left it (with LRU
  replacement, a set's content is its last ``assoc`` distinct lines; 4x the capacity
  gives every set about 4 x ``assoc`` of them on uniformly spread addresses).
* **Warm-up runs.** They settle glibc's allocator (the program's buffers get their final
  addresses from the second run on) whether or not their nests run. With a cold cache
  no nest runs in them (the counted run starts after a flush, as before); with a warm
  cache they leave the caches the counted run starts with: every nest runs in them when
  no layer is skipped (as exact as before), else their last nests, back to the
  context's number of bytes or to the first nest whose own buffers exceed that (run
  whole for the few lines it leaves in the cache it would cost the most: the LM head of
  GPT-2's 128-token prefill, 154 MB of weights, ~0.6 s natively, ~400 s per run under
  callgrind; what it leaves is then missing from the counted run's first nests).

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
    """Nests ``start .. stop - 1``: layers of ``period`` nests, each nest identical to the
    one ``period`` before it (the last layer may end early); the nests from
    ``start + 2 * period`` on take the counters of the second layer's."""

    start: int
    period: int
    stop: int

    @property
    def copies(self) -> range:
        return range(self.start + 2 * self.period, self.stop)

    def representative(self, index: int) -> int:
        return self.start + self.period + (index - self.start) % self.period

    def describe(self, ids: tuple[str, ...]) -> str:
        count = (self.stop - self.start) / self.period
        return f"{count:.3g} layers of {self.period} nests, {ids[self.start]}-{ids[self.stop - 1]}"


@dataclass(frozen=True)
class SimulationPlan:
    """What the cache simulation does with each nest (program order), per run."""

    counted_run: tuple[int, ...]  # SKIP (not run) | COUNT per nest
    warm_up_run: tuple[int, ...]  # SKIP | CONTEXT (run, not counted) per nest
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
        blocks = "; ".join(b.describe(self.nest_ids) for b in self.layers)
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
                {"first_nest": self.nest_ids[b.start], "last_nest": self.nest_ids[b.stop - 1],
                 "nests_per_layer": b.period, "layers": (b.stop - b.start) / b.period}
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
    warm_up = [SKIP] * len(nests)  # cold: nothing runs before the flush
    if warm:
        if all(mode == COUNT for mode in counted):
            warm_up = [CONTEXT] * len(nests)
        else:  # the last nests, back to the context's bytes or to a nest larger than that
            touched = 0
            for index in range(len(nests) - 1, -1, -1):
                if touched >= context_bytes or footprint(nests[index]) >= context_bytes:
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
            if end - begin >= 2 * period:  # three layers at least
                candidates.append(Layers(int(begin), period, int(end) + period))
    chosen: list[Layers] = []
    taken = np.zeros(len(seq), dtype=bool)
    for block in sorted(candidates, key=lambda b: (-len(b.copies), b.start, b.period)):
        span = slice(block.start, block.stop)
        if not taken[span].any():
            taken[span] = True
            chosen.append(block)
    return sorted(chosen, key=lambda b: b.start)


def nest_signatures(program: LoweredProgram) -> list[str]:
    """Per nest (program order), what makes two nests identical (module docstring)."""
    from torch_mlir import ir

    from placement.profiling.mlir.lower import new_context
    from placement.profiling.mlir.markers import nest_loop_ops

    with new_context():
        module = ir.Module.parse(program.module_text)
        loops = nest_loop_ops(module, program)
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
