"""The points of a sweep: their ids and rows, the plain task a worker gets, solving one point.

:func:`plan_points` expands models x hardware x grid values into :class:`Point` s with
stable ids; :func:`build_task` turns a point into a picklable :class:`PointTask`;
:func:`solve_point` (run by any executor) solves it through the target's adapter
(:mod:`placement.sweep.targets`) and returns the row and schedule document.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.errors import PlacementError
from placement.hardware.hostcheck import HostLatencySource, host_latency_source
from placement.plots.common import ID_COLUMNS, RESULT_COLUMNS
from placement.solvers.base import DEFAULT_REL_GAP
from placement.sweep.grid import Grid
from placement.sweep.targets import Number, get_target

ERROR = "error"  # the status of a point that could not be solved


def columns_for(grid: Grid) -> list[str]:
    """The row columns of a sweep over ``grid``, in order."""
    return [*ID_COLUMNS, *grid.keys, *RESULT_COLUMNS]


def hardware_identity(hw: Any) -> dict[str, Any]:
    """What defines a hardware description (its JSON without where it was found, and
    without host model constants that measured host latencies do not use)."""
    doc = hw.to_json()
    doc.pop("source", None)  # where the file was found does not change the machine
    doc["host"] = hw.host.identity()
    return doc


@dataclass(frozen=True)
class ModelInput:
    """One model of the sweep; ``profile`` is the HostProfile (CIM) or NestProfile (PIM)."""

    name: str  # file stem: the ``model`` column
    path: str
    sha256: str
    profile: Any = field(default=None, compare=False, repr=False)
    graph: Any = field(default=None, compare=False, repr=False)  # OpGraph, CIM only

    @property
    def profile_file(self) -> str:
        """Where the sweep directory keeps this model's profile (relative path)."""
        return f"profiles/{self.name}.{self.sha256[:12]}.json"

    def host_source(self, hw: Any) -> HostLatencySource:
        """Where this model's host latencies on ``hw`` come from: its profile (measured on
        the machine its metadata names), or the host model when ``hw``'s host says so."""
        meta = getattr(self.profile, "metadata", None)
        return host_latency_source(hw.name, hw.host, meta)


@dataclass(frozen=True)
class Point:
    """One point of the grid: its id and the values of its identifying columns."""

    point_id: str
    target: str
    model: str
    hardware: str
    params: tuple[tuple[str, Number], ...]

    def row_prefix(self) -> dict[str, Any]:
        """The point's id columns and swept values, as the start of its row."""
        row: dict[str, Any] = {
            "point_id": self.point_id,
            "target": self.target,
            "model": self.model,
            "hardware": self.hardware,
        }
        row.update(self.params)
        return row


def make_point_id(target: str, model: ModelInput, hw: Any, params: Mapping[str, Number]) -> str:
    """Readable label plus a hash of what defines the point (stable across runs and hosts)."""
    identity = {
        "target": target,
        "model_sha256": model.sha256,
        "hardware": hardware_identity(hw),
        "params": [[k, v] for k, v in params.items()],
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    parts = [model.name, hw.name] + [f"{k}={_fmt_value(v)}" for k, v in params.items()]
    label = ".".join(re.sub(r"[^A-Za-z0-9_=+-]", "_", p) for p in parts)
    return f"{label}.{digest}"


def _fmt_value(v: Number) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v)).replace(".", "p")


def plan_points(
    target: str, models: Sequence[ModelInput], hardware: Sequence[Any], grid: Grid
) -> list[tuple[Point, ModelInput, Any]]:
    """Every point with its model and hardware (parameters applied), in grid order.

    Applying the values checks them against each hardware description (a PIM
    ``instr_per_iter`` below ``i_min``, say) before any solving.
    """
    adapter = get_target(target)
    out = []
    for model in models:
        for base in hardware:
            for params in grid.combinations():
                try:
                    hw = adapter.apply_parameters(base, params)
                except PlacementError as exc:
                    shown = ", ".join(f"{k}={v}" for k, v in params.items())
                    raise PlacementError(f"grid point {base.name} {shown}: {exc}") from None
                pid = make_point_id(target, model, base, params)
                point = Point(pid, target, model.name, base.name, tuple(params.items()))
                out.append((point, model, hw))
    return out


@dataclass(frozen=True)
class SolverOptions:
    """How every point is solved (copy/granularity are PIM only, formulation/solver CIM)."""

    time_limit: float = 600.0  # seconds per point
    rel_gap: float = DEFAULT_REL_GAP
    threads: int = 1  # HiGHS threads per point: 1 keeps results independent of the executor
    copy: str = "auto"  # PIM only: the hardware's memory architecture
    granularity: str = "loop"  # PIM only
    formulation: str = "auto"  # CIM only: as ``placement solve --formulation``
    solver: str = "auto"  # CIM only: as ``placement solve --solver``

    def to_json(self, target: str) -> dict[str, Any]:
        """The options ``target`` uses, as recorded in the manifest."""
        unused = get_target(target).unused_options
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in unused}


