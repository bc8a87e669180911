"""Basic blocks of a loop nest: the decision units of basic-block granularity, as plain data.

Torch-PIM compares its loop-level decisions with "basic-block-level offloading: the same
decision rule is applied to basic blocks, so each block is judged independently"
(Section 5.1, Table 5), the granularity of PIMProf, and warns that "if consecutive
blocks are assigned to different targets, every boundary incurs data-transfer and
synchronization cost". Here a basic block is a block of the control-flow graph that
``convert-scf-to-cf`` makes of a nest (the host code before LLVM), so these are the
blocks a PIM offload marker could be placed around.

A nest's control structure is a tree of :class:`Loop` (one per loop dimension: an
``scf.parallel`` of rank ``p`` is lowered to ``p`` nested loops), each with the
straight-line :class:`Segment` of its body before, between and after its inner loops.
``convert-scf-to-cf`` lays out, for each loop in pre-order, its *header* (index compare
and conditional branch: 2 ops), then its segments with the blocks of each inner loop
after the segment that enters it. A segment that enters an inner loop ends with a branch
(its ops + 1); the last segment advances the index and branches back (its ops + 2).
:func:`basic_blocks` derives the blocks, their executions and the edges between them.

Per invocation of the nest, a loop entered ``E`` times with ``t`` trips runs its header
``E * (t + 1)`` times and each segment ``E * t`` times. Its edges (each executed
``E * t`` times): header -> first segment, each segment -> the next inner loop's header,
that header -> the following segment (the inner loop's exit), last segment -> header
(the back edge). The outermost header's entry and exit are the nest's boundary with
the rest of the program (the loop model's boundaries), not edges here.

Values live across an edge: the loop indices of the loops enclosing the block entered
(a header: its own loop's index, the block argument, included), 8 bytes each (``index``
is 64-bit on the hosts we lower for). The lowering of linalg ops keeps every other value
inside one block, so these are all the registers a crossing moves.

*Body* blocks: the segments that access memory (loads, stores, any op on a memref; a
nest lowered from a linalg op has exactly one, its innermost segment), or, in a nest
that accesses no memory, its first deepest segment. A nest's buffers are accessed only
by its body blocks, so its copies (Eq. 8 or exact) follow where its body runs; the body
blocks of one nest share one decision (a copy model per buffer and nest needs one place
for the nest's accesses). A conditional inside a segment (``scf.if``) stays inside its
block: its branches are not separate units (linalg lowerings emit none).

Block shares: a block's dynamic MLIR ops (ops per execution x executions) over the
nest's. Basic-block granularity splits a nest's measured host time and modelled PIM time
by these shares: an estimate (an apportioning by op counts, not a measurement: timing a
block that runs for nanoseconds per execution with markers costing ~25 ns each would
measure the markers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INDEX_BYTES = 8  # one loop index (MLIR ``index`` lowered to i64)
HEADER_OPS = 2  # arith.cmpi + cf.cond_br
ENTER_OPS = 1  # cf.br into the next inner loop's header
LATCH_OPS = 2  # arith.addi + cf.br back to the header
KINDS = ("header", "body", "step")  # step: a segment that accesses no memory


@dataclass(frozen=True)
class Segment:
    """A straight-line part of a loop body: its own MLIR ops (terminators not counted)."""

    ops: int
    memory: bool  # loads, stores or otherwise accesses a memref


@dataclass(frozen=True)
class Loop:
    """One loop of a nest: ``trips`` iterations, ``len(inner) + 1`` segments around its
    inner loops (segment ``j`` runs before inner loop ``j``, the last one after them)."""

    trips: int
    segments: tuple[Segment, ...]
    inner: tuple[Loop, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.trips, bool) or not isinstance(self.trips, int) or self.trips < 0:
            raise ValueError(f"loop trips must be a whole number >= 0, got {self.trips!r}")
        if len(self.segments) != len(self.inner) + 1:
            raise ValueError(
                f"a loop with {len(self.inner)} inner loop(s) needs {len(self.inner) + 1}"
                f" segments, got {len(self.segments)}"
            )
        for s in self.segments:
            if isinstance(s.ops, bool) or not isinstance(s.ops, int) or s.ops < 0:
                raise ValueError(f"segment ops must be a whole number >= 0, got {s.ops!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "trips": self.trips,
            "segments": [{"ops": s.ops, "memory": s.memory} for s in self.segments],
            "inner": [loop.to_json() for loop in self.inner],
        }

    @classmethod
    def from_json(cls, data: Any) -> Loop:
        if not isinstance(data, dict) or not isinstance(data.get("segments"), list):
            raise ValueError("a loop must be an object with 'trips', 'segments' and 'inner'")
        segments = []
        for s in data["segments"]:
            if not isinstance(s, dict) or not isinstance(s.get("memory"), bool):
                raise ValueError("a segment must be an object with 'ops' and 'memory' (bool)")
            segments.append(Segment(s.get("ops"), s["memory"]))
        inner = data.get("inner", [])
        if not isinstance(inner, list):
            raise ValueError("'inner' must be a list of loops")
        return cls(data.get("trips"), tuple(segments), tuple(cls.from_json(i) for i in inner))


@dataclass(frozen=True)
class BasicBlock:
    id: str  # "<nest id>.bb<k>", k = position in convert-scf-to-cf's layout of the nest
    kind: str  # "header" | "body" | "step" (KINDS)
    depth: int  # loops enclosing the block (a header's own loop included)
    executions: int  # per invocation of the nest
    ops: int  # MLIR ops per execution, branches included

    @property
    def dynamic_ops(self) -> int:
        return self.ops * self.executions


@dataclass(frozen=True)
class BlockEdge:
    src: int  # index into NestBlocks.blocks
    dst: int
    count: int  # executions per invocation of the nest
    live_bytes: int  # loop indices live on entry to dst (module docstring)


@dataclass(frozen=True)
class NestBlocks:
    """The basic blocks of one nest (layout order; ``blocks[0]`` is the outermost header,
    the nest's entry and exit) and the edges between them."""

    nest: str
    blocks: tuple[BasicBlock, ...]
    edges: tuple[BlockEdge, ...]

    @property
    def ids(self) -> list[str]:
        return [b.id for b in self.blocks]

    @property
    def body(self) -> tuple[int, ...]:
        """Indices of the body blocks (one decision; module docstring)."""
        return tuple(k for k, b in enumerate(self.blocks) if b.kind == "body")

    @property
    def shares(self) -> tuple[float, ...]:
        """Each block's dynamic ops over the nest's (sum 1)."""
        total = sum(b.dynamic_ops for b in self.blocks)
        return tuple(b.dynamic_ops / total for b in self.blocks)

    def to_json(self) -> dict[str, Any]:
        shares = self.shares
        return {
            "blocks": [
                {"id": b.id, "kind": b.kind, "depth": b.depth, "executions": b.executions,
                 "ops": b.ops, "share": s}
                for b, s in zip(self.blocks, shares, strict=True)
            ],  # fmt: skip
            "edges": [
                {"from": self.blocks[e.src].id, "to": self.blocks[e.dst].id, "count": e.count,
                 "live_bytes": e.live_bytes}
                for e in self.edges
            ],  # fmt: skip
        }


def basic_blocks(nest_id: str, root: Loop) -> NestBlocks:
    """The blocks and edges of a nest whose outermost loop is ``root`` (module docstring)."""
    blocks: list[dict[str, Any]] = []
    edges: list[BlockEdge] = []

    def visit(loop: Loop, depth: int, entries: int) -> int:
        """Lay out ``loop`` entered ``entries`` times; returns its header's index."""
        runs = entries * loop.trips
        header = len(blocks)
        blocks.append({"kind": "header", "depth": depth, "executions": entries + runs,
                       "ops": HEADER_OPS})  # fmt: skip
        previous = header
        last = len(loop.segments) - 1
        for j, seg in enumerate(loop.segments):
            here = len(blocks)
            blocks.append({"kind": "body" if seg.memory else "step", "depth": depth,
                           "executions": runs,
                           "ops": seg.ops + (LATCH_OPS if j == last else ENTER_OPS)})  # fmt: skip
            # into this segment: from the header (j = 0) or from inner loop j-1's exit
            edges.append(BlockEdge(previous, here, runs, INDEX_BYTES * depth))
            if j < last:  # the inner loop's header is laid out next
                edges.append(BlockEdge(here, len(blocks), runs, INDEX_BYTES * (depth + 1)))
                previous = visit(loop.inner[j], depth + 1, runs)
            else:
                edges.append(BlockEdge(here, header, runs, INDEX_BYTES * depth))
        return header

    visit(root, 1, 1)
    if not any(b["kind"] == "body" for b in blocks):
        deepest = max(b["depth"] for b in blocks if b["kind"] == "step")
        first = next(b for b in blocks if b["kind"] == "step" and b["depth"] == deepest)
        first["kind"] = "body"
    out = tuple(
        BasicBlock(f"{nest_id}.bb{k}", b["kind"], b["depth"], b["executions"], b["ops"])
        for k, b in enumerate(blocks)
    )
    return NestBlocks(nest_id, out, tuple(edges))
