"""Objectives beyond the makespan, as blocks a user adds to the CIM model and combines.

The paper's model minimizes the makespan ``T`` (``m.objective``). The blocks below add
the other quantities an architect trades against it, each as a variable defined by one
constraint, so that any of them can be minimized or bounded, alone or together:

============================  ==============================================================
``add_energy(m, instance)``   ``m.energy`` (J / ``m.energy_unit``), defined by
                              ``m.energy_total``: sum of ``e_host[v] x_v`` + ``e_acc[v] (1 -
                              x_v)`` + ``e_transfer[u, v] z_uv`` + ``p_static T``; the data
                              ``m.e_host``, ``m.e_acc``, ``m.e_transfer``, ``m.p_static``
                              (energy units, per time unit for ``p_static``) and
                              ``m.energy_unit`` (joules per energy unit)
``add_period(m)``             ``m.period`` (time units): the steady-state period of a frame
                              stream, at least every resource's load per frame:
                              ``m.period_host`` (host work), ``m.period_bus`` (transfers on the
                              shared bus) and ``m.period_crossbars[v]`` (each CIM operator's
                              own crossbars)
``add_crossbars_used(m)``     ``m.crossbars_used``, defined by ``m.crossbars_used_total``: the
                              crossbars of the offloaded operators (Eq. 14's left side)
``set_bound(m, axis, value)`` ``m.<axis>_bound``: the axis at most ``value`` (SI units: s, J,
                              s, crossbars), replacing an earlier bound on that axis
``set_objective(m, axis)``    ``m.objective``: minimize one axis
============================  ==============================================================

Axes (:data:`AXES`): ``latency`` (``m.makespan``, the paper's objective), ``energy``,
``period`` (frames per second = 1 / period) and ``crossbars``. The energy model is
:mod:`placement.devices.cim_energy` (its numbers come with the instance); the throughput
model: with weight-stationary crossbars and no dependence between frames, the host, the
shared bus and each offloaded operator's crossbars are the resources a stream of frames
shares, and the smallest period is the largest load per frame, which a modulo schedule
achieves (:mod:`placement.cim.stream` builds one and simulates it).

Validity with the other families: the paper's families and the valid inequalities of
:mod:`placement.models.cim_makespan.bounds` describe the schedules, not the objective, so
they stay valid under any of these objectives and bounds, with one exception:
``window_big_m`` states ``T <= UB`` and needs ``UB`` at least the makespan of some optimal
solution of the problem actually solved (``placement.cim.objectives`` passes one).

The transfer variables ``z_uv`` are bounded from below only (Eq. 9), so ``m.energy``
and ``m.period`` are at least the values of the placement's own devices; a solver may
leave them above, never below, which the independent verifier's recomputation
(:mod:`placement.cim.verifier`) would catch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyomo.environ as pyo

from placement.errors import PlacementError
from placement.models.cim_makespan.problem import CimProblem
from placement.models.cim_makespan.terms import lookup, weighted_sum
from placement.models.common import power_of_ten_unit

#: Energy units: the largest energy of any placement lands in [1e4, 1e5) of them.
_E_DECADE = 4


@dataclass(frozen=True)
class Axis:
    """One quantity to minimize or bound: its model component and its SI unit."""

    name: str
    component: str  # the model variable
    unit: str  # of the SI value: "s", "J", "crossbars"
    scale: Callable[[pyo.ConcreteModel], float]  # SI units per model unit


AXES: dict[str, Axis] = {
    "latency": Axis("latency", "makespan", "s", lambda m: pyo.value(m.time_unit)),
    "energy": Axis("energy", "energy", "J", lambda m: pyo.value(m.energy_unit)),
    "period": Axis("period", "period", "s", lambda m: pyo.value(m.time_unit)),
    "crossbars": Axis("crossbars", "crossbars_used", "crossbars", lambda m: 1.0),
}


def axis(name: str) -> Axis:
    """The axis ``name``; a one-line PlacementError for an unknown one."""
    try:
        return AXES[name]
    except KeyError:
        raise PlacementError(f"unknown objective {name!r}; known: {', '.join(AXES)}") from None


def energy_upper_bound(instance: CimProblem, makespan_bound: float) -> float:
    """Joules no placement exceeds when its makespan is at most ``makespan_bound`` s."""
    ops = instance.operators
    dynamic = math.fsum(max(getattr(op, "e_host", 0.0) or 0.0, getattr(op, "e_acc", 0.0) or 0.0)
                        for op in ops)  # fmt: skip
    transfers = math.fsum(getattr(e, "e_transfer", 0.0) or 0.0 for e in instance.edges)
    static = (getattr(instance, "p_static", 0.0) or 0.0) * makespan_bound
    return dynamic + transfers + static


def add_energy(m: pyo.ConcreteModel, instance: CimProblem) -> None:
    """``m.energy``: the energy of one inference (module docstring; the data come from the
    instance, which must carry the energy model's numbers: ``has_energy``)."""
    if not getattr(instance, "has_energy", False):
        raise PlacementError(
            "the instance has no energy model: its hardware needs the [cim] energy constants"
            " and a host power ([host] active_power_w)"
        )
    t_unit = pyo.value(m.time_unit)
    unit = power_of_ten_unit(energy_upper_bound(instance, pyo.value(m.big_m) * t_unit), _E_DECADE)
    ops = instance.operators
    m.energy_unit = pyo.Param(initialize=unit)  # joules per energy unit
    m.e_host = pyo.Param(m.V, initialize={op.name: op.e_host / unit for op in ops})
    m.e_acc = pyo.Param(
        m.V_ACC, initialize={op.name: op.e_acc / unit for op in ops if op.supported}
    )
    m.e_transfer = pyo.Param(
        m.E, initialize={(e.src, e.dst): e.e_transfer / unit for e in instance.edges}
    )
    m.p_static = pyo.Param(initialize=instance.p_static * t_unit / unit)  # per time unit
    m.energy = pyo.Var(within=pyo.NonNegativeReals)
    host, transfer = lookup(m.host), lookup(m.transfer)
    e_host, e_acc, e_transfer = lookup(m.e_host), lookup(m.e_acc), lookup(m.e_transfer)
    # (1 - x_v) e_acc,v = e_acc,v - x_v e_acc,v: constants apart, one linear sum
    offloadable = math.fsum(e_acc[v] for v in m.V_ACC)
    terms = weighted_sum(
        [(e_host[v], host[v]) for v in m.V]
        + [(-e_acc[v], host[v]) for v in m.V_ACC]
        + [(e_transfer[u, v], transfer[u, v]) for u, v in m.E]
        + [(pyo.value(m.p_static), m.makespan)]
    )
    m.energy_total = pyo.Constraint(expr=m.energy == terms + offloadable)


def add_period(m: pyo.ConcreteModel) -> None:
    """``m.period``: at least each resource's load per frame (module docstring)."""
    host, transfer = lookup(m.host), lookup(m.transfer)
    t_host, t_acc, t_transfer = lookup(m.t_host), lookup(m.t_acc), lookup(m.t_transfer)
    m.period = pyo.Var(within=pyo.NonNegativeReals)
    m.period_host = pyo.Constraint(
        expr=m.period >= weighted_sum((t_host[v], host[v]) for v in m.V)
    )
    m.period_bus = pyo.Constraint(
        expr=m.period >= weighted_sum((t_transfer[u, v], transfer[u, v]) for u, v in m.E)
    )
    m.period_crossbars = pyo.Constraint(
        m.V_ACC, rule=lambda m, v: m.period >= t_acc[v] * (1 - host[v])
    )


def add_crossbars_used(m: pyo.ConcreteModel) -> None:
    """``m.crossbars_used``: the crossbars of the offloaded operators."""
    host, crossbars = lookup(m.host), lookup(m.crossbars)
    m.crossbars_used = pyo.Var(within=pyo.NonNegativeReals)
    total = math.fsum(crossbars[v] for v in m.V_ACC)
    m.crossbars_used_total = pyo.Constraint(
        expr=m.crossbars_used == total + weighted_sum((-crossbars[v], host[v]) for v in m.V_ACC)
    )


def axis_value(m: pyo.ConcreteModel, name: str) -> float | None:
    """The solved value of axis ``name`` in SI units (None when unset)."""
    ax = axis(name)
    value = m.component(ax.component).value
    return None if value is None else value * ax.scale(m)


def set_bound(m: pyo.ConcreteModel, name: str, value: float) -> None:
    """``m.<name>_bound``: axis ``name`` at most ``value`` (SI units), replacing an earlier
    bound on it. The axis's block must have been added (latency always is)."""
    ax = axis(name)
    var = m.component(ax.component)
    if var is None:
        raise PlacementError(f"the model has no {name} block: add it first ({ax.component})")
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise PlacementError(f"a bound on {name} must be a finite number >= 0, got {value!r}")
    component = f"{name}_bound"
    if m.component(component) is not None:
        m.del_component(component)
    m.add_component(component, pyo.Constraint(expr=var <= value / ax.scale(m)))


def set_objective(m: pyo.ConcreteModel, name: str) -> None:
    """``m.objective``: minimize axis ``name`` (its block must have been added)."""
    ax = axis(name)
    var = m.component(ax.component)
    if var is None:
        raise PlacementError(f"the model has no {name} block: add it first ({ax.component})")
    m.del_component("objective")
    m.objective = pyo.Objective(expr=var, sense=pyo.minimize)


#: The block each axis needs, by axis (latency's is the paper's model itself).
AXIS_BLOCKS: dict[str, Callable[[pyo.ConcreteModel, Any], None]] = {
    "latency": lambda m, instance: None,
    "energy": add_energy,
    "period": lambda m, instance: add_period(m),
    "crossbars": lambda m, instance: add_crossbars_used(m),
}


def add_axes(m: pyo.ConcreteModel, instance: CimProblem, names: Any) -> None:
    """The blocks of the axes ``names`` not yet in ``m``."""
    for name in dict.fromkeys(names):
        ax = axis(name)
        if m.component(ax.component) is None:
            AXIS_BLOCKS[name](m, instance)
