"""Placements for other objectives than latency, under bounds, verified: the solve of
:mod:`placement.models.cim_makespan.objectives`' blocks.

An :class:`Objective` names the axis to minimize (``latency``, ``energy``, ``period``:
the inverse of frames per second, ``crossbars``), upper bounds on any axes, and the axes
that break ties, in order (lexicographic: each later stage keeps the earlier stages'
optima, within :data:`LEX_SLACK`). :func:`solve_objective` solves one stage after the
other on the same instance:

* the start: the best feasible schedule known (the given ones, the earlier stage's, the
  CPU-only one, the latency heuristic's without bounds or where nothing known meets them,
  whichever meet the bounds) and, on the CP-SAT routes, the best one the local search of
  :mod:`placement.cim.bounded_search` finds from them, a few operators moved;
* the MIP route: the Pyomo model of the formulation (the paper's families and the valid
  bounds), with the axes' blocks, the bounds and the objective, solved by a MIP backend
  from the start;
* ``cpsat+highs`` (``auto`` where the formulation is ``tightened``, as for latency): first
  CP-SAT on the interval model with the same objective and bounds in integers, every
  latency and energy rounded down (a relaxation: its bound is valid, its solution is
  re-timed on the true data and used only if it meets the bounds), then, unless that
  already proves the stage, the MIP route from the best schedule for the rest of the time.

Every stage's value is the one recomputed from the schedule (re-timed, energy and period
from the instance's data), its bound the best the solvers certified, and its status
``optimal`` only within the relative gap. The result is verified independently: the
schedule and its energy (:func:`placement.cim.verifier.verify_cim`), the bounds, and the
period by simulating a stream of frames through a modulo schedule of the placement
(:mod:`placement.cim.stream`). A placement that fails is an error, never a result.

Infeasible bounds are an answer, not an error: the result's status is ``infeasible`` and
it has no schedule (a Pareto front ends there).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import networkx as nx
import pyomo.environ as pyo

from placement.cim.bounded_search import bounded_schedule
from placement.cim.cpsat_route import interval_data, retimed_solution, time_unit
from placement.cim.deadline import (
    CPSAT_SHARE,
    HEURISTIC_SHARE,
    MIN_SOLVE,
    WORKER_START,
    Deadline,
    phase_limit,
)
from placement.cim.energy import EnergyBreakdown, placement_energy
from placement.cim.instance import CimInstance
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.pipeline import CimPlacement, resolve_formulation, resolve_solver
from placement.cim.pipeline import build_model as build_latency_model
from placement.cim.pipeline import solve as solve_latency
from placement.cim.schedule import CimSchedule, all_host_schedule, asap_schedule, retime
from placement.cim.stream import (
    ModuloSchedule,
    StreamSimulation,
    minimum_period,
    modulo_schedule,
    simulate_stream,
)
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.models.cim_makespan.build import (
    big_m_seconds,
    build_cim_model,
    extract_schedule,
    formulation_families,
    start_values,
)
from placement.models.cim_makespan.interval_objectives import build_objective_interval_model
from placement.models.cim_makespan.objectives import (
    AXES,
    add_axes,
    axis,
    axis_value,
    set_bound,
    set_objective,
)
from placement.solvers.base import (
    DEFAULT_REL_GAP,
    ModelSize,
    SolveOptions,
    SolveResult,
    SolveStatus,
    gap_to_lower_bound,
)
from placement.solvers.cpsat import CpSatModel
from placement.solvers.registry import MIP_BACKENDS, get_backend
from placement.solvers.workers import AUTO_WORKERS
from placement.units import fmt_energy, fmt_time

#: The lexicographic stages after the first keep each earlier axis within this relative
#: slack of the value found (solver tolerances; the reported values are recomputed).
LEX_SLACK = 1e-9
#: A bound is met when the recomputed value exceeds it by at most this (relative): a MIP
#: solver's integrality tolerance (1e-6 in HiGHS) lets a binary be a millionth off, which
#: moves a sum of terms by up to a millionth of them; the rounded placement may carry that.
BOUND_SLACK = 1e-6
#: What people call the axes (``throughput`` is the period's inverse, maximized).
OBJECTIVE_NAMES: dict[str, str] = {
    "latency": "latency", "energy": "energy", "throughput": "period", "period": "period",
    "crossbars": "crossbars",
}  # fmt: skip
_INTEGRAL = {"crossbars"}


def axis_name(name: str) -> str:
    """The axis of an objective name (``throughput`` -> ``period``); one line for others."""
    try:
        return OBJECTIVE_NAMES[name]
    except KeyError:
        raise PlacementError(
            f"unknown objective {name!r}; known: {', '.join(OBJECTIVE_NAMES)}"
        ) from None


@dataclass(frozen=True)
class Objective:
    """What to minimize, under which bounds, with which tie-breakers (module docstring).

    ``bounds``: (axis, upper bound) pairs in SI units (seconds, joules, seconds, crossbars).
    """

    minimize: str = "latency"
    bounds: tuple[tuple[str, float], ...] = ()
    then: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "minimize", axis_name(self.minimize))
        object.__setattr__(self, "then", tuple(axis_name(a) for a in self.then))
        bounds = tuple((axis_name(a), b) for a, b in self.bounds)
        object.__setattr__(self, "bounds", bounds)
        stages = self.stages
        if len(set(stages)) != len(stages):
            raise PlacementError(f"an axis appears twice among the stages: {', '.join(stages)}")
        seen = set()
        for name, value in bounds:
            if name in seen:
                raise PlacementError(f"two bounds on {name}: give one")
            seen.add(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value >= 0
            ):
                raise PlacementError(f"a bound on {name} must be a finite number >= 0,"
                                     f" got {value!r}")  # fmt: skip

    @property
    def stages(self) -> tuple[str, ...]:
        return (self.minimize, *self.then)

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.stages, *(a for a, _ in self.bounds)]))

    @property
    def latency_only(self) -> bool:
        """The paper's objective alone: today's pipeline solves it."""
        return self.stages == ("latency",) and not self.bounds

    def describe(self) -> str:
        """E.g. "minimum energy, latency <= 5 ms, then minimum latency"."""
        words = [_goal(self.minimize)]
        words += [_bound_text(a, b) for a, b in self.bounds]
        words += [f"then {_goal(a)}" for a in self.then]
        return ", ".join(words)

    def to_json(self) -> dict[str, Any]:
        return {"minimize": self.minimize, "bounds": {a: b for a, b in self.bounds},
                "then": list(self.then)}  # fmt: skip


def _goal(name: str) -> str:
    return "maximum throughput (minimum period)" if name == "period" else f"minimum {name}"


def _bound_text(name: str, value: float) -> str:
    """A bound for people: "latency <= 5.5 ms", "throughput >= 120 frames/s"."""
    if name == "period":
        return "throughput >= " + (f"{1.0 / value:.6g} frames/s" if value > 0 else "infinity")
    if name == "energy":
        return f"energy <= {fmt_energy(value, 6)}"
    if name == "latency":
        return f"latency <= {fmt_time(value, 6)}"
    return f"{name} <= {value:g}"


def axis_values(instance: CimInstance, schedule: CimSchedule) -> dict[str, float]:
    """Every axis of a schedule, recomputed from the instance's data (SI units; no energy
    without the energy model)."""
    values = {
        "latency": schedule.makespan,
        "period": minimum_period(instance, schedule.on_host)[0],
        "crossbars": float(schedule.crossbars_used(instance)),
    }
    energy = placement_energy(instance, schedule.on_host, schedule.makespan)
    if energy is not None:
        values["energy"] = energy.total
    return values


def meets(values: Mapping[str, float], bounds: Mapping[str, float]) -> bool:
    """True when every bounded axis is within its bound (relative :data:`BOUND_SLACK`)."""
    return all(values[a] <= b * (1 + BOUND_SLACK) + 1e-15 for a, b in bounds.items())


@dataclass
class Stage:
    """One lexicographic stage: its axis and what the solvers found and proved (SI)."""

    axis: str
    status: SolveStatus
    value: float | None  # of the reported placement, recomputed
    bound: float | None  # certified lower bound
    gap: float | None
    solver: str
    seconds: float
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["status"] = self.status.value
        return data


@dataclass
class ObjectivePlacement(CimPlacement):
    """A placement for an :class:`Objective`: every axis's value, the stages, the energy
    breakdown and the stream's modulo schedule and simulation."""

    objective: Objective = field(default_factory=Objective)
    stages: list[Stage] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    energy: EnergyBreakdown | None = None
    modulo: ModuloSchedule | None = None
    stream: StreamSimulation | None = None

    def to_json(self) -> dict[str, Any]:
        doc = super().to_json()
        doc["objective"] = self.objective.to_json()
        doc["stages"] = [s.to_json() for s in self.stages]
        doc["values"] = dict(self.values)
        if self.stream is not None and self.modulo is not None:
            doc["stream"] = self.stream.to_json() | {
                "modulo_frame_latency": self.modulo.frame_latency
            }
        return doc


