"""OR-Tools CP-SAT as a backend: it runs a CP-SAT model in a separate worker process.

A CP-SAT model cannot cross a process boundary as an object, so the caller hands over
a :class:`CpSatModel`: a module-level *builder* function (pickled by reference) and the
plain data it builds from. In the worker the builder returns the ``CpModel`` and the
variables whose values the caller wants by name; the backend solves it and loads those
values into ``CpSatModel.solution``, as the Pyomo backends load theirs into the model's
variables. The backend knows no formulation (the CIM interval model is
``placement.models.cim_makespan.interval``).

Process isolation: OR-Tools' ``libortools.so`` exports its own (older) HiGHS symbols,
and highspy's extension binds to whichever HiGHS is loaded first: importing ``ortools``
and ``highspy`` in one process breaks one of them ("undefined symbol", measured with
ortools 9.15 and highspy 1.15.1). CP-SAT therefore always runs in a separate
worker interpreter (a subprocess kept for reuse; :class:`_Worker`); this module never
imports ``ortools`` in the caller's process.

Statuses: OPTIMAL -> OPTIMAL, FEASIBLE -> TIME_LIMIT, UNKNOWN -> TIME_LIMIT_NO_SOLUTION
(with CP-SAT's bound), INFEASIBLE -> INFEASIBLE, anything else (MODEL_INVALID) -> ERROR
with CP-SAT's validation message. ``options["cpsat_status"]`` keeps CP-SAT's own name.
"""

from __future__ import annotations

import atexit
import importlib.util
import math
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
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
from placement.solvers.workers import die_with_parent

INSTALL = "OR-Tools is not installed: pip install ortools"
#: Tag of the worker's progress messages, sent before its (ok, answer) pair.
_PROGRESS = "progress"

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
        monitor = options.monitor
        params = {"time_limit": options.time_limit, "threads": options.threads,
                  "rel_gap": options.rel_gap, "progress": monitor is not None}
        tick = time.perf_counter()
        try:
            out = _worker().run(model.builder, model.data, params, None if monitor is None
                                else lambda i, b: monitor.improved(finite_or_none(i),
                                                                   finite_or_none(b)))  # fmt: skip
        except WorkerDied as exc:
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

class WorkerDied(Exception):
    """The worker process ended (killed, crashed) before answering."""


class _Worker:
    """A child interpreter (``subprocess``, not ``multiprocessing``) that solves the CP-SAT
    models it reads, pickled, from its stdin and answers on its stdout.

    A plain subprocess can be started from anywhere, including daemonic processes such as
    Dask's workers, which ``multiprocessing`` forbids to have children; it exits as soon
    as its stdin closes, and while it solves, when the process that started it is gone
    (:func:`placement.solvers.workers.die_with_parent`), so it never outlives it.
    """

    def __init__(self) -> None:
        # the kernel's parent-death signal follows the starting thread: only the main one
        # lives as long as this process
        main = threading.current_thread() is threading.main_thread()
        code = f"from placement.solvers.cpsat import serve; serve({os.getpid()}, {main})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def run(
        self,
        builder: Builder,
        data: Any,
        params: dict[str, Any],
        on_progress: Callable[[float | None, float | None], None] | None = None,
    ) -> dict[str, Any]:
        """Solve in the worker; ``on_progress(incumbent, bound)`` gets the progress
        messages it sends before its answer (with ``params["progress"]``)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        try:
            pickle.dump((builder, data, params), self.process.stdin)
            self.process.stdin.flush()
            while True:
                ok, value = pickle.load(self.process.stdout)
                if ok != _PROGRESS:
                    break
                if on_progress is not None:
                    on_progress(*value)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            code = self.process.poll()
            raise WorkerDied(f"exit code {code} ({exc or 'no answer'})") from None
        if not ok:
            raise value  # the worker's own exception, as if raised here
        return value

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()  # the worker exits at end of input
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()


def serve(parent: int | None = None, kernel: bool = False) -> None:
    """The worker's loop (in the child): solve each (builder, data, params) read from stdin
    and write (ok, result or exception) to stdout, until stdin ends or process ``parent``
    does (``kernel``: by the kernel's parent-death signal too)."""
    if parent is not None:
        die_with_parent(parent, kernel=kernel, ignore_interrupts=False)
    # Answers go to a private copy of fd 1; fd 1 itself now points at stderr, so nothing
    # printed by Python or by OR-Tools' C++ can corrupt them.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    lock = threading.Lock()  # CP-SAT calls back from its own threads

    def send(incumbent: float | None, bound: float | None) -> None:
        with lock:
            try:
                pickle.dump((_PROGRESS, (incumbent, bound)), stdout)
                stdout.flush()
            except (OSError, ValueError):
                pass  # the caller is gone; its answer will fail to send as well

    while True:
        try:
            task = pickle.load(stdin)
        except (EOFError, KeyboardInterrupt):
            return
        try:
            answer: tuple[bool, Any] = (True, _solve_in_worker(*task, send=send))
        except KeyboardInterrupt:
            return
        except Exception as exc:  # noqa: BLE001 -- sent back and raised by the caller
            answer = (False, exc)
        pickle.dump(answer, stdout)
        stdout.flush()


_WORKER: _Worker | None = None


def _worker() -> _Worker:
    """The reusable worker, started on first use."""
    global _WORKER
    if _WORKER is None or not _WORKER.alive():
        _WORKER = _Worker()
        atexit.register(shutdown)
    return _WORKER


def shutdown() -> None:
    """Stop the worker (it is started again on the next solve)."""
    global _WORKER
    if _WORKER is not None:
        worker, _WORKER = _WORKER, None
        worker.stop()


def _solve_in_worker(
    builder: Builder,
    data: Any,
    params: dict[str, Any],
    send: Callable[[float | None, float | None], None] | None = None,
) -> dict[str, Any]:
    """Build with ``builder`` and solve (runs in the worker); plain values come back.
    With ``params["progress"]``, ``send(incumbent, bound)`` at every solution and bound
    CP-SAT finds."""
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
    callback = None
    if params.get("progress") and send is not None:
        callback = _solution_reporter(cp_model, send)
        solver.best_bound_callback = lambda bound: send(None, float(bound))
    tick = time.perf_counter()
    code = solver.solve(model, callback)
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


def _solution_reporter(cp_model: Any, send: Callable[[float | None, float | None], None]) -> Any:
    """A CP-SAT solution callback that sends each solution's objective and bound."""

    class Reporter(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            send(float(self.objective_value), float(self.best_objective_bound))

    return Reporter()
