"""The one CIM pipeline: from an instance to a verified placement, with any backend.

``solve(instance)`` picks the formulation and the solver ("auto" for each, as
``placement solve`` does), builds the Pyomo model (or the CP-SAT interval model),
solves it through the backend interface, reads the schedule back, and verifies it
independently (``placement.cim.verifier``). ``placement solve``, ``placement bench``,
``placement sweep`` and the Python API all come through here, so a solver error, a
time limit or a start that the solver could not beat is handled the same way whatever
ran. A placement is never returned unverified: a schedule that fails verification
raises :class:`PlacementError`. Objective and bound are in seconds.

Solvers:

* ``highs`` (default), ``scip``, ``cbc``, ``gurobi``: the Pyomo ILP of the formulation
  (``placement.models.cim_makespan``), with the list-scheduling heuristic as MIP start for
  ``tightened`` (or when ``warm_start``);
* ``cpsat``: OR-Tools CP-SAT on the interval model (``placement.cim.cpsat_route``);
* ``cpsat+highs``: CP-SAT for half the time limit; unless it proved optimality, HiGHS
  on the tightened model for the rest with CP-SAT's schedule as start and upper bound,
  its ordering rows added only where a relaxation's optimum violates them
  (``placement.cim.lazy_ordering``); the bound reported is the better of the two (both
  are valid lower bounds);
* ``auto``: ``cpsat+highs`` where the formulation is ``tightened`` (many parallel
  pairs; why: benchmarks/README.md), a start is allowed and OR-Tools is installed;
  HiGHS otherwise. A Pyomo model of your own is solved as given: its formulation read
  from it (:func:`model_formulation`), ``auto`` is HiGHS.

Methods: ``monolithic`` solves the whole instance as one model; ``decomposition`` splits
it at its cut operators (``placement.cim.frontier``) and solves the blocks between them
alone, combining them exactly (``placement.cim.decompose``; each block with the
formulation and solver asked for; with ``auto`` HiGHS, and CP-SAT on a block with many
parallel pairs that HiGHS does not prove quickly: ``placement.cim.blockwise``); ``auto``
(:func:`plan_method`) solves whole a model of your own, a graph of fewer than
:data:`AUTO_DECOMPOSE_MIN_OPERATORS` operators and one whose largest block holds more
than :data:`AUTO_DECOMPOSE_MAX_BLOCK_SHARE` of them; it decomposes the others, and where
their blocks compete for the budget and a time limit is set, it measures: if the
decomposition's gap is still above :data:`AUTO_WHOLE_MIN_GAP` once
:data:`AUTO_DECOMPOSITION_SHARE` of the time has passed, the whole model takes over from
its placement (unless it could not even be built in the time left) and the better
placement and bound are kept. The result's ``options["method"]`` says what ran,
``"method_choice"`` why, and ``"method_kept"`` (after both) whose placement and bound
are reported.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, TextIO

import pyomo.environ as pyo

from placement.cim.blockwise import solve_decomposed
from placement.cim.cpsat_route import solve_cpsat
from placement.cim.deadline import (
    CPSAT_SHARE,
    HEURISTIC_SHARE,
    MIN_SOLVE,
    WORKER_START,
    Deadline,
    Phases,
    build_estimate,
    end_reserve,
    phase_limit,
)
from placement.cim.decompose import HANDED_OVER
from placement.cim.frontier import Block, floor_bound, split
from placement.cim.instance import CimInstance
from placement.cim.lazy_ordering import solve_lazy_ordering
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.schedule import CimSchedule, best_start, retime
from placement.cim.verifier import CimVerification, verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.build import (
    FORMULATIONS,
    build_cim_model,
    extract_schedule,
    formulation_families,
    start_values,
)
from placement.models.common import solve_in_seconds
from placement.solvers.base import (
    DEFAULT_REL_GAP,
    ModelSize,
    SolveMonitor,
    SolveOptions,
    SolverError,
    SolveResult,
    SolveStatus,
    gap_to_lower_bound,
)
from placement.solvers.names import SOLVERS
from placement.solvers.registry import MIP_BACKENDS, get_backend
from placement.solvers.workers import (
    AUTO_WORKERS,
    auto_workers,
    check_scheduler_address,
    connect,
)

#: What ``formulation=`` accepts.
FORMULATION_CHOICES: tuple[str, ...] = ("auto", *FORMULATIONS)
#: What ``method=`` accepts.
METHODS: tuple[str, ...] = ("auto", "monolithic", "decomposition")
#: "auto" decomposes instances of at least this many operators (with two blocks or more):
#: smaller ones close as one model in about a second, less than the blocks' overhead.
AUTO_DECOMPOSE_MIN_OPERATORS = 150
#: ... and whose largest block holds at most this share of the operators: a graph that is
#: mostly one block closes faster whole than by solving that block again and again for the
#: decomposition's frontier (the YOLOv5n measurement in benchmarks/README.md).
AUTO_DECOMPOSE_MAX_BLOCK_SHARE = 0.5
#: When the budget binds the blocks and the deadline allows, "auto" gives the decomposition
#: this share of the time and the whole model the rest, from the decomposition's
#: placement (the LLaMA-style export the issue measured: blocks alone left a weaker bound
#: than the whole model). Since block solves add ordering rows as violated the blocks
#: close further: at half the time, family row 13 of benchmarks/cim_scale.py handed over
#: at 1.34 % and ended there, where the decomposition alone reached 0.017 % (at three
#: quarters its whole model is not tried, too slow to build for the quarter left: 0.039 %;
#: benchmarks/README.md)...
AUTO_DECOMPOSITION_SHARE = 0.75
#: ... unless building the whole model would take more than this share of its time: then
#: it could not search, and the decomposition gets all of the time. The decomposition
#: keeps the rest of the time too if its gap is within this by then (closing the last
#: percent is what the blocks do fast: benchmarks/README.md).
AUTO_WHOLE_MAX_BUILD_SHARE = 0.1
AUTO_WHOLE_MIN_GAP = 0.01
#: What "auto" stands for on a block of a decomposition (chosen with benchmarks/cim_scale.py).
BLOCK_FORMULATION = "tightened"
BLOCK_SOLVER = "highs"

#: Up to this many parallel pairs (Eq. 10), "auto" solves the bounded model without a
#: heuristic: with few ordering decisions it closes faster than the heuristic alone runs.
#: Beyond it, ordering decisions dominate and the tightened model with a heuristic start
#: and per-pair big-M wins (benchmarks/README.md).
AUTO_MAX_PAIRS_FOR_BOUNDED = 200
#: A solver's makespan may sit this much (relative) below the re-timed makespan of its
#: decisions (feasibility tolerances on big-M rows); more is a solver error.
_CLAIM_SLACK = 1e-4


@dataclass
class CimPlacement:
    instance: CimInstance
    result: SolveResult  # objective and bound in seconds
    schedule: CimSchedule | None  # None when the solver found no solution (time limit)
    verification: CimVerification | None
    cpu_only: float  # every operator on the host, seconds

    @property
    def speedup(self) -> float | None:
        """CPU-only latency over the placement's makespan."""
        if self.schedule is None:
            return None
        if self.schedule.makespan <= 0.0:
            return 1.0 if self.cpu_only <= 0.0 else math.inf
        return self.cpu_only / self.schedule.makespan

    @property
    def crossbars_used(self) -> int:
        return 0 if self.schedule is None else self.schedule.crossbars_used(self.instance)

    def to_json(self) -> dict[str, Any]:
        inst = self.instance
        speedup = self.speedup
        return {
            "instance": {
                "operators": len(inst.operators),
                "edges": len(inst.edges),
                "parallel_pairs": len(inst.parallel_pairs),
                "cim_capable": sum(1 for op in inst.operators if op.supported),
                "crossbar_budget": inst.crossbar_budget,
            },
            "result": self.result.to_json(),
            "cpu_only": self.cpu_only,
            "makespan": None if self.schedule is None else self.schedule.makespan,
            "speedup": None if speedup is None or math.isinf(speedup) else speedup,
            "crossbars_used": self.crossbars_used,
            "verification": None if self.verification is None else self.verification.to_json(),
            "schedule": None if self.schedule is None else self.schedule.to_json(),
        }


