"""Test oracles for the PIM placement: brute force, a segment DP, and random instances.

The cost function here shares no code with the model or the verifier. Its
exact copy accounting is a third formulation: a lazy simulation that tracks,
per buffer, whether the current PIM segment holds it and whether a value
written on PIM is still pending a flush; a pending flush is charged when the
value is first needed off its segment (a host read, a read in a later
segment, or the program's end for non-temporaries) and dropped when the value
is overwritten unread. The partitioned accounting is the same simulation over the link
with the resident weights skipped, and under a binding bank capacity the brute force
tries every set of resident weights. The shared accounting is a third formulation too:
per buffer, the program is cut into the *lifetimes* of its values (from a write, or the
program's start, up to and including the next write); a lifetime pays once, at its first
access from the side that did not write the value (on the host: its first read).

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


def hybrid_cost(
    instance: PimInstance, y: list[bool], copy: str, resident: frozenset[str] | None = None
) -> float:
    """Eq. 9 of placement ``y`` (program order, True = PIM); ``resident``: partitioned
    only, the weights in the banks (default: every weight and constant)."""
    nests = instance.nests
    spec = instance.spec
    total = 0.0
    for n, p in zip(nests, y, strict=True):
        total += instance.pim_times[n.id] if p else instance.t_cpu[n.id]
    path = [False, *y, False]
    total += spec.t_sw * sum(a != b for a, b in itertools.pairwise(path))
    return total + copy_seconds(instance, y, copy, resident)


def bandwidths(spec: PimSpec, copy: str) -> tuple[float, float]:
    """(to PIM, to the host): the link on a partitioned device, else B_rd and B_wb."""
    if copy == "partitioned":
        return spec.link_to_pim_bandwidth, spec.link_to_host_bandwidth
    return spec.read_bandwidth, spec.writeback_bandwidth


def copy_seconds(
    instance: PimInstance, y: list[bool], copy: str, resident: frozenset[str] | None = None
) -> float:
    """T_copy of placement ``y`` under accounting ``copy``."""
    nests = instance.nests
    to_pim, to_host = bandwidths(instance.spec, copy)
    if copy == "upper_bound":
        return sum(n.fetch_bytes / to_pim + n.flush_bytes / to_host
                   for n, p in zip(nests, y, strict=True) if p)  # fmt: skip
    if copy == "shared":
        back, again = _shared_bytes(instance, y)
        return back / to_pim + again / to_host
    skip = frozenset()
    if copy == "partitioned":
        skip = weight_buffers(instance) if resident is None else resident
    fetch, flush = _lazy_copy_bytes(nests, y, skip)
    return fetch / to_pim + flush / to_host


def weight_buffers(instance: PimInstance) -> frozenset[str]:
    """Buffers whose operands say weight or constant (the random instances never write them)."""
    return frozenset(op.buffer for n in instance.nests for op in n.operands
                     if op.buffer_role in ("weight", "constant"))  # fmt: skip


def _shared_bytes(instance: PimInstance, y: list[bool]) -> tuple[float, float]:
    """(bytes written back before PIM, bytes the host re-reads) by value lifetimes."""
    nests = instance.nests
    cap = instance.spec.host_cache
    # buffer -> (pos, bytes, reads, writes) of every nest touching it
    touches: dict[str, list[tuple[int, int, bool, bool]]] = {}
    info: dict[str, tuple[str, str]] = {}  # buffer -> (kind, role)
    for pos, n in enumerate(nests):
        mine: dict[str, list] = {}
        for op in n.operands:
            e = mine.setdefault(op.buffer, [0, False, False])
            e[0] = max(e[0], op.nbytes)
            e[1] |= op.read
            e[2] |= op.written
            info[op.buffer] = (op.kind, op.buffer_role)
        for b, (nbytes, r, w) in mine.items():
            touches.setdefault(b, []).append((pos, nbytes, r, w))
    back = again = 0.0
    for b, seq in touches.items():
        looped = any(w and nests[pos].trip_count > 1 for pos, _, _, w in seq)
        kind, role = info[b]
        # lifetimes: (writer side or None for clean, the touches that see the value)
        writes = [k for k, (_, _, _, w) in enumerate(seq) if w]
        starts = [None, *writes]
        for s_idx, start in enumerate(starts):
            stop = writes[s_idx] if s_idx < len(writes) else None  # the next write, included
            window = seq[(0 if start is None else start + 1): (None if stop is None else stop + 1)]
            if start is None:
                side = False if (role == "input" and instance.cache == "warm") else None
            else:
                side = y[seq[start][0]]
            if side is None:
                continue
            # the other side's touches: PIM touching a host value, the host reading a PIM one
            other = [(pos, nbytes) for pos, nbytes, r, _ in window
                     if y[pos] != side and (y[pos] or r)]  # fmt: skip
            if other:
                pos, nbytes = other[0]
                made = 1 if start is None else nests[seq[start][0]].trip_count
                moved = min(nbytes, cap) * (min(nests[pos].trip_count, made) if looped else 1)
                if side:
                    again += moved
                else:
                    back += moved
            elif stop is None and side and kind != "alloc":
                again += min(seq[start][1], cap)  # the caller reads what PIM wrote last
    return back, again


def _lazy_copy_bytes(
    nests: tuple[LoopNest, ...], y: list[bool], skip: frozenset[str] = frozenset()
) -> tuple[float, float]:
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
            in_segment = set(skip)
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
    """Minimum Eq. 9 over every placement (groups share one decision) and, for a
    partitioned device whose banks cannot hold every weight, every set of resident
    weights that fits."""
    groups = groups_of(instance, granularity)
    residents: list[frozenset[str] | None] = [None]
    if copy == "partitioned":
        residents = resident_sets(instance)
    best = (math.inf, [])
    for choice in itertools.product((False, True), repeat=len(groups)):
        y = [False] * len(instance.nests)
        for g, c in zip(groups, choice, strict=True):
            for i in g:
                y[i] = c
        for resident in residents:
            cost = hybrid_cost(instance, y, copy, resident)
            if cost < best[0]:
                best = (cost, y)
    return best


def resident_sets(instance: PimInstance) -> list[frozenset[str] | None]:
    """Every set of weights the banks hold (all of them when they fit or no capacity is
    given: one set)."""
    sizes: dict[str, int] = {}
    for n in instance.nests:
        for op in n.operands:
            if op.buffer_role in ("weight", "constant"):
                sizes[op.buffer] = max(sizes.get(op.buffer, 0), op.nbytes)
    per_core = instance.spec.bank_capacity_per_core
    if per_core is None or sum(sizes.values()) <= per_core * instance.n_cores:
        return [frozenset(sizes)]
    out: list[frozenset[str] | None] = []
    for k in range(len(sizes) + 1):
        for subset in itertools.combinations(sorted(sizes), k):
            if sum(sizes[b] for b in subset) <= per_core * instance.n_cores:
                out.append(frozenset(subset))
    return out


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
    buffer: str, nbytes: int, *, read: bool, written: bool, kind: str = "alloc", role: str = ""
) -> NestOperand:
    return NestOperand(buffer, kind, (max(nbytes // 4, 1),), "f32", nbytes, read, written, role)


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


#: A partitioned machine for the oracle tests: the link and 64 KiB banks (their capacity binds
#: on some random instances at 4 cores and below).
PARTITIONED_SPEC = PimSpec(
    memory="partitioned", host_cache=None, link_to_pim_bandwidth=6e9,
    link_to_host_bandwidth=4e9, bank_capacity_per_core=65536.0,
)  # fmt: skip
#: A shared machine whose caches hold less than the larger buffers (the bound binds).
SMALL_CACHE_SPEC = PimSpec(host_cache=200_000.0)


def random_instance(
    seed: int, n: int, spec: PimSpec | None = None, cache: str | None = None
) -> PimInstance:
    """A random program of ``n`` nests over a small buffer pool, with clashing costs: a
    model input (sometimes written in place), an output, two weights and a constant that
    are only read, and temporaries; the cache state random unless given."""
    rng = random.Random(seed)
    spec = spec or PimSpec()
    roles = {"arg0": "input", "arg1": "output", "arg2": "weight", "arg3": "weight",
             "global:w": "constant"}  # fmt: skip
    pool = [(f"arg{k}", "argument") for k in range(4)] + [("global:w", "global")]
    pool += [(f"alloc{k}", "alloc") for k in range(4)]
    size = {b: rng.choice([4096, 65536, 262144, 524288]) for b, _ in pool}
    writable = [p for p in pool if roles.get(p[0], "temporary") in ("input", "output", "temporary")]
    nests = []
    node_id = 0
    left_in_node = 0
    for i in range(n):
        if left_in_node == 0:
            node_id += 1
            left_in_node = rng.choice([1, 2, 3])
        left_in_node -= 1
        def role(b: str) -> str:
            return roles.get(b, "temporary")

        reads = rng.sample(pool, rng.choice([1, 2]))
        ops = [operand(b, size[b], read=True, written=False, kind=k, role=role(b))
               for b, k in reads]  # fmt: skip
        out_b, out_k = rng.choice(writable)
        in_place = out_b in {b for b, _ in reads}
        if in_place:
            ops = [operand(b, size[b], read=True, written=(b == out_b), kind=k, role=role(b))
                   for b, k in reads]  # fmt: skip
        else:
            ops.append(operand(out_b, size[out_b], read=False, written=True, kind=out_k,
                               role=role(out_b)))  # fmt: skip
        trip = rng.choice([1, 1, 1, 3])
        nests.append(nest(i, tuple(ops), trip_count=trip,
                          node="" if rng.random() < 0.15 else f"op{node_id}"))
    t_cpu = {m.id: rng.uniform(1e-6, 80e-6) for m in nests}
    t_pim = {m.id: rng.uniform(0.5e-6, 80e-6) for m in nests}
    cache = cache or rng.choice(["warm", "cold"])
    return PimInstance(tuple(nests), t_cpu, spec, t_pim=t_pim, cache=cache)


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

    def cost(self, y: dict[str, bool], copy: str, resident: frozenset[str] | None = None) -> float:
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
        to_pim, to_host = bandwidths(spec, copy)
        total += moved_in / to_pim + moved_out / to_host
        body = [y[b] for _n, _ids, _s, b, _t in self.nests]
        return total + copy_seconds(inst, body, copy, resident)

    def brute_force(self, copy: str) -> tuple[float, dict[str, bool]]:
        """Minimum Eq. 9 over every block placement (a nest's body blocks decide together)
        and, partitioned, every set of resident weights the banks hold."""
        residents = resident_sets(self.instance) if copy == "partitioned" else [None]
        best: tuple[float, dict[str, bool]] = (math.inf, {})
        for choice in itertools.product((False, True), repeat=len(self.units)):
            y = {b: c for unit, c in zip(self.units, choice, strict=True) for b in unit}
            for resident in residents:
                cost = self.cost(y, copy, resident)
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
