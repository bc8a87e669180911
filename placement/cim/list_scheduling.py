"""A fast list-scheduling heuristic for the CIM makespan problem (no solver).

``heuristic_schedule(instance)`` returns a feasible :class:`CimSchedule`:

1. Assignment: several greedy starts under the crossbar budget (everything on
   the host; knapsack by host-time saved per crossbar; by host-time saved).
2. Host sequence: list scheduling of the host operators for a fixed
   assignment. CIM operators start as soon as their inputs arrive (they never
   wait for each other); the host takes, whenever it is free, a ready operator
   chosen by a priority rule. Several rules are tried and the best kept.
3. Local search on the assignment: flip one operator host <-> CIM within the
   budget, or swap one CIM operator with one host operator, re-evaluating with
   step 2; first improvement, until no move helps or the evaluation budget is
   spent (a count, not a clock: the result is deterministic).

The final schedule is the earliest-start schedule (``asap_schedule``) of the
best assignment and its host sequence, so it obeys the paper's timing model
exactly. It is an upper bound for the ILP (a MIP start, a cutoff for
per-pair big-Ms), never a claim of optimality.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule, asap_schedule
from placement.models.cim_makespan.structure import reachability, structure

#: Local search may evaluate ``DEFAULT_WORK // n_operators`` assignments (at least
#: ``_MIN_EVALS``, at most ``_MAX_EVALS``): 640 on a 250-operator graph, a few seconds
#: in pure Python.
DEFAULT_WORK = 160_000


_MIN_EVALS = 200
_MAX_EVALS = 600  # small graphs converge long before; kicks would spend it all
_REL_IMPROVE = 1e-12  # a move must improve by more than this (relative) to be taken


@dataclass
class IndexedGraph:
    """The instance as index arrays, in one topological order (index = position)."""

    names: list[str]
    t_host: list[float]
    t_acc: list[float | None]
    crossbars: list[int]
    preds: list[list[tuple[int, float]]]  # (pred index, transfer latency)
    succs: list[list[tuple[int, float]]]
    descendants: list[int]  # bitsets: bit v of descendants[u] = v reachable from u (v != u)
    # Descendants of u, as the structure of the bounds states them: those before the next
    # bottleneck (indices), and that bottleneck (everything from it on descends from u).
    local_desc: list[list[int]]
    next_bottleneck: list[int | None]


def indexed_graph(instance: CimInstance) -> IndexedGraph:
    g = instance.graph
    pos = {op.name: i for i, op in enumerate(instance.operators)}
    # Lexicographic by instance order: deterministic whatever networkx's internals do.
    topo = list(nx.lexicographical_topological_sort(g, key=lambda v: f"{pos[v]:09d}"))
    idx = {v: i for i, v in enumerate(topo)}
    n = len(topo)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for e in instance.edges:
        u, v = idx[e.src], idx[e.dst]
        preds[v].append((u, e.t_transfer))
        succs[u].append((v, e.t_transfer))
    _, desc_of = reachability(g, topo, idx)
    st = structure(instance, 1.0)  # the same topological order: ties by instance position
    assert st["order"] == topo
    local_desc = [[idx[w] for w in st["after"][v][1]] for v in topo]
    next_bottleneck = [None if (q := st["after"][v][0]) is None else idx[q] for v in topo]
    ops = [instance.by_name[v] for v in topo]
    return IndexedGraph(
        names=topo,
        t_host=[op.t_host for op in ops],
        t_acc=[op.t_acc for op in ops],
        crossbars=[op.crossbars if op.supported else 0 for op in ops],
        preds=preds,
        succs=succs,
        descendants=[desc_of[v] for v in topo],
        local_desc=local_desc,
        next_bottleneck=next_bottleneck,
    )


class ListScheduler:
    """List scheduling of one assignment; the best makespan over a few priority rules."""

    def __init__(
        self, g: IndexedGraph, deadline: float | None = None, target: float = -1.0
    ) -> None:
        self.g = g
        self.deadline = deadline  # time.perf_counter() value: stop searching after it
        self.target = target  # stop searching once a makespan this low is found
        self.best = math.inf
        self.timed_out = False
        self.n = len(g.names)
        self.t_host_arr = np.array(g.t_host)
        self.n_preds = [len(p) for p in g.preds]
        self.sources = [i for i in range(self.n) if not g.preds[i]]
        self.evals = 0  # assignments evaluated

    def done(self, stop_at: int) -> bool:
        """The search must stop: ``stop_at`` evaluations made, the target reached, or the
        deadline passed."""
        return self.evals >= stop_at or self.best <= self.target or self.past_deadline()

    def past_deadline(self) -> bool:
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            self.timed_out = True
        return self.timed_out

    def durations(self, host: Sequence[bool]) -> list[float]:
        g = self.g
        return [g.t_host[i] if host[i] else g.t_acc[i] for i in range(self.n)]  # type: ignore[misc]

    def priorities(self, host: Sequence[bool], dur: list[float]) -> list[list[float]]:
        """Priority rules (higher = sooner): critical tail; tail vs. host work still to come."""
        g = self.g
        tail = [0.0] * self.n
        for u in range(self.n - 1, -1, -1):
            best = 0.0
            for w, tr in g.succs[u]:
                t = tail[w] + (tr if host[u] != host[w] else 0.0)
                if t > best:
                    best = t
            tail[u] = dur[u] + best
        # Host work of each operator's descendants: a host operator feeding much later host
        # work should not be postponed (the host is the bottleneck resource).
        # Everything after u's next bottleneck descends from u: a suffix sum, plus the
        # descendants before it (segment-sized lists, not an n x n matrix).
        host_work = (self.t_host_arr * np.asarray(host, dtype=float)).tolist()
        suffix = [0.0] * (self.n + 1)
        for i in range(self.n - 1, -1, -1):
            suffix[i] = suffix[i + 1] + host_work[i]
        below = [
            math.fsum(host_work[j] for j in g.local_desc[i])
            + (0.0 if (q := g.next_bottleneck[i]) is None else suffix[q])
            for i in range(self.n)
        ]
        energetic = [max(tail[i], dur[i] + below[i]) for i in range(self.n)]
        return [tail, energetic]

    def schedule(
        self,
        host: Sequence[bool],
        dur: list[float],
        prio: list[float],
        delay: bool,
        forced: Sequence[int] | None = None,
    ) -> tuple[float, list[int]]:
        """Makespan and host sequence by list scheduling with one priority rule.

        ``delay=False``: non-delay dispatch (the host never idles while an operator is
        ready). ``delay=True``: Giffler-Thompson style, among ready operators that could
        start before the earliest possible completion, the highest priority goes first.
        ``forced``: a host sequence (a linear extension of precedence) to follow instead.
        """
        succs = self.g.succs
        left = list(self.n_preds)
        ready_at = [0.0] * self.n  # earliest start from the predecessors known so far
        finish = [0.0] * self.n
        pending: list[int] = []  # host operators whose inputs are all known (few at a time)
        stack = list(self.sources)
        order: list[int] = []
        host_free = 0.0
        while True:
            # Resolve everything resolvable: CIM operators start as soon as inputs arrive.
            while stack:
                i = stack.pop()
                if host[i]:
                    pending.append(i)
                    continue
                f = finish[i] = ready_at[i] + dur[i]
                hi = host[i]
                for w, tr in succs[i]:
                    t = f + tr if hi != host[w] else f
                    if t > ready_at[w]:
                        ready_at[w] = t
                    left[w] -= 1
                    if left[w] == 0:
                        stack.append(w)
            if not pending:
                break
            if forced is not None:
                best = forced[len(order)]
                if best not in pending:  # pragma: no cover - a valid sequence never stalls
                    raise ValueError("host sequence contradicts precedence")
            else:
                earliest = max(host_free, min(ready_at[i] for i in pending))
                horizon = earliest
                if delay:  # anything that could start before the earliest completion competes
                    horizon = min(max(host_free, ready_at[i]) + dur[i] for i in pending)
                best = -1
                for i in pending:
                    r = ready_at[i]
                    if r > earliest and r >= horizon:
                        continue
                    if best < 0 or prio[i] > prio[best] or (
                        prio[i] == prio[best] and (r, i) < (ready_at[best], best)
                    ):
                        best = i
            # Run the chosen operator next on the host and release its successors.
            pending.remove(best)
            start = max(host_free, ready_at[best])
            f = finish[best] = host_free = start + dur[best]
            order.append(best)
            for w, tr in succs[best]:
                t = f if host[w] else f + tr
                if t > ready_at[w]:
                    ready_at[w] = t
                left[w] -= 1
                if left[w] == 0:
                    stack.append(w)
        return max(finish), order

    def evaluate(self, host: Sequence[bool]) -> tuple[float, list[int]]:
        self.evals += 1
        dur = self.durations(host)
        best: tuple[float, list[int]] | None = None
        for prio in self.priorities(host, dur):
            for delay in (False, True):
                res = self.schedule(host, dur, prio, delay)
                if best is None or res[0] < best[0]:
                    best = res
        assert best is not None
        self.best = min(self.best, best[0])
        return best


def _greedy_starts(g: IndexedGraph, budget: int) -> list[list[bool]]:
    """Starting assignments: all host, then two knapsack greedies over profitable operators."""
    n = len(g.names)
    starts = [[True] * n]
    gain = {
        i: g.t_host[i] - g.t_acc[i]  # type: ignore[operator]
        for i in range(n)
        if g.t_acc[i] is not None and g.t_acc[i] < g.t_host[i]  # type: ignore[operator]
    }
    keys = (
        lambda i: (-gain[i] / max(g.crossbars[i], 1e-9), i),  # saved time per crossbar
        lambda i: (-gain[i], i),  # saved time
    )
    for key in keys:
        host = [True] * n
        used = 0
        for i in sorted(gain, key=key):
            if used + g.crossbars[i] <= budget:
                host[i] = False
                used += g.crossbars[i]
        if host not in starts:
            starts.append(host)
    return starts


def heuristic_schedule(
    instance: CimInstance,
    *,
    max_evals: int | None = None,
    seconds: float | None = None,
    target: float | None = None,
) -> CimSchedule:
    """A good feasible schedule by greedy assignment, list scheduling and local search.

    Deterministic for a given instance and ``max_evals`` (how many assignments the
    search may evaluate in all, each by four list schedules; default scaled to the
    graph size, see ``DEFAULT_WORK``). ``seconds`` caps the search's wall time as well
    (the part of a deadline the caller gives it); the result is then the best found so
    far, and no longer deterministic under machine load. ``target``: the search stops
    once it found a makespan this low (a lower bound the caller knows: no better exists).
    """
    g = indexed_graph(instance)
    n = len(g.names)
    if max_evals is None:
        max_evals = min(_MAX_EVALS, max(_MIN_EVALS, DEFAULT_WORK // n))
    ev = ListScheduler(g, None if seconds is None else time.perf_counter() + seconds,
                    -1.0 if target is None else target)  # fmt: skip
    budget = instance.crossbar_budget
    # Half the budget for descents from the greedy starts, the rest for kicks.
    starts = _greedy_starts(g, budget)
    best: tuple[float, list[int], list[bool]] | None = None
    for k, host in enumerate(starts):
        share = (max_evals // 2 - ev.evals) // (len(starts) - k)
        res = _local_search(g, ev, budget, list(host), ev.evals + max(share, 1))
        if best is None or res[0] < best[0]:
            best = res
    assert best is not None
    best = _kicks(g, ev, budget, best, max_evals)
    makespan, order, host = best
    if not ev.timed_out and makespan > ev.target:
        # One pass over the sequence, but never more list schedules than the search itself
        # made (4 per evaluation): each costs O(n), so a pass of n tries is quadratic.
        limit = min(max(n, _MIN_EVALS), 4 * max_evals)
        order = _improve_sequence(g, ev, host, order, makespan, limit)
    on_host = {g.names[i]: host[i] for i in range(n)}
    return asap_schedule(instance, on_host, [g.names[i] for i in order])


def _kicks(
    g: IndexedGraph,
    ev: ListScheduler,
    budget: int,
    best: tuple[float, list[int], list[bool]],
    stop_at: int,
) -> tuple[float, list[int], list[bool]]:
    """Iterated local search: flip one operator (repairing the budget), descend again.

    Escapes local optima that need three or more flips (knapsack-like trade-offs).
    Operators are kicked in a fixed order, so the outcome is deterministic.
    """
    n = len(g.names)
    movable = [i for i in range(n) if g.t_acc[i] is not None and g.crossbars[i] <= budget]
    for k in movable:
        if ev.done(stop_at):
            break
        host = list(best[2])
        host[k] = not host[k]
        used = sum(g.crossbars[i] for i in range(n) if not host[i])
        # Over budget: send the other CIM operators with the least saved time per crossbar
        # back to the host until it fits.
        back = sorted(
            (i for i in range(n) if not host[i] and i != k),
            key=lambda i: ((g.t_host[i] - g.t_acc[i]) / max(g.crossbars[i], 1e-9), i),  # type: ignore[operator]
        )
        for i in back:
            if used <= budget:
                break
            host[i] = True
            used -= g.crossbars[i]
        if used > budget:
            continue
        res = _local_search(g, ev, budget, host, stop_at)
        if res[0] < best[0] * (1 - _REL_IMPROVE) - 1e-15:
            best = res
    return best


def _improve_sequence(
    g: IndexedGraph,
    ev: ListScheduler,
    host: list[bool],
    order: list[int],
    makespan: float,
    limit: int,
) -> list[int]:
    """Adjacent swaps in the host sequence (where precedence allows), first improvement."""
    dur = ev.durations(host)
    tries = 0
    improved = True
    while improved and tries < limit:
        improved = False
        for p in range(len(order) - 1):
            if tries >= limit or ev.past_deadline():
                break
            a, b = order[p], order[p + 1]
            if g.descendants[a] >> b & 1:
                continue  # a must precede b
            cand = order[:p] + [b, a] + order[p + 2 :]
            tries += 1
            val, _ = ev.schedule(host, dur, [], False, forced=cand)
            if val < makespan * (1 - _REL_IMPROVE) - 1e-15:
                order, makespan, improved = cand, val, True
    return order


def _local_search(
    g: IndexedGraph, ev: ListScheduler, budget: int, host: list[bool], stop_at: int
) -> tuple[float, list[int], list[bool]]:
    """First-improvement descent: single flips, then pairs of flips (swaps, add or drop two).

    Returns (makespan, host sequence, assignment) of the local optimum reached, or of
    the best assignment seen when the evaluation budget ``stop_at`` runs out.
    """
    n = len(g.names)
    movable = [i for i in range(n) if g.t_acc[i] is not None and g.crossbars[i] <= budget]
    used = sum(g.crossbars[i] for i in range(n) if not host[i])
    makespan, order = ev.evaluate(host)

    def delta(i: int) -> int:
        return g.crossbars[i] if host[i] else -g.crossbars[i]

    def try_move(moves: tuple[int, ...]) -> bool:
        nonlocal used, makespan, order
        change = sum(delta(i) for i in moves)
        if used + change > budget:
            return False
        for i in moves:
            host[i] = not host[i]
        val, seq = ev.evaluate(host)
        if val < makespan * (1 - _REL_IMPROVE) - 1e-15:
            makespan, order, used = val, seq, used + change
            return True
        for i in moves:
            host[i] = not host[i]
        return False

    improved = True
    while improved and not ev.done(stop_at):
        improved = False
        for i in movable:
            if ev.done(stop_at):
                break
            improved = try_move((i,)) or improved
        if improved:
            continue  # single flips are cheap: exhaust them before pairs
        for a, i in enumerate(movable):
            for j in movable[a + 1 :]:
                if ev.done(stop_at):
                    break
                # Two flips the same way that each fit alone are tried, too: the pair can
                # help where neither does (e.g. both branches of a fork offloaded).
                if try_move((i, j)):
                    improved = True
                    break
            if improved or ev.done(stop_at):
                break
    return makespan, order, list(host)
