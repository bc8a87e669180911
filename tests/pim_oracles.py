"""Test oracles for the PIM placement: brute force, a segment DP, and random instances.

The cost function here shares no code with the model or the verifier. Its
exact copy accounting is a third formulation: a lazy simulation that tracks,
per buffer, whether the current PIM segment holds it and whether a value
written on PIM is still pending a flush; a pending flush is charged when the
value is first needed off its segment (a host read, a read in a later
segment, or the program's end for non-temporaries) and dropped when the value
is overwritten unread.

Basic-block granularity (:func:`block_cost`) is a third formulation too: it runs each
nest's loops (:class:`placement.blocks.Loop`) as a program would, block after block,
and counts what the run does -- how often each block executes (its share of the
nest's time), every change of side between consecutive blocks (a switch, moving the
loop indices of the loops open at the block entered) -- instead of the closed-form
executions and edge counts of ``placement.blocks``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

from placement.blocks import Loop, Segment
from placement.hardware.pim import PimSpec
from placement.nests import LoopNest, NestOperand
from placement.pim.instance import PimInstance
from placement.profiling.counters import SIMULATED_EVENTS


def hybrid_cost(instance: PimInstance, y: list[bool], copy: str) -> float:
    """Eq. 9 of placement ``y`` (program order, True = PIM)."""
    nests = instance.nests
    spec = instance.spec
    total = 0.0
    for n, p in zip(nests, y, strict=True):
        total += instance.pim_times[n.id] if p else instance.t_cpu[n.id]
    path = [False, *y, False]
    total += spec.t_sw * sum(a != b for a, b in itertools.pairwise(path))
    if copy == "upper_bound":
        for n, p in zip(nests, y, strict=True):
            if p:
                total += n.fetch_bytes / spec.read_bandwidth
                total += n.flush_bytes / spec.writeback_bandwidth
        return total
    fetch, flush = _lazy_copy_bytes(nests, y)
    return total + fetch / spec.read_bandwidth + flush / spec.writeback_bandwidth


def _lazy_copy_bytes(nests: tuple[LoopNest, ...], y: list[bool]) -> tuple[float, float]:
    def merged(n: LoopNest) -> dict[str, list]:
        out: dict[str, list] = {}
        for op in n.operands:
            e = out.setdefault(op.buffer, [0, False, False, op.kind])
            e[0] = max(e[0], op.nbytes)
            e[1] |= op.read
            e[2] |= op.written
        return out

    uses = [merged(n) for n in nests]
    looped_writes = {b for n, u in zip(nests, uses, strict=True) if n.trip_count > 1
                     for b, e in u.items() if e[2]}
    kinds = {b: e[3] for u in uses for b, e in u.items()}
    in_segment: set[str] = set()
    pending: dict[str, float] = {}  # buffer -> bytes of its unflushed PIM-written value
    fetch = flush = 0.0
    for pos, (n, p) in enumerate(zip(nests, y, strict=True)):
        if not p:
            in_segment.clear()
        elif pos == 0 or not y[pos - 1]:
            in_segment = set()
        for b, (nbytes, r, w, _) in uses[pos].items():
            if r and not (p and b in in_segment):
                if b in pending:  # its value lives on PIM outside this segment
                    flush += pending.pop(b)
                if p:
                    fetch += nbytes * (n.trip_count if b in looped_writes else 1)
            if w:
                pending.pop(b, None)  # the old value is dead or was just handled
                if p:
                    pending[b] = nbytes * n.trip_count
            if p and (r or w):
                in_segment.add(b)
    flush += sum(v for b, v in pending.items() if kinds[b] != "alloc")
    return fetch, flush


def groups_of(instance: PimInstance, granularity: str) -> list[list[int]]:
    pos = {n.id: i for i, n in enumerate(instance.nests)}
    if granularity == "loop":
        return [[i] for i in range(len(instance.nests))]
    return [[pos[i] for i in g] for g in instance.operator_groups()]


def brute_force(instance: PimInstance, copy: str, granularity: str) -> tuple[float, list[bool]]:
    """Minimum Eq. 9 over every placement (groups share one decision)."""
    groups = groups_of(instance, granularity)
    best = (math.inf, [])
    for choice in itertools.product((False, True), repeat=len(groups)):
        y = [False] * len(instance.nests)
        for g, c in zip(groups, choice, strict=True):
            for i in g:
                y[i] = c
        cost = hybrid_cost(instance, y, copy)
        if cost < best[0]:
            best = (cost, y)
    return best


def segment_dp(instance: PimInstance, copy: str) -> float:
    """Loop granularity: DP over maximal PIM segments (copy cost is segment-local).

    H[i]: best cost of nests 0..i-1 with nest i-1 on the host (H[0] = 0);
    P[i]: same with nest i-1 ending a PIM segment. A segment [s, e] costs its
    PIM times, its own copy cost and two switches.
    """
    n = len(instance.nests)
    base = [False] * n
    h = [0.0] + [math.inf] * n
    p = [math.inf] * (n + 1)
    for i in range(1, n + 1):
        nest = instance.nests[i - 1]
        h[i] = min(h[i - 1], p[i - 1]) + instance.t_cpu[nest.id]
        for s in range(i):
            y = base.copy()
            y[s:i] = [True] * (i - s)
            # cost of the segment alone: drop the host times it replaced
            seg = hybrid_cost(instance, y, copy) - sum(
                instance.t_cpu[m.id] for k, m in enumerate(instance.nests) if not y[k]
            )
            p[i] = min(p[i], h[s] + seg)
    return min(h[n], p[n])


# --- instances --------------------------------------------------------------------------


def operand(
    buffer: str, nbytes: int, *, read: bool, written: bool, kind: str = "alloc"
) -> NestOperand:
    return NestOperand(buffer, kind, (max(nbytes // 4, 1),), "f32", nbytes, read, written)


def nest(
    i: int,
    operands: tuple[NestOperand, ...],
    *,
    n_iter: int = 1024,
    n_total: int | None = None,
    trip_count: int = 1,
    node: str = "",
) -> LoopNest:
    return LoopNest(
        id=f"n{i:03d}", index=i, onnx_node=node, onnx_op_type="", linalg_op="linalg.generic",
        n_iter=n_iter, n_total=n_iter if n_total is None else n_total, trip_count=trip_count,
        operands=operands,
    )


def random_instance(seed: int, n: int, spec: PimSpec | None = None) -> PimInstance:
    """A random program of ``n`` nests over a small buffer pool, with clashing costs."""
    rng = random.Random(seed)
    spec = spec or PimSpec()
    pool = [(f"arg{k}", "argument") for k in range(2)] + [("global:w", "global")]
    pool += [(f"alloc{k}", "alloc") for k in range(4)]
    size = {b: rng.choice([4096, 65536, 262144, 524288]) for b, _ in pool}
    nests = []
    node_id = 0
    left_in_node = 0
    for i in range(n):
        if left_in_node == 0:
            node_id += 1
            left_in_node = rng.choice([1, 2, 3])
        left_in_node -= 1
        reads = rng.sample(pool, rng.choice([1, 2]))
        ops = [operand(b, size[b], read=True, written=False, kind=k) for b, k in reads]
        out_b, out_k = rng.choice([p for p in pool if p[1] != "global"])
        in_place = out_b in {b for b, _ in reads}
        if in_place:
            ops = [operand(b, size[b], read=True, written=(b == out_b), kind=k) for b, k in reads]
        else:
            ops.append(operand(out_b, size[out_b], read=False, written=True, kind=out_k))
        trip = rng.choice([1, 1, 1, 3])
        nests.append(nest(i, tuple(ops), trip_count=trip,
                          node="" if rng.random() < 0.15 else f"op{node_id}"))
    t_cpu = {m.id: rng.uniform(1e-6, 80e-6) for m in nests}
    t_pim = {m.id: rng.uniform(0.5e-6, 80e-6) for m in nests}
    return PimInstance(tuple(nests), t_cpu, spec, t_pim=t_pim)


# --- basic-block granularity -------------------------------------------------------------


def _layout(loop: Loop, path: tuple[int, ...] = ()) -> list[tuple]:
    """Block keys in the layout convert-scf-to-cf emits: a loop's header, then its
    segments, each inner loop's blocks after the segment that enters it."""
    keys: list[tuple] = [("H", path)]
    for j in range(len(loop.segments)):
        keys.append(("S", path, j))
        if j < len(loop.inner):
            keys += _layout(loop.inner[j], (*path, j))
    return keys


