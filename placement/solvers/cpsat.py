"""OR-Tools CP-SAT as a backend: it runs a CP-SAT model in a separate worker process.

A CP-SAT model cannot cross a process boundary as an object, so the caller hands over
a :class:`CpSatModel`: a module-level *builder* function (pickled by reference) and the
plain data it builds from. In the worker the builder returns the ``CpModel`` and the
variables whose values the caller wants by name; the backend solves it and loads those
values into ``CpSatModel.solution``, as the Pyomo backends load theirs into the model's
variables. The backend knows no formulation (the CIM interval model is
``placement.models.cim.cpsat``).

Process isolation: OR-Tools' ``libortools.so`` exports its own (older) HiGHS symbols,
and highspy's extension binds to whichever HiGHS is loaded first: importing ``ortools``
and ``highspy`` in one process breaks one of them ("undefined symbol", measured with
ortools 9.15 and highspy 1.15.1). CP-SAT therefore always runs in a separate
``spawn``ed worker process (kept for reuse); this module never imports ``ortools`` in
the caller's process.

Statuses: OPTIMAL -> OPTIMAL, FEASIBLE -> TIME_LIMIT, UNKNOWN -> TIME_LIMIT_NO_SOLUTION
(with CP-SAT's bound), INFEASIBLE -> INFEASIBLE, anything else (MODEL_INVALID) -> ERROR
with CP-SAT's validation message. ``options["cpsat_status"]`` keeps CP-SAT's own name.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import multiprocessing
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from placement.errors import PlacementError
from placement.solvers.base import (
    BackendBase,
    ModelSize,
    SolveOptions,
    SolveResult,
    SolveStatus,
    finite_or_none,
    relative_gap,
)

INSTALL = "OR-Tools is not installed: pip install ortools"

#: builder(data) -> (cp_model.CpModel, {name: variable whose value is wanted})
Builder = Callable[[Any], tuple[Any, dict[str, Any]]]


@dataclass
class CpSatModel:
    """What the CP-SAT backend solves: ``builder(data)`` run in the worker.

    ``builder`` must be a module-level function (pickled by reference); ``data`` plain,
    picklable values. After a solve with a solution, ``solution`` maps each name the
    builder returned to its integer value.
    """

    builder: Builder
    data: Any
    binaries: int = 0  # reported as ModelSize.binaries (CP-SAT does not distinguish)
    solution: dict[str, int] | None = field(default=None, repr=False)


class CpSatBackend(BackendBase):
    name = "cpsat"
    label = "CP-SAT"

    def unavailable_reason(self) -> str | None:
        # Never import ortools here: it would break highspy in this process.
        if importlib.util.find_spec("ortools") is None:
            return INSTALL
        return None


    def solve(
        self, model: CpSatModel, options: SolveOptions, *, start: Mapping[Any, float] | None = None
    ) -> SolveResult:
        """Solve ``model`` in the worker; ``start`` is unused (the builder adds its hints)."""
        self.check_ready(options)
        params = {"time_limit": options.time_limit, "threads": options.threads,
                  "rel_gap": options.rel_gap}
        tick = time.perf_counter()
        try:
            out = _executor().submit(_solve_in_worker, model.builder, model.data, params).result()
        except BrokenProcessPool as exc:
            shutdown()
            raise PlacementError(f"the CP-SAT worker process died: {exc}") from None
        wall = time.perf_counter() - tick
        status_name = out["status"]
        model.solution = out.get("values")
        objective = out.get("objective") if model.solution is not None else None
        bound = finite_or_none(out["bound"])
        recorded = options.recorded() | {
            "cpsat_status": status_name,
            "worker_overhead_seconds": max(wall - out["build_seconds"] - out["solve_seconds"], 0.0),
        }
        words = f"CP-SAT: {status_name}"
        status, message = {
            "OPTIMAL": (SolveStatus.OPTIMAL, ""),
            "FEASIBLE": (SolveStatus.TIME_LIMIT, words),
            "UNKNOWN": (SolveStatus.TIME_LIMIT_NO_SOLUTION, words),
            "INFEASIBLE": (SolveStatus.INFEASIBLE, words),
        }.get(status_name, (SolveStatus.ERROR, f"{words}: {out.get('message', '')}"))
        return SolveResult(
            status=status,
            solver=self.name,
            objective=objective,
            best_bound=bound,
            gap=relative_gap(objective, bound),
            build_seconds=out["build_seconds"],  # the builder's time in the worker
            solve_seconds=out["solve_seconds"],
            size=ModelSize(out["variables"], model.binaries, out["constraints"]),
            message=message,
            options=recorded,
        )


# --- the worker process -----------------------------------------------------------------

_EXECUTOR: ProcessPoolExecutor | None = None


def _executor() -> ProcessPoolExecutor:
    """One reusable spawned worker: a fresh interpreter that never loads highspy."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = ProcessPoolExecutor(max_workers=1,
                                        mp_context=multiprocessing.get_context("spawn"))
        atexit.register(shutdown)
    return _EXECUTOR


def shutdown() -> None:
    """Stop the worker (it is started again on the next solve)."""
    global _EXECUTOR
    if _EXECUTOR is not None:
        _EXECUTOR.shutdown(wait=False, cancel_futures=True)
        _EXECUTOR = None


def _solve_in_worker(builder: Builder, data: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Build with ``builder`` and solve (runs in the worker); plain values come back."""
    from ortools.sat.python import cp_model

    tick = time.perf_counter()
    model, wanted = builder(data)
    proto = model.proto
    n_vars, n_rows = len(proto.variables), len(proto.constraints)
    build_seconds = time.perf_counter() - tick

    solver = cp_model.CpSolver()
    if params["time_limit"] is not None:
        solver.parameters.max_time_in_seconds = float(params["time_limit"])
    solver.parameters.num_workers = params["threads"] or 0
    solver.parameters.relative_gap_limit = params["rel_gap"]
    tick = time.perf_counter()
    code = solver.solve(model)
    out: dict[str, Any] = {
        "status": solver.status_name(code),
        "build_seconds": build_seconds,
        "solve_seconds": time.perf_counter() - tick,
        "variables": n_vars,
        "constraints": n_rows,
        "bound": None,
    }
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        bound = float(solver.best_objective_bound)
        out["bound"] = bound if math.isfinite(bound) else None
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        out["objective"] = float(solver.objective_value)
        out["values"] = {name: int(solver.value(var)) for name, var in wanted.items()}
    if code == cp_model.MODEL_INVALID:
        out["message"] = model.validate()
    return out
