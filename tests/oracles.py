"""Test oracles for the CIM makespan: brute force over every placement, and random instances.

The brute force shares no code with the model, the schedule module or the
verifier: it has its own earliest-start evaluation, so agreement with the ILP
checks both.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random

import networkx as nx

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import CrossbarCost


def brute_force_makespan(
    instance: CimInstance, price: float | CrossbarCost = 0.0
) -> tuple[float, dict[str, bool], list[str]]:
    """Minimum makespan (plus what the crossbars used cost at ``price``, seconds per
    crossbar or by the count: a priced solve's objective) over every assignment within
    budget and every host sequence.

    For each assignment of supported operators (unsupported ones stay on the
    host) whose crossbars fit the budget, every sequence of the host operators
    consistent with precedence (including paths through CIM operators) is
    scheduled earliest-start; the minimum wins. Branches whose partial
    schedule already cannot beat the best are cut (host work still to come
    runs after the last placed host operator), which never cuts an optimum.
    Returns (makespan, on_host, host_order).
    """
    names = [op.name for op in instance.operators]
    supported = [v for v in names if instance.by_name[v].supported]
    ancestors = {v: nx.ancestors(instance.graph, v) for v in names}
    best = _Best()
    for choice in itertools.product((True, False), repeat=len(supported)):
        on_host = {v: True for v in names}
        on_host.update(zip(supported, choice, strict=True))
        offloaded = [v for v in names if not on_host[v]]
        crossbars = sum(instance.by_name[v].crossbars for v in offloaded)
        if crossbars > instance.crossbar_budget:
            continue
        host = [v for v in names if on_host[v]]
        blockers = {v: {a for a in ancestors[v] if on_host[a]} for v in host}
        rest = sum(instance.by_name[v].t_host for v in host)
        best.extra = price(crossbars) if isinstance(price, CrossbarCost) else price * crossbars
        _extend(instance, on_host, host, blockers, [], {}, 0.0, rest, best)
    assert best.on_host is not None and best.order is not None
    return best.makespan, best.on_host, best.order


class _Best:
    def __init__(self) -> None:
        self.makespan = math.inf  # with the price of its crossbars
        self.extra = 0.0  # the price of the assignment being searched
        self.on_host: dict[str, bool] | None = None
        self.order: list[str] | None = None


def _finish_of(instance: CimInstance, on_host: dict[str, bool], v: str,
               fin: dict[str, float]) -> float:
    """Finish of a CIM operator from its predecessors (memoized in ``fin``).

    Resolvable once every host ancestor of ``v`` is sequenced; host operators
    are entered into ``fin`` when they are sequenced.
    """
    if v not in fin:
        start = 0.0
        for u in instance.graph.predecessors(v):
            t = _finish_of(instance, on_host, u, fin)
            if on_host[u]:
                t += instance.transfer[(u, v)]
            start = max(start, t)
        fin[v] = start + instance.by_name[v].t_acc
    return fin[v]


def _extend(instance: CimInstance, on_host: dict[str, bool], host: list[str],
            blockers: dict[str, set[str]], seq: list[str], fin: dict[str, float],
            host_free: float, rest: float, best: _Best) -> None:
    """Depth-first over host sequences; ``fin`` holds finishes known so far."""
    if max(max(fin.values(), default=0.0), host_free + rest) + best.extra >= best.makespan:
        return  # cannot beat the best: every finish only grows, host work is serial
    if len(seq) == len(host):
        fin = dict(fin)
        for v in on_host:
            if not on_host[v]:
                _finish_of(instance, on_host, v, fin)
        makespan = max(fin.values()) + best.extra
        if makespan < best.makespan:
            best.makespan, best.on_host, best.order = makespan, dict(on_host), list(seq)
        return
    placed = set(seq)
    for v in host:
        if v in placed or not blockers[v] <= placed:
            continue
        nfin = dict(fin)
        start = host_free
        for u in instance.graph.predecessors(v):
            t = _finish_of(instance, on_host, u, nfin)
            if not on_host[u]:
                t += instance.transfer[(u, v)]
            start = max(start, t)
        t_host = instance.by_name[v].t_host
        nfin[v] = start + t_host
        _extend(instance, on_host, host, blockers, seq + [v], nfin, nfin[v], rest - t_host, best)


def random_instance(
    rng: random.Random,
    n_ops: int,
    *,
    edge_prob: float = 0.35,
    unsupported_prob: float = 0.25,
    t_host_range: tuple[float, float] = (1e-5, 1e-3),
    acc_factor_range: tuple[float, float] = (0.05, 1.5),
    transfer_factor_range: tuple[float, float] = (0.0, 0.6),
    max_crossbars: int = 6,
) -> CimInstance:
    """A random DAG (edges i -> j, i < j, each with ``edge_prob``) with parallel branches.

    Latencies in seconds: host uniform in ``t_host_range``; accelerator a random
    factor of the host latency (some slower than the host); transfers a
    random factor of the producer's host latency. Some operators are
    unsupported; crossbars 1..``max_crossbars``; the budget anywhere from 0
    to everything.
    """
    ops = []
    for i in range(n_ops):
        t_host = rng.uniform(*t_host_range)
        if rng.random() < unsupported_prob:
            ops.append(CimOperator(f"op{i}", t_host))
        else:
            t_acc = t_host * rng.uniform(*acc_factor_range)
            ops.append(CimOperator(f"op{i}", t_host, t_acc, rng.randint(1, max_crossbars)))
    edges = [
        CimEdge(f"op{i}", f"op{j}", ops[i].t_host * rng.uniform(*transfer_factor_range))
        for i in range(n_ops)
        for j in range(i + 1, n_ops)
        if rng.random() < edge_prob
    ]
    total = sum(op.crossbars for op in ops if op.supported)
    return CimInstance.build(ops, edges, rng.randint(0, total))


def block_structured_instance(
    rng: random.Random,
    blocks: int,
    *,
    width: int = 3,
    depth: int = 2,
    cim_prob: float = 0.6,
    budget_share: float = 0.4,
    transfer_range: tuple[float, float] = (0.0, 2e-3),
) -> CimInstance:
    """Blocks of up to ``width`` parallel chains (1..``depth`` operators) between cut
    operators ``c0``..``c{blocks}``; cuts may run on the accelerator too. The budget is
    ``budget_share`` of all crossbars, so the blocks compete for it."""
    ops: list[CimOperator] = []
    edges: list[CimEdge] = []

    def add(name: str) -> None:
        t_host = rng.uniform(1e-3, 1e-2)
        if rng.random() < cim_prob:
            ops.append(CimOperator(name, t_host, t_host * rng.uniform(0.05, 1.2),
                                   rng.randint(1, 4)))  # fmt: skip
        else:
            ops.append(CimOperator(name, t_host))

    def edge(u: str, v: str) -> None:
        edges.append(CimEdge(u, v, rng.uniform(*transfer_range)))

    add("c0")
    for b in range(blocks):
        cut = f"c{b + 1}"
        lasts = []
        for i in range(rng.randint(1, width)):
            chain = [f"b{b}.{i}.{j}" for j in range(rng.randint(1, depth))]
            for v in chain:
                add(v)
            edge(f"c{b}", chain[0])
            for u, v in zip(chain, chain[1:], strict=False):
                edge(u, v)
            lasts.append(chain[-1])
        add(cut)
        for v in lasts:
            edge(v, cut)
        if rng.random() < 0.3:
            edge(f"c{b}", cut)  # a skip connection around the block
    total = sum(op.crossbars for op in ops if op.supported)
    return CimInstance.build(ops, edges, int(budget_share * total))


# --------------------------------------------------------------------------- other objectives


def with_energy(
    instance: CimInstance,
    rng: random.Random,
    *,
    host_w: tuple[float, float] = (0.5, 10.0),
    acc_w: tuple[float, float] = (0.01, 2.0),
) -> CimInstance:
    """``instance`` with random energies (joules, watts): the host at ``host_w`` W, the
    accelerator at ``acc_w`` W of its own latency (so some operators cost more energy
    there, some less), transfers at 0.1-5 W of theirs, static power 0-0.5 W."""
    host_power = rng.uniform(*host_w)
    ops = [
        dataclasses.replace(
            op, e_host=op.t_host * host_power,
            e_mvm=None if op.t_acc is None else op.t_acc * rng.uniform(*acc_w),
            e_internal=None if op.t_acc is None else op.t_acc * rng.uniform(0.0, 0.05),
        )
        for op in instance.operators
    ]  # fmt: skip
    edges = [dataclasses.replace(e, e_transfer=e.t_transfer * rng.uniform(0.1, 5.0))
             for e in instance.edges]  # fmt: skip
    return CimInstance.build(ops, edges, instance.crossbar_budget, rng.uniform(0.0, 0.5))


def assignment_points(instance: CimInstance) -> list[dict[str, float]]:
    """For every assignment within the budget, the best of its schedules on every axis at
    once: its minimum makespan (``latency``), the energy at that makespan (the static
    term only grows with the makespan), its stream period (the busiest of the host, the
    bus and each offloaded operator's crossbars) and its crossbars. Computed here, from
    the instance's numbers alone."""
    names = [op.name for op in instance.operators]
    ops = instance.by_name
    supported = [v for v in names if ops[v].supported]
    ancestors = {v: nx.ancestors(instance.graph, v) for v in names}
    points = []
    for choice in itertools.product((True, False), repeat=len(supported)):
        on_host = {v: True for v in names}
        on_host.update(zip(supported, choice, strict=True))
        crossbars = sum(ops[v].crossbars for v in names if not on_host[v])
        if crossbars > instance.crossbar_budget:
            continue
        host = [v for v in names if on_host[v]]
        blockers = {v: {a for a in ancestors[v] if on_host[a]} for v in host}
        best = _Best()
        _extend(instance, on_host, host, blockers, [], {}, 0.0,
                sum(ops[v].t_host for v in host), best)  # fmt: skip
        crossing = [e for e in instance.edges if on_host[e.src] != on_host[e.dst]]
        loads = [sum(ops[v].t_host for v in host), sum(e.t_transfer for e in crossing)]
        loads += [ops[v].t_acc for v in names if not on_host[v]]
        point = {"latency": best.makespan, "period": max(loads), "crossbars": float(crossbars)}
        if instance.has_energy:
            energy = [ops[v].e_host if on_host[v] else ops[v].e_mvm + ops[v].e_internal
                      for v in names]  # fmt: skip
            energy += [e.e_transfer for e in crossing]
            point["energy"] = math.fsum(energy) + instance.p_static * best.makespan
        points.append(point | {"on_host": on_host})
    return points


def brute_force_objective(
    instance: CimInstance,
    minimize: str,
    bounds: dict[str, float] | None = None,
    then: tuple[str, ...] = (),
    rel: float = 1e-9,
) -> dict[str, float] | None:
    """The lexicographic optimum of (``minimize``, *``then``) under ``bounds`` over
    :func:`assignment_points` (None: no assignment meets the bounds); each later axis is
    minimized among the points within ``rel`` of the earlier optima."""
    points = [p for p in assignment_points(instance)
              if all(p[a] <= b * (1 + rel) + 1e-15 for a, b in (bounds or {}).items())]
    for name in (minimize, *then):
        if not points:
            return None
        best = min(p[name] for p in points)
        points = [p for p in points if p[name] <= best * (1 + rel) + 1e-15]
    return points[0] if points else None


def brute_force_front(instance: CimInstance, axes: list[str]) -> list[dict[str, float]]:
    """The nondominated points of :func:`assignment_points` on ``axes`` (each once)."""
    points = assignment_points(instance)
    front: list[dict[str, float]] = []
    for p in points:
        dominated = any(
            all(q[a] <= p[a] * (1 + 1e-9) + 1e-15 for a in axes)
            and any(q[a] < p[a] * (1 - 1e-9) - 1e-15 for a in axes)
            for q in points
        )
        same = any(all(math.isclose(q[a], p[a], rel_tol=1e-9, abs_tol=1e-15) for a in axes)
                   for q in front)  # fmt: skip
        if not dominated and not same:
            front.append(p)
    return front


def median_price(instance: CimInstance) -> float:
    """The median CIM saving per crossbar (seconds per crossbar, at least 0): a price at
    which some operators pay for their crossbars and some do not."""
    rates = sorted((op.t_host - op.t_acc) / op.crossbars for op in instance.operators
                   if op.supported and op.crossbars)  # fmt: skip
    return max(0.0, rates[len(rates) // 2]) if rates else 0.0


def random_cost(rng: random.Random, instance: CimInstance) -> CrossbarCost:
    """A cost of the crossbars by the count, never decreasing, for 0..budget: steps of
    about the median saving per crossbar, some flat (near-ties), some a jump."""
    scale = max(median_price(instance), 1e-5)
    values, total = [], rng.uniform(0.0, 5.0) * scale
    for _ in range(instance.crossbar_budget + 1):
        values.append(total)
        total += rng.choice([0.0, rng.uniform(0.0, 2.0) * scale, 5.0 * scale])
    return CrossbarCost(tuple(values))
