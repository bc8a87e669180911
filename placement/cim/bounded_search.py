"""A local search for one objective stage under bounds (no solver): the incumbent a stage
of :mod:`placement.cim.objectives` starts its solvers from.

Why: a stage such as "minimum latency, energy at most eps" is proven quickly once the
solver holds a near-optimal placement (CP-SAT takes the hint's makespan as its horizon
and prunes with it), but a single CP-SAT worker finds none by itself within minutes on
YOLO-sized graphs (benchmarks/README.md, "Energy, Pareto fronts"). The placements known
before the stage (a front's neighbouring points, the other end) are a step away from a
good one: a few operators moved between the devices.

The search: from each of the best few seeds (known placements, feasible or not), a
descent on the assignment, every candidate timed by the list scheduler of
:mod:`placement.cim.list_scheduling` (the best of its priority rules) and every axis
computed from that schedule. A candidate is ranked first by how far it exceeds the
bounds (relative, summed), then by the minimized axis; moves are single flips (best
improvement) and, when none helps, pairs of flips (first improvement). The crossbar
budget is never exceeded. The evaluation budget is a count, so the result is
deterministic unless ``seconds`` cuts it short.

The result is a feasible schedule or None; the caller recomputes its values on the
instance (``placement.cim.objectives.axis_values``) before it uses it, so nothing here
is trusted beyond being a valid schedule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from placement.cim.instance import CimInstance
from placement.cim.list_scheduling import _Evaluator, _Graph, _index_graph
from placement.cim.schedule import CimSchedule, asap_schedule

#: Evaluations (each four list schedules) the search may make in all, and how many of the
#: best seeds it descends from.
DEFAULT_EVALS = 1500
DEFAULT_SEEDS = 3
_SLACK = 1e-6  # as placement.cim.objectives.BOUND_SLACK: a bound met within it is met
_REL_IMPROVE = 1e-12


@dataclass(frozen=True)
class _Data:
    """The axis data of the instance in the list scheduler's index order."""

    g: _Graph
    e_host: list[float]
    e_acc: list[float]
    edges: list[tuple[int, int, float, float]]  # (u, v, t_transfer, e_transfer)
    p_static: float
    has_energy: bool
    budget: int
    movable: list[int]


def _data(instance: CimInstance, g: _Graph) -> _Data:
    pos = {v: i for i, v in enumerate(g.names)}
    ops = [instance.by_name[v] for v in g.names]
    return _Data(
        g=g,
        e_host=[op.e_host or 0.0 for op in ops],
        e_acc=[op.e_acc or 0.0 for op in ops],
        edges=[(pos[e.src], pos[e.dst], e.t_transfer, e.e_transfer or 0.0)
               for e in instance.edges],  # fmt: skip
        p_static=instance.p_static or 0.0,
        has_energy=instance.has_energy,
        budget=instance.crossbar_budget,
        movable=[i for i, op in enumerate(ops)
                 if op.supported and op.crossbars <= instance.crossbar_budget],  # fmt: skip
    )


def _values(d: _Data, host: Sequence[bool], makespan: float) -> dict[str, float]:
    """Every axis of an assignment whose schedule has ``makespan`` (SI units)."""
    g = d.g
    n = len(host)
    cut = [e for e in d.edges if host[e[0]] != host[e[1]]]
    values = {
        "latency": makespan,
        "crossbars": float(sum(g.crossbars[i] for i in range(n) if not host[i])),
        "period": max(
            math.fsum(g.t_host[i] for i in range(n) if host[i]),
            math.fsum(e[2] for e in cut),
            max((g.t_acc[i] or 0.0 for i in range(n) if not host[i]), default=0.0),
        ),
    }
    if d.has_energy:
        values["energy"] = math.fsum(
            [d.e_host[i] if host[i] else d.e_acc[i] for i in range(n)]
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
    g = _index_graph(instance)
    d = _data(instance, g)
    ev = _Evaluator(g, None if seconds is None else time.perf_counter() + seconds)
    cache: dict[tuple[bool, ...], tuple[tuple[float, float], list[int]]] = {}

    def rank(host: list[bool]) -> tuple[float, float]:
        key = tuple(host)
        if key not in cache:
            makespan, order = ev.evaluate(host)
            values = _values(d, host, makespan)
            cache[key] = ((_excess(values, bounds), values[minimize]), order)
        return cache[key][0]

    def better(a: tuple[float, float], b: tuple[float, float]) -> bool:
        if a[0] != b[0]:
            return a[0] < b[0]
        return a[1] < b[1] * (1 - _REL_IMPROVE) - 1e-15

    def used(host: list[bool]) -> int:
        return sum(g.crossbars[i] for i in d.movable if not host[i])

    starts = {tuple(s.on_host[v] for v in g.names) for s in seeds}
    ranked = sorted(starts, key=lambda h: rank(list(h)))[:n_seeds]
    for start in ranked:
        _descend(list(start), rank, better, used, d, ev, max_evals)
        if ev.done(max_evals):
            break
    feasible = [(k[1], h) for h, (k, _) in cache.items() if k[0] == 0.0]
    if not feasible:
        return None
    _, host = min(feasible)
    order = cache[host][1]
    on_host = {g.names[i]: host[i] for i in range(len(host))}
    return asap_schedule(instance, on_host, [g.names[i] for i in order])


def _descend(host: list[bool], rank, better, used, d: _Data, ev: _Evaluator,
             max_evals: int) -> None:  # fmt: skip
    """Descent from ``host``: best single flip while one improves, else the first pair of
    flips that does; stops at a local optimum or when the evaluations run out."""
    current = rank(host)
    while not ev.done(max_evals):
        best, best_move = current, None
        for i in d.movable:
            host[i] = not host[i]
            if used(host) <= d.budget:
                r = rank(host)
                if better(r, best):
                    best, best_move = r, (i,)
            host[i] = not host[i]
            if ev.done(max_evals):
                break
        if best_move is None:
            best_move = _first_pair(host, current, rank, better, used, d, ev, max_evals)
            if best_move is None:
                return
            best = None
        for i in best_move:
            host[i] = not host[i]
        current = rank(host) if best is None else best


def _first_pair(host: list[bool], current, rank, better, used, d: _Data, ev: _Evaluator,
                max_evals: int) -> tuple[int, int] | None:  # fmt: skip
    movable = d.movable
    for a, i in enumerate(movable):
        for j in movable[a + 1 :]:
            if ev.done(max_evals):
                return None
            host[i], host[j] = not host[i], not host[j]
            ok = used(host) <= d.budget and better(rank(host), current)
            host[i], host[j] = not host[i], not host[j]
            if ok:
                return (i, j)
    return None
