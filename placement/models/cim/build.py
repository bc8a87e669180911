"""The CIM paper's makespan ILP (Section IV-B, Eqs. 5-14) as a Pyomo model.

``build_cim_model(instance)`` returns a plain :class:`pyomo.environ.ConcreteModel`
that users may extend before solving. Components:

========================  ============================================================
``m.V, m.V_ACC``          operators; those the accelerator supports
``m.E, m.P, m.SINKS``     data edges; parallel pairs (Eq. 10); terminal operators
``m.host[v]``             x_v, binary, 1 = host CPU (Eq. 5); fixed to 1 outside V_acc
``m.start[v]``            s_v >= 0
``m.finish[v]``           f_v
``m.transfer[u, v]``      z_uv, binary, 1 = ends on different devices
``m.order[u, v]``         o_uv, binary, 1 = u before v, for (u, v) in P
``m.makespan``            T >= 0; ``m.objective`` minimizes it
``m.t_host, m.t_acc,``    the data, as immutable Params in model time units
``m.t_transfer, m.big_m``
``m.crossbars, m.crossbar_budget``
``m.time_unit``           seconds per model time unit (see "Scaling")
========================  ============================================================

Constraint families (each a component, or two, named after it; see
``FAMILY_COMPONENTS``): ``makespan`` (Eq. 6), ``finish`` (Eq. 7), ``precedence``
(Eq. 8), ``transfer`` (Eq. 9), ``ordering`` (Eqs. 11-12, big-M of Eq. 13) and
``budget`` (Eq. 14). All are on by default: that is the faithful model. A
benchmark may build with a subset (a relaxation) or deactivate a family on a
built model with ``set_family_active``. Valid inequalities are further families
(``TIGHTENING_FAMILIES``: ``host_serial``, ``energetic``, ``bottleneck``,
``window_big_m``; each docstring gives its validity argument); ``FORMULATIONS``
names the choices of families: ``faithful`` (Eqs. 5-14 only), ``bounded`` (plus
the three bound families, no upper bound needed) and ``tightened`` (plus the
per-pair big-M of ``window_big_m`` in place of Eqs. 11-12).

Eq. 5 is realized by fixing ``m.host[v] = 1`` for ``v`` outside ``V_acc`` (not by
a constraint): Pyomo's HiGHS interface then passes those x_v as constants.
For such operators ``T_acc,v := 0`` (as in Eq. 13), harmless because x_v = 1.

Scaling: latencies are in seconds (1e-7 .. 1e-1), where HiGHS's absolute
tolerances (primal feasibility 1e-7, MIP absolute gap 1e-6, matrix entries
below 1e-9 dropped) are of the order of the data. The model is therefore built
in a time unit ``m.time_unit`` (a power of ten of seconds) chosen so that the
big-M of Eq. 13 lies in [1e4, 1e5) model units. Every time-valued component
(``start``, ``finish``, ``makespan``, ``t_*``, ``big_m``, the objective) is in
that unit; multiply by ``value(m.time_unit)`` for seconds.
``extract_schedule`` returns seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import networkx as nx
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap

from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule
from placement.errors import PlacementError
from placement.solvers.base import ModelSize
from placement.solvers.highs import model_size

#: Model units for the big-M: M lands in [10**_M_DECADE, 10**(_M_DECADE + 1)).
_M_DECADE = 4


def big_m_seconds(instance: CimInstance) -> float:
    """Eq. 13: sum of max(T_host, T_acc) (T_acc := 0 outside V_acc) plus all transfers."""
    return math.fsum(max(op.t_host, op.t_acc or 0.0) for op in instance.operators) + math.fsum(
        e.t_transfer for e in instance.edges
    )


def time_unit_for(instance: CimInstance) -> float:
    """Seconds per model time unit: a power of ten putting Eq. 13's M in [1e4, 1e5)."""
    big_m = big_m_seconds(instance)
    if big_m <= 0.0:
        return 1.0  # every latency is zero: any unit works
    return 10.0 ** (math.floor(math.log10(big_m)) - _M_DECADE)