def auto_formulation(instance: CimInstance) -> str:
    """"bounded" for near-chain graphs, "tightened" (with a heuristic start) otherwise."""
    return "bounded" if len(instance.parallel_pairs) <= AUTO_MAX_PAIRS_FOR_BOUNDED else "tightened"


def resolve_formulation(instance: CimInstance, formulation: str) -> str:
    """The formulation "auto" stands for on ``instance``; an unknown name is an error."""
    if formulation == "auto":
        return auto_formulation(instance)
    formulation_families(formulation)  # validates the name
    return formulation


def resolve_solver(
    formulation: str, solver: str, warm_start: bool | None, *, mip: bool = False
) -> str:
    """The solver "auto" stands for, given the resolved formulation (module docstring);
    ``mip``: a Pyomo model must be solved (a model of your own), by a MIP solver."""
    if solver not in SOLVERS:
        raise PlacementError(f"unknown solver {solver!r}; known: {', '.join(SOLVERS)}")
    if mip and solver not in (*MIP_BACKENDS, "auto"):
        raise PlacementError(
            f"a Pyomo model of your own is solved by a MIP solver ({', '.join(MIP_BACKENDS)}"
            f" or auto), not {solver!r}"
        )
    if solver != "auto":
        return solver
    if (not mip and formulation == "tightened" and warm_start is not False
            and get_backend("cpsat").available()):
        return "cpsat+highs"
    return "highs"


