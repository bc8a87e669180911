"""The objectives of :mod:`placement.models.cim_makespan.objectives` on the CP-SAT interval
model (:mod:`placement.models.cim_makespan.interval`): the same axes, in integers.

``data["objective"]`` adds to the interval model's data:

* ``minimize``: the axis to minimize (``latency``, ``energy``, ``period``, ``crossbars``);
* ``bounds``: axis -> integer upper bound, in the axis's integer unit;
* ``energy`` (when an axis is energy): per operator ``e_host`` and ``e_acc`` (None when
  unsupported), per edge ``e_transfer`` (in ``data["edges"]`` order) and ``p_static``
  (energy units per time unit), all integers.

Energy needs ``z_uv`` (devices differ), which the interval model enforces by reified
rows only: here a Boolean ``z`` per edge with ``z >= x_u - x_v`` and ``z >= x_v - x_u``,
bounded from below as in the MILP (Eq. 9). The caller rounds every coefficient down, so
the integer problem is a relaxation of the true one (``placement.cim.objectives``).
"""

from __future__ import annotations

from typing import Any

from placement.models.cim_makespan.interval import build_interval_model


def build_objective_interval_model(data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The interval model of ``data`` with the objective of ``data["objective"]``; its
    variables by name as :func:`build_interval_model` returns them."""
    m, wanted = build_interval_model(data)
    spec = data["objective"]
    names: list[str] = data["names"]
    x = {v: wanted[f"host[{v}]"] for v in names}
    axes = {spec["minimize"], *spec["bounds"]}
    expr: dict[str, Any] = {"latency": wanted["makespan"]}
    capable = [i for i, v in enumerate(names) if data["t_acc"][i] is not None]
    if "crossbars" in axes:
        xb = data["crossbars"]
        expr["crossbars"] = sum(xb[i] * (1 - x[names[i]]) for i in capable)
    z = {}
    if "energy" in axes or "period" in axes:
        for k, (u, v, _t) in enumerate(data["edges"]):
            z[k] = m.new_bool_var(f"transfer[{u},{v}]")
            m.add(z[k] >= x[u] - x[v])
            m.add(z[k] >= x[v] - x[u])
    if "energy" in axes:
        en = spec["energy"]
        expr["energy"] = (
            sum(en["e_host"][i] * x[v] for i, v in enumerate(names))
            + sum(en["e_acc"][i] * (1 - x[names[i]]) for i in capable)
            + sum(en["e_transfer"][k] * z[k] for k in z)
            + en["p_static"] * wanted["makespan"]
        )
    if "period" in axes:
        period = m.new_int_var(0, data["period_horizon"], "period")
        m.add(period >= sum(data["t_host"][i] * x[v] for i, v in enumerate(names)))
        m.add(period >= sum(t * z[k] for k, (_u, _v, t) in enumerate(data["edges"])))
        for i in capable:
            m.add(period >= data["t_acc"][i] * (1 - x[names[i]]))
        expr["period"] = period
    for axis, bound in spec["bounds"].items():
        m.add(expr[axis] <= bound)
    m.minimize(expr[spec["minimize"]])
    return m, wanted