def solve(
    instance: CimInstance, *, objective: Objective | str = "latency", **options: Any
) -> CimPlacement:
    """:func:`placement.cim.pipeline.solve` for the paper's objective (today's pipeline,
    every option of it), :func:`solve_objective` for any other ``objective`` (an
    :class:`Objective`, or an axis name to minimize without bounds)."""
    if isinstance(objective, str):
        objective = Objective(objective)
    if objective.latency_only:
        return solve_latency(instance, **options)
    # workers "auto" asks for processes only where a decomposition runs: none here
    if (options.get("method", "auto") == "decomposition"
            or options.get("workers", 1) not in (1, AUTO_WORKERS)
            or options.get("scheduler") is not None):  # fmt: skip
        raise PlacementError("the decomposition solves the latency objective only;"
                             " other objectives are solved whole")  # fmt: skip
    for name in ("method", "workers", "progress", "warm_start", "scheduler",
                 "scheduler_timeout"):  # fmt: skip
        options.pop(name, None)
    return solve_objective(instance, objective, **options)


def build_model(
    instance: CimInstance,
    formulation: str = "auto",
    *,
    upper_bound: float | None = None,
    objective: Objective | str | None = None,
) -> pyo.ConcreteModel:
    """The Pyomo model to extend before :func:`solve`: without ``objective`` (or for the
    paper's), :func:`placement.cim.pipeline.build_model`; for another ``objective`` (an
    :class:`Objective` without ``then`` axes, or an axis name), the formulation's families
    with the blocks of its axes, its bounds and its objective
    (:mod:`placement.models.cim_makespan.objectives`), solved by
    ``solve(instance, model=model, objective=objective)``.

    ``upper_bound`` is the latency objective's (see the pipeline's ``build_model``); for
    another objective the makespan cap of ``window_big_m`` is chosen here so that it cuts
    no optimum off: Eq. 13's M or the latency bound, or for minimum latency under bounds
    the makespan of a schedule that meets them.
    """
    if isinstance(objective, str):
        objective = Objective(objective)
    if objective is None or objective.latency_only:
        return build_latency_model(instance, formulation, upper_bound=upper_bound)
    if upper_bound is not None:
        raise PlacementError("upper_bound is for the latency objective; with another"
                             " objective the makespan cap is chosen so that it cuts no"
                             " optimum off")  # fmt: skip
    if objective.then:
        raise PlacementError("a model is solved in one stage: give no 'then' axes (cim.solve"
                             " without a model solves them one after the other)")  # fmt: skip
    if "energy" in objective.axes and not instance.has_energy:
        raise PlacementError("energy needs the energy model: hardware with the [cim] energy"
                             " constants and a host power ([host] active_power_w)")  # fmt: skip
    bounds = dict(objective.bounds)
    start = None
    if objective.minimize == "latency":
        feasible = [s for s in _cap_schedules(instance)
                    if meets(axis_values(instance, s), bounds)]  # fmt: skip
        start = _best(instance, "latency", feasible)
    return stage_model(instance, objective.minimize, bounds,
                       resolve_formulation(instance, formulation), start)  # fmt: skip