def model_formulation(model: pyo.ConcreteModel, formulation: str = "auto") -> str:
    """The formulation a model of your own was built with (its ``families``, as
    :func:`build_model` records them): a name of :data:`FORMULATIONS`, or "custom"; a
    ``formulation`` given besides must agree."""
    families = tuple(getattr(model, "families", ()))
    if not families:
        raise PlacementError(
            "this Pyomo model was not built by placement.cim.build_model (it records no"
            " constraint families): build it there and add your constraints to it"
        )
    named = next((name for name, fams in FORMULATIONS.items()
                  if set(fams) == set(families)), "custom")  # fmt: skip
    if formulation not in ("auto", named):
        raise PlacementError(
            f"formulation {formulation!r} given, but the model was built as {named!r}"
            f" ({', '.join(families)}): leave formulation at 'auto'"
        )
    return named


def unavailable_reason(solver: str) -> str | None:
    """None when ``solver`` (a :data:`SOLVERS` name) can run here. ``auto`` needs HiGHS
    (without OR-Tools it runs HiGHS alone)."""
    names = {"cpsat+highs": ("cpsat", "highs"), "auto": ("highs",)}.get(solver, (solver,))
    for name in names:
        reason = get_backend(name).unavailable_reason()
        if reason is not None:
            return reason
    return None


def build_model(
    instance: CimInstance, formulation: str = "auto", *, upper_bound: float | None = None
) -> pyo.ConcreteModel:
    """The Pyomo model of ``formulation`` for ``instance``, to extend before :func:`solve`.

    ``tightened`` needs an upper bound on the optimum (the makespan of a feasible
    schedule): without ``upper_bound`` the list-scheduling heuristic provides one.
    """
    formulation = resolve_formulation(instance, formulation)
    families = formulation_families(formulation)
    if upper_bound is None and "window_big_m" in families:
        upper_bound = heuristic_schedule(instance).makespan
    return build_cim_model(instance, families=families, upper_bound=upper_bound)


