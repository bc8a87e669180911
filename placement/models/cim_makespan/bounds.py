"""Valid inequalities for the CIM makespan model: each family leaves the optimum unchanged.

Each ``add_<family>(m)`` adds one family to a model that
:func:`placement.models.cim_makespan.build.build_cim_model` has set up; each docstring gives its
validity argument. They use ``m.graph_structure`` (ancestor / descendant sets,
bottleneck pairs, head/tail bounds; :func:`placement.models.cim_makespan.structure.structure`),
computed once per build. Rows are stated on variables and data looked up once, host-work
sums built in one step (:mod:`placement.models.cim_makespan.terms`): the same expressions as the
plain Pyomo statement, built several times faster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyomo.environ as pyo

from placement.errors import PlacementError
from placement.models.cim_makespan.terms import lookup, weighted_sum


def host_work(m: pyo.ConcreteModel, nodes: Iterable[str]) -> Any:
    """sum x_w T_host,w over ``nodes`` (0 when empty), in operator order: a set's order
    depends on the process's hash seed, and the sum's last bits on the order."""
    return _HostWork(m)(nodes)


class _HostWork:
    """:func:`host_work` for many rows of one model: its variables and data looked up once."""

    def __init__(self, m: pyo.ConcreteModel) -> None:
        self.pos = m.graph_structure["pos"]
        self.host, self.t_host = lookup(m.host), lookup(m.t_host)

    def __call__(self, nodes: Iterable[str]) -> Any:
        host, t_host = self.host, self.t_host
        return weighted_sum((t_host[w], host[w]) for w in sorted(nodes, key=self.pos.get))


def add_host_serial(m: pyo.ConcreteModel) -> None:
    """T >= sum_v x_v T_host,v.

    Valid: host operators run one at a time (Eqs. 11-12 for every host pair in P, precedence
    for the others) and all inside [0, T], so their total latency fits in T.
    """
    m.host_serial = pyo.Constraint(expr=m.makespan >= host_work(m, m.V))


def add_energetic(m: pyo.ConcreteModel) -> None:
    """s_v >= f_p + host work of v's ancestors after p; s_q >= f_v + host work of v's
    descendants before q, with p and q the bottlenecks around v (without p: from time 0;
    without q: T >= f_v + ...).

    Valid: every ancestor a of v after p finishes inside [f_p, s_v] (precedence along the
    paths), every descendant of v before q runs inside [f_v, s_q]; the host ones among them
    are disjoint intervals on the single host. Chained through the bottleneck rows these
    bound v's start by all its ancestors' host work, with rows of segment size, not n
    (:mod:`placement.models.cim_makespan.structure`).
    """
    before, after = m.graph_structure["before"], m.graph_structure["after"]
    work, start, finish = _HostWork(m), lookup(m.start), lookup(m.finish)

    def head(m: pyo.ConcreteModel, v: str) -> Any:
        p, nodes = before[v]
        if not nodes:
            return pyo.Constraint.Skip
        base = 0.0 if p is None else finish[p]
        return start[v] >= base + work(nodes)

    def tail(m: pyo.ConcreteModel, v: str) -> Any:
        q, nodes = after[v]
        if not nodes:
            return pyo.Constraint.Skip
        end = m.makespan if q is None else start[q]
        return end >= finish[v] + work(nodes)

    m.energetic_head = pyo.Constraint(m.V, rule=head)
    m.energetic_tail = pyo.Constraint(m.V, rule=tail)


def add_bottleneck(m: pyo.ConcreteModel) -> None:
    """s_v >= f_u + host work strictly between consecutive bottlenecks u -> v.

    A bottleneck is comparable with every other operator. Valid: each w between u and v
    (a descendant of u and an ancestor of v) runs inside [f_u, s_v]; the host ones are
    disjoint there. Only a handful of rows (one per consecutive bottleneck pair).
    """
    pairs = m.graph_structure["bottleneck_pairs"]
    between = m.graph_structure["between"]
    work, start, finish = _HostWork(m), lookup(m.start), lookup(m.finish)
    m.BOTTLENECK_PAIRS = pyo.Set(dimen=2, initialize=pairs, ordered=True)
    m.bottleneck = pyo.Constraint(
        m.BOTTLENECK_PAIRS,
        rule=lambda m, u, v: start[v] >= finish[u] + work(between[u, v]),
    )


def pair_big_m(m: pyo.ConcreteModel) -> Callable[[str, str], float]:
    """M_uv of :func:`add_window_big_m`, in model units: f_u - s_v <= M_uv when T <= UB."""
    if m.component("upper_bound") is None:
        raise PlacementError("the window_big_m family needs an upper bound (build_cim_model)")
    head, tail = m.graph_structure["head"], m.graph_structure["tail"]
    ub = pyo.value(m.upper_bound)
    big_m = pyo.value(m.big_m)

    def m_pair(u: str, v: str) -> float:
        return max(0.0, min(big_m, ub - tail[u] - head[v]))

    return m_pair


def add_window_big_m(m: pyo.ConcreteModel) -> None:
    """Eqs. 11-12 with a per-pair M_uv = max(0, min(M, UB - tail_u - head_v)), and T <= UB.

    UB is the makespan of a feasible schedule (``m.upper_bound``), head_v a constant lower
    bound on s_v and tail_u one on T - f_u (longest paths of the faster device's
    latencies, or of host-only operators' latencies, which the host runs serially). Valid
    for every solution with T <= UB, the only ones the added row T <= UB keeps and among
    which an optimum lies (UB is achieved): there f_u - s_v <= UB - tail_u - head_v, so a
    row switched off by x or o (coefficient >= 1) never binds. The faithful ``ordering``
    rows are then dominated; ``TIGHTENED_FAMILIES`` omits them.
    """
    rows = window_rows(m)
    m.makespan_cap = pyo.Constraint(expr=m.makespan <= m.upper_bound)
    m.order_uv_window = pyo.Constraint(m.P, rule=lambda m, u, v: rows(u, v)[0])
    m.order_vu_window = pyo.Constraint(m.P, rule=lambda m, u, v: rows(u, v)[1])


def window_rows(m: pyo.ConcreteModel) -> Callable[[str, str], tuple[Any, Any]]:
    """The two rows of :func:`add_window_big_m` for a parallel pair (u, v) of ``m.P``:
    u before v when both on the host and o_uv = 1, v before u when o_uv = 0."""
    m_pair = pair_big_m(m)
    host, start, finish, order = lookup(m.host), lookup(m.start), lookup(m.finish), lookup(m.order)

    def rows(u: str, v: str) -> tuple[Any, Any]:
        o = order[u, v]
        return (start[v] >= finish[u] - m_pair(u, v) * (3 - host[u] - host[v] - o),
                start[u] >= finish[v] - m_pair(v, u) * (2 - host[u] - host[v] + o))  # fmt: skip

    return rows