def _cap_schedules(instance: CimInstance) -> list[CimSchedule]:
    """Feasible schedules whose makespans can cap a bounded latency optimum."""
    return [all_host_schedule(instance), heuristic_schedule(instance)]


def check_makespan_cap(
    model: pyo.ConcreteModel, instance: CimInstance, objective: Objective,
    known: Sequence[CimSchedule] = (),
) -> None:  # fmt: skip
    """Refuse a model whose ``window_big_m`` cap ``T <= UB`` may cut the optimum of
    ``objective`` off (the family's validity condition, :mod:`placement.models.cim_makespan.
    objectives`): the cap must reach Eq. 13's M or the latency bound, or, for minimum
    latency, the makespan of a known schedule that meets the bounds."""
    families = getattr(model, "families", ())
    if "window_big_m" not in families or model.component("upper_bound") is None:
        return
    cap = pyo.value(model.upper_bound) * pyo.value(model.time_unit)
    bounds = dict(objective.bounds)
    enough = min(big_m_seconds(instance), bounds.get("latency", math.inf))
    if objective.minimize == "latency":
        feasible = [s.makespan for s in known if meets(axis_values(instance, s), bounds)]
        enough = min([enough, *feasible])
    if cap < enough * (1 - 1e-9):
        raise PlacementError(
            f"the model's makespan cap (window_big_m: T <= {fmt_time(cap, 6)}) may cut off the"
            f" optimum of {objective.describe()}: build the model with"
            " cim.build_model(instance, formulation, objective=...), or without window_big_m"
        )