def solve(
    instance: CimInstance,
    *,
    formulation: str = "auto",
    solver: str = "auto",
    model: pyo.ConcreteModel | None = None,
    time_limit: float | None = None,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = None,
    warm_start: bool | None = None,
    tee: bool | list[TextIO] = False,
    starts: Sequence[CimSchedule] = (),
    method: str = "auto",
    progress: Callable[[str], None] | None = None,
    monitor: SolveMonitor | None = None,
    workers: int | str = 1,
    scheduler: Any = None,
    scheduler_timeout: float = 10.0,
) -> CimPlacement:
    """Optimal (or, with a time limit, best found) placement of ``instance``, verified.

    ``formulation``: "faithful", "bounded", "tightened" or "auto" (by graph shape,
    :func:`auto_formulation`). ``solver``: one of :data:`SOLVERS` (module docstring).
    ``model``: a model from :func:`placement.cim.build_model` that the caller extended
    with constraints of their own (MIP solvers only); the verifier still checks the
    paper's constraints only, so extra constraints can only restrict the placement,
    never make it wrong. ``warm_start`` (default: only for "tightened"): run the
    list-scheduling heuristic first and give its schedule to the solver as a MIP
    start; a time-limited solve then never reports a placement worse than it.
    ``time_limit`` is one deadline for everything: a phase that cannot fit in what is left
    is skipped, and ``options["phases"]`` says which ran, for how long, and why others
    did not. ``tee``: True streams the solver's log to stdout, or a list of streams.
    ``starts``: feasible schedules (of this model, e.g. from a neighbouring point of a
    sweep) to start from; each is re-timed on ``instance``. Every solve starts from the
    best of them, the CPU-only schedule and the heuristic's (when it runs), and never
    reports a placement worse than that start. ``method``: one of :data:`METHODS`
    (module docstring); a model of your own is always solved whole. ``progress`` gets
    a line now and then during a long (decomposed) solve; ``monitor`` is told each phase
    as it starts and the incumbent and bound (seconds) as they improve (from the solvers'
    callbacks, HiGHS and CP-SAT; :class:`~placement.solvers.base.SolveMonitor`).
    ``workers``: processes for the block solves of a decomposition (1: this process;
    :mod:`placement.cim.blockwise`); "auto": as many as the CPUs this process may use
    (:func:`~placement.solvers.workers.auto_workers`) when it decomposes, else 1 (the
    command line's default; a script that uses more than 1 must start from an
    ``if __name__ == "__main__":`` block, as the workers are spawned). ``scheduler``: a
    Dask scheduler's address (connected to within ``scheduler_timeout`` seconds, closed
    at the end) or a ``distributed.Client``: the block solves of a decomposition run on
    that cluster instead (``workers`` is then not used); a whole model is solved here.

    The result's ``options`` record ``formulation``, ``heuristic_makespan`` and
    ``heuristic_seconds`` (when the heuristic ran) and ``start`` (HiGHS's verdict).
    Raises :class:`PlacementError` on bad options, an unavailable solver, a solver
    error (:class:`~placement.solvers.base.SolverError`) or a failed verification.
    """
    options = SolveOptions(time_limit=time_limit, rel_gap=rel_gap, threads=threads, tee=tee,
                           monitor=monitor)  # fmt: skip
    options.check()
    if workers != AUTO_WORKERS and (isinstance(workers, bool) or not isinstance(workers, int)
                                    or workers < 1):  # fmt: skip
        raise PlacementError(f"workers must be a positive integer or 'auto', got {workers!r}")
    if isinstance(scheduler, str):
        check_scheduler_address(scheduler)
    deadline = Deadline(time_limit)
    block_formulation, block_solver = block_choices(formulation, solver)
    cpsat_blocks = solver == "auto"  # large blocks may go to CP-SAT (cim.blockwise)
    if model is not None:
        formulation = model_formulation(model, formulation)
        solver = resolve_solver(formulation, solver, warm_start, mip=True)
    else:
        formulation = resolve_formulation(instance, formulation)
        solver = resolve_solver(formulation, solver, warm_start)
    given = [("given", s) for s in starts]
    plan = plan_method(instance, method, model=model, time_limit=time_limit)
    if workers == AUTO_WORKERS:  # only a decomposition has block solves to share out
        workers = auto_workers() if plan.method != "monolithic" and scheduler is None else 1
    assert isinstance(workers, int)

    def whole(deadline: Deadline, starts: Sequence[tuple[str, CimSchedule]]
              ) -> tuple[SolveResult, CimSchedule | None]:  # fmt: skip
        return _monolithic(instance, solver, formulation, options, deadline, starts,
                           model=model, warm_start=warm_start)  # fmt: skip

    with ExitStack() as stack:
        client = scheduler
        if isinstance(scheduler, str) and plan.method != "monolithic":
            client = connect(scheduler, scheduler_timeout)
            stack.callback(client.close)

        def blocks(hand_over: Callable[[float, float], bool] | None = None
                   ) -> tuple[SolveResult, CimSchedule]:  # fmt: skip
            return solve_decomposed(
                instance, solve, formulation=block_formulation, solver=block_solver,
                options=options, deadline=deadline, starts=given, blocks_and_cuts=plan.blocks,
                warm_start=warm_start, progress=progress, workers=workers, client=client,
                heuristic_pairs=AUTO_MAX_PAIRS_FOR_BOUNDED, hand_over=hand_over,
                cpsat_blocks=cpsat_blocks)  # fmt: skip

        if plan.method == "monolithic":
            result, schedule = whole(deadline, given)
        elif plan.method == "decomposition":
            result, schedule = blocks()
        else:
            result, schedule = _blocks_then_whole(blocks, whole, deadline, options.rel_gap)
    result.options["method_choice"] = plan.why
    verification = None
    if schedule is not None:
        verification = verify_cim(instance, schedule, claimed=result.objective)
        verification.raise_if_failed()
    return CimPlacement(instance, result, schedule, verification, instance.cpu_only_latency)


def _monolithic(
    instance: CimInstance, solver: str, formulation: str, options: SolveOptions,
    deadline: Deadline, starts: Sequence[tuple[str, CimSchedule]], *,
    model: pyo.ConcreteModel | None, warm_start: bool | None,
) -> tuple[SolveResult, CimSchedule | None]:  # fmt: skip
    """The whole instance as one model with ``solver``; its bound at least the floor."""
    if solver == "cpsat":
        result, schedule = _cpsat(instance, options, deadline, starts)
    elif solver == "cpsat+highs":
        result, schedule = _cpsat_then_highs(instance, options, deadline, starts)
    else:
        result, schedule = solve_mip(
            instance, solver, formulation, options, model=model, warm_start=warm_start,
            starts=starts, deadline=deadline,
        )  # fmt: skip
    result.options["method"] = "monolithic"
    if schedule is not None:
        result = _with_floor(result, instance, options.rel_gap)
    return result, schedule