@dataclass(frozen=True)
class PointTask:
    """Plain, picklable data for one point: what a worker needs and nothing more."""

    point: Point
    instance: Any  # CimInstance or PimInstance; None when building it failed
    options: SolverOptions
    context: dict[str, Any]  # model path/sha256 and hardware JSON for the schedule document
    error: str | None = None
    starts: tuple[dict[str, Any], ...] = ()  # schedule documents of solved neighbours


@dataclass
class PointOutcome:
    """A finished point: its row and its schedule document (None for failed points)."""

    row: dict[str, Any]
    document: dict[str, Any] | None  # the schedule document; None for failed points


def build_task(
    point: Point,
    model: ModelInput,
    hw: Any,
    options: SolverOptions,
    starts: Sequence[dict[str, Any]] = (),
) -> PointTask:
    """The point's instance, built here once (cheap) so workers receive plain data;
    ``starts``: the schedule documents of its solved neighbours."""
    context = {
        "model": {"name": model.name, "path": model.path, "sha256": model.sha256},
        "hardware": hw.to_json(),
        "host": model.host_source(hw).to_json(),
    }
    adapter = get_target(point.target)
    context["energy_source"] = adapter.energy_source(hw, model.profile)
    try:
        instance = adapter.build_instance(model.graph, model.profile, hw)
    except PlacementError as exc:
        return PointTask(point, None, options, context, error=str(exc))
    return PointTask(point, instance, options, context, starts=tuple(starts))


def solve_point(task: PointTask) -> PointOutcome:
    """Solve and verify one point; every failure of the point becomes an ``error`` row.

    Runs in whichever worker the executor chose; it reads nothing but ``task``.
    """
    row = task.point.row_prefix() | dict.fromkeys(RESULT_COLUMNS)
    host = task.context.get("host")
    if isinstance(host, dict):  # where the host latencies came from (hostcheck)
        row["host_latencies"] = str(host.get("label", "")).removeprefix("host latencies ")
        row["host_mismatch"] = bool(host.get("mismatch"))
    if task.context.get("energy_source"):
        row["energy_source"] = task.context["energy_source"]
    if task.error is not None:
        return PointOutcome(row | {"status": ERROR, "message": task.error}, None)
    try:
        values, doc = get_target(task.point.target).solve(
            task.instance, task.options, task.starts
        )
    except PlacementError as exc:
        return PointOutcome(row | {"status": ERROR, "message": str(exc)}, None)
    except Exception as exc:  # noqa: BLE001 -- one broken point must not end a long sweep
        message = f"unexpected {type(exc).__name__}: {exc}"
        return PointOutcome(row | {"status": ERROR, "message": message}, None)
    row.update(values)
    doc["point"] = {"point_id": task.point.point_id, "params": dict(task.point.params)}
    doc["model"] = task.context["model"] | doc.get("model", {})
    doc["hardware"] = task.context["hardware"]
    if host is not None:
        doc["host"] = host
    return PointOutcome(row, doc)


def neighbours(target: str, points: Sequence[Point]) -> dict[str, list[str]]:
    """Per point, the points it dominates one step away: the same model, hardware and
    values but one monotone key one grid step worse (fewer crossbars, a slower MVM ...).

    A placement of such a neighbour, re-timed, is a start no worse than the neighbour's
    own result; started from all of them, reported results are monotone across the grid.
    """
    monotone = get_target(target).monotone_keys()
    by_values = {(p.model, p.hardware, p.params): p.point_id for p in points}
    grid_values: dict[str, list[Number]] = {}
    for p in points:
        for key, value in p.params:
            if key in monotone:
                grid_values.setdefault(key, [])
                if value not in grid_values[key]:
                    grid_values[key].append(value)
    out: dict[str, list[str]] = {}
    for p in points:
        found = []
        for i, (key, value) in enumerate(p.params):
            if key not in monotone:
                continue
            worse = [v for v in grid_values[key] if (v - value) * monotone[key] < 0]
            if not worse:
                continue
            step = max(worse, key=lambda v: v * monotone[key])  # the nearest worse value
            params = (*p.params[:i], (key, step), *p.params[i + 1 :])
            other = by_values.get((p.model, p.hardware, params))
            if other is not None:
                found.append(other)
        out[p.point_id] = found
    return out


def rounds(order: Sequence[str], before: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """``order`` split into rounds: a point comes after every point in ``before[point]``
    (its neighbours), so each round can run in parallel once the earlier ones are done."""
    level: dict[str, int] = {}

    def depth(pid: str) -> int:
        if pid not in level:
            level[pid] = 1 + max((depth(q) for q in before.get(pid, ())), default=-1)
        return level[pid]

    out: list[list[str]] = []
    for pid in order:
        d = depth(pid)
        while len(out) <= d:
            out.append([])
        out[d].append(pid)
    return out