# --- constraint families -------------------------------------------------------------


def _add_makespan(m: pyo.ConcreteModel) -> None:
    # Eq. 6: T bounds the finish of every terminal operator.
    m.makespan_bound = pyo.Constraint(m.SINKS, rule=lambda m, v: m.makespan >= m.finish[v])


def _add_finish(m: pyo.ConcreteModel) -> None:
    # Eq. 7: f_v = s_v + x_v T_host + (1 - x_v) T_acc.
    m.finish_time = pyo.Constraint(
        m.V,
        rule=lambda m, v: m.finish[v]
        == m.start[v] + m.host[v] * m.t_host[v] + (1 - m.host[v]) * m.t_acc[v],
    )


def _add_precedence(m: pyo.ConcreteModel) -> None:
    # Eq. 8: s_v >= f_u + z_uv T_transfer,(u,v).
    m.precedence = pyo.Constraint(
        m.E,
        rule=lambda m, u, v: m.start[v] >= m.finish[u] + m.transfer[u, v] * m.t_transfer[u, v],
    )


def _add_transfer(m: pyo.ConcreteModel) -> None:
    # Eq. 9: z_uv >= |x_u - x_v|, as two rows.
    m.transfer_lo = pyo.Constraint(
        m.E, rule=lambda m, u, v: m.transfer[u, v] >= m.host[u] - m.host[v]
    )
    m.transfer_hi = pyo.Constraint(
        m.E, rule=lambda m, u, v: m.transfer[u, v] >= m.host[v] - m.host[u]
    )


def _add_ordering(m: pyo.ConcreteModel) -> None:
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


def _add_budget(m: pyo.ConcreteModel) -> None:
    # Eq. 14: crossbars of offloaded operators within C (no row when nothing can be offloaded).
    if len(m.V_ACC) == 0:
        return
    m.budget = pyo.Constraint(
        expr=sum((1 - m.host[v]) * m.crossbars[v] for v in m.V_ACC) <= m.crossbar_budget
    )


# --- tightenings: valid inequalities (same optimum), each its own family ---------------
# They use ``m._structure`` (ancestor / descendant sets, computed once per build).


def _host_work(m: pyo.ConcreteModel, nodes: Iterable[str]) -> pyo.Expression | float:
    """sum x_w T_host,w over ``nodes`` (0 when empty)."""
    return sum((m.host[w] * m.t_host[w] for w in nodes), start=0.0)


def _add_host_serial(m: pyo.ConcreteModel) -> None:
    """T >= sum_v x_v T_host,v.

    Valid: host operators run one at a time (Eqs. 11-12 for every host pair in P, precedence
    for the others) and all inside [0, T], so their total latency fits in T.
    """
    m.host_serial = pyo.Constraint(expr=m.makespan >= _host_work(m, m.V))


def _add_energetic(m: pyo.ConcreteModel) -> None:
    """s_v >= host work of v's ancestors; T >= f_v + host work of v's descendants.

    Valid: every ancestor a of v finishes before s_v (precedence along the path) and every
    descendant starts after f_v and ends by T; the host ones among them are disjoint
    intervals on the single host, inside [0, s_v] resp. [f_v, T].
    """
    anc, desc = m._structure["ancestors"], m._structure["descendants"]
    m.energetic_head = pyo.Constraint(
        m.V,
        rule=lambda m, v: m.start[v] >= _host_work(m, anc[v]) if anc[v] else pyo.Constraint.Skip,
    )
    m.energetic_tail = pyo.Constraint(
        m.V,
        rule=lambda m, v: m.makespan >= m.finish[v] + _host_work(m, desc[v])
        if desc[v]
        else pyo.Constraint.Skip,
    )


