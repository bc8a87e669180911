"""Exact Pareto fronts of CIM placements by the epsilon-constraint method.

Axes (:data:`FRONT_AXES`): ``latency`` (s), ``energy`` (J), ``crossbars`` (used) and
``throughput`` (frames per second; the period, its inverse, is what is minimized). A
front is over two or three of them, all minimized.

Two axes ``(a, b)``, on top of any ``fixed`` bounds:

1. the two ends, independent of each other (one batch): the lexicographic minimum of
   ``(a, b)`` and that of ``(b, a)``;
2. from the first end on, the lexicographic minimum of ``(a, b)`` under
   ``b <= b_previous - step(b)``, until the point found is the second end (a proven end:
   no point with a smaller ``b`` exists; an unproven one is followed by one more solve,
   which must come back infeasible).

Each solve is lexicographic (:class:`~placement.cim.objectives.Objective` with ``then``),
so every point is nondominated: no placement is better on one axis and no worse on the
other (within the solver's relative gap, which each point reports, and ``step``).
``step(b)`` is 1 for crossbars, else ``rel_step * |b_previous|``: it must be below the
differences between distinct values on the front, and at least the relative gap and the
bounds' slack (:data:`~placement.cim.objectives.BOUND_SLACK`, 1e-6), so that a point within
them of the previous one is not found again (:data:`MIN_REL_STEP`).

Three axes ``(a, b, c)``: two-axis fronts of ``(a, b)`` under ``c <= eps``, each solve
breaking ties by ``c`` last, for ``eps`` from infinity down to ``max c`` over the last
slice's points less ``step(c)``, until a slice is infeasible; the union, filtered for
dominance, is the front.

The method is a generator (:func:`front_steps`) that yields batches of
:class:`FrontStep` s and receives their outcomes, so that a driver can solve each batch
anywhere (in this process, worker processes, a Dask cluster: ``placement.sweep.pareto``)
and replay a finished prefix from a log when a run resumes.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.cim.objectives import Objective, axis_name
from placement.errors import PlacementError, repeated

#: The axes a front may have, as people name them.
FRONT_AXES: tuple[str, ...] = ("latency", "energy", "crossbars", "throughput")
#: Relative step below the previous point on a continuous axis (at least the gap).
DEFAULT_REL_STEP = 1e-4
#: The smallest step: ten times the slack within which a bound counts as met.
MIN_REL_STEP = 1e-5
#: A front stops after this many points (a safety net; the report says so).
DEFAULT_MAX_POINTS = 200


def parse_axes(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"latency,energy"`` -> ("latency", "energy"): two or three known, distinct axes."""
    names = [a.strip() for a in (text.split(",") if isinstance(text, str) else text)]
    unknown = [a for a in names if a not in FRONT_AXES]
    if unknown:
        raise PlacementError(
            f"unknown axis {unknown[0]!r}; a front's axes are {', '.join(FRONT_AXES)}"
        )
    twice = repeated(names)
    if twice:
        raise PlacementError(f"axis {twice[0]} given twice")
    if not 2 <= len(names) <= 3:
        raise PlacementError(f"a front has two or three axes, got {len(names)}: {text}")
    return tuple(names)


@dataclass(frozen=True)
class FrontStep:
    """One solve of the method: its index, role and objective."""

    index: int
    role: str  # "end" (an end of a two-axis front), "step" (below the previous point)
    objective: Objective

    @property
    def step_id(self) -> str:
        return f"step{self.index:03d}"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "role": self.role, "objective": self.objective.to_json()}


@dataclass(frozen=True)
class StepOutcome:
    """What a step found: every axis's value (None when nothing was found), and whether
    each of its stages was proven."""

    status: str  # "optimal", "time_limit", "infeasible", "time_limit_no_solution", "error"
    values: Mapping[str, float] | None  # by axis (latency, energy, period, crossbars)
    proven: bool

    @property
    def found(self) -> bool:
        return self.values is not None


