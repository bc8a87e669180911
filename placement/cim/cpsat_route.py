"""The CP-SAT route of the CIM pipeline: an exact non-MIP reference for the same problem.

The interval model itself is ``placement.models.cim_makespan.interval``; here it gets its data and
its answer is turned into a verified schedule on the original instance.

Integer data and rounding: CP-SAT needs integers. Every latency is divided by a time
unit ``u`` (1 ns, or finer for instances whose total work is under ~0.1 s, so that the
horizon spans at least ~1e8 units) and rounded *down*. The rounded instance is a
relaxation of the true one (a placement's makespan never grows when latencies shrink),
so CP-SAT's bound times ``u`` is a valid lower bound in seconds. CP-SAT's solution is
never reported with its rounded times: its assignment and its host order (by start
time) are re-timed by the earliest-start schedule on the ORIGINAL instance
(:func:`placement.cim.schedule.asap_schedule`), which is feasible by construction, then
checked by ``verify_cim``. The reported gap is between that makespan and the rounded
bound, so rounding can only make the gap look larger (by at most about
n_operators * u). The best start (the list-scheduling heuristic's schedule, the
CPU-only one, or a given one) is CP-SAT's hint and its makespan the horizon; without a
CP-SAT solution in time, that start is reported.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.schedule import (
    CimSchedule,
    CrossbarCost,
    asap_schedule,
    best_start,
    priced_makespan,
)
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.interval import build_interval_model
from placement.models.cim_makespan.structure import host_idle_windows, structure
from placement.models.common import check_outcome
from placement.solvers.base import (
    SolveOptions,
    SolveResult,
    SolveStatus,
    gap_to_lower_bound,
    in_units,
)
from placement.solvers.cpsat import CpSatModel
from placement.solvers.registry import get_backend

_SPAN_UNITS = 1e8  # the horizon spans at least this many time units
_MAX_UNIT = 1e-9  # never coarser than 1 ns


def time_unit(instance: CimInstance) -> float:
    """Seconds per CP-SAT time unit: a power of ten, at most 1 ns."""
    horizon = instance.cpu_only_latency + math.fsum(e.t_transfer for e in instance.edges)
    if horizon <= 0.0:
        return _MAX_UNIT
    return min(_MAX_UNIT, 10.0 ** (math.floor(math.log10(horizon / _SPAN_UNITS))))


def rounded_instance(instance: CimInstance, unit: float) -> CimInstance:
    """The instance with every latency in ``unit``s, rounded down (a relaxation)."""

    def down(t: float) -> float:
        return float(math.floor(t / unit))

    ops = [
        CimOperator(op.name, down(op.t_host), None if op.t_acc is None else down(op.t_acc),
                    op.crossbars, op.op_type)
        for op in instance.operators
    ]
    edges = [CimEdge(e.src, e.dst, down(e.t_transfer)) for e in instance.edges]
    return CimInstance.build(ops, edges, instance.crossbar_budget)


def interval_data(
    instance: CimInstance,
    start: CimSchedule,
    unit: float,
    *,
    use_bounds: bool = True,
    horizon: float | None = None,
    price: float | CrossbarCost | None = None,
) -> dict[str, object]:
    """The interval model's integer data: ``instance`` in ``unit`` s rounded down
    (:func:`rounded_instance`), ``start`` as the hint, and the horizon: ``horizon``
    seconds (rounded up), by default the start's makespan. With ``price`` (seconds per
    crossbar, or a :class:`~placement.cim.schedule.CrossbarCost`): the objective T +
    what the crossbars cost, in time units rounded down (so the priced optimum of the
    data is at most the true one, a relaxation again), and by default the start's priced
    value as the horizon (it bounds T at the priced optimum)."""
    r = rounded_instance(instance, unit)
    hint = asap_schedule(r, start.on_host, start.host_order)
    st = structure(r, 1.0)
    names = [op.name for op in r.operators]
    price_units, cost = 0, None
    if isinstance(price, CrossbarCost):
        cost = [int(math.floor(price(c) / unit)) for c in range(r.crossbar_budget + 1)]
        span = hint.makespan + cost[min(hint.crossbars_used(r), r.crossbar_budget)]
    else:
        price_units = 0 if price is None else int(math.floor(price / unit))
        span = hint.makespan + price_units * hint.crossbars_used(r)
    if horizon is not None:
        span = max(span, horizon / unit)
    head = {v: int(math.floor(st["head"][v])) for v in names}
    tail = {v: int(math.floor(st["tail"][v])) for v in names}
    t_host = {op.name: int(op.t_host) for op in r.operators}
    t_fast = {op.name: int(op.t_host if op.t_acc is None else min(op.t_host, op.t_acc))
              for op in r.operators}  # fmt: skip
    forced = {op.name: not op.supported for op in r.operators}
    return {
        "names": names,
        "t_host": [int(op.t_host) for op in r.operators],
        "t_acc": [None if op.t_acc is None else int(op.t_acc) for op in r.operators],
        "crossbars": [op.crossbars for op in r.operators],
        "budget": r.crossbar_budget,
        "edges": [(e.src, e.dst, int(e.t_transfer)) for e in r.edges],
        "sinks": list(r.sinks),
        "horizon": int(math.ceil(span)),
        "head": head,
        "tail": tail,
        "idle_windows": [(int(a), int(b)) for a, b in
                         host_idle_windows(t_host, t_fast, forced, head, tail)],
        "before": {v: st["before"][v] for v in names},
        "after": {v: st["after"][v] for v in names},
        "between": [(u, w, st["between"][u, w]) for u, w in st["bottleneck_pairs"]],
        "use_bounds": use_bounds,
        "price": price_units,
        "cost": cost,
        "hint": {v: (bool(hint.on_host[v]), int(round(hint.start[v])),
                     int(round(hint.finish[v]))) for v in names},
    }  # fmt: skip


def retimed_solution(
    instance: CimInstance, names: Sequence[str], values: dict[str, float]
) -> CimSchedule:
    """CP-SAT's assignment and host order (by start time), re-timed by the earliest-start
    schedule on the ORIGINAL instance: feasible by construction."""
    on_host = {v: bool(values[f"host[{v}]"]) for v in names}
    pos = {v: i for i, v in enumerate(names)}
    timing = {v: (values[f"start[{v}]"], values[f"finish[{v}]"]) for v in names}
    order = sorted((v for v in names if on_host[v]), key=lambda v: (*timing[v], pos[v]))
    return asap_schedule(instance, on_host, order)


def solve_cpsat(
    instance: CimInstance,
    options: SolveOptions,
    *,
    heuristic: CimSchedule | None = None,
    use_bounds: bool = True,
    starts: Sequence[tuple[str, CimSchedule]] = (),
    price: float | CrossbarCost | None = None,
) -> tuple[SolveResult, CimSchedule | None]:
    """Solve ``instance`` with CP-SAT's interval model; (result in seconds, schedule).

    Status OPTIMAL only when CP-SAT proved its optimum and the re-timed makespan is
    within ``options.rel_gap`` of the (rounded, valid) bound. The schedule is verified.
    The hint (and the fallback) is the best of the heuristic's schedule, the CPU-only
    one and ``starts`` (origin, schedule). With ``price`` (seconds per crossbar, or a
    :class:`~placement.cim.schedule.CrossbarCost`) the objective is T + what the
    crossbars cost (:mod:`placement.cim.priced`): the result's
    objective and bound are of that value, and the best start is by it.
    """

    def value(schedule: CimSchedule) -> float:
        return schedule.makespan if price is None else priced_makespan(instance, schedule, price)

    options.check()
    backend = get_backend("cpsat")
    reason = backend.unavailable_reason()
    if reason is not None:
        raise PlacementError(reason)
    heuristic_seconds = 0.0
    if heuristic is None:
        tick = time.perf_counter()
        heuristic = heuristic_schedule(instance)
        heuristic_seconds = time.perf_counter() - tick
    heuristic_makespan = heuristic.makespan
    origin, start = best_start(instance, [("heuristic", heuristic), *starts], key=value)
    tick = time.perf_counter()
    unit = time_unit(instance)
    data = interval_data(instance, start, unit, use_bounds=use_bounds, price=price)
    names = data["names"]
    prepare = time.perf_counter() - tick
    model = CpSatModel(build_interval_model, data, binaries=len(names))
    # Half the gap for CP-SAT: room for the re-timing's rounding.
    raw = backend.solve(model, in_units(dataclasses.replace(options, rel_gap=options.rel_gap / 2),
                                        unit))  # fmt: skip
    cpsat_status = str(raw.options["cpsat_status"])
    bound = None if raw.best_bound is None else max(raw.best_bound, 0.0) * unit
    recorded: dict[str, object] = {
        **options.recorded(), "time_unit": unit,
        "heuristic_makespan": heuristic_makespan, "heuristic_seconds": heuristic_seconds,
        "start_from": origin, "start_makespan": start.makespan,
        "crossbar_price": None if isinstance(price, CrossbarCost) else price,
        "crossbar_cost_by_count": isinstance(price, CrossbarCost),
        "cpsat_status": cpsat_status,
        "worker_overhead_seconds": raw.options["worker_overhead_seconds"],
    }
    result = dataclasses.replace(
        raw, best_bound=bound, build_seconds=prepare + raw.build_seconds, options=recorded,
        objective=None, gap=None,
    )
    check_outcome(result, backend, "CIM", "operator")
    words = f"CP-SAT: {cpsat_status}"
    if model.solution is None:  # no solution in time: the start
        schedule = start
        message = f"{words}; {origin} schedule reported (CP-SAT had no solution)"
    else:
        schedule = retimed_solution(instance, names, model.solution)
        if value(schedule) > value(start):  # rounding made it worse: keep the better
            schedule = start
        message = "" if cpsat_status == "OPTIMAL" else words
    verify_cim(instance, schedule, claimed=schedule.makespan).raise_if_failed()
    obj = value(schedule)
    status = SolveStatus.TIME_LIMIT
    if cpsat_status == "OPTIMAL":
        if bound is not None and (obj - bound) <= options.rel_gap * obj + 1e-15:
            status = SolveStatus.OPTIMAL
        else:
            message = (f"{words}, but the re-timed value is not within"
                       f" {options.rel_gap:g} of the rounded bound")
    gap = None if bound is None else gap_to_lower_bound(obj, bound)
    return dataclasses.replace(
        result, status=status, objective=obj, gap=gap, message=message
    ), schedule