def _add_bottleneck(m: pyo.ConcreteModel) -> None:
    """s_v >= f_u + host work strictly between consecutive bottlenecks u -> v.

    A bottleneck is comparable with every other operator. Valid: each w between u and v
    (a descendant of u and an ancestor of v) runs inside [f_u, s_v]; the host ones are
    disjoint there. Only a handful of rows (one per consecutive bottleneck pair).
    """
    pairs = m._structure["bottleneck_pairs"]
    anc, desc = m._structure["ancestors"], m._structure["descendants"]
    m.BOTTLENECK_PAIRS = pyo.Set(dimen=2, initialize=pairs, ordered=True)
    m.bottleneck = pyo.Constraint(
        m.BOTTLENECK_PAIRS,
        rule=lambda m, u, v: m.start[v]
        >= m.finish[u] + _host_work(m, sorted(desc[u] & anc[v], key=m._structure["pos"].get)),
    )


def _add_window_big_m(m: pyo.ConcreteModel) -> None:
    """Eqs. 11-12 with a per-pair M_uv = max(0, min(M, UB - tail_u - head_v)), and T <= UB.

    UB is the makespan of a feasible schedule (``m.upper_bound``), head_v a constant lower
    bound on s_v and tail_u one on T - f_u (longest paths of the faster device's
    latencies, or of host-only operators' latencies, which the host runs serially). Valid
    for every solution with T <= UB, the only ones the added row T <= UB keeps and among
    which an optimum lies (UB is achieved): there f_u - s_v <= UB - tail_u - head_v, so a
    row switched off by x or o (coefficient >= 1) never binds. The faithful ``ordering``
    rows are then dominated; ``TIGHTENED_FAMILIES`` omits them.
    """
    if m.component("upper_bound") is None:
        raise PlacementError("the window_big_m family needs an upper bound (build_cim_model)")
    head, tail = m._structure["head"], m._structure["tail"]
    ub = pyo.value(m.upper_bound)
    big_m = pyo.value(m.big_m)

    def m_pair(u: str, v: str) -> float:  # model units: f_u - s_v <= this when T <= UB
        return max(0.0, min(big_m, ub - tail[u] - head[v]))

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


FAMILY_BUILDERS: dict[str, Callable[[pyo.ConcreteModel], None]] = {
    "makespan": _add_makespan,
    "finish": _add_finish,
    "precedence": _add_precedence,
    "transfer": _add_transfer,
    "ordering": _add_ordering,
    "budget": _add_budget,
    "host_serial": _add_host_serial,
    "energetic": _add_energetic,
    "bottleneck": _add_bottleneck,
    "window_big_m": _add_window_big_m,
}
#: The paper's model, Eqs. 5-14: the default.
FAITHFUL_FAMILIES: tuple[str, ...] = (
    "makespan", "finish", "precedence", "transfer", "ordering", "budget"
)
#: Valid inequalities only; each alone or together leaves the optimum unchanged.
TIGHTENING_FAMILIES: tuple[str, ...] = ("host_serial", "energetic", "bottleneck", "window_big_m")
#: Faithful rows with Eqs. 11-12 replaced by their per-pair big-M version, plus the bounds.
TIGHTENED_FAMILIES: tuple[str, ...] = (
    "makespan", "finish", "precedence", "transfer", "budget",
    "host_serial", "energetic", "bottleneck", "window_big_m",
)
# The paper's model plus the valid bounds that need no upper bound (no heuristic run):
# on near-chain graphs (few parallel pairs) this closes fastest.
BOUNDED_FAMILIES: tuple[str, ...] = FAITHFUL_FAMILIES + ("host_serial", "energetic", "bottleneck")
FORMULATIONS: dict[str, tuple[str, ...]] = {
    "faithful": FAITHFUL_FAMILIES,
    "bounded": BOUNDED_FAMILIES,
    "tightened": TIGHTENED_FAMILIES,
}
FAMILY_COMPONENTS: dict[str, tuple[str, ...]] = {
    "makespan": ("makespan_bound",),
    "finish": ("finish_time",),
    "precedence": ("precedence",),
    "transfer": ("transfer_lo", "transfer_hi"),
    "ordering": ("order_uv", "order_vu"),
    "budget": ("budget",),
    "host_serial": ("host_serial",),
    "energetic": ("energetic_head", "energetic_tail"),
    "bottleneck": ("bottleneck",),
    "window_big_m": ("makespan_cap", "order_uv_window", "order_vu_window"),
}

