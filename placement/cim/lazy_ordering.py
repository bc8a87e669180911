"""The CIM makespan ILP with its ordering rows added only where they are violated.

The ordering rows (Eqs. 11-12; ``window_big_m``'s per-pair version) are most of the
tightened model: two rows and a binary per parallel pair, thousands on a YOLO-sized block.
Without them the model is a relaxation (host operators may overlap; the host-serial,
ancestor/descendant and bottleneck bounds still hold) that HiGHS solves in well under a
second there; its optimum is as high as the whole model's bound after minutes of search
(YOLOv5nu, benchmarks/README.md). So: solve the relaxation, find the parallel pairs whose
host intervals overlap in its optimum, add their two rows, solve again, until the
optimum has no overlap or the time is up.

Validity: every model of the loop is the tightened model (with T <= UB, UB the makespan
of a feasible schedule) less some of its ordering rows, a relaxation of it, so each
bound HiGHS proves for one is a lower bound on the optimum; the largest of them is
reported. When an optimum of one has no two host operators of a parallel pair overlapping,
it satisfies every omitted row too (o_uv = 1 iff u runs first; the rows' big-M keeps the
other row slack below UB, :func:`placement.models.cim_makespan.bounds.add_window_big_m`),
so it is feasible for the whole model and hence optimal for it. Every schedule reported
is an assignment and host order re-timed on the instance
(:func:`placement.cim.schedule.asap_schedule`: feasible by construction), the start
passed in if none is better; the pipeline verifies it.

Priced (``price`` p: the objective T + p x crossbars of :mod:`placement.cim.priced`, the
budget row kept): the same argument holds for that objective. The cap T <= UB, with UB
the priced value of a feasible schedule, removes only placements whose priced value
exceeds UB (p x crossbars >= 0), never the priced optimum, so each model of the loop is
still a relaxation of the priced tightened model with that cap, and the window big-M
stays valid below it (:func:`placement.models.cim_makespan.build.price_crossbars`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable

import pyomo.environ as pyo

from placement.cim.deadline import MIN_SOLVE, Deadline, Phases, end_reserve, phase_limit
from placement.cim.instance import CimInstance
from placement.cim.list_scheduling import ListScheduler, indexed_graph
from placement.cim.schedule import (
    CimSchedule,
    asap_schedule,
    host_order_by_start,
    priced_makespan,
)
from placement.models.cim_makespan.bounds import window_rows
from placement.models.cim_makespan.build import build_cim_model, price_crossbars, start_values
from placement.models.common import solve_in_seconds
from placement.solvers.base import (
    ModelSize,
    SolveOptions,
    SolverError,
    SolveResult,
    SolveStatus,
    gap_to_lower_bound,
)
from placement.solvers.registry import get_backend

#: The tightened model's families without its ordering rows (``window_big_m`` less
#: ``order_*_window``; the makespan cap T <= UB is added by :func:`relaxed_model`).
RELAXED_FAMILIES: tuple[str, ...] = (
    "makespan", "finish", "precedence", "transfer", "budget",
    "host_serial", "energetic", "bottleneck",
)
#: Overlaps shorter than this (model units, ~1e4-1e5 for the whole horizon) are the
#: solver's feasibility tolerance, not an overlap.
_OVERLAP_TOLERANCE = 1e-6


def relaxed_model(
    instance: CimInstance, upper_bound: float, price: float | None = None
) -> pyo.ConcreteModel:
    """The tightened model without ordering rows, with T <= ``upper_bound`` (seconds, the
    makespan of a feasible schedule, or with ``price`` its T + price x crossbars),
    minimizing T (or T + ``price`` x crossbars), and ``m.lazy_order``, where
    :func:`add_ordering` puts the rows of the pairs it is given."""
    m = build_cim_model(instance, families=RELAXED_FAMILIES, upper_bound=upper_bound)
    m.makespan_cap = pyo.Constraint(expr=m.makespan <= m.upper_bound)
    m.lazy_order = pyo.ConstraintList()
    if price is not None:
        price_crossbars(m, price)
    return m


def add_ordering(m: pyo.ConcreteModel, pairs: Iterable[tuple[str, str]]) -> None:
    """Add the two ordering rows (per-pair big-M) of each parallel pair in ``pairs``."""
    rows = window_rows(m)
    for u, v in pairs:
        for row in rows(u, v):
            m.lazy_order.add(row)


def overlapping_pairs(
    m: pyo.ConcreteModel, parallel: set[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The pairs of ``parallel`` (as ordered there) both on the host whose intervals overlap
    in the model's solution, in start order."""
    on_host = [v for v in m.V if m.host[v].value > 0.5]
    spans = sorted((m.start[v].value, m.finish[v].value, v) for v in on_host)
    found = []
    for i, (_, end, u) in enumerate(spans):
        for begin, _, w in spans[i + 1:]:
            if begin >= end - _OVERLAP_TOLERANCE:
                break  # sorted by start: no later one overlaps u either
            pair = (u, w) if (u, w) in parallel else (w, u)
            if pair in parallel:
                found.append(pair)
    return found


