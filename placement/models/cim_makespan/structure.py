"""Precedence structure of a CIM instance that the valid inequalities and CP-SAT use.

Reachability is computed with bitsets (one Python int per operator, bit ``i`` = the
``i``-th operator in a topological order), so ancestors and descendants of all operators
cost O(n * edges / 64) word operations, not n^2 Python steps.

A *bottleneck* is an operator comparable with every other one (every source-to-sink
path passes through it); the ops before it in topological order are exactly its
ancestors. Consecutive bottlenecks cut the graph into *segments*. The quadratic bounds
(an operator's ancestors' host work before it starts, its descendants' after it ends)
are stated segment by segment, from the previous bottleneck's finish to the next
bottleneck's start: chained by the bottleneck rows, they bound as much as the whole
sets would, and their size is the sum of the segments' squares, not n^2.

Also: constant lower bounds on each operator's start (``head``) and on the time after
its finish (``tail``), in model units, and the windows of the host-idle rows
(:func:`host_idle_windows`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import networkx as nx

from placement.models.cim_makespan.problem import CimProblem


def bits_of(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def reachability(
    graph: nx.DiGraph, order: list[str], bit: dict[str, int] | None = None
) -> tuple[dict[str, int], dict[str, int]]:
    """Per operator, the bitsets of its ancestors and of its descendants; operator ``v`` is
    bit ``bit[v]`` (default: its position in ``order``, which must be topological)."""
    bit = bit if bit is not None else {v: i for i, v in enumerate(order)}
    anc: dict[str, int] = {}
    for v in order:
        mask = 0
        for u in graph.predecessors(v):
            mask |= anc[u] | (1 << bit[u])
        anc[v] = mask
    desc: dict[str, int] = {}
    for v in reversed(order):
        mask = 0
        for w in graph.successors(v):
            mask |= desc[w] | (1 << bit[w])
        desc[v] = mask
    return anc, desc


def structure(instance: CimProblem, unit: float) -> dict[str, Any]:
    """Bottlenecks, segment-local ancestor/descendant sets and head/tail bounds.

    Keys: ``pos`` (operator -> instance position), ``order`` (a topological order),
    ``bottleneck_pairs`` (consecutive bottlenecks), ``between`` (per such pair, the
    operators strictly between them), ``before`` (per operator: the previous bottleneck
    or None, and its ancestors after that bottleneck), ``after`` (the next bottleneck or
    None, and its descendants before it), ``head`` and ``tail`` (model units).
    """
    g = instance.graph
    pos = {op.name: i for i, op in enumerate(instance.operators)}
    order = list(nx.lexicographical_topological_sort(g, key=lambda v: f"{pos[v]:09d}"))
    n = len(order)
    anc_of, desc_of = reachability(g, order)
    anc = [anc_of[v] for v in order]
    desc = [desc_of[v] for v in order]

    def names(mask: int) -> list[str]:
        return [order[i] for i in bits_of(mask)]

    bottlenecks = [i for i in range(n) if (anc[i] | desc[i]).bit_count() == n - 1]
    is_bottleneck = set(bottlenecks)
    prev_b: list[int | None] = [None] * n  # the last bottleneck before i (not i itself)
    next_b: list[int | None] = [None] * n
    last: int | None = None
    for i in range(n):
        prev_b[i] = last
        if i in is_bottleneck:
            last = i
    last = None
    for i in range(n - 1, -1, -1):
        next_b[i] = last
        if i in is_bottleneck:
            last = i
    before: dict[str, tuple[str | None, list[str]]] = {}
    after: dict[str, tuple[str | None, list[str]]] = {}
    for i, v in enumerate(order):
        p, q = prev_b[i], next_b[i]
        before[v] = (None, names(anc[i])) if p is None else (order[p], names(anc[i] & desc[p]))
        after[v] = (None, names(desc[i])) if q is None else (order[q], names(desc[i] & anc[q]))
    pairs = list(zip(bottlenecks, bottlenecks[1:], strict=False))
    between = {(order[u], order[w]): names(desc[u] & anc[w]) for u, w in pairs}

    ops = instance.by_name
    # Latency on the faster device: a lower bound whatever the placement.
    fast = {v: min(ops[v].t_host, ops[v].t_acc if ops[v].t_acc is not None else math.inf)
            for v in order}  # fmt: skip
    forced = {v: 0.0 if ops[v].supported else ops[v].t_host for v in order}
    path_head: dict[str, float] = {}
    for v in order:
        path_head[v] = max((path_head[u] + fast[u] for u in g.predecessors(v)), default=0.0)
    path_tail: dict[str, float] = {}
    for v in reversed(order):
        path_tail[v] = max((path_tail[w] + fast[w] for w in g.successors(v)), default=0.0)
    # Host work that no placement avoids, before and after each operator: through the
    # bottlenecks (everything before a bottleneck is its ancestor) plus the segment's.
    prefix = [0.0]
    for v in order:
        prefix.append(prefix[-1] + forced[v])
    total = prefix[-1]
    head, tail = {}, {}
    for i, v in enumerate(order):
        p, q = prev_b[i], next_b[i]
        upto = 0.0 if p is None else prefix[p + 1]
        since = 0.0 if q is None else total - prefix[q]
        forced_before = upto + math.fsum(forced[a] for a in before[v][1])
        forced_after = since + math.fsum(forced[d] for d in after[v][1])
        head[v] = max(path_head[v], forced_before) / unit
        tail[v] = max(path_tail[v], forced_after) / unit
    return {
        "pos": pos,
        "order": order,
        "bottleneck_pairs": [(order[u], order[w]) for u, w in pairs],
        "between": between,
        "before": before,
        "after": after,
        "head": head,
        "tail": tail,
    }


#: The host-idle rows (:func:`host_idle_windows`) hold a term per operator: at most this
#: many windows' lengths on each side, fewer on large graphs so that the rows hold about
#: :data:`IDLE_ROW_TERMS` terms in all.
IDLE_LEVELS = 12
IDLE_ROW_TERMS = 200_000


def host_idle_windows(
    t_host: Mapping[str, float],
    t_fast: Mapping[str, float],
    forced: Mapping[str, bool],
    head: Mapping[str, float],
    tail: Mapping[str, float],
) -> list[tuple[float, float]]:
    """Pairs (a, b) of window lengths, a window of length a at the start of the schedule
    and one of length b at its end, for the host-idle rows.

    The host runs one operator at a time, so the makespan is its work plus its idle
    time; in [0, a) an operator v can keep it busy at most min(t_host, a - head[v]),
    and in the last b at most min(t_host, b - tail[v]). So

        T >= sum_v t_host[v] x_v + a + b - sum_v min(t_host[v], o_a[v] + o_b[v]) x_v

    (o_a, o_b: those overlaps, 0 when head[v] >= a, tail[v] >= b) whenever the two
    windows cannot overlap: a + b is at most a makespan no placement beats (the longest
    path at ``t_fast``, the faster latency; the host work of the ``forced`` operators,
    those only the host runs). The LP relaxation of the ordering otherwise sees no idle
    time at all, and a placement that offloads every operator able to start early
    leaves the host waiting (YOLOv5nu-P2's head block: benchmarks/README.md).

    The lengths are where the idle may stop growing: the distinct heads (tails) below
    that makespan, evenly sampled down to :data:`IDLE_LEVELS` per side."""
    names = list(t_host)
    if not names:
        return []
    least = max(sum(t_host[v] for v in names if forced[v]),
                max(head[v] + t_fast[v] + tail[v] for v in names))  # fmt: skip
    levels = min(IDLE_LEVELS, math.isqrt(IDLE_ROW_TERMS // len(names)))
    if levels < 1:
        return []

    def lengths(bound: Mapping[str, float]) -> list[float]:
        found = sorted({bound[v] for v in names if 0 < bound[v] <= least})
        if len(found) > levels:
            step = (len(found) - 1) / max(levels - 1, 1)
            found = [found[round(i * step)] for i in range(levels)]
        return found

    starts, ends = [0.0, *lengths(head)], [0.0, *lengths(tail)]
    return [(a, b) for a in starts for b in ends if (a or b) and a + b <= least]