def solve_objective(
    instance: CimInstance,
    objective: Objective,
    *,
    formulation: str = "auto",
    solver: str = "auto",
    model: pyo.ConcreteModel | None = None,
    time_limit: float | None = None,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = None,
    tee: bool | list[TextIO] = False,
    starts: Sequence[CimSchedule] = (),
    monitor: Any = None,
) -> ObjectivePlacement:
    """The placement of ``objective`` on ``instance``, verified (module docstring).

    ``model``: a model of your own with the objective's blocks, bounds and objective set
    (:mod:`placement.models.cim_makespan.objectives`), solved as built by a MIP backend
    (one stage; the bounds of ``objective`` are still checked on the result). ``starts``:
    feasible schedules to start from. ``time_limit`` is shared by the stages, the later
    ones getting what the earlier ones leave. ``monitor`` is told each stage as it starts
    (:class:`~placement.solvers.base.SolveMonitor`). Raises :class:`PlacementError` on bad
    options, an unavailable solver, a solver error or a failed verification.
    """
    options = SolveOptions(time_limit=time_limit, rel_gap=rel_gap, threads=threads, tee=tee)
    options.check()
    if "energy" in objective.axes and not instance.has_energy:
        raise PlacementError(
            "energy needs the energy model: hardware with the [cim] energy constants and a"
            " host power ([host] active_power_w)"
        )
    if model is not None and objective.then:
        raise PlacementError("a model of your own is solved in one stage: no 'then' axes")
    deadline = Deadline(time_limit)
    formulation = resolve_formulation(instance, formulation)
    route = resolve_solver(formulation, solver, None)
    if model is not None and route not in MIP_BACKENDS:
        route = "highs" if solver == "auto" else route
        if route not in MIP_BACKENDS:
            raise PlacementError(f"a Pyomo model of your own needs a MIP solver, not {route!r}")
    known = [retime(instance, s) for s in starts] + [all_host_schedule(instance)]
    if model is not None:
        check_makespan_cap(model, instance, objective, known + _cap_schedules(instance))
    bounds = dict(objective.bounds)
    stages: list[Stage] = []
    schedule: CimSchedule | None = None
    size = ModelSize(0, 0, 0)
    for k, name in enumerate(objective.stages):
        left = deadline.left()
        share = None if left is None else left / (len(objective.stages) - k)
        stage_options = options if share is None else dataclasses.replace(options,
                                                                           time_limit=share)
        if monitor is not None:  # the progress line names the stage (its values are not times)
            monitor.phase(f"stage {k + 1} of {len(objective.stages)}: {_goal(name)}")
        stage, found, size = _solve_stage(
            instance, name, bounds, known, formulation, route, stage_options, model
        )  # fmt: skip
        stages.append(stage)
        if found is None:
            break
        schedule = found
        known.append(found)
        value = axis_values(instance, found)[name]
        bounds[name] = min(bounds.get(name, math.inf), value * (1 + LEX_SLACK))
    return _verified(instance, objective, stages, schedule, route, formulation, size, options)


