"""A local search for one objective stage under bounds (no solver): the incumbent a stage
of :mod:`placement.cim.objectives` starts its solvers from.

Why: a stage such as "minimum latency, energy at most eps" is proven quickly once the
solver holds a near-optimal placement (CP-SAT takes the hint's makespan as its horizon
and prunes with it), but a single CP-SAT worker finds none by itself within minutes on
YOLO-sized graphs (benchmarks/README.md, "Energy, Pareto fronts"). The placements known
before the stage (a front's neighbouring points, the other end) are a step away from a
good one: a few operators moved between the devices.

The search: from each of the best few seeds (known placements, feasible or not), a
descent on the assignment. A candidate is ranked first by how far it exceeds the bounds
(relative, summed), then by the minimized axis, every axis computed from its schedule: the
better of the list scheduler's (:mod:`placement.cim.list_scheduling`, the best of its
priority rules) and the seed's own host sequence kept (a solver's optimal sequence often
stays optimal a few operators on, where list scheduling misses it by ~1e-4). Moves are
single flips (best improvement) and, when none helps, pairs of flips (first improvement);
a candidate whose lower rank (its makespan at least the host's work and the longest path)
cannot beat the current one is not scheduled. The best assignments found are timed with
every seed's sequence at the end. The crossbar budget is never exceeded. The budget is a
count of evaluations, so the result is deterministic unless ``seconds`` cuts it short.

The result is a feasible schedule or None; the caller recomputes its values on the
instance (``placement.cim.objectives.axis_values``) before it uses it, so nothing here
is trusted beyond being a valid schedule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from placement.cim.instance import CimInstance
from placement.cim.list_scheduling import IndexedGraph, ListScheduler, indexed_graph
from placement.cim.schedule import CimSchedule, asap_schedule

#: Evaluations (each four list schedules) the search may make in all, and how many of the
#: best seeds it descends from.
DEFAULT_EVALS = 250
DEFAULT_SEEDS = 3
#: The best assignments found are timed with every seed's sequence too, this many.
_POLISHED = 5
#: A lower rank (a longest path) costs about this many times less than an evaluation
#: (four list schedules); the search stops after this many per evaluation of its budget.
_LOWER_RANKS_PER_EVAL = 8
_SLACK = 1e-6  # as placement.cim.objectives.BOUND_SLACK: a bound met within it is met
_REL_IMPROVE = 1e-12


@dataclass(frozen=True)
class _Data:
    """The axis data of the instance in the list scheduler's index order."""

    g: IndexedGraph
    e_host: list[float]
    e_acc: list[float]
    edges: list[tuple[int, int, float, float]]  # (u, v, t_transfer, e_transfer)
    p_static: float
    budget: int
    movable: list[int]


def _data(instance: CimInstance, g: IndexedGraph) -> _Data:
    pos = {v: i for i, v in enumerate(g.names)}
    ops = [instance.by_name[v] for v in g.names]
    return _Data(
        g=g,
        e_host=[op.e_host or 0.0 for op in ops],
        e_acc=[op.e_acc or 0.0 for op in ops],
        edges=[(pos[e.src], pos[e.dst], e.t_transfer, e.e_transfer or 0.0)
               for e in instance.edges],  # fmt: skip
        p_static=instance.p_static or 0.0,
        budget=instance.crossbar_budget,
        movable=[i for i, op in enumerate(ops)
                 if op.supported and op.crossbars <= instance.crossbar_budget],  # fmt: skip
    )


def _values(d: _Data, host: Sequence[bool], makespan: float,
            axes: Collection[str]) -> dict[str, float]:  # fmt: skip
    """The ``axes`` of an assignment whose schedule has ``makespan`` (SI units)."""
    g = d.g
    values = {"latency": makespan}
    if "crossbars" in axes:
        values["crossbars"] = float(sum(x for x, h in zip(g.crossbars, host, strict=True)
                                        if not h))  # fmt: skip
    cut = [e for e in d.edges if host[e[0]] != host[e[1]]]
    if "period" in axes:
        values["period"] = max(
            math.fsum(t for t, h in zip(g.t_host, host, strict=True) if h),
            math.fsum(e[2] for e in cut),
            max((t or 0.0 for t, h in zip(g.t_acc, host, strict=True) if not h), default=0.0),
        )
    if "energy" in axes:
        values["energy"] = math.fsum(
            [eh if h else ea for eh, ea, h in zip(d.e_host, d.e_acc, host, strict=True)]
            + [e[3] for e in cut] + [d.p_static * makespan]
        )  # fmt: skip
    return values