def _run(loop: Loop, path: tuple[int, ...] = ()) -> list[tuple[tuple, int]]:
    """The blocks one invocation executes, in order, each with the number of loops open."""
    out: list[tuple[tuple, int]] = []
    for it in range(loop.trips + 1):
        out.append((("H", path), len(path) + 1))
        if it == loop.trips:
            break
        for j in range(len(loop.segments)):
            out.append((("S", path, j), len(path) + 1))
            if j < len(loop.inner):
                out += _run(loop.inner[j], (*path, j))
    return out


def _loop_at(loop: Loop, path: tuple[int, ...]) -> Loop:
    for j in path:
        loop = loop.inner[j]
    return loop


def _block_ops(root: Loop, key: tuple) -> int:
    """Ops per execution as convert-scf-to-cf emits them: compare and branch in a header;
    a segment's own ops plus a branch into the next inner loop, or increment and branch."""
    if key[0] == "H":
        return 2
    loop = _loop_at(root, key[1])
    return loop.segments[key[2]].ops + (1 if key[2] < len(loop.inner) else 2)


class BlockOracle:
    """One instance's runs, computed once; :meth:`cost` prices any block placement."""

    def __init__(self, instance: PimInstance) -> None:
        self.instance = instance
        self.units: list[list[str]] = []  # block ids deciding together
        self.nests = []
        for n in instance.nests:
            root = instance.blocks[n.id]
            keys = _layout(root)
            ids = {k: f"{n.id}.bb{i}" for i, k in enumerate(keys)}
            trace = _run(root)
            runs = {k: 0 for k in keys}
            for k, _depth in trace:
                runs[k] += 1

            memory = [k for k in keys if k[0] == "S" and _loop_at(root, k[1]).segments[k[2]].memory]
            if not memory:  # no access: the first of the deepest segments
                segs = [k for k in keys if k[0] == "S"]
                memory = [max(segs, key=lambda k: (len(k[1]), -keys.index(k)))]
            dyn = {k: _block_ops(root, k) * runs[k] for k in keys}
            total = sum(dyn.values())
            self.units.append([ids[k] for k in memory])
            self.units += [[ids[k]] for k in keys if k not in memory]
            self.nests.append((n, [ids[k] for k in keys], {ids[k]: dyn[k] / total for k in keys},
                               ids[memory[0]], [(ids[k], d) for k, d in trace]))

    def cost(self, y: dict[str, bool], copy: str) -> float:
        inst, spec = self.instance, self.instance.spec
        total = 0.0
        moved_in = moved_out = 0.0
        switches = 0
        for n, ids, share, _body, trace in self.nests:
            for b in ids:
                total += share[b] * (inst.pim_times[n.id] if y[b] else inst.t_cpu[n.id])
            for (a, _), (b, depth) in itertools.pairwise(trace):
                if y[a] != y[b]:
                    switches += n.trip_count
                    if y[b]:
                        moved_in += n.trip_count * 8 * depth
                    else:
                        moved_out += n.trip_count * 8 * depth
        path = [False, *(y[ids[0]] for _n, ids, _s, _b, _t in self.nests), False]
        switches += sum(a != b for a, b in itertools.pairwise(path))
        total += switches * spec.t_sw
        total += moved_in / spec.read_bandwidth + moved_out / spec.writeback_bandwidth
        body = [y[b] for _n, _ids, _s, b, _t in self.nests]
        if copy == "upper_bound":
            for n, p in zip(inst.nests, body, strict=True):
                if p:
                    total += n.fetch_bytes / spec.read_bandwidth
                    total += n.flush_bytes / spec.writeback_bandwidth
            return total
        fetch, flush = _lazy_copy_bytes(inst.nests, body)
        return total + fetch / spec.read_bandwidth + flush / spec.writeback_bandwidth

    def brute_force(self, copy: str) -> tuple[float, dict[str, bool]]:
        """Minimum Eq. 9 over every block placement (a nest's body blocks decide together)."""
        best: tuple[float, dict[str, bool]] = (math.inf, {})
        for choice in itertools.product((False, True), repeat=len(self.units)):
            y = {b: c for unit, c in zip(self.units, choice, strict=True) for b in unit}
            cost = self.cost(y, copy)
            if cost < best[0]:
                best = (cost, y)
        return best


