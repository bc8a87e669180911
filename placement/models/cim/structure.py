"""Precedence structure of a CIM instance that the valid inequalities and CP-SAT use.

Ancestors and descendants of every operator, the bottleneck operators (comparable
with every other operator) in topological order, and constant lower bounds on each
operator's start (``head``) and on the time after its finish (``tail``).
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

from placement.models.cim.problem import CimProblem


def structure(instance: CimProblem, unit: float) -> dict[str, Any]:
    """Ancestors, descendants, bottleneck pairs and head/tail bounds (model units)."""
    g = instance.graph
    pos = {op.name: i for i, op in enumerate(instance.operators)}
    topo = list(nx.lexicographical_topological_sort(g, key=lambda v: f"{pos[v]:09d}"))
    anc: dict[str, set[str]] = {}
    for v in topo:
        anc[v] = set().union(*([anc[u] | {u} for u in g.predecessors(v)] or [set()]))
    desc: dict[str, set[str]] = {v: set() for v in topo}
    for v in topo:
        for a in anc[v]:
            desc[a].add(v)
    n = len(topo)
    bottlenecks = [v for v in topo if len(anc[v]) + len(desc[v]) == n - 1]
    ops = instance.by_name
    # Latency on the faster device: a lower bound whatever the placement.
    fast = {v: min(ops[v].t_host, ops[v].t_acc if ops[v].t_acc is not None else math.inf)
            for v in topo}
    forced = {v: 0.0 if ops[v].supported else ops[v].t_host for v in topo}
    path_head: dict[str, float] = {}
    for v in topo:
        path_head[v] = max((path_head[u] + fast[u] for u in g.predecessors(v)), default=0.0)
    path_tail: dict[str, float] = {}
    for v in reversed(topo):
        path_tail[v] = max((path_tail[w] + fast[w] for w in g.successors(v)), default=0.0)
    head = {v: max(path_head[v], math.fsum(forced[a] for a in anc[v])) / unit for v in topo}
    tail = {v: max(path_tail[v], math.fsum(forced[d] for d in desc[v])) / unit for v in topo}
    return {
        "pos": pos,
        "ancestors": anc,
        "descendants": desc,
        "bottleneck_pairs": list(zip(bottlenecks, bottlenecks[1:], strict=False)),
        "head": head,
        "tail": tail,
    }
