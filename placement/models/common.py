"""What the CIM and PIM models share: their time unit, and how a solve is read back.

Scaling: latencies are in seconds (1e-7 .. 1e-1), where a MIP solver's absolute
tolerances (HiGHS: primal feasibility 1e-7, absolute MIP gap 1e-6, matrix entries
below 1e-9 dropped) are of the order of the data. Each model is therefore built in a
time unit ``m.time_unit`` (a power of ten of seconds) chosen from a magnitude of the
model: :func:`power_of_ten_unit`. :func:`solve_in_seconds` solves with any backend,
turns the objective and bound back into seconds and reacts to a failed solve the same
way whichever backend ran.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import pyomo.environ as pyo

from placement.errors import PlacementError
from placement.solvers.base import (
    Backend,
    SolveOptions,
    SolverError,
    SolveResult,
    SolveStatus,
    in_units,
)


def power_of_ten_unit(magnitude_seconds: float, decade: int) -> float:
    """Seconds per model unit: a power of ten putting ``magnitude_seconds`` in
    [10**decade, 10**(decade + 1)) model units (1 s when the magnitude is 0)."""
    if magnitude_seconds <= 0.0:
        return 1.0  # every time is zero: any unit works
    return 10.0 ** (math.floor(math.log10(magnitude_seconds)) - decade)


def in_seconds(result: SolveResult, unit: float) -> SolveResult:
    """``result`` with objective and bound converted from model units to seconds."""
    return dataclasses.replace(
        result,
        objective=None if result.objective is None else result.objective * unit,
        best_bound=None if result.best_bound is None else result.best_bound * unit,
    )


def check_outcome(result: SolveResult, backend: Backend, what: str, item: str) -> None:
    """Raise for a solve that failed; a solve that merely ran out of time returns.

    ERROR: :class:`SolverError` carrying the result. INFEASIBLE: every ``item`` on the
    host is always feasible, so a claim of infeasibility is a solver error too.
    """
    if result.status == SolveStatus.ERROR:
        raise SolverError(f"the {what} model could not be solved: {result.message}", result)
    if result.status == SolveStatus.INFEASIBLE:
        raise PlacementError(
            f"{backend.label} declared the {what} model infeasible ({result.message}), but"
            f" placing every {item} on the host is always feasible: solver error"
        )


def solve_in_seconds(
    model: pyo.ConcreteModel,
    backend: Backend,
    options: SolveOptions,
    *,
    what: str,
    item: str,
    start: Mapping[Any, float] | None = None,
    build_seconds: float = 0.0,
    extra: Mapping[str, object] | None = None,
) -> SolveResult:
    """Solve ``model`` (built in ``model.time_unit``) with ``backend``; times in seconds.

    ``extra`` is added to the result's options (what the pipeline wants recorded).
    Raises as :func:`check_outcome` says; the incumbent, if any, is in the model.
    """
    unit = pyo.value(model.time_unit)
    raw = backend.solve(model, in_units(options, unit), start=start)
    result = dataclasses.replace(
        in_seconds(raw, unit),
        build_seconds=build_seconds,
        options={**raw.options, **(extra or {})},
    )
    check_outcome(result, backend, what, item)
    return result
