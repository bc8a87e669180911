"""The CIM paper's constraint families, Eqs. 5-14 (Section IV-B): the faithful model.

Each ``add_<family>(m)`` adds one family's components to a model that
:func:`placement.models.cim_makespan.build.build_cim_model` has set up (sets, data, variables);
the family's equation is named beside it, once. Rows are stated on variables and data
looked up once (:mod:`placement.models.cim_makespan.terms`): the same expressions as indexing
``m.start[v]``, ``m.t_host[v]``, ... in every row, built several times faster.
"""

from __future__ import annotations

import pyomo.environ as pyo

from placement.models.cim_makespan.terms import lookup


def add_makespan(m: pyo.ConcreteModel) -> None:
    # Eq. 6: T bounds the finish of every terminal operator.
    finish, makespan = lookup(m.finish), m.makespan
    m.makespan_bound = pyo.Constraint(m.SINKS, rule=lambda m, v: makespan >= finish[v])


def add_finish(m: pyo.ConcreteModel) -> None:
    # Eq. 7: f_v = s_v + x_v T_host + (1 - x_v) T_acc.
    host, start, finish = lookup(m.host), lookup(m.start), lookup(m.finish)
    t_host, t_acc = lookup(m.t_host), lookup(m.t_acc)
    m.finish_time = pyo.Constraint(
        m.V,
        rule=lambda m, v: finish[v]
        == start[v] + host[v] * t_host[v] + (1 - host[v]) * t_acc[v],
    )


def add_precedence(m: pyo.ConcreteModel) -> None:
    # Eq. 8: s_v >= f_u + z_uv T_transfer,(u,v).
    start, finish = lookup(m.start), lookup(m.finish)
    transfer, t_transfer = lookup(m.transfer), lookup(m.t_transfer)
    m.precedence = pyo.Constraint(
        m.E,
        rule=lambda m, u, v: start[v] >= finish[u] + transfer[u, v] * t_transfer[u, v],
    )


def add_transfer(m: pyo.ConcreteModel) -> None:
    # Eq. 9: z_uv >= |x_u - x_v|, as two rows.
    host, transfer = lookup(m.host), lookup(m.transfer)
    m.transfer_lo = pyo.Constraint(
        m.E, rule=lambda m, u, v: transfer[u, v] >= host[u] - host[v]
    )
    m.transfer_hi = pyo.Constraint(
        m.E, rule=lambda m, u, v: transfer[u, v] >= host[v] - host[u]
    )


def add_ordering(m: pyo.ConcreteModel) -> None:
    host, start, finish, order = lookup(m.host), lookup(m.start), lookup(m.finish), lookup(m.order)
    big_m = pyo.value(m.big_m)  # an immutable Param enters every expression as its value
    # Eq. 11: u before v when both on host and o_uv = 1.
    m.order_uv = pyo.Constraint(
        m.P,
        rule=lambda m, u, v: start[v]
        >= finish[u] - big_m * (3 - host[u] - host[v] - order[u, v]),
    )
    # Eq. 12: v before u when both on host and o_uv = 0.
    m.order_vu = pyo.Constraint(
        m.P,
        rule=lambda m, u, v: start[u]
        >= finish[v] - big_m * (2 - host[u] - host[v] + order[u, v]),
    )


def add_budget(m: pyo.ConcreteModel) -> None:
    # Eq. 14: crossbars of offloaded operators within C (no row when nothing can be offloaded).
    if len(m.V_ACC) == 0:
        return
    host, crossbars = lookup(m.host), lookup(m.crossbars)
    m.budget = pyo.Constraint(
        expr=sum((1 - host[v]) * crossbars[v] for v in m.V_ACC) <= m.crossbar_budget
    )
