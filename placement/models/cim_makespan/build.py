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
``FAMILY_COMPONENTS``), in :mod:`placement.models.cim_makespan.paper`: ``makespan`` (Eq. 6),
``finish`` (Eq. 7), ``precedence`` (Eq. 8), ``transfer`` (Eq. 9), ``ordering`` (Eqs.
11-12, big-M of Eq. 13) and ``budget`` (Eq. 14). All are on by default: that is the
faithful model. A benchmark may build with a subset (a relaxation) or deactivate a
family on a built model with ``set_family_active``. Valid inequalities are further
families in :mod:`placement.models.cim_makespan.bounds` (``TIGHTENING_FAMILIES``:
``host_serial``, ``energetic``, ``bottleneck``, ``window_big_m``; each docstring
gives its validity argument); ``FORMULATIONS`` names the choices of families:
``faithful`` (Eqs. 5-14 only), ``bounded`` (plus the three bound families, no upper
bound needed) and ``tightened`` (plus the per-pair big-M of ``window_big_m`` in
place of Eqs. 11-12).

Eq. 5 is realized by fixing ``m.host[v] = 1`` for ``v`` outside ``V_acc`` (not by
a constraint): Pyomo's HiGHS interface then passes those x_v as constants.
For such operators ``T_acc,v := 0`` (as in Eq. 13), harmless because x_v = 1.

Scaling (``placement.models.common``): the model is built in a time unit
``m.time_unit`` (a power of ten of seconds) chosen so that the big-M of Eq. 13 lies
in [1e4, 1e5) model units. Every time-valued component (``start``, ``finish``,
``makespan``, ``t_*``, ``big_m``, the objective) is in that unit; multiply by
``value(m.time_unit)`` for seconds. ``extract_schedule`` returns seconds. The model
reads the instance through the protocols of :mod:`placement.models.cim_makespan.problem`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap
from pyomo.common.gc_manager import PauseGC

from placement.errors import PlacementError
from placement.models.cim_makespan import bounds, paper
from placement.models.cim_makespan.problem import CimProblem, ScheduleData, ScheduleValues
from placement.models.cim_makespan.structure import structure
from placement.models.common import power_of_ten_unit

#: Model units for the big-M: M lands in [10**_M_DECADE, 10**(_M_DECADE + 1)).
_M_DECADE = 4


def big_m_seconds(instance: CimProblem) -> float:
    """Eq. 13: sum of max(T_host, T_acc) (T_acc := 0 outside V_acc) plus all transfers."""
    return math.fsum(max(op.t_host, op.t_acc or 0.0) for op in instance.operators) + math.fsum(
        e.t_transfer for e in instance.edges
    )


def time_unit_for(instance: CimProblem) -> float:
    """Seconds per model time unit: a power of ten putting Eq. 13's M in [1e4, 1e5)."""
    return power_of_ten_unit(big_m_seconds(instance), _M_DECADE)



FAMILY_BUILDERS: dict[str, Callable[[pyo.ConcreteModel], None]] = {
    "makespan": paper.add_makespan,
    "finish": paper.add_finish,
    "precedence": paper.add_precedence,
    "transfer": paper.add_transfer,
    "ordering": paper.add_ordering,
    "budget": paper.add_budget,
    "host_serial": bounds.add_host_serial,
    "energetic": bounds.add_energetic,
    "bottleneck": bounds.add_bottleneck,
    "window_big_m": bounds.add_window_big_m,
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


def build_cim_model(
    instance: CimProblem,
    *,
    families: Iterable[str] = FAITHFUL_FAMILIES,
    upper_bound: float | None = None,
) -> pyo.ConcreteModel:
    """The faithful makespan ILP of Eqs. 5-14, or any choice of constraint families.

    ``upper_bound`` (seconds) must be the makespan of a feasible schedule; it is
    used by ``window_big_m`` only (as ``m.upper_bound`` and the row T <= UB), which
    needs one (:func:`placement.cim.build_model` runs the heuristic for it).

    Python's cyclic garbage collector is paused while building: the build allocates
    millions of small objects and no cycles worth collecting, and each collection would
    scan all of them again (measured: half the build time at 2,000 operators).
    """
    with PauseGC():
        return _build(instance, families, upper_bound)


def _build(
    instance: CimProblem, families: Iterable[str], upper_bound: float | None
) -> pyo.ConcreteModel:
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
        raise PlacementError(
            "the window_big_m family needs an upper bound: the makespan of a feasible"
            " schedule (placement.cim.build_model runs the heuristic for it)"
        )
    if upper_bound is not None:
        if not (math.isfinite(upper_bound) and upper_bound >= 0):
            raise PlacementError(f"upper bound must be finite and >= 0, got {upper_bound!r}")
        m.upper_bound = pyo.Param(initialize=upper_bound / unit * (1 + _UB_SLACK))
    if any(f in TIGHTENING_FAMILIES for f in chosen):
        m.graph_structure = structure(instance, unit)  # plain attribute, used while building

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


def price_crossbars(model: pyo.ConcreteModel, price: float) -> None:
    """Minimize T + ``price`` x the crossbars used instead of T (``price`` in seconds per
    crossbar): the Lagrangian relaxation of the budget (Eq. 14), whose optimum bounds the
    budgeted one from below by ``price`` x budget less. The budget row stays (a block of a
    decomposition keeps it as its own limit). A model with ``window_big_m`` must have
    been built with an upper bound of T at the priced optimum: the T + price x crossbars
    of a feasible schedule is one. Adds ``m.priced_objective`` and deactivates
    ``m.objective``."""
    if not (math.isfinite(price) and price >= 0):
        raise PlacementError(f"crossbar price must be finite and >= 0, got {price!r}")
    unit = pyo.value(model.time_unit)
    model.objective.deactivate()
    used = sum(model.crossbars[v] * (1 - model.host[v]) for v in model.V_ACC)
    model.priced_objective = pyo.Objective(expr=model.makespan + price / unit * used,
                                           sense=pyo.minimize)  # fmt: skip


def extract_schedule(model: pyo.ConcreteModel, instance: CimProblem) -> ScheduleValues:
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
    return ScheduleValues(on_host=on_host, start=start, finish=finish, makespan=t * unit)


def start_values(
    model: pyo.ConcreteModel, instance: CimProblem, schedule: ScheduleData
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