def random_loop(rng: random.Random, depth: int = 1) -> Loop:
    """A small random loop tree: up to three levels, at most two inner loops per loop."""
    n_inner = 0 if depth >= 3 else rng.choice([0, 1, 1, 1, 2] if depth == 1 else [0, 0, 1])
    inner = tuple(random_loop(rng, depth + 1) for _ in range(n_inner))
    segments = []
    for _ in range(n_inner + 1):
        innermost = n_inner == 0
        memory = rng.random() < (0.9 if innermost else 0.15)
        segments.append(Segment(rng.choice([0, 1, 3, 8]) if memory or innermost else 0, memory))
    return Loop(rng.choice([0, 1, 2, 3]) if depth > 1 else rng.choice([1, 2, 3]),
                tuple(segments), inner)


def random_block_instance(
    seed: int, n: int, t_sw: float | None = None, max_units: int = 12
) -> PimInstance:
    """:func:`random_instance` with random loops per nest (at most ``max_units`` decisions)."""
    rng = random.Random(10_000 + seed)
    spec = PimSpec()
    spec = dataclasses.replace(spec, t_sw=t_sw if t_sw is not None else rng.choice(
        [1e-9, 1e-7, 5e-7, 2e-6]))
    base = random_instance(seed, n, spec)
    while True:
        loops = {m.id: random_loop(rng) for m in base.nests}
        inst = dataclasses.replace(base, blocks=loops)
        if len(BlockOracle(inst).units) <= max_units:
            return inst


def sim(ir=0.0, d1r=0.0, d1w=0.0, llr=0.0, llw=0.0, line=64):
    """Simulated counters with every name of SIMULATED_EVENTS."""
    values = {
        "sim.instructions": ir, "sim.data_reads": ir / 2, "sim.data_writes": ir / 4,
        "sim.l1d_read_misses": max(d1r, llr), "sim.l1d_write_misses": max(d1w, llw),
        "sim.ll_read_misses": llr, "sim.ll_write_misses": llw,
        "sim.offcore_read_bytes": llr * line, "sim.offcore_write_bytes": llw * line,
    }  # fmt: skip
    assert set(values) == set(SIMULATED_EVENTS)
    return values


def big(i=0, nbytes=64 << 20, **kw):
    """A streaming nest: reads one buffer of ``nbytes``, writes another."""
    ops = (operand(f"a{i}", nbytes, read=True, written=False, kind="argument"),
           operand(f"b{i}", nbytes, read=False, written=True, kind="argument"))  # fmt: skip
    return nest(i, ops, n_iter=nbytes // 4, **kw)
