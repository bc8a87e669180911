"""Independent checks of a CIM placement, from the raw instance data alone.

Nothing here uses Pyomo or the model code: a schedule (assignment, start and
finish times, makespan) is checked against the instance's latencies, edges,
transfers and crossbar budget, and its makespan is recomputed by an
earliest-start schedule of the same assignment and host sequence. A solver
bug (HiGHS has had presolve bugs on big-M models) shows up as a violation.

Tolerance: ``a >= b`` passes when ``a >= b - (tol * scale + 1e-12)``, where
``scale`` is the schedule's latest finish (seconds): a relative tolerance plus a
picosecond for all-zero instances.

Energy: on an instance with the energy model, the energy of the schedule is recomputed
from the instance's per-operator and per-edge energies and its static power
(``recomputed_energy``, joules), and a claimed energy must match it within ``tol``
(relative).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule, asap_schedule, host_order_by_start
from placement.errors import PlacementError, raise_violations

_ABS_SLACK = 1e-12  # seconds


@dataclass
class CimVerification:
    ok: bool
    violations: list[str] = field(default_factory=list)
    recomputed_makespan: float = math.nan  # NaN when the assignment is unusable
    recomputed_energy: float = math.nan  # J; NaN without an energy model

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise_violations(self.violations)

    def to_json(self) -> dict[str, Any]:
        rec = self.recomputed_makespan
        doc = {
            "ok": self.ok,
            "violations": list(self.violations),
            "recomputed_makespan": None if math.isnan(rec) else rec,
        }
        if not math.isnan(self.recomputed_energy):
            doc["recomputed_energy"] = self.recomputed_energy
        return doc


def verify_cim(
    instance: CimInstance,
    schedule: CimSchedule,
    *,
    claimed: float | None = None,
    claimed_energy: float | None = None,
    tol: float = 1e-6,
) -> CimVerification:
    """Check ``schedule`` against ``instance``; every problem becomes one readable violation.

    ``claimed``: the makespan a solver reported; ``claimed_energy``: the energy (joules) it
    reported, checked against the energy recomputed here."""
    bad: list[str] = []
    ops = instance.by_name
    names = [op.name for op in instance.operators]

    # Every operator present, with a device, a start and a finish; nothing unknown.
    complete = True
    for what, table in (("device", schedule.on_host), ("start", schedule.start),
                        ("finish", schedule.finish)):
        for v in names:
            if v not in table:
                bad.append(f"operator {v!r} has no {what} in the schedule")
                complete = False
        for v in table:
            if v not in ops:
                bad.append(f"the schedule names unknown operator {v!r} ({what})")
    if not complete:
        return CimVerification(ok=False, violations=bad)
    on_host, start, finish = schedule.on_host, schedule.start, schedule.finish

    finite = True
    for v in names:
        for what, t in (("start", start[v]), ("finish", finish[v])):
            if not (isinstance(t, (int, float)) and math.isfinite(t)):
                bad.append(f"operator {v!r}: {what} time {t!r} is not a finite number")
                finite = False
    for what, t in (("makespan", schedule.makespan), ("claimed makespan", claimed)):
        if t is not None and not (isinstance(t, (int, float)) and math.isfinite(t)):
            bad.append(f"{what} {t!r} is not a finite number")
            finite = False
    if not finite:
        return CimVerification(ok=False, violations=bad)

    # Scale from the finish times only: a wildly wrong makespan or claim must not loosen checks.
    scale = max(abs(finish[v]) for v in names)
    slack = tol * scale + _ABS_SLACK

    # Eq. 5: unsupported operators on the host.
    for v in names:
        if not on_host[v] and not ops[v].supported:
            bad.append(f"operator {v!r} is placed on CIM but the accelerator does not support it")

    # Eq. 14: crossbar budget.
    used = sum(ops[v].crossbars for v in names if not on_host[v] and ops[v].supported)
    if used > instance.crossbar_budget:
        offloaded = [v for v in names if not on_host[v]]
        bad.append(
            f"crossbar budget exceeded: {used} crossbars used > {instance.crossbar_budget}"
            f" available (CIM operators: {', '.join(offloaded)})"
        )

    # s_v >= 0 and Eq. 7: durations.
    for v in names:
        if start[v] < -slack:
            bad.append(f"operator {v!r} starts at {start[v]:.9g} s, before time 0")
        op = ops[v]
        dur = op.t_host if on_host[v] else op.t_acc
        if dur is None:
            continue  # already reported as unsupported
        if abs(finish[v] - start[v] - dur) > slack:
            dev = "host" if on_host[v] else "CIM"
            bad.append(
                f"operator {v!r}: finish - start = {finish[v] - start[v]:.9g} s but its {dev}"
                f" latency is {dur:.9g} s"
            )

    # Eq. 8: precedence, with the transfer when the devices differ.
    for e in instance.edges:
        u, v = e.src, e.dst
        need = finish[u] + (e.t_transfer if on_host[u] != on_host[v] else 0.0)
        if start[v] < need - slack:
            extra = f" + transfer {e.t_transfer:.9g} s" if on_host[u] != on_host[v] else ""
            bad.append(
                f"precedence {u!r} -> {v!r} violated: {v!r} starts at {start[v]:.9g} s, before"
                f" {u!r} finishes at {finish[u]:.9g} s{extra} (short by {need - start[v]:.3g} s)"
            )

    # Host serialization: no two host operators overlap.
    host = sorted((v for v in names if on_host[v]), key=lambda v: (start[v], finish[v]))
    latest = None  # host operator with the latest finish so far
    for v in host:
        if latest is not None and start[v] < finish[latest] - slack:
            bad.append(
                f"host operators {latest!r} and {v!r} overlap: {v!r} starts at {start[v]:.9g} s,"
                f" {latest!r} runs until {finish[latest]:.9g} s"
            )
        if latest is None or finish[v] > finish[latest]:
            latest = v

    # Eq. 6: makespan = latest finish; and the claim.
    last = max(names, key=lambda v: finish[v])
    if abs(schedule.makespan - finish[last]) > slack:
        bad.append(
            f"makespan {schedule.makespan:.9g} s differs from the latest finish"
            f" {finish[last]:.9g} s (operator {last!r})"
        )
    if claimed is not None and abs(claimed - finish[last]) > slack:
        bad.append(
            f"claimed makespan {claimed:.9g} s differs from the schedule's"
            f" {finish[last]:.9g} s (operator {last!r} finishes last)"
        )

    # Recompute: the earliest-start schedule of the same assignment and host order can
    # only be as fast or faster; a claim below it is impossible.
    recomputed = math.nan
    if all(on_host[v] or ops[v].supported for v in names):
        try:
            asap = asap_schedule(instance, on_host, host_order_by_start(instance, on_host, start))
            recomputed = asap.makespan
        except PlacementError as exc:  # pragma: no cover - order is built consistent
            bad.append(f"cannot recompute the makespan: {exc}")
        claim = claimed if claimed is not None else schedule.makespan
        if not math.isnan(recomputed) and recomputed > claim + slack:
            bad.append(
                f"recomputed makespan {recomputed:.9g} s (earliest start, same assignment and"
                f" host order) exceeds the claimed {claim:.9g} s"
            )
    energy = math.nan
    if instance.has_energy:
        energy = _energy(instance, on_host, finish[last])
        if claimed_energy is not None and not (
            abs(claimed_energy - energy) <= tol * max(abs(energy), 1e-30) + 1e-18
        ):
            bad.append(
                f"claimed energy {claimed_energy:.9g} J differs from the recomputed"
                f" {energy:.9g} J (same assignment, makespan {finish[last]:.9g} s)"
            )
    return CimVerification(ok=not bad, violations=bad, recomputed_makespan=recomputed,
                           recomputed_energy=energy)  # fmt: skip


def _energy(instance: CimInstance, on_host: dict[str, bool], makespan: float) -> float:
    """Joules: host operators' E5, CIM operators' E1 + E2, E3 on edges between devices and
    the static power over ``makespan`` (placement.devices.cim_energy)."""
    terms = [(instance.p_static or 0.0) * makespan]
    for op in instance.operators:
        if on_host[op.name]:
            terms.append(op.e_host or 0.0)
        else:
            terms += [op.e_mvm or 0.0, op.e_internal or 0.0]
    terms += [e.e_transfer or 0.0 for e in instance.edges if on_host[e.src] != on_host[e.dst]]
    return math.fsum(terms)