def _blocks_then_whole(
    blocks: Callable[[Callable[[float, float], bool]], tuple[SolveResult, CimSchedule]],
    whole: Callable[[Deadline, Sequence[tuple[str, CimSchedule]]],
                    tuple[SolveResult, CimSchedule | None]],
    deadline: Deadline,
    rel_gap: float,
) -> tuple[SolveResult, CimSchedule]:  # fmt: skip
    """The decomposition; once :data:`AUTO_DECOMPOSITION_SHARE` of the deadline has passed
    with its gap still above :data:`AUTO_WHOLE_MIN_GAP`, the whole model from its
    placement for the rest. The better placement and the better bound (both certified)
    are kept, and the result says whose (``options["method_kept"]``)."""
    assert deadline.limit is not None
    turn = AUTO_DECOMPOSITION_SHARE * deadline.limit

    def hand_over(best: float, bound: float) -> bool:
        return deadline.elapsed() >= turn and gap_to_lower_bound(best, bound) > AUTO_WHOLE_MIN_GAP

    parts, schedule = blocks(hand_over)
    if parts.options.get("ended") != HANDED_OVER:
        kept = (f"decomposition: within {AUTO_WHOLE_MIN_GAP:.0%} once"
                f" {AUTO_DECOMPOSITION_SHARE:.0%} of the time had passed; it kept the rest")
        if parts.status == SolveStatus.OPTIMAL:
            kept = "decomposition: proven within the gap"
        parts.options["method_kept"] = kept
        return parts, schedule
    try:
        one, found = whole(deadline, [("decomposition", schedule)])
    except SolverError as exc:  # the decomposition's verified placement stands
        parts.options["method_kept"] = f"decomposition (the whole model failed: {exc})"
        return parts, schedule
    keep_one = found is not None and found.makespan < schedule.makespan
    best = found if keep_one and found is not None else schedule
    bound = max(b for b in (parts.best_bound, one.best_bound, 0.0) if b is not None)
    bound = min(bound, best.makespan)
    gap = gap_to_lower_bound(best.makespan, bound)
    status = SolveStatus.OPTIMAL if gap <= rel_gap else SolveStatus.TIME_LIMIT
    bound_from = ("whole model" if (one.best_bound or 0.0) > (parts.best_bound or 0.0)
                  else "decomposition")  # fmt: skip
    kept = (f"placement from the {'whole model' if keep_one else 'decomposition'}, bound from"
            f" the {bound_from} (alone: decomposition {_percent(parts.gap)} when it handed"
            f" over, whole model {_percent(one.gap)})")  # fmt: skip
    message = "; ".join(m for m in (parts.message, one.message) if m)
    options = one.options | {
        "method": "decomposition+monolithic", "method_kept": kept,
        "decomposition": {k: v for k, v in parts.options.items() if k != "phases"},
        "phases": [*parts.options.get("phases", []), *one.options.get("phases", [])],
    }  # fmt: skip
    return dataclasses.replace(
        one, status=status, objective=best.makespan, best_bound=bound, gap=gap,
        build_seconds=parts.build_seconds + one.build_seconds,
        solve_seconds=parts.solve_seconds + one.solve_seconds, message=message, options=options,
    ), best


def _percent(gap: float | None) -> str:
    return "no bound" if gap is None else f"gap {100 * gap:.3g} %"


def _with_floor(result: SolveResult, instance: CimInstance, rel_gap: float) -> SolveResult:
    """``result`` with its bound raised to the floor (longest path at the faster
    latencies; the host work the budget leaves: :func:`~placement.cim.frontier.floor_bound`)
    where the solver's is lower or missing, so that a solve stopped early still reports a
    certified gap, never an unknown one."""
    floor = floor_bound(instance)
    if result.objective is None or (result.best_bound is not None and result.best_bound >= floor):
        return result
    makespan = result.objective
    gap = gap_to_lower_bound(makespan, floor)
    status = result.status
    if status == SolveStatus.TIME_LIMIT and gap <= rel_gap:
        status = SolveStatus.OPTIMAL
    note = "bound: the longest path or the host work (the solver's was lower)"
    message = "; ".join(m for m in (result.message, note) if m)
    return dataclasses.replace(result, best_bound=floor, gap=gap, status=status,
                               message=message)  # fmt: skip