@dataclass
class FrontState:
    """What the generator reports when it ends."""

    complete: bool = False  # the last slice ended in a proof that no point remains
    note: str = ""
    steps: list[FrontStep] = field(default_factory=list)


def step_size(axis: str, value: float, rel_step: float) -> float:
    """How far below ``value`` the next point must be on ``axis``."""
    if axis == "crossbars":
        return 1.0
    return max(abs(value) * rel_step, 1e-300)


Batch = list[FrontStep]
Outcomes = list[StepOutcome]


def front_steps(
    axes: Sequence[str],
    *,
    fixed: Mapping[str, float] | None = None,
    rel_step: float = DEFAULT_REL_STEP,
    max_points: int = DEFAULT_MAX_POINTS,
    state: FrontState | None = None,
) -> Generator[Batch, Outcomes, None]:
    """The epsilon-constraint method (module docstring) as a generator of batches: send
    each batch's outcomes (in the batch's order) to get the next batch. ``fixed``: bounds
    every solve keeps (SI units, by axis name). ``state`` receives the steps and whether the
    front is complete."""
    names = [axis_name(a) for a in parse_axes(list(axes))]
    state = state if state is not None else FrontState()
    counter = [0]
    points = [0]

    def make(role: str, objective: Objective) -> FrontStep:
        step = FrontStep(counter[0], role, objective)
        counter[0] += 1
        state.steps.append(step)
        return step

    base = dict(fixed or {})
    if len(names) == 2:
        yield from _two_axes(names[0], names[1], base, (), rel_step, max_points, make, points,
                             state)  # fmt: skip
        return
    a, b, c = names
    eps = math.inf
    while True:
        bounds = base | ({} if math.isinf(eps) else {c: eps})
        slice_state = FrontState()
        found = yield from _two_axes(a, b, bounds, (c,), rel_step, max_points, make, points,
                                     slice_state)  # fmt: skip
        if not found:
            state.complete = slice_state.complete
            state.note = slice_state.note or "no point remains below the last slice"
            return
        if not slice_state.complete or points[0] >= max_points:
            state.note = slice_state.note
            return
        eps = max(o.values[c] for o in found if o.values is not None)
        eps -= step_size(c, eps, rel_step)
        if eps < 0:  # every axis is non-negative: no slice remains
            state.complete = True
            return


def _two_axes(
    a: str, b: str, bounds: Mapping[str, float], last: tuple[str, ...], rel_step: float,
    max_points: int, make: Any, points: list[int], state: FrontState,
) -> Generator[Batch, Outcomes, list[StepOutcome]]:  # fmt: skip
    """One two-axis front under ``bounds``; returns the outcomes with a point."""

    def objective(first: str, second: str, extra: Mapping[str, float]) -> Objective:
        return Objective(first, bounds=tuple({**bounds, **extra}.items()),
                         then=(second, *last))  # fmt: skip

    low, high = yield [make("end", objective(a, b, {})), make("end", objective(b, a, {}))]
    if not low.found or not high.found:
        state.complete = low.status == "infeasible" or high.status == "infeasible"
        state.note = "no placement meets the bounds" if state.complete else \
            "an end of the front was not found within the time limit"
        return []
    found = [low, high]  # the nondominance filter drops high where a step finds it again
    points[0] += 2
    end_b = high.values[b]
    previous = low
    while True:
        if high.proven and _same(previous.values, high.values):
            state.complete = True
            return found
        eps = previous.values[b] - step_size(b, previous.values[b], rel_step)
        if high.proven and eps < end_b * (1 - 1e-9) - 1e-300:
            state.complete = True  # nothing lies below the proven minimum of b
            return found
        if points[0] >= max_points:
            state.note = f"stopped after {max_points} points"
            return found
        (outcome,) = yield [make("step", objective(a, b, {b: eps}))]
        if not outcome.found:
            state.complete = outcome.status == "infeasible"
            if not state.complete:
                state.note = f"the step below {b} {eps:.6g} found no point within the time limit"
            return found
        found.append(outcome)
        points[0] += 1
        previous = outcome