def _verified(
    instance: CimInstance, objective: Objective, stages: list[Stage],
    schedule: CimSchedule | None, route: str, formulation: str, size: ModelSize,
    options: SolveOptions,
) -> ObjectivePlacement:  # fmt: skip
    """The result of the stages, checked independently (module docstring)."""
    first = stages[0]
    complete = schedule is not None and len(stages) == len(objective.stages)
    statuses = [s.status for s in stages]
    if schedule is None:
        status = first.status
    elif all(s == SolveStatus.OPTIMAL for s in statuses) and complete:
        status = SolveStatus.OPTIMAL
    else:
        status = SolveStatus.TIME_LIMIT
    result = SolveResult(
        status=status, solver=route, objective=first.value, best_bound=first.bound,
        gap=max((s.gap for s in stages if s.gap is not None), default=None),
        build_seconds=0.0, solve_seconds=math.fsum(s.seconds for s in stages), size=size,
        message="; ".join(s.message for s in stages if s.message),
        options=options.recorded() | {
            "formulation": formulation, "method": "monolithic",
            "objective": objective.to_json(), "stages": [s.to_json() for s in stages],
        },
    )  # fmt: skip
    placement = ObjectivePlacement(instance, result, schedule, None, instance.cpu_only_latency,
                                   objective=objective, stages=stages)  # fmt: skip
    if schedule is None:
        return placement
    values = axis_values(instance, schedule)
    energy = placement_energy(instance, schedule.on_host, schedule.makespan)
    verification = verify_cim(instance, schedule, claimed=schedule.makespan,
                              claimed_energy=None if energy is None else energy.total)
    bad = [f"{a} {values[a]:.9g} exceeds its bound {b:.9g}" for a, b in objective.bounds
           if not meets(values, {a: b})]  # fmt: skip
    modulo = modulo_schedule(instance, schedule)
    stream = simulate_stream(instance, modulo, claimed_period=values["period"])
    bad += [f"stream: {v}" for v in stream.violations]
    if bad:
        verification = dataclasses.replace(verification, ok=False,
                                           violations=verification.violations + bad)
    verification.raise_if_failed()
    placement.verification = verification
    placement.values, placement.energy = values, energy
    placement.modulo, placement.stream = modulo, stream
    return placement


# --------------------------------------------------------------------------- one stage