def block_choices(formulation: str, solver: str) -> tuple[str, str]:
    """The formulation and solver of each block solve (:data:`BLOCK_FORMULATION`,
    :data:`BLOCK_SOLVER` for "auto")."""
    return (BLOCK_FORMULATION if formulation == "auto" else formulation,
            BLOCK_SOLVER if solver == "auto" else solver)  # fmt: skip


@dataclass(frozen=True)
class MethodPlan:
    """How :func:`solve` goes about an instance (``method`` resolved) and why."""

    method: str  # "monolithic", "decomposition" or "decomposition+monolithic"
    why: str
    blocks: tuple[list[Block], list[str]] | None = None  # with a decomposition


def plan_method(
    instance: CimInstance,
    method: str = "auto",
    *,
    model: pyo.ConcreteModel | None = None,
    time_limit: float | None = None,
) -> MethodPlan:
    """What ``method`` (one of :data:`METHODS`) stands for on ``instance`` (module
    docstring), with the reason in a few words."""
    if method not in METHODS:
        raise PlacementError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if model is not None:
        if method == "decomposition":
            raise PlacementError("a Pyomo model of your own is solved whole, not decomposed")
        return MethodPlan("monolithic", "a Pyomo model of your own is solved whole")
    if method == "monolithic":
        return MethodPlan("monolithic", "asked for")
    blocks, cuts = split(instance)
    decomposed = (blocks, cuts)
    if method == "decomposition":
        return MethodPlan("decomposition", "asked for", decomposed)
    n = len(instance.operators)
    largest = max((len(b.operators) for b in blocks), default=n)
    if n < AUTO_DECOMPOSE_MIN_OPERATORS:
        return MethodPlan("monolithic", f"{n} operators: one model closes fast")
    nonempty = sum(1 for b in blocks if b.operators)  # as the result counts them
    if nonempty < 2:
        return MethodPlan("monolithic", "no two blocks between cut operators")
    if largest > AUTO_DECOMPOSE_MAX_BLOCK_SHARE * n:
        return MethodPlan("monolithic", f"one block holds {largest / n:.0%} of the operators")
    usable = sum(op.crossbars for op in instance.operators
                 if op.supported and op.crossbars <= instance.crossbar_budget)  # fmt: skip
    if usable <= instance.crossbar_budget:
        why = f"{nonempty} blocks; the budget fits every CIM-capable operator"
        return MethodPlan("decomposition", why, decomposed)
    if time_limit is None:
        return MethodPlan("decomposition", f"{nonempty} blocks; no time limit: the"
                          " decomposition proves the optimum", decomposed)  # fmt: skip
    rest = (1 - AUTO_DECOMPOSITION_SHARE) * time_limit
    if build_estimate(instance) > AUTO_WHOLE_MAX_BUILD_SHARE * rest:
        return MethodPlan("decomposition", f"{nonempty} blocks; the whole model (about"
                          f" {build_estimate(instance):.2g} s to build) could not be searched in"
                          f" the {rest:.3g} s after them", decomposed)  # fmt: skip
    return MethodPlan(
        "decomposition+monolithic",
        f"{nonempty} blocks and a budget that binds them: the decomposition, and if"
        f" after {AUTO_DECOMPOSITION_SHARE:.0%} of the time its gap is above"
        f" {AUTO_WHOLE_MIN_GAP:.0%}, the whole model from its placement; the better"
        " placement and bound are kept",
        decomposed,
    )


