"""A Pareto front of one model on one machine, run as a sweep is: the sweep's directory,
resume and executors carry the epsilon-constraint method of :mod:`placement.cim.pareto`.

Every solve of the method is a point of the store (:class:`ParetoStore`, a
:class:`~placement.sweep.store.SweepStore` whose tables are the front): its row is logged
to ``points.jsonl`` and its placement written to ``schedules/<step>.json`` as soon as it
is verified, so an interrupted run resumes by replaying the logged steps through the
method and solving only the rest. The solves run through
:func:`~placement.sweep.executors.execute` (this process, worker processes or a Dask
cluster); the two ends of a front are independent and run side by side.

Output directory::

    DIR/manifest.json      model, hardware, axes, solver options, bounds (what a resume must match)
    DIR/points.jsonl       one row per solve, as solved (the resumable log)
    DIR/schedules/<id>.json   each solve's placement (ObjectivePlacement.to_json()), its step
    DIR/profiles/          the host profile used
    DIR/front.csv, front.json  the front: one row per point (:data:`FRONT_COLUMNS`)

The figure and the report (``front.png``, ``report.md``) are written beside them by the
command (:mod:`placement.cli.pareto`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from placement.cim.energy import energy_source
from placement.cim.instance import CimInstance
from placement.cim.objectives import Objective, axis_name, solve_objective
from placement.cim.pareto import (
    DEFAULT_MAX_POINTS,
    DEFAULT_REL_STEP,
    MIN_REL_STEP,
    FrontState,
    FrontStep,
    StepOutcome,
    front_steps,
    nondominated,
    parse_axes,
)
from placement.cim.schedule import CimSchedule
from placement.errors import PlacementError
from placement.solvers.workers import check_scheduler_address, connect
from placement.sweep.executors import execute
from placement.sweep.plan import ERROR, PointOutcome, SolverOptions, hardware_identity
from placement.sweep.run import check_options, model_inputs, package_version, with_profiles
from placement.sweep.store import FORMAT, FORMAT_VERSION, SweepStore
from placement.sweep.targets import finite, get_target
from placement.tables import text_table
from placement.units import fmt_energy, fmt_gap, fmt_rate, fmt_time

TARGET = "cim-pareto"  # the manifest's target: a sweep directory is not a front's
#: The column of each axis in front.csv, in SI units (throughput: frames per second).
AXIS_COLUMNS = {"latency": "latency_s", "energy": "energy_j", "crossbars": "crossbars",
                "throughput": "throughput_fps"}  # fmt: skip
#: front.csv's columns after the chosen axes' (every other measure of the placement).
OTHER_COLUMNS = (
    "status", "gap", "latency_s", "energy_j", "throughput_fps", "period_s", "crossbars",
    "n_offloaded", "stream_frame_latency_s", "verified", "solve_seconds", "bounds", "message",
)  # fmt: skip


def front_columns(axes: Sequence[str]) -> list[str]:
    """front.csv's columns: id, step, the axes in order, then the rest."""
    first = [AXIS_COLUMNS[a] for a in axes]
    return ["point_id", "step", "role", *first,
            *(c for c in OTHER_COLUMNS if c not in first)]  # fmt: skip


class ParetoStore(SweepStore):
    """A sweep directory whose tables are the front (``front.csv``, ``front.json``), its
    points in the order of the first axis (then the others)."""

    def __init__(self, directory: str | Path, axes: Sequence[str] = ("latency",)) -> None:
        super().__init__(directory)
        self.csv_path = self.dir / "front.csv"
        self.json_path = self.dir / "front.json"
        self.order = [AXIS_COLUMNS[a] for a in axes]

    def row_order(self, row: Mapping[str, Any]) -> Any:
        # throughput is maximized: its points in decreasing order
        return tuple(-(row.get(c) or 0.0) if c == "throughput_fps" else (row.get(c) or 0.0)
                     for c in self.order) + (row["point_id"],)  # fmt: skip


@dataclass(frozen=True)
class FrontTask:
    """One step, as plain data for whichever worker solves it."""

    point_id: str
    instance: CimInstance
    step: FrontStep
    settings: SolverOptions
    starts: tuple[dict[str, Any], ...] = ()  # schedule documents of the points found before

    @property
    def point(self) -> FrontTask:  # what the executors report failures by
        return self