def solution_schedule(
    m: pyo.ConcreteModel, instance: CimInstance, scheduler: ListScheduler
) -> CimSchedule:
    """The model's assignment, sequenced the better of two ways: its host operators in the
    model's start order, and the list scheduler's best rule (``scheduler``, on this
    instance's :func:`~placement.cim.list_scheduling.indexed_graph`); re-timed on the
    instance, feasible whatever the model's rows were. A relaxation's host operators may
    overlap, so its own order alone can be poor."""
    on_host = {v: m.host[v].value > 0.5 for v in m.V}
    # by start, as a linear extension of precedence: a zero-length operator (a block's
    # entry) may start a tolerance after its successor in the solver's values
    order = host_order_by_start(instance, on_host, {v: m.start[v].value for v in m.V})
    own = asap_schedule(instance, on_host, order)
    names = scheduler.g.names
    _, listed = scheduler.evaluate([on_host[v] for v in names])
    other = asap_schedule(instance, on_host, [names[i] for i in listed])
    return other if other.makespan < own.makespan else own


def solve_lazy_ordering(
    instance: CimInstance,
    options: SolveOptions,
    start: CimSchedule,
    deadline: Deadline,
    *,
    price: float | None = None,
) -> tuple[SolveResult, CimSchedule]:
    """Exact by the loop of the module docstring with HiGHS, from the feasible ``start``
    (also the models' UB) until ``deadline``; (result in seconds, best schedule). With
    ``price``: of T + ``price`` x crossbars instead of T (the result's objective and
    bound are of that value).

    Status OPTIMAL when the best schedule is within ``options.rel_gap`` of the best bound
    (a relaxation's optimum without overlaps closes it); TIME_LIMIT otherwise. The
    result's options record the rounds, the pairs given rows and the bound of each round.
    """

    def value(schedule: CimSchedule) -> float:
        return schedule.makespan if price is None else priced_makespan(instance, schedule, price)

    backend = get_backend("highs", mip=True)
    phases = Phases(options.monitor)
    parallel = set(instance.parallel_pairs)
    scheduler = ListScheduler(indexed_graph(instance))
    phases.start("building the relaxation", start.makespan)
    tick = time.perf_counter()
    m = relaxed_model(instance, value(start), price)
    build_seconds = time.perf_counter() - tick
    phases.ran("build", build_seconds)
    best, bound, added = start, None, 0
    rounds: list[float | None] = []
    proven, solve_seconds, size, message = False, 0.0, ModelSize(0, 0, 0), ""
    phases.start("HiGHS, ordering rows as violated")
    while True:
        left = deadline.left()
        if left is not None:
            left -= end_reserve(instance)
            if left <= MIN_SOLVE:
                break
        limit = None if left is None else phase_limit(left)
        round_options = dataclasses.replace(options, time_limit=limit, monitor=None)
        try:
            result = solve_in_seconds(m, backend, round_options, what="CIM", item="operator",
                                      start=start_values(m, instance, best))  # fmt: skip
        except SolverError as exc:  # HiGHS failed on this round: what is known stands
            message = exc.result.message
            break
        solve_seconds += result.solve_seconds
        size = result.size
        rounds.append(result.best_bound)
        if result.best_bound is not None and (bound is None or result.best_bound > bound):
            bound = result.best_bound
        if not result.status.has_solution:
            break
        candidate = solution_schedule(m, instance, scheduler)
        if value(candidate) < value(best):
            best = candidate
        if options.monitor is not None:
            options.monitor.improved(value(best), bound)
        if bound is not None and gap_to_lower_bound(value(best), bound) <= options.rel_gap:
            proven = True
            break
        if result.status != SolveStatus.OPTIMAL:
            break  # the time is up
        overlaps = overlapping_pairs(m, parallel)
        if not overlaps:
            break  # feasible: proven above unless the re-timing rounding spoiled it
        add_ordering(m, overlaps)
        added += len(overlaps)
    phases.ran("highs", solve_seconds)
    gap = None if bound is None else gap_to_lower_bound(value(best), bound)
    recorded = {
        **options.recorded(), "formulation": "tightened, ordering rows as violated",
        "start_makespan": start.makespan, "lazy_rounds": len(rounds),
        "lazy_pairs": added, "lazy_round_bounds": rounds, "phases": phases.records,
    }  # fmt: skip
    return SolveResult(
        status=SolveStatus.OPTIMAL if proven else SolveStatus.TIME_LIMIT, solver="highs",
        objective=value(best), best_bound=bound, gap=gap, build_seconds=build_seconds,
        solve_seconds=solve_seconds, size=size, message=message, options=recorded,
    ), best