def _excess(values: Mapping[str, float], bounds: Mapping[str, float]) -> float:
    """How far ``values`` exceed ``bounds``, relative to each bound, summed (0: feasible)."""
    total = 0.0
    for a, b in bounds.items():
        over = values[a] - b * (1 + _SLACK) - 1e-15
        if over > 0:
            total += over / max(b, 1e-300)
    return total


def bounded_schedule(
    instance: CimInstance,
    minimize: str,
    bounds: Mapping[str, float],
    seeds: Sequence[CimSchedule],
    *,
    max_evals: int = DEFAULT_EVALS,
    n_seeds: int = DEFAULT_SEEDS,
    seconds: float | None = None,
) -> CimSchedule | None:
    """The best feasible schedule the search finds for minimizing axis ``minimize`` under
    ``bounds`` (SI units, by axis) from ``seeds`` (module docstring); None when it finds
    none that meets the bounds."""
    if not seeds or ("energy" in {minimize, *bounds} and not instance.has_energy):
        return None
    g = indexed_graph(instance)
    search = _Search(_data(instance, g), minimize, dict(bounds),
                     ListScheduler(g, None if seconds is None else time.perf_counter() + seconds),
                     max_evals)  # fmt: skip
    by_assignment: dict[tuple[bool, ...], list[int]] = {}
    for seed in seeds:  # one seed per assignment, the first given
        host = tuple(seed.on_host[v] for v in g.names)
        by_assignment.setdefault(host, _sequence(g, seed))

    def seed_rank(host: tuple[bool, ...]) -> tuple[float, float]:
        search.reference = by_assignment[host]
        return search.rank(list(host))

    for start in sorted(by_assignment, key=seed_rank)[:n_seeds]:
        search.reference = by_assignment[start]
        search.descend(list(start))
        if search.spent():
            break
    best = search.best(list(by_assignment.values()))
    if best is None:
        return None
    host, order = best
    on_host = {g.names[i]: host[i] for i in range(len(host))}
    return asap_schedule(instance, on_host, [g.names[i] for i in order])


def _sequence(g: IndexedGraph, schedule: CimSchedule) -> list[int]:
    """Every operator by its start in ``schedule`` (ties in topological order): restricted
    to the host operators of any assignment, a host sequence that precedence allows (a
    successor starts no earlier than its predecessor finishes)."""
    return sorted(range(len(g.names)), key=lambda i: (schedule.start[g.names[i]], i))


Rank = tuple[float, float]  # (excess over the bounds, value of the minimized axis)


