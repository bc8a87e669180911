"""Test oracles for the PIM placement: brute force, a segment DP, and random instances.

The cost function here shares no code with the model or the verifier. Its
exact copy accounting is a third formulation: a lazy simulation that tracks,
per buffer, whether the current PIM segment holds it and whether a value
written on PIM is still pending a flush; a pending flush is charged when the
value is first needed off its segment (a host read, a read in a later
segment, or the program's end for non-temporaries) and dropped when the value
is overwritten unread.
"""

from __future__ import annotations

import itertools
import math
import random

from placement.hardware.pim import PimSpec
from placement.nests import LoopNest, NestOperand
from placement.pim.instance import PimInstance


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