def solve_mip(
    instance: CimInstance,
    solver: str,
    formulation: str,
    options: SolveOptions,
    *,
    model: pyo.ConcreteModel | None = None,
    warm_start: bool | None = None,
    starts: Sequence[tuple[str, CimSchedule]] = (),
    deadline: Deadline | None = None,
) -> tuple[SolveResult, CimSchedule | None]:
    """The Pyomo ILP of ``formulation`` with a MIP backend; (result in seconds, schedule).

    The solver always gets a start: the best of the CPU-only schedule, the heuristic's
    (when it runs: ``warm_start``, default for "tightened") and ``starts`` (origin,
    schedule; re-timed on this instance), which is also the upper bound of the per-pair
    big-M. On our own model a result no better than that start reports the start.
    The schedule read back is re-timed (:func:`placement.cim.schedule.retime`).
    """
    backend = get_backend(solver, mip=True)
    families = tuple(model.families) if model is not None else formulation_families(formulation)
    deadline = deadline or Deadline(options.time_limit)
    phases = Phases(options.monitor)
    if warm_start is None:
        warm_start = formulation == "tightened"
    heuristic, heuristic_seconds = None, 0.0
    # A given start (CP-SAT's, a neighbour's) stands in for the heuristic.
    if not starts and (warm_start or (model is None and "window_big_m" in families)):
        phases.start("heuristic")
        tick = time.perf_counter()
        heuristic = heuristic_schedule(instance, seconds=deadline.share(HEURISTIC_SHARE))
        heuristic_seconds = time.perf_counter() - tick
        phases.ran("heuristic", heuristic_seconds)
    candidates = [("heuristic", heuristic)] if heuristic is not None else []
    origin, start = best_start(instance, [*candidates, *starts])
    extra: dict[str, object] = {
        "formulation": formulation, "start_from": origin, "start_makespan": start.makespan,
    }  # fmt: skip
    if heuristic is not None:
        extra["heuristic_makespan"] = heuristic.makespan
        extra["heuristic_seconds"] = heuristic_seconds
    own_model = model is None
    left = deadline.left()
    reserve = end_reserve(instance)
    if own_model and left is not None and left - reserve < build_estimate(instance) + MIN_SOLVE:
        why = (f"{left:.2g} s left of the {deadline.limit:g} s limit; building the model"
               f" alone takes about {build_estimate(instance):.2g} s")  # fmt: skip
        phases.skipped(backend.name, why)
        result = _no_solve(backend.name, options, extra | {"phases": phases.records})
        note = f"{origin} schedule reported ({backend.label} skipped: {why})"
        return _reported(result, start, options.rel_gap, note), start
    phases.start("building the model", start.makespan)
    tick = time.perf_counter()
    if model is None:
        model = build_cim_model(instance, families=families, upper_bound=start.makespan)
    values = start_values(model, instance, start)
    build_seconds = time.perf_counter() - tick
    phases.ran("build", build_seconds)
    left = deadline.left()
    phase_options = options
    if left is not None:
        limit = phase_limit(left - reserve)
        phase_options = dataclasses.replace(options, time_limit=limit)
        extra["phase_time_limit"] = phase_options.time_limit
    phases.start(backend.label)
    result = solve_in_seconds(
        model, backend, phase_options, what="CIM", item="operator", start=values,
        build_seconds=build_seconds, extra=extra,
    )  # fmt: skip
    phases.ran(backend.name, result.solve_seconds)
    result.options |= {"time_limit": options.time_limit, "phases": phases.records}
    schedule = None
    if result.status.has_solution:
        schedule = CimSchedule(**extract_schedule(model, instance)._asdict())
        try:
            schedule = retime(instance, schedule)
        except PlacementError:
            pass  # decisions no timing can make valid: the verifier names what is wrong
    if own_model and result.status != SolveStatus.OPTIMAL:
        if schedule is None or schedule.makespan > start.makespan:
            return _reported(result, start, options.rel_gap,
                             f"{origin} schedule reported ({backend.label} had no better"
                             " incumbent)"), start  # fmt: skip
    if schedule is None:
        return result, None
    return _reported(result, schedule, options.rel_gap), schedule


def _no_solve(solver: str, options: SolveOptions, extra: dict[str, object]) -> SolveResult:
    """The result of a solve that did not start (no time left for it)."""
    return SolveResult(
        status=SolveStatus.TIME_LIMIT_NO_SOLUTION, solver=solver, objective=None,
        best_bound=None, gap=None, build_seconds=0.0, solve_seconds=0.0,
        size=ModelSize(0, 0, 0), message="", options=options.recorded() | extra,
    )  # fmt: skip


def _reported(
    result: SolveResult, schedule: CimSchedule, rel_gap: float, note: str = ""
) -> SolveResult:
    """``result`` for the (re-timed) ``schedule``: its makespan, the gap to the solver's
    bound recomputed from it, OPTIMAL when that gap proves it; ``note`` added."""
    makespan = schedule.makespan
    claimed = result.objective
    if not note and claimed is not None and makespan > claimed * (1 + _CLAIM_SLACK) + 1e-12:
        # An incumbent's value below what its own decisions achieve: a solver bug.
        raise PlacementError(
            f"verification failed: {result.solver} reported a makespan of {claimed:.9g} s, but"
            f" its decisions take {makespan:.9g} s at best (recomputed)"
        )
    bound = result.best_bound
    gap = None if bound is None else gap_to_lower_bound(makespan, bound)
    status = result.status
    notes = [note] if note else []
    if status != SolveStatus.OPTIMAL:
        status = SolveStatus.TIME_LIMIT
        if gap is not None and gap <= rel_gap:
            status = SolveStatus.OPTIMAL
            notes.append(f"proven by the bound: gap {gap:.3g} <= {rel_gap:g}")
    if claimed is not None and not note and abs(claimed - makespan) > 1e-6 * makespan:
        notes.append(f"re-timed makespan {makespan:.9g} s (solver's {claimed:.9g} s)")
    message = "; ".join(m for m in (result.message, *notes) if m)
    return dataclasses.replace(result, status=status, objective=makespan, gap=gap,
                               message=message)  # fmt: skip