def _solve_stage(
    instance: CimInstance, name: str, bounds: Mapping[str, float], known: Sequence[CimSchedule],
    formulation: str, route: str, options: SolveOptions, model: pyo.ConcreteModel | None,
) -> tuple[Stage, CimSchedule | None, ModelSize]:  # fmt: skip
    """Minimize axis ``name`` under ``bounds``: (the stage, its schedule or None, the size
    of the last model solved)."""
    tick = time.perf_counter()
    deadline = Deadline(options.time_limit)
    feasible = [s for s in known if meets(axis_values(instance, s), bounds)]
    seeds = list(known)
    if name == "energy":
        seeds.append(energy_greedy_schedule(instance))
    if route in ("cpsat", "cpsat+highs") and model is None and (
        not bounds or not any(meets(axis_values(instance, s), bounds) for s in seeds)
    ):  # fmt: skip
        # The latency heuristic: a start without bounds, a seed where nothing known meets
        # them (under bounds the search below starts from the known placements: on a
        # front, the neighbouring points, closer than the heuristic's).
        seeds.append(heuristic_schedule(instance, seconds=deadline.share(HEURISTIC_SHARE)))
    feasible += [s for s in seeds[len(known):] if meets(axis_values(instance, s), bounds)]
    if route in ("cpsat", "cpsat+highs") and model is None and (bounds or name != "latency"):
        # A near-optimal start from the known placements, a few operators moved: without
        # one, one CP-SAT worker may neither find nor prove the optimum within minutes
        # (placement.cim.bounded_search). HiGHS alone (auto's choice for the graphs with
        # few parallel branches) proves the fronts measured faster without it.
        searched = bounded_schedule(instance, name, bounds, seeds,
                                    seconds=deadline.share(HEURISTIC_SHARE))  # fmt: skip
        if searched is not None and meets(axis_values(instance, searched), bounds):
            feasible.append(searched)
    best = _best(instance, name, feasible)
    cp_bound: float | None = None
    messages = []
    size = ModelSize(0, 0, 0)
    if route in ("cpsat", "cpsat+highs") and model is None:
        share = 1.0 if route == "cpsat" else CPSAT_SHARE
        hint = best if best is not None else all_host_schedule(instance)
        cp_status, cp_schedule, cp_bound, size = _cpsat(
            instance, name, bounds, hint, options, deadline, share
        )  # fmt: skip
        if cp_status == SolveStatus.INFEASIBLE:
            return (Stage(name, SolveStatus.INFEASIBLE, None, None, None, "cpsat",
                          time.perf_counter() - tick, "CP-SAT: no placement meets the bounds"),
                    None, size)  # fmt: skip
        if cp_schedule is not None and meets(axis_values(instance, cp_schedule), bounds):
            best = _best(instance, name, [s for s in (best, cp_schedule) if s is not None])
        elif cp_schedule is not None:
            messages.append("CP-SAT's placement misses a bound on the true data (rounding)")
        if route == "cpsat" or _proven(instance, name, best, cp_bound, options.rel_gap):
            return (_stage(instance, name, best, cp_bound, options.rel_gap, "cpsat",
                           time.perf_counter() - tick, messages), best, size)  # fmt: skip
    backend = route if route in MIP_BACKENDS else "highs"
    left = deadline.left()
    mip_options = options
    if left is not None:
        if left < MIN_SOLVE:
            messages.append(f"{backend} skipped: no time left")
            return (_stage(instance, name, best, cp_bound, options.rel_gap, route,
                           time.perf_counter() - tick, messages), best, size)  # fmt: skip
        mip_options = dataclasses.replace(options, time_limit=phase_limit(left))
    status, found, mip_bound, size, message = _mip(
        instance, name, bounds, best, formulation, backend, mip_options, model
    )  # fmt: skip
    if message:
        messages.append(message)
    if status == SolveStatus.INFEASIBLE:
        return (Stage(name, status, None, None, None, route, time.perf_counter() - tick,
                      "; ".join(messages)), None, size)  # fmt: skip
    if found is not None and not meets(axis_values(instance, found), bounds):
        messages.append(f"{backend}'s placement misses a bound once rounded; not used")
        found = None
    if found is not None:
        best = _best(instance, name, [s for s in (best, found) if s is not None])
    bound = max((b for b in (cp_bound, mip_bound) if b is not None), default=None)
    if best is None:
        return (Stage(name, SolveStatus.TIME_LIMIT_NO_SOLUTION, None, bound, None, route,
                      time.perf_counter() - tick, "; ".join(messages)), None, size)  # fmt: skip
    return (_stage(instance, name, best, bound, options.rel_gap, route,
                   time.perf_counter() - tick, messages), best, size)  # fmt: skip


def energy_greedy_schedule(instance: CimInstance) -> CimSchedule:
    """A start for energy: the operators whose offload saves the most operator energy
    (host minus accelerator, transfers and static power left out) within the crossbar
    budget, chosen exactly by a knapsack over the budget, scheduled earliest-start with
    the host operators in instance order. Without an energy model: the CPU-only schedule."""
    if not instance.has_energy:
        return all_host_schedule(instance)
    items = [(op.name, op.crossbars, (op.e_host or 0.0) - (op.e_acc or 0.0))
             for op in instance.operators if op.supported]  # fmt: skip
    items = [it for it in items if it[2] > 0 and it[1] <= instance.crossbar_budget]
    budget = instance.crossbar_budget
    best: list[tuple[float, frozenset[str]]] = [(0.0, frozenset())] * (budget + 1)
    for name, weight, saving in items:
        for room in range(budget, weight - 1, -1):
            value = best[room - weight][0] + saving
            if value > best[room][0]:
                best[room] = (value, best[room - weight][1] | {name})
    chosen = best[budget][1]
    on_host = {op.name: op.name not in chosen for op in instance.operators}
    index = {op.name: i for i, op in enumerate(instance.operators)}
    order = nx.lexicographical_topological_sort(instance.graph, key=lambda v: f"{index[v]:09d}")
    return asap_schedule(instance, on_host, [v for v in order if on_host[v]])