#: Relative slack on UB in ``T <= UB``: float rounding must never cut off the UB schedule.
_UB_SLACK = 1e-9


def formulation_families(name: str) -> tuple[str, ...]:
    """The families of a named formulation ("faithful", "bounded", "tightened")."""
    try:
        return FORMULATIONS[name]
    except KeyError:
        raise PlacementError(
            f"unknown CIM formulation {name!r}; known: {', '.join(FORMULATIONS)}"
        ) from None


def _structure(instance: CimInstance, unit: float) -> dict[str, Any]:
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


# --- model ----------------------------------------------------------------------------


def build_cim_model(
    instance: CimInstance,
    *,
    families: Iterable[str] = FAITHFUL_FAMILIES,
    upper_bound: float | None = None,
) -> pyo.ConcreteModel:
    """The faithful makespan ILP of Eqs. 5-14, or any choice of constraint families.

    ``upper_bound`` (seconds) must be the makespan of a feasible schedule; it is
    used by ``window_big_m`` only (as ``m.upper_bound`` and the row T <= UB).
    When that family is chosen without one, the heuristic's makespan is used.
    """
    chosen = list(dict.fromkeys(families))
    unknown = [f for f in chosen if f not in FAMILY_BUILDERS]
    if unknown:
        raise PlacementError(
            f"unknown CIM model family {unknown[0]!r}; known: {', '.join(FAMILY_BUILDERS)}"
        )
    unit = time_unit_for(instance)
    ops = instance.operators

    m = pyo.ConcreteModel(name="cim_makespan")
    m.families = tuple(chosen)  # plain attribute: which families were built
    m.V = pyo.Set(initialize=[op.name for op in ops], ordered=True)
    m.V_ACC = pyo.Set(within=m.V, initialize=[op.name for op in ops if op.supported], ordered=True)
    m.E = pyo.Set(dimen=2, initialize=[(e.src, e.dst) for e in instance.edges], ordered=True)
    m.P = pyo.Set(dimen=2, initialize=instance.parallel_pairs, ordered=True)  # Eq. 10
    m.SINKS = pyo.Set(within=m.V, initialize=instance.sinks, ordered=True)

    m.time_unit = pyo.Param(initialize=unit)  # seconds per model time unit
    m.t_host = pyo.Param(m.V, initialize={op.name: op.t_host / unit for op in ops})
    m.t_acc = pyo.Param(m.V, initialize={op.name: (op.t_acc or 0.0) / unit for op in ops})
    m.t_transfer = pyo.Param(
        m.E, initialize={(e.src, e.dst): e.t_transfer / unit for e in instance.edges}
    )
    m.crossbars = pyo.Param(
        m.V, initialize={op.name: op.crossbars if op.supported else 0 for op in ops}
    )
    m.crossbar_budget = pyo.Param(initialize=instance.crossbar_budget)
    m.big_m = pyo.Param(initialize=big_m_seconds(instance) / unit)  # Eq. 13
    if "window_big_m" in chosen and upper_bound is None:
        from placement.cim.heuristic import heuristic_schedule

        upper_bound = heuristic_schedule(instance).makespan
    if upper_bound is not None:
        if not (math.isfinite(upper_bound) and upper_bound >= 0):
            raise PlacementError(f"upper bound must be finite and >= 0, got {upper_bound!r}")
        m.upper_bound = pyo.Param(initialize=upper_bound / unit * (1 + _UB_SLACK))
    if any(f in TIGHTENING_FAMILIES for f in chosen):
        m._structure = _structure(instance, unit)  # plain attribute, used while building

    m.host = pyo.Var(m.V, within=pyo.Binary)  # Eq. 5
    for op in ops:
        if not op.supported:
            m.host[op.name].fix(1)  # Eq. 5: x_v = 1 outside V_acc
    m.start = pyo.Var(m.V, within=pyo.NonNegativeReals)
    m.finish = pyo.Var(m.V, within=pyo.NonNegativeReals)  # implied by Eq. 7 and s_v >= 0
    m.transfer = pyo.Var(m.E, within=pyo.Binary)
    m.order = pyo.Var(m.P, within=pyo.Binary)
    m.makespan = pyo.Var(within=pyo.NonNegativeReals)
    m.objective = pyo.Objective(expr=m.makespan, sense=pyo.minimize)

    for family in chosen:
        FAMILY_BUILDERS[family](m)
    return m


