"""A priced solve: the placement of a CIM instance that minimizes its makespan plus a price
per crossbar used, and a lower bound of that least priced makespan.

This is the subproblem of the Lagrangian relaxation of the crossbar budget (Eq. 14)
that :mod:`placement.cim.decompose` solves per block: with the crossbars priced at p
seconds each, a lower bound v of min over placements of T + p x crossbars gives every
budget r the bound T*(r) >= v - p r. It is solved on the Pyomo model of a MIP backend
(:func:`placement.models.cim_makespan.build.price_crossbars`), from the best of the
given starts by priced value, whose T + p x crossbars also bounds T at the priced
optimum (what ``window_big_m`` needs). A tightened block with many parallel pairs is
solved with HiGHS by :mod:`placement.cim.lazy_ordering` instead (its ordering rows
added only where a relaxation's optimum violates them; every round a relaxation of the
priced model, so every bound valid; :data:`LAZY_MIN_PAIRS`). The schedule read back is
re-timed and verified; the bound is the solver's (a solve without one reports the
longest-path bound, valid since the price term is never negative).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

from placement.cim.cpsat_route import solve_cpsat
from placement.cim.deadline import HEURISTIC_SHARE, MIN_SOLVE, Deadline
from placement.cim.frontier import trivial_bound
from placement.cim.instance import CimInstance
from placement.cim.lazy_ordering import solve_lazy_ordering
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.schedule import (
    CimSchedule,
    CrossbarCost,
    all_host_schedule,
    crossbar_cost,
    fitted,
    priced_makespan,
)
from placement.cim.verifier import verify_cim
from placement.models.cim_makespan.build import (
    build_cim_model,
    extract_schedule,
    formulation_families,
    price_crossbars,
    start_values,
)
from placement.models.common import solve_in_seconds
from placement.solvers.base import DEFAULT_REL_GAP, ModelSize, SolveOptions, SolveResult
from placement.solvers.names import MIP_BACKENDS
from placement.solvers.registry import get_backend

#: The MIP backend of a priced solve when the solver asked for is neither a MIP backend
#: nor CP-SAT.
PRICED_FALLBACK_SOLVER = "highs"
#: From this many parallel pairs, a priced solve on the tightened model with HiGHS (and a
#: decomposition's block solve at a budget, as price 0) adds the ordering rows as violated
#: (:func:`lazy_ordering_pays`). Measured on the priced block
#: solves of benchmarks/cim_scale.py's branched family (1-s limit, both ways on the same
#: blocks; benchmarks/README.md): at 70-150 pairs the whole model found better placements
#: (12 of 39 blocks, 2 the other way), from 150 pairs the loop did (8 of 50 vs 1), and from
#: 500 pairs it proved all 8 blocks in 0.3 s median where the whole model proved none.
LAZY_MIN_PAIRS = 150
#: From this many parallel pairs a block solve may go to CP-SAT when the solver is left to
#: choose (:func:`cpsat_pays`; ``placement.cim.blockwise._LargeBlocks`` decides).
#: Measured (benchmarks/README.md, "Cuts over host-only skip edges"): YOLOv5nu's
#: 88-operator head block (1,929 pairs) proven by CP-SAT at every budget tried in
#: 0.4-1.2 s, where HiGHS with the ordering rows as violated ended at its 60-s limit
#: with 1.1-1.6 %.
CPSAT_MIN_PAIRS = 150


def solve_priced(
    instance: CimInstance,
    price: float | CrossbarCost,
    *,
    formulation: str = "tightened",
    solver: str = "highs",
    time_limit: float | None = None,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = None,
    starts: Sequence[CimSchedule] = (),
) -> tuple[CimSchedule, float, ModelSize | None, str]:
    """The best placement found for T + ``price`` x crossbars within the budget, a lower
    bound of the least such value (seconds), the model's size and the solve's status.

    Starts from the best of the CPU-only schedule and ``starts`` (each re-timed; one
    that does not fit is passed over; without any, the list-scheduling heuristic's, within
    a share of the time limit) and never reports worse. A ``time_limit`` below
    the least worth starting a solver for reports that start, with the longest-path
    bound. ``solver``: a MIP backend, or "cpsat" (the interval model with the priced
    objective, :func:`placement.cim.cpsat_route.solve_cpsat`); any other name solves
    with HiGHS. A :class:`~placement.cim.schedule.CrossbarCost` (a price by the count
    of crossbars) is solved by CP-SAT only.
    """
    if isinstance(price, CrossbarCost) and solver != "cpsat":
        raise ValueError("a crossbar cost by the count is solved by CP-SAT only")
    if solver not in (*MIP_BACKENDS, "cpsat"):
        solver = PRICED_FALLBACK_SOLVER
    if not starts:
        seconds = None if time_limit is None else HEURISTIC_SHARE * time_limit
        starts = [heuristic_schedule(instance, seconds=seconds)]
    fitting = [t for s in starts if (t := fitted(instance, s)) is not None]
    start = min([all_host_schedule(instance), *fitting],
                key=lambda s: priced_makespan(instance, s, price))  # fmt: skip
    floor = trivial_bound(instance) + crossbar_cost(price, 0)  # the cost never decreases
    if time_limit is not None and time_limit < MIN_SOLVE:
        return start, min(floor, priced_makespan(instance, start, price)), None, "not solved"
    options = SolveOptions(rel_gap=rel_gap, threads=threads)
    if solver == "cpsat":
        result, found = solve_cpsat(instance, dataclasses.replace(options, time_limit=time_limit),
                                    heuristic=start, price=price)  # fmt: skip
        schedule = start if found is None else found
    elif lazy_ordering_pays(instance, formulation, solver):
        result, schedule = solve_lazy_ordering(instance, options, start, Deadline(time_limit),
                                               price=price)  # fmt: skip
    else:
        result, schedule = _solve_whole(instance, price, formulation, solver, time_limit,
                                        options, start)  # fmt: skip
    verify_cim(instance, schedule).raise_if_failed()
    bound = floor if result.best_bound is None else max(result.best_bound, floor)
    value = priced_makespan(instance, schedule, price)
    return schedule, min(bound, value), result.size, result.status.value


def cpsat_pays(instance: CimInstance) -> bool:
    """Whether a decomposition's block solve (at a budget or priced) of ``instance`` may go
    to CP-SAT when the solver is left to choose: with at least :data:`CPSAT_MIN_PAIRS`
    parallel pairs, and OR-Tools installed."""
    return (len(instance.parallel_pairs) >= CPSAT_MIN_PAIRS
            and get_backend("cpsat").unavailable_reason() is None)  # fmt: skip


def lazy_ordering_pays(instance: CimInstance, formulation: str, solver: str) -> bool:
    """Whether a priced solve of ``instance`` adds the tightened model's ordering rows only
    where a relaxation violates them (:mod:`placement.cim.lazy_ordering`, HiGHS) rather
    than building them all: with at least :data:`LAZY_MIN_PAIRS` parallel pairs."""
    return (formulation == "tightened" and solver == "highs"
            and len(instance.parallel_pairs) >= LAZY_MIN_PAIRS)  # fmt: skip


def _solve_whole(
    instance: CimInstance, price: float, formulation: str, solver: str,
    time_limit: float | None, options: SolveOptions, start: CimSchedule,
) -> tuple[SolveResult, CimSchedule]:  # fmt: skip
    """The priced model of ``formulation`` with every row, from ``start`` (its priced
    value the model's UB); the better of its solution and ``start``."""
    tick = time.perf_counter()
    upper = priced_makespan(instance, start, price)
    model = build_cim_model(instance, families=formulation_families(formulation),
                            upper_bound=upper)  # fmt: skip
    price_crossbars(model, price)
    if time_limit is not None:  # the limit covers building the model too
        time_limit = max(time_limit - (time.perf_counter() - tick), MIN_SOLVE)
    options = dataclasses.replace(options, time_limit=time_limit)
    values = start_values(model, instance, start)
    result = solve_in_seconds(model, get_backend(solver, mip=True), options, what="CIM",
                              item="operator", start=values)  # fmt: skip
    schedule = start
    if result.status.has_solution:
        # decisions no timing can make valid (None) keep the start
        found = fitted(instance, CimSchedule(**extract_schedule(model, instance)._asdict()))
        if found is not None and priced_makespan(instance, found, price) < upper:
            schedule = found
    return result, schedule