def _best(instance: CimInstance, name: str, schedules: Iterable[CimSchedule]) -> CimSchedule | None:
    """The schedule with the smallest value of axis ``name`` (the first among equals)."""
    return min(schedules, key=lambda s: axis_values(instance, s)[name], default=None)


def _rounded_bound(name: str, bound: float | None) -> float | None:
    if bound is None or name not in _INTEGRAL:
        return bound
    return float(math.ceil(bound - 1e-6))  # a count's bound: the next whole number


def _proven(
    instance: CimInstance, name: str, best: CimSchedule | None, bound: float | None,
    rel_gap: float,
) -> bool:  # fmt: skip
    if best is None or bound is None:
        return False
    value = axis_values(instance, best)[name]
    return gap_to_lower_bound(value, _rounded_bound(name, bound) or 0.0) <= rel_gap


def _stage(
    instance: CimInstance, name: str, best: CimSchedule | None, bound: float | None,
    rel_gap: float, solver: str, seconds: float, messages: list[str],
) -> Stage:  # fmt: skip
    if best is None:
        return Stage(name, SolveStatus.TIME_LIMIT_NO_SOLUTION, None, bound, None, solver,
                     seconds, "; ".join(messages))  # fmt: skip
    value = axis_values(instance, best)[name]
    bound = _rounded_bound(name, bound)
    gap = None if bound is None else gap_to_lower_bound(value, bound)
    status = SolveStatus.OPTIMAL if gap is not None and gap <= rel_gap else SolveStatus.TIME_LIMIT
    return Stage(name, status, value, bound, gap, solver, seconds, "; ".join(messages))


# --------------------------------------------------------------------------- MIP route


def _mip(
    instance: CimInstance, name: str, bounds: Mapping[str, float], start: CimSchedule | None,
    formulation: str, backend_name: str, options: SolveOptions,
    model: pyo.ConcreteModel | None,
) -> tuple[SolveStatus, CimSchedule | None, float | None, ModelSize, str]:  # fmt: skip
    """The Pyomo model of the stage with a MIP backend: (status, re-timed schedule, bound
    in SI, model size, message)."""
    backend = get_backend(backend_name, mip=True)
    if model is None:
        model = stage_model(instance, name, bounds, formulation, start)
    values = None if start is None else start_point(model, instance, start)
    raw = backend.solve(model, options, start=values)
    size = raw.size
    if raw.status == SolveStatus.ERROR:
        raise PlacementError(f"the CIM model could not be solved: {raw.message}")
    if raw.status == SolveStatus.INFEASIBLE:
        return SolveStatus.INFEASIBLE, None, None, size, f"{backend.label}: infeasible"
    scale = axis(name).scale(model)
    bound = None if raw.best_bound is None else raw.best_bound * scale
    if not raw.status.has_solution:
        return raw.status, None, bound, size, f"{backend.label}: no placement in time"
    schedule = retime(instance, CimSchedule(**extract_schedule(model, instance)._asdict()))
    claimed = axis_value(model, name)
    value = axis_values(instance, schedule)[name]
    if claimed is not None and value > claimed * (1 + 1e-4) + 1e-12:
        raise PlacementError(
            f"verification failed: {backend.label} reported {name} {claimed:.9g}, but its"
            f" decisions give {value:.9g} (recomputed)"
        )
    return raw.status, schedule, bound, size, ""


def stage_model(
    instance: CimInstance, name: str, bounds: Mapping[str, float], formulation: str,
    start: CimSchedule | None,
) -> pyo.ConcreteModel:  # fmt: skip
    """The Pyomo model minimizing axis ``name`` under ``bounds`` with the formulation's
    families. ``window_big_m`` (tightened) gets an upper bound no optimum exceeds: the
    start's makespan when latency is minimized, else the latency bound or Eq. 13's M."""
    families = formulation_families(formulation)
    upper = None
    if "window_big_m" in families:
        upper = big_m_seconds(instance)
        if name == "latency" and start is not None:
            upper = min(upper, start.makespan)
        if "latency" in bounds:
            upper = min(upper, bounds["latency"])
    model = build_cim_model(instance, families=families, upper_bound=upper)
    add_axes(model, instance, [name, *bounds])
    for a, b in bounds.items():
        set_bound(model, a, b)
    set_objective(model, name)
    return model


