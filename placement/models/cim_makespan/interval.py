"""The CIM makespan problem as an OR-Tools CP-SAT interval model (no big-M, no ordering
binaries): the same problem as the ILP of ``placement.models.cim_makespan`` (Eqs. 5-14), stated
with scheduling constraints.

* per operator v a Boolean x_v (1 = host; fixed to 1 outside V_acc), integer start s_v
  and end e_v = s_v + T_acc,v + x_v (T_host,v - T_acc,v);
* one *optional* fixed-size interval [s_v, s_v + T_host,v) per operator, present iff
  x_v, and a single NoOverlap over them: the host runs one operator at a time;
* per edge (u, v): s_v >= e_u, and s_v >= e_u + T_transfer,(u,v) enforced when
  x_u != x_v (two reified rows);
* the crossbar budget (Eq. 14), T >= e_v for sinks, minimize T;
* the valid bounds of the ``bounded`` formulation (host-serial, ancestor/descendant
  host work within each segment between bottlenecks, consecutive bottlenecks) and
  constant head/tail bounds on the domains; without them CP-SAT proves little on
  YOLO-sized graphs; and the host-idle rows of ``data["idle_windows"]``
  (:func:`~placement.models.cim_makespan.structure.host_idle_windows`);
* a feasible schedule as a hint, its makespan as the horizon;
* with ``data["price"]`` (time units per crossbar, an integer): minimize T + price x
  crossbars used instead of T (:mod:`placement.cim.priced`); or with ``data["cost"]``
  (time units for 0, 1, ..., budget crossbars, never decreasing): T + cost[crossbars
  used]. The horizon must then be the hint's priced value, which bounds T at the
  priced optimum.

:func:`build_interval_model` takes plain integer data (``placement.cim.cpsat_route`` prepares
it) and runs in the CP-SAT worker process (``placement.solvers.cpsat``): this module
imports OR-Tools only there, never in the caller's process.
"""

from __future__ import annotations

from typing import Any


def build_interval_model(data: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The CP-SAT model of ``data`` and its variables by name (``host[v]``, ``start[v]``,
    ``finish[v]``, ``makespan``)."""
    from ortools.sat.python import cp_model

    names: list[str] = data["names"]
    index = {v: i for i, v in enumerate(names)}
    dh = dict(zip(names, data["t_host"], strict=True))
    horizon: int = data["horizon"]
    m = cp_model.CpModel()
    x = {v: m.new_bool_var(f"host[{v}]") for v in names}
    s, e, intervals = {}, {}, []
    for v in names:
        head = data["head"][v] if data["use_bounds"] else 0
        tail = data["tail"][v] if data["use_bounds"] else 0
        s[v] = m.new_int_var(min(head, horizon), horizon, f"start[{v}]")
        e[v] = m.new_int_var(0, max(horizon - tail, 0), f"finish[{v}]")
        da = data["t_acc"][index[v]]
        if da is None:
            m.add(x[v] == 1)  # Eq. 5
            m.add(e[v] == s[v] + dh[v])
        else:
            m.add(e[v] == s[v] + da + (dh[v] - da) * x[v])  # Eq. 7
        intervals.append(m.new_optional_fixed_size_interval_var(s[v], dh[v], x[v], f"iv[{v}]"))
    m.add_no_overlap(intervals)  # the single host: what Eqs. 11-12 encode with big-M
    for u, v, tr in data["edges"]:
        m.add(s[v] >= e[u])  # Eq. 8 on the same device
        if tr > 0:  # Eqs. 8-9: the transfer only between devices
            m.add(s[v] >= e[u] + tr).only_enforce_if([x[u], x[v].Not()])
            m.add(s[v] >= e[u] + tr).only_enforce_if([x[u].Not(), x[v]])
    capable = [v for v in names if data["t_acc"][index[v]] is not None]
    if capable:  # Eq. 14
        xb = data["crossbars"]
        m.add(sum(xb[index[v]] * (1 - x[v]) for v in capable) <= data["budget"])
    makespan = m.new_int_var(0, horizon, "makespan")
    for v in data["sinks"]:
        m.add(makespan >= e[v])  # Eq. 6
    if data["use_bounds"]:
        def work(nodes: Any) -> Any:
            return sum((dh[w] * x[w] for w in nodes if dh[w] > 0), start=0)

        m.add(makespan >= work(names))  # host-serial
        for v in names:  # host work of v's ancestors / descendants within its segment
            p, before = data["before"][v]
            if before:
                m.add(s[v] >= (0 if p is None else e[p]) + work(before))
            q, after = data["after"][v]
            if after:
                m.add((makespan if q is None else s[q]) >= e[v] + work(after))
        for u, v, between in data["between"]:  # between consecutive bottlenecks
            m.add(s[v] >= e[u] + work(between))
        head, tail = data["head"], data["tail"]
        for a, b in data["idle_windows"]:  # the host's idle time (host_idle_windows)
            left = {w: dh[w] - min(dh[w], max(a - head[w], 0) + max(b - tail[w], 0))
                    for w in names}  # fmt: skip
            m.add(makespan >= sum((left[w] * x[w] for w in names if left[w]), start=0) + a + b)
    price, cost = data.get("price", 0), data.get("cost")
    if capable and (price or cost):  # priced: a relaxation of Eq. 14 (the row stays)
        xb = data["crossbars"]
        used = sum(xb[index[v]] * (1 - x[v]) for v in capable)
        if cost is None:
            m.minimize(makespan + price * used)
        else:
            count = m.new_int_var(0, data["budget"], "crossbars")
            m.add(count == used)
            charged = m.new_int_var(cost[0], cost[-1], "crossbar_cost")
            m.add_element(count, cost, charged)
            m.minimize(makespan + charged)
    else:
        m.minimize(makespan)
    for v in names:  # a feasible schedule on the same data: the hint
        on_host, start, finish = data["hint"][v]
        m.add_hint(x[v], on_host)
        m.add_hint(s[v], start)
        m.add_hint(e[v], finish)
    m.add_hint(makespan, horizon)
    wanted: dict[str, Any] = {"makespan": makespan}
    for v in names:
        wanted[f"host[{v}]"] = x[v]
        wanted[f"start[{v}]"] = s[v]
        wanted[f"finish[{v}]"] = e[v]
    return m, wanted