def solve_front_step(task: FrontTask) -> PointOutcome:
    """Solve one step; every failure becomes an ``error`` row (runs in any worker)."""
    step = task.step
    row: dict[str, Any] = {"point_id": task.point_id, "step": step.index, "role": step.role,
                           "bounds": _bounds_text(step.objective)}  # fmt: skip
    s = task.settings
    try:
        placement = solve_objective(
            task.instance, step.objective, formulation=s.formulation, solver=s.solver,
            time_limit=s.time_limit, rel_gap=s.rel_gap, threads=s.threads,
            starts=[CimSchedule.from_json(d) for d in task.starts],
        )  # fmt: skip
    except PlacementError as exc:
        return PointOutcome(row | {"status": ERROR, "message": str(exc)}, None)
    except Exception as exc:  # noqa: BLE001 -- a broken step is reported, not a crash
        return PointOutcome(row | {"status": ERROR,
                                   "message": f"unexpected {type(exc).__name__}: {exc}"}, None)
    row |= {"status": placement.result.status.value, "gap": placement.result.gap,
            "solve_seconds": placement.result.solve_seconds,
            "message": placement.result.message}  # fmt: skip
    doc = placement.to_json() | {"step": step.to_json()}
    if placement.schedule is None:
        return PointOutcome(row, doc)
    v = placement.values
    row |= {
        "latency_s": v["latency"], "energy_j": v.get("energy"), "period_s": v["period"],
        "throughput_fps": finite(1.0 / v["period"]) if v["period"] > 0 else None,
        "crossbars": int(round(v["crossbars"])),
        "n_offloaded": sum(1 for h in placement.schedule.on_host.values() if not h),
        "stream_frame_latency_s": placement.modulo.frame_latency if placement.modulo else None,
        "verified": placement.verification is not None and placement.verification.ok,
    }  # fmt: skip
    return PointOutcome(row, doc)


def _step_text(step: FrontStep) -> str:
    return step.objective.describe()


def _bounds_text(objective: Objective) -> str:
    return "; ".join(f"{a} <= {b:.9g}" for a, b in objective.bounds)


def outcome_of_row(row: Mapping[str, Any]) -> StepOutcome:
    """A step's outcome from its logged row."""
    status = str(row.get("status"))
    if row.get("latency_s") is None:
        return StepOutcome(status, None, False)
    values = {"latency": float(row["latency_s"]), "period": float(row["period_s"]),
              "crossbars": float(row["crossbars"])}  # fmt: skip
    if row.get("energy_j") is not None:
        values["energy"] = float(row["energy_j"])
    return StepOutcome(status, values, status == "optimal")


@dataclass
class ParetoResult:
    """A finished (or stopped) front: every step's row, the front's rows, and the store."""

    axes: tuple[str, ...]
    rows: list[dict[str, Any]]  # every step, in order
    front: list[dict[str, Any]]  # the nondominated points, in the order found
    columns: list[str]
    complete: bool
    note: str
    resumed: int
    solved: int
    seconds: float
    store: ParetoStore
    documents: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    host_source: dict[str, Any] | None = None  # where the host latencies came from
    energy_source: dict[str, Any] | None = None  # which energy parts are measured or modelled

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("status") == ERROR]