def set_family_active(model: pyo.ConcreteModel, family: str, active: bool) -> None:
    """Switch a constraint family of a built model on or off."""
    if family not in FAMILY_COMPONENTS:
        raise PlacementError(
            f"unknown CIM model family {family!r}; known: {', '.join(FAMILY_COMPONENTS)}"
        )
    for name in FAMILY_COMPONENTS[family]:
        comp = model.component(name)
        if comp is None:
            continue  # not built (e.g. no budget row without supported operators)
        if active:
            comp.activate()
        else:
            comp.deactivate()


def cim_model_size(model: pyo.ConcreteModel) -> ModelSize:
    """Columns and rows the solver sees: unfixed variables in active rows/objective, active rows.

    Fixed x_v (operators outside V_acc) are constants to the solver and not counted.
    """
    return model_size(model)


def extract_schedule(model: pyo.ConcreteModel, instance: CimInstance) -> CimSchedule:
    """The solver's schedule in seconds; binaries are rounded (x_v > 0.5 means host).

    Start and finish times are the solver's values (not recomputed), so that
    ``verify_cim`` checks what the solver actually returned.
    """
    unit = pyo.value(model.time_unit)
    on_host: dict[str, bool] = {}
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    for op in instance.operators:
        v = op.name
        x, s, f = model.host[v].value, model.start[v].value, model.finish[v].value
        if x is None or s is None or f is None:
            raise PlacementError(f"the solver returned no value for operator {v!r}")
        on_host[v] = x > 0.5
        start[v] = s * unit
        finish[v] = f * unit
    t = model.makespan.value
    if t is None:
        raise PlacementError("the solver returned no makespan value")
    return CimSchedule(on_host=on_host, start=start, finish=finish, makespan=t * unit)


def start_values(
    model: pyo.ConcreteModel, instance: CimInstance, schedule: CimSchedule
) -> ComponentMap:
    """A MIP start from a feasible schedule: every variable's value, in model units.

    x, s, f and T from the schedule; z from the devices; o_uv = 1 when u starts
    before v (for pairs not both on the host any value is feasible). Fixed x_v are
    included; a solver interface skips what is not a column.
    """
    unit = pyo.value(model.time_unit)
    values = ComponentMap()
    for v in model.V:
        values[model.host[v]] = 1.0 if schedule.on_host[v] else 0.0
        values[model.start[v]] = schedule.start[v] / unit
        values[model.finish[v]] = schedule.finish[v] / unit
    for u, v in model.E:
        values[model.transfer[u, v]] = float(schedule.on_host[u] != schedule.on_host[v])
    host_pos = {v: i for i, v in enumerate(schedule.host_order)}
    for u, v in model.P:
        key_u = (host_pos.get(u, -1), schedule.start[u])
        key_v = (host_pos.get(v, -1), schedule.start[v])
        if u in host_pos and v in host_pos:
            values[model.order[u, v]] = float(key_u < key_v)
        else:
            values[model.order[u, v]] = float(schedule.start[u] <= schedule.start[v])
    values[model.makespan] = max(schedule.finish.values()) / unit
    return values
