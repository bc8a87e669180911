"""The CIM paper's constraint families, Eqs. 5-14 (Section IV-B): the faithful model.

Each ``add_<family>(m)`` adds one family's components to a model that
:func:`placement.models.cim.build.build_cim_model` has set up (sets, data, variables);
the family's equation is named beside it, once.
"""

from __future__ import annotations

import pyomo.environ as pyo


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