def _cpsat(
    instance: CimInstance,
    options: SolveOptions,
    deadline: Deadline,
    starts: Sequence[tuple[str, CimSchedule]],
    share: float = 1.0,
) -> tuple[SolveResult, CimSchedule]:
    """CP-SAT within ``share`` of the time the deadline leaves after the heuristic."""
    phases = Phases(options.monitor)
    phases.start("heuristic")
    tick = time.perf_counter()
    heuristic = heuristic_schedule(instance, seconds=deadline.share(HEURISTIC_SHARE))
    phases.ran("heuristic", time.perf_counter() - tick)
    left = deadline.left()
    if left is not None:
        limit = phase_limit(share * (left - end_reserve(instance)) - WORKER_START)
        if limit <= MIN_SOLVE:
            why = f"{left:.2g} s left of the {deadline.limit:g} s limit"
            phases.skipped("cpsat", why)
            origin, start = best_start(instance, [("heuristic", heuristic), *starts])
            extra = {"start_from": origin, "start_makespan": start.makespan,
                     "heuristic_makespan": heuristic.makespan,
                     "heuristic_seconds": phases.records[0]["seconds"],
                     "phases": phases.records}  # fmt: skip
            result = _no_solve("cpsat", options, extra)
            note = f"{origin} schedule reported (CP-SAT skipped: {why})"
            return _reported(result, start, options.rel_gap, note), start
        phase_options = dataclasses.replace(options, time_limit=limit)
    else:
        phase_options = options
    phases.start("CP-SAT", heuristic.makespan)
    result, schedule = solve_cpsat(instance, phase_options, heuristic=heuristic, starts=starts)
    phases.ran("cpsat", result.solve_seconds)
    result.options |= {
        "time_limit": options.time_limit, "phase_time_limit": phase_options.time_limit,
        "heuristic_seconds": phases.records[0]["seconds"], "phases": phases.records,
    }  # fmt: skip
    return result, schedule


def _cpsat_then_highs(
    instance: CimInstance,
    options: SolveOptions,
    deadline: Deadline,
    starts: Sequence[tuple[str, CimSchedule]],
) -> tuple[SolveResult, CimSchedule | None]:
    """CP-SAT for half the time left; if not proven, HiGHS (tightened, its ordering rows
    added as violated: :mod:`placement.cim.lazy_ordering`) from its incumbent for the rest."""
    r1, first = _cpsat(instance, options, deadline, starts, share=CPSAT_SHARE)
    heur_s = r1.options.get("heuristic_seconds", 0.0)
    if r1.status == SolveStatus.OPTIMAL:
        return dataclasses.replace(r1, solver="cpsat+highs"), first
    r2, sched = solve_lazy_ordering(instance, options, first, deadline)
    obj = sched.makespan
    bounds = [b for b in (r1.best_bound, r2.best_bound) if b is not None]
    bound = max(bounds) if bounds else None
    gap = None if bound is None else gap_to_lower_bound(obj, bound)
    status = r2.status
    if status != SolveStatus.OPTIMAL and gap is not None and gap <= options.rel_gap:
        status = SolveStatus.OPTIMAL  # the two bounds together prove it
    if status == SolveStatus.ERROR:
        status = SolveStatus.TIME_LIMIT  # HiGHS failed; CP-SAT's verified schedule stands
    message = "; ".join(m for m in (r1.message, r2.message) if m)
    recorded = {**r2.options, "cpsat_seconds": r1.solve_seconds, "cpsat_bound": r1.best_bound,
                "heuristic_seconds": heur_s,
                "heuristic_makespan": r1.options.get("heuristic_makespan"),
                "phases": [*r1.options.get("phases", []), *r2.options.get("phases", [])]}
    return dataclasses.replace(
        r2, status=status, solver="cpsat+highs", objective=obj, best_bound=bound, gap=gap,
        build_seconds=r1.build_seconds + r2.build_seconds,
        solve_seconds=r1.solve_seconds + r2.solve_seconds, message=message, options=recorded,
    ), sched

