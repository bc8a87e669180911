"""The CIM model's constraint families as they were built before the fast builder: the
reference that ``tests/models/test_model_identity.py`` compares the product's models with.

Each family is written the plain Pyomo way (component indexing, operator overloading),
exactly as ``placement/models/cim_makespan/paper.py`` and ``bounds.py`` stated them up to
commit c39f10c. :func:`reference_model` builds a model with them on the scaffolding of
:func:`placement.models.cim_makespan.build.build_cim_model` (sets, data, variables), so the two
models differ only in how the rows were constructed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyomo.environ as pyo

from placement.models.cim_makespan.bounds import pair_big_m
from placement.models.cim_makespan.build import build_cim_model
from placement.models.cim_makespan.problem import CimProblem
from placement.models.cim_makespan.structure import structure


def add_makespan(m: pyo.ConcreteModel) -> None:
    # Eq. 6: T bounds the finish of every terminal operator.
    m.makespan_bound = pyo.Constraint(m.SINKS, rule=lambda m, v: m.makespan >= m.finish[v])


def add_finish(m: pyo.ConcreteModel) -> None:
    # Eq. 7: f_v = s_v + x_v T_host + (1 - x_v) T_acc.
    m.finish_time = pyo.Constraint(
        m.V,
        rule=lambda m, v: m.finish[v]
        == m.start[v] + m.host[v] * m.t_host[v] + (1 - m.host[v]) * m.t_acc[v],
    )


def add_precedence(m: pyo.ConcreteModel) -> None:
    # Eq. 8: s_v >= f_u + z_uv T_transfer,(u,v).
    m.precedence = pyo.Constraint(
        m.E,
        rule=lambda m, u, v: m.start[v] >= m.finish[u] + m.transfer[u, v] * m.t_transfer[u, v],
    )


def add_transfer(m: pyo.ConcreteModel) -> None:
    # Eq. 9: z_uv >= |x_u - x_v|, as two rows.
    m.transfer_lo = pyo.Constraint(
        m.E, rule=lambda m, u, v: m.transfer[u, v] >= m.host[u] - m.host[v]
    )
    m.transfer_hi = pyo.Constraint(
        m.E, rule=lambda m, u, v: m.transfer[u, v] >= m.host[v] - m.host[u]
    )


def add_ordering(m: pyo.ConcreteModel) -> None:
    # Eq. 11: u before v when both on host and o_uv = 1.
    m.order_uv = pyo.Constraint(
        m.P,
        rule=lambda m, u, v: m.start[v]
        >= m.finish[u] - m.big_m * (3 - m.host[u] - m.host[v] - m.order[u, v]),
    )
    # Eq. 12: v before u when both on host and o_uv = 0.
    m.order_vu = pyo.Constraint(
        m.P,
        rule=lambda m, u, v: m.start[u]
        >= m.finish[v] - m.big_m * (2 - m.host[u] - m.host[v] + m.order[u, v]),
    )


def add_budget(m: pyo.ConcreteModel) -> None:
    # Eq. 14: crossbars of offloaded operators within C (no row when nothing can be offloaded).
    if len(m.V_ACC) == 0:
        return
    m.budget = pyo.Constraint(
        expr=sum((1 - m.host[v]) * m.crossbars[v] for v in m.V_ACC) <= m.crossbar_budget
    )


def host_work(m: pyo.ConcreteModel, nodes: Iterable[str]) -> pyo.Expression | float:
    pos = m.graph_structure["pos"]
    return sum((m.host[w] * m.t_host[w] for w in sorted(nodes, key=pos.get)), start=0.0)


def add_host_serial(m: pyo.ConcreteModel) -> None:
    m.host_serial = pyo.Constraint(expr=m.makespan >= host_work(m, m.V))


def add_energetic(m: pyo.ConcreteModel) -> None:
    before, after = m.graph_structure["before"], m.graph_structure["after"]

    def head(m: pyo.ConcreteModel, v: str) -> Any:
        p, nodes = before[v]
        if not nodes:
            return pyo.Constraint.Skip
        base = 0.0 if p is None else m.finish[p]
        return m.start[v] >= base + host_work(m, nodes)

    def tail(m: pyo.ConcreteModel, v: str) -> Any:
        q, nodes = after[v]
        if not nodes:
            return pyo.Constraint.Skip
        end = m.makespan if q is None else m.start[q]
        return end >= m.finish[v] + host_work(m, nodes)

    m.energetic_head = pyo.Constraint(m.V, rule=head)
    m.energetic_tail = pyo.Constraint(m.V, rule=tail)


def add_bottleneck(m: pyo.ConcreteModel) -> None:
    pairs = m.graph_structure["bottleneck_pairs"]
    between = m.graph_structure["between"]
    m.BOTTLENECK_PAIRS = pyo.Set(dimen=2, initialize=pairs, ordered=True)
    m.bottleneck = pyo.Constraint(
        m.BOTTLENECK_PAIRS,
        rule=lambda m, u, v: m.start[v] >= m.finish[u] + host_work(m, between[u, v]),
    )


def add_window_big_m(m: pyo.ConcreteModel) -> None:
    m_pair = pair_big_m(m)  # the data of the rows, not how they are built
    m.makespan_cap = pyo.Constraint(expr=m.makespan <= m.upper_bound)
    m.order_uv_window = pyo.Constraint(
        m.P,
        rule=lambda m, u, v: m.start[v]
        >= m.finish[u] - m_pair(u, v) * (3 - m.host[u] - m.host[v] - m.order[u, v]),
    )
    m.order_vu_window = pyo.Constraint(
        m.P,
        rule=lambda m, u, v: m.start[u]
        >= m.finish[v] - m_pair(v, u) * (2 - m.host[u] - m.host[v] + m.order[u, v]),
    )


REFERENCE_BUILDERS = {
    "makespan": add_makespan,
    "finish": add_finish,
    "precedence": add_precedence,
    "transfer": add_transfer,
    "ordering": add_ordering,
    "budget": add_budget,
    "host_serial": add_host_serial,
    "energetic": add_energetic,
    "bottleneck": add_bottleneck,
    "window_big_m": add_window_big_m,
}


def reference_model(
    instance: CimProblem, families: Iterable[str], upper_bound: float | None = None
) -> pyo.ConcreteModel:
    """The model of ``families``, its rows built by the reference families above."""
    chosen = list(dict.fromkeys(families))
    m = build_cim_model(instance, families=(), upper_bound=upper_bound)
    m.families = tuple(chosen)
    m.graph_structure = structure(instance, pyo.value(m.time_unit))
    for family in chosen:
        REFERENCE_BUILDERS[family](m)
    return m