def run_pareto(
    model_path: str | Path,
    hardware: Any,
    axes: Sequence[str],
    output: str | Path,
    *,
    settings: SolverOptions | None = None,
    fixed: Mapping[str, float] | None = None,
    profile: str | Path | None = None,
    measure: Callable[[str], Any] | None = None,
    rel_step: float = DEFAULT_REL_STEP,
    max_points: int = DEFAULT_MAX_POINTS,
    workers: int = 1,
    scheduler: str | None = None,
    scheduler_timeout: float = 10.0,
    client: Any = None,
    force: bool = False,
    info: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    memory_limit_gb: float | None = None,
) -> ParetoResult:
    """Compute (or resume) the front of ``model_path`` on ``hardware`` (a CIM
    :class:`~placement.hardware.cim.Hardware`, overrides applied) over ``axes`` into
    ``output`` (module docstring). ``fixed``: bounds every solve keeps (axis -> SI value).
    ``profile``: a saved host profile; else ``measure(path)`` profiles the model (not
    needed when the hardware models its host latencies)."""
    started = time.perf_counter()
    settings = settings or SolverOptions()
    say = info or (lambda _text: None)
    axes = parse_axes(list(axes))
    _check(settings, workers, rel_step, max_points, scheduler_timeout)
    if client is None and scheduler is not None:
        check_scheduler_address(scheduler)
    adapter = get_target("cim")
    (model,) = model_inputs("cim", [model_path])
    given = {}
    if profile is not None:
        loaded = adapter.load_profile(profile)
        loaded.check_matches(model.sha256, model.path)
        adapter.check_profile(model.graph, loaded)
        given[model.name] = loaded
    needs_profile = adapter.needs_profile(hardware)
    store = ParetoStore(output, axes)
    identity = {
        "target": TARGET, "models": [{"name": model.name, "sha256": model.sha256}],
        "hardware": [hardware_identity(hardware)], "axes": list(axes),
        "fixed": dict(fixed or {}), "solver": settings.to_json("cim"),
        "grid": {"rel_step": rel_step, "max_points": max_points},
    }  # fmt: skip
    if needs_profile and model.name not in given and not (store.dir / model.profile_file).exists():
        adapter.check_memory(model.path, memory_limit_gb)
    old = store.check_directory(identity, force)
    owns_client = client is None and scheduler is not None
    if owns_client:
        client = connect(scheduler, scheduler_timeout)
    try:
        created_dir = not store.dir.exists()
        try:
            if old is None:
                store.create(_manifest(model, hardware, axes, identity, needs_profile))
            if needs_profile:
                (model,) = with_profiles("cim", [model], given, store, measure, say)
            instance = adapter.build_instance(model.graph, model.profile, hardware)
            if "energy" in (*(axis_name(a) for a in axes), *(fixed or {})) and \
                    not instance.has_energy:
                raise PlacementError(
                    f"hardware '{hardware.name}' has no energy model: its [cim] energy"
                    " constants or [host] active_power_w are missing"
                )
        except PlacementError:
            if old is None:
                store.remove_started(created_dir)
            raise
        source = model.host_source(hardware)
        if source.warning and warn is not None:
            warn(f"{model.name} on {hardware.name}: {source.warning}")
        result = _drive(instance, axes, store, settings, fixed, rel_step, max_points, workers,
                        client, say, started)  # fmt: skip
        meta = getattr(model.profile, "metadata", None)
        energy = energy_source(hardware, meta)
        result.host_source = source.to_json()
        result.energy_source = None if energy is None else energy.to_json()
        return result
    finally:
        if owns_client:
            client.close()


def _drive(
    instance: CimInstance, axes: tuple[str, ...], store: ParetoStore, settings: SolverOptions,
    fixed: Mapping[str, float] | None, rel_step: float, max_points: int, workers: int,
    client: Any, say: Callable[[str], None], started: float,
) -> ParetoResult:  # fmt: skip
    """Replay the logged steps through the method and solve the others, batch by batch."""
    limit = 8 * max_points + 16  # more steps than any run of the method takes
    logged = store.load_done({f"step{i:03d}" for i in range(limit)})
    if logged:
        say(f"resuming {store.dir}: {len(logged)} step(s) already solved")
    state = FrontState()
    steps = front_steps(axes, fixed=fixed, rel_step=rel_step, max_points=max_points,
                        state=state)  # fmt: skip
    rows: dict[str, dict[str, Any]] = {}
    documents: dict[str, dict[str, Any] | None] = {}
    resumed = solved = 0
    try:
        batch = next(steps)
        while True:
            todo = []
            for step in batch:
                row = logged.get(step.step_id)
                if row is not None and row.get("bounds") == _bounds_text(step.objective) \
                        and row.get("status") != ERROR:
                    rows[step.step_id] = row
                    resumed += 1
                else:
                    todo.append(step)
            found = [_document(store, documents, pid) for pid in rows]
            starts = tuple(d["schedule"] for d in found if d is not None and d.get("schedule"))
            tasks = [FrontTask(s.step_id, instance, s, settings, starts) for s in todo]

            def on_result(outcome: PointOutcome) -> None:
                store.record(outcome)
                rows[outcome.row["point_id"]] = outcome.row
                documents[outcome.row["point_id"]] = outcome.document

            if tasks:
                say("solving " + ", ".join(f"{t.point_id} ({_step_text(t.step)})" for t in tasks))
                execute(tasks, on_result, workers=min(workers, len(tasks)), client=client,
                        run=solve_front_step)  # fmt: skip
                solved += len(tasks)
            failed = [rows[s.step_id] for s in batch if rows[s.step_id].get("status") == ERROR]
            if failed:
                state.note = f"{failed[0]['point_id']} failed: {failed[0].get('message')}"
                break
            batch = steps.send([outcome_of_row(rows[s.step_id]) for s in batch])
    except StopIteration:
        pass
    finally:
        store.close()
    ordered = [rows[s.step_id] for s in state.steps if s.step_id in rows]
    found = [r for r in ordered if r.get("latency_s") is not None]
    outcomes = [outcome_of_row(r) for r in found]
    keep = nondominated([o.values for o in outcomes if o.values is not None], axes,
                        [o.proven for o in outcomes])  # fmt: skip
    front = [found[i] for i in keep]
    columns = front_columns(axes)
    store.write_tables(front, columns)
    front = sorted(front, key=store.row_order)
    return ParetoResult(axes, ordered, [{c: r.get(c) for c in columns} for r in front], columns,
                        state.complete, state.note, resumed, solved,
                        time.perf_counter() - started, store, documents)  # fmt: skip