class _Search:
    """The descent's state: every assignment ranked so far, with its host sequence."""

    def __init__(self, d: _Data, minimize: str, bounds: dict[str, float], ev: ListScheduler,
                 max_evals: int) -> None:  # fmt: skip
        self.d, self.minimize, self.bounds, self.ev = d, minimize, bounds, ev
        self.max_evals = max_evals
        self.axes = {minimize, *bounds}
        self.lower_ranks = 0  # computed: each a longest path, cheaper than an evaluation
        self.ranked: dict[tuple[bool, ...], tuple[Rank, list[int]]] = {}
        self.reference: list[int] = []  # the sequence of the seed being descended from

    def spent(self) -> bool:
        return (self.ev.done(self.max_evals)
                or self.lower_ranks >= _LOWER_RANKS_PER_EVAL * self.max_evals)  # fmt: skip

    def rank(self, host: list[bool]) -> Rank:
        """The assignment's rank, its makespan the best list schedule's (or the reference
        sequence's, where that is better: a solver's optimal sequence often stays optimal
        a few operators on, where list scheduling may miss it)."""
        key = tuple(host)
        if key not in self.ranked:
            ev = self.ev
            makespan, order = ev.evaluate(host)
            kept = [i for i in self.reference if host[i]]
            same, _ = ev.schedule(host, ev.durations(host), [], False, forced=kept)
            if same < makespan:
                makespan, order = same, kept
            self.ranked[key] = (self._rank(host, makespan), order)
        return self.ranked[key][0]

    def _rank(self, host: Sequence[bool], makespan: float) -> Rank:
        values = _values(self.d, host, makespan, self.axes)
        return _excess(values, self.bounds), values[self.minimize]

    def lower_rank(self, host: list[bool]) -> Rank:
        """A rank no schedule of the assignment beats: its makespan at least the host's
        work and the longest path (every term of the rank grows with the makespan)."""
        self.lower_ranks += 1
        g = self.d.g
        finish = [0.0] * len(host)
        for i in range(len(host)):
            ready = 0.0
            for p, transfer in g.preds[i]:
                t = finish[p] + (transfer if host[p] != host[i] else 0.0)
                if t > ready:
                    ready = t
            finish[i] = ready + (g.t_host[i] if host[i] else g.t_acc[i])  # type: ignore[operator]
        work = math.fsum(g.t_host[i] for i in range(len(host)) if host[i])
        return self._rank(host, max(work, max(finish, default=0.0)))

    @staticmethod
    def better(a: Rank, b: Rank) -> bool:
        if a[0] != b[0]:
            return a[0] < b[0]
        return a[1] < b[1] * (1 - _REL_IMPROVE) - 1e-15

    def promising(self, host: list[bool], than: Rank) -> bool:
        """Within the crossbar budget and not ruled out by its lower rank."""
        d = self.d
        if sum(x for x, h in zip(d.g.crossbars, host, strict=True) if not h) > d.budget:
            return False
        return tuple(host) in self.ranked or self.better(self.lower_rank(host), than)

    def descend(self, host: list[bool]) -> None:
        """Best single flip while one improves, else the first pair of flips that does;
        stops at a local optimum or when the evaluations run out."""
        current = self.rank(host)
        while not self.spent():
            best, move = current, None
            for i in self.d.movable:
                host[i] = not host[i]
                if self.promising(host, best):
                    r = self.rank(host)
                    if self.better(r, best):
                        best, move = r, (i,)
                host[i] = not host[i]
                if self.spent():
                    break
            if move is None:
                move = self.first_pair(host, current)
                if move is None:
                    return
            for i in move:
                host[i] = not host[i]
            current = self.rank(host)

    def first_pair(self, host: list[bool], current: Rank) -> tuple[int, int] | None:
        movable = self.d.movable
        for a, i in enumerate(movable):
            for j in movable[a + 1 :]:
                if self.spent():
                    return None
                host[i], host[j] = not host[i], not host[j]
                ok = self.promising(host, current) and self.better(self.rank(host), current)
                host[i], host[j] = not host[i], not host[j]
                if ok:
                    return (i, j)
        return None

    def best(self, sequences: Sequence[list[int]]) -> tuple[tuple[bool, ...], list[int]] | None:
        """The feasible assignment with the smallest value and its host sequence, the best
        assignments timed with each of ``sequences`` too (the seeds' own)."""
        feasible = sorted((r[1], host) for host, (r, _) in self.ranked.items() if r[0] == 0.0)
        ev = self.ev
        for _, host in feasible[:_POLISHED]:
            durations = ev.durations(host)
            for sequence in sequences:
                kept = [i for i in sequence if host[i]]
                makespan, _ = ev.schedule(host, durations, [], False, forced=kept)
                rank = self._rank(host, makespan)
                if self.better(rank, self.ranked[host][0]):
                    self.ranked[host] = (rank, kept)
        feasible = [(r[1], host) for host, (r, _) in self.ranked.items() if r[0] == 0.0]
        if not feasible:
            return None
        host = min(feasible)[1]
        return host, self.ranked[host][1]