def start_point(model: pyo.ConcreteModel, instance: CimInstance, schedule: CimSchedule) -> Any:
    """A MIP start from ``schedule``: the paper's variables and every axis block's value."""
    values = start_values(model, instance, schedule)
    axes = axis_values(instance, schedule)
    for name, ax in AXES.items():
        var = model.component(ax.component)
        if var is not None and name in axes:
            values[var] = axes[name] / ax.scale(model)
    return values


# --------------------------------------------------------------------------- CP-SAT route


def _cpsat(
    instance: CimInstance, name: str, bounds: Mapping[str, float], hint: CimSchedule,
    options: SolveOptions, deadline: Deadline, share: float,
) -> tuple[SolveStatus, CimSchedule | None, float | None, ModelSize]:  # fmt: skip
    """CP-SAT on the rounded (relaxed) interval model: (status, its placement re-timed on
    the true data, its bound in SI, size)."""
    backend = get_backend("cpsat")
    reason = backend.unavailable_reason()
    if reason is not None:
        raise PlacementError(reason)
    left = deadline.left()
    cp_options = options
    if left is not None:
        limit = share * left - WORKER_START
        if limit <= MIN_SOLVE:
            return SolveStatus.TIME_LIMIT_NO_SOLUTION, None, None, ModelSize(0, 0, 0)
        cp_options = dataclasses.replace(options, time_limit=phase_limit(limit))
    unit = time_unit(instance)
    # The horizon must not cut an optimum off: the hint's makespan only when it meets the
    # bounds and latency is minimized, else the latency bound or Eq. 13's M.
    horizon = min(bounds.get("latency", math.inf), big_m_seconds(instance))
    if name == "latency" and meets(axis_values(instance, hint), bounds):
        horizon = hint.makespan
    data = interval_data(instance, hint, unit, horizon=horizon)
    axes = {name, *bounds}
    spec: dict[str, Any] = {"minimize": name, "bounds": {}}
    energy_unit = None
    if "energy" in axes:
        energy_unit, spec["energy"] = _integer_energy(instance, unit)
    scale = {"latency": unit, "period": unit, "crossbars": 1.0, "energy": energy_unit}
    for a, b in bounds.items():
        spec["bounds"][a] = int(math.floor(b * (1 + BOUND_SLACK) / scale[a] + 1e-9))
    data["objective"] = spec
    if "period" in axes:
        data["period_horizon"] = int(math.ceil(
            max(instance.cpu_only_latency, math.fsum(e.t_transfer for e in instance.edges))
            / unit)) + 1  # fmt: skip
    model = CpSatModel(build_objective_interval_model, data, binaries=len(data["names"]))
    raw = backend.solve(model, dataclasses.replace(cp_options, rel_gap=cp_options.rel_gap / 2))
    if raw.status == SolveStatus.ERROR:
        raise PlacementError(f"CP-SAT could not solve the CIM model: {raw.message}")
    bound = None if raw.best_bound is None else max(raw.best_bound, 0.0) * scale[name]
    schedule = None
    if model.solution is not None:
        schedule = retimed_solution(instance, data["names"], model.solution)
    return raw.status, schedule, bound, raw.size


def _integer_energy(instance: CimInstance, unit: float) -> tuple[float, dict[str, Any]]:
    """(joules per integer energy unit, the energies in it, rounded down): fine enough that
    the total spans ~1e9 units and the static power ~100 units per time unit."""
    total = math.fsum(max(op.e_host or 0.0, op.e_acc or 0.0) for op in instance.operators)
    total += math.fsum(e.e_transfer or 0.0 for e in instance.edges)
    per_tick = (instance.p_static or 0.0) * unit
    candidates = [total / 1e9] + ([per_tick / 100] if per_tick > 0 else [])
    energy_unit = max(min(candidates), total / 1e13, 1e-30)

    def down(joules: float | None) -> int | None:
        return None if joules is None else int(math.floor(joules / energy_unit))

    return energy_unit, {
        "e_host": [down(op.e_host) for op in instance.operators],
        "e_acc": [down(op.e_acc) for op in instance.operators],
        "e_transfer": [down(e.e_transfer) for e in instance.edges],
        "p_static": down(per_tick),
    }