def _document(store: ParetoStore, documents: dict[str, dict[str, Any] | None],
              pid: str) -> dict[str, Any] | None:  # fmt: skip
    if pid not in documents:
        documents[pid] = store.load_document(pid)
    return documents[pid]


def _check(settings: SolverOptions, workers: int, rel_step: float, max_points: int,
           scheduler_timeout: float) -> None:  # fmt: skip
    """The sweep's checks of the solver and execution options, and the front's own."""
    check_options("cim", settings, workers, scheduler_timeout)
    if not (math.isfinite(rel_step) and MIN_REL_STEP <= rel_step < 1):
        raise PlacementError(f"--step must be a fraction in [{MIN_REL_STEP:g}, 1), got {rel_step}")
    if max_points < 2:
        raise PlacementError(f"--max-points must be at least 2, got {max_points}")


def _manifest(
    model: Any, hardware: Any, axes: Sequence[str], identity: dict[str, Any], needs_profile: bool
) -> dict[str, Any]:
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "target": TARGET,
        "models": [{"name": model.name, "path": model.path, "sha256": model.sha256,
                    "profile": model.profile_file if needs_profile else None}],
        "hardware": [hardware.to_json()], "axes": list(axes),
        "columns": front_columns(axes),
        "placement_version": package_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "identity": identity,
    }  # fmt: skip


# --------------------------------------------------------------------------- for people


_HEAD = {"latency_s": "latency", "energy_j": "energy", "crossbars": "crossbars",
         "throughput_fps": "frames/s"}  # fmt: skip


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if column == "latency_s":
        return fmt_time(float(value))
    if column == "energy_j":
        return fmt_energy(float(value))
    if column == "throughput_fps":
        return fmt_rate(float(value))
    if column == "crossbars":
        return str(int(value))
    return str(value)


def front_table(result: ParetoResult) -> list[str]:
    """The front as a terminal table: a row per point, the axes first, status and gap."""
    axes = [AXIS_COLUMNS[a] for a in result.axes]
    rest = [c for c in ("latency_s", "energy_j", "throughput_fps", "crossbars") if c not in axes]
    columns = [*axes, *rest]
    header = [["point", *(_HEAD[c] for c in columns), "offloaded", "status", "gap"]]
    body = [[str(r["point_id"]), *(_cell(c, r.get(c)) for c in columns),
             str(r.get("n_offloaded", "-")), str(r.get("status")), fmt_gap(r.get("gap"))]
            for r in result.front]  # fmt: skip
    return text_table(header, body, right=range(1, len(columns) + 2), indent="  ")


def report_markdown(result: ParetoResult, hardware: Any, model: str, command: str) -> str:
    """report.md: the front as a table, what every number is, and the command."""
    axes = ", ".join(result.axes)
    state = ("complete: the last solve proved that no further point exists" if result.complete
             else f"INCOMPLETE: {result.note}")  # fmt: skip
    proven = sum(1 for r in result.front if r.get("status") == "optimal")
    lines = [
        f"# Pareto front: {Path(model).name} on {hardware.name}", "",
        f"Axes: {axes} (all minimized, throughput maximized). {len(result.front)} points,"
        f" {proven} proven optimal (the others carry their gap); the front is {state}.",
        f"{len(result.rows)} solves ({result.solved} in this run, {result.resumed} resumed),"
        f" {result.seconds:.1f} s.", "",
        f"Hardware: {hardware.describe()}.", "",
    ]  # fmt: skip
    host = result.host_source or {}
    if host:
        lines.append(f"Latencies: the accelerator's and the bus's modelled (CIM paper Eqs. 1-4);"
                     f" {host.get('label', 'host latencies')}.")  # fmt: skip
    energy = result.energy_source
    if energy:
        lines.append(f"Energy, host side: {energy['host_detail']}. Accelerator side:"
                     f" {energy['accelerator_detail']}.")
    lines += ["Throughput: frames per second of a pipelined stream, 1 / the busiest"
              " resource's load (host, shared bus, each offloaded operator's crossbars),"
              " achieved by a modulo schedule checked by simulating the stream.", ""]
    columns = [c for c in result.columns if c not in ("bounds", "message", "role")]
    lines.append("| " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * len(columns))
    for r in result.front:
        cells = []
        for c in columns:
            v = r.get(c)
            cells.append("" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v)))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Units: seconds, joules, frames per second, crossbars. Command:", "",
              "```sh", command, "```", ""]  # fmt: skip
    return "\n".join(lines)