def _same(x: Mapping[str, float] | None, y: Mapping[str, float] | None) -> bool:
    if x is None or y is None:
        return False
    return all(math.isclose(x[k], y[k], rel_tol=1e-9, abs_tol=1e-15) for k in x)


def nondominated(
    values: Sequence[Mapping[str, float]], axes: Sequence[str],
    proven: Sequence[bool] | None = None,
) -> list[int]:  # fmt: skip
    """Indices of the points no other point dominates on ``axes`` (all minimized), in the
    given order. Of points equal on every axis one is kept: a ``proven`` one if any (a
    later solve may prove what an earlier one found), else the first."""
    names = [axis_name(a) for a in axes]
    rank = [(not (proven[i] if proven else False), i) for i in range(len(values))]
    keep: list[int] = []
    for i, p in enumerate(values):
        dominated = False
        for j, q in enumerate(values):
            if i == j:
                continue
            no_worse = all(q[a] <= p[a] * (1 + 1e-9) + 1e-15 for a in names)
            better = any(q[a] < p[a] * (1 - 1e-9) - 1e-15 for a in names)
            if no_worse and (better or rank[j] < rank[i]):
                dominated = True
                break
        if not dominated:
            keep.append(i)
    return keep


# --------------------------------------------------------------------------- in this process


@dataclass
class Front:
    """A computed front: every step with its placement (None: nothing found), the indices
    of the front's points among them, and whether the front is complete."""

    axes: tuple[str, ...]
    steps: list[tuple[FrontStep, Any]]  # (step, ObjectivePlacement or None)
    points: list[int]  # indices into ``steps``: the nondominated points, in order found
    complete: bool
    note: str


def outcome_of(placement: Any) -> StepOutcome:
    """The outcome of a step from its :class:`~placement.cim.objectives.ObjectivePlacement`."""
    if placement.schedule is None:
        return StepOutcome(placement.result.status.value, None, False)
    proven = all(s.status.value == "optimal" for s in placement.stages)
    return StepOutcome(placement.result.status.value, dict(placement.values), proven)


def pareto_front(
    instance: Any,
    axes: Sequence[str],
    *,
    fixed: Mapping[str, float] | None = None,
    rel_step: float = DEFAULT_REL_STEP,
    max_points: int = DEFAULT_MAX_POINTS,
    **solve_options: Any,
) -> Front:
    """The front of ``instance`` over ``axes``, every step solved here, one after the other,
    with :func:`~placement.cim.objectives.solve_objective` (``solve_options``: its keyword
    arguments; ``time_limit`` is per step). Each step starts from the placements found
    before it."""
    from placement.cim.objectives import solve_objective

    state = FrontState()
    steps = front_steps(axes, fixed=fixed, rel_step=rel_step, max_points=max_points,
                        state=state)  # fmt: skip
    done: list[tuple[FrontStep, Any]] = []
    try:
        batch = next(steps)
        while True:
            outcomes = []
            for step in batch:
                starts = [p.schedule for _, p in done if p is not None and p.schedule is not None]
                placement = solve_objective(instance, step.objective, starts=starts,
                                            **solve_options)  # fmt: skip
                done.append((step, placement))
                outcomes.append(outcome_of(placement))
            batch = steps.send(outcomes)
    except StopIteration:
        pass
    found = [i for i, (_, p) in enumerate(done) if p is not None and p.schedule is not None]
    keep = nondominated([done[i][1].values for i in found], axes,
                        [outcome_of(done[i][1]).proven for i in found])  # fmt: skip
    return Front(tuple(axes), done, [found[k] for k in keep], state.complete, state.note)
