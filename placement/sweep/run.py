"""Design-space sweeps: one verified solve per point of a cartesian grid of hardware values.

A sweep takes one or more models, a target (``cim`` or ``pim``), a list of hardware
descriptions (presets or TOML files) and, per swept key, a list of values in file
units (``crossbars``, ``t_mvm_ns``, ... for CIM; any ``[pim]`` key such as ``cores``
or ``t_sw_us`` for PIM; :func:`known_keys`). The grid is
``models x hardware x values(key1) x values(key2) x ...``; every point is solved
independently with HiGHS and verified, exactly as ``placement solve`` would.

Work done once: every model is ingested and profiled once up front (or its
``--profile`` is loaded), the profile is saved under ``profiles/``, and the points
receive plain data only (a :class:`~placement.cim.instance.CimInstance` or a
:class:`~placement.models.pim.PimInstance`): workers never profile.

Execution: :func:`execute` runs :func:`solve_point` in this process (1 worker), in a
``concurrent.futures.ProcessPoolExecutor`` (N workers) or on a Dask cluster
(``distributed.Client``). The workers of a Dask cluster must be able to import this
package (``pip install`` it there, same version). Each point is solved on its own,
with HiGHS on one thread by default, so the rows do not depend on the executor or
the worker count. One caveat: two different placements with the same optimal
objective (or within the relative gap) are both correct answers, and a different
HiGHS version or thread count may return the other one; compare sweeps on
``status``/``objective_s``, not on assignments. With the same inputs, HiGHS with one
thread is deterministic, so the same installation gives identical rows everywhere
(except ``solve_seconds``, a wall-clock time).

Output directory (``-o DIR``)::

    DIR/manifest.json            target, models (path, sha256, profile), grid, hardware specs,
                                 solver options, placement version, creation date
    DIR/points.jsonl             one JSON row per finished point, appended and fsynced as
                                 points finish: what a resumed sweep skips
    DIR/points.csv, points.json  all rows, sorted by point_id (regenerated atomically at the end;
                                 points.json is a list of row objects)
    DIR/profiles/<model-stem>.<sha12>.json   the host (CIM) or nest (PIM) profile used
    DIR/schedules/<point_id>.json            the point's placement: CimPlacement.to_json()
                                 (CIM) or PimPlacement.to_json() plus the threshold rule's
                                 result (PIM), with "point", "model" and "hardware" added

Row columns, in this order (empty in the CSV / null in JSON when not applicable):

=================  ===========================================================================
point_id           ``<model>.<hardware>.<key>=<value>....<hash8>``: readable, and stable (the
                   hash covers target, model SHA-256, hardware spec and parameter values)
target             ``cim`` or ``pim``
model              the model file's stem
hardware           the hardware's name (preset name, or the name/stem of a TOML file)
<key> ...          one column per swept key, in file units, named like the key
status             ``optimal``, ``time_limit`` (best found, see gap),
                   ``time_limit_no_solution`` or ``error`` (see message)
objective_s        CIM: makespan; PIM: T_hybrid of Eq. 9; seconds
cpu_only_s         every operator (nest) on the host, seconds
speedup            cpu_only_s / objective_s
n_operators        CIM: operators of the model; PIM: loop nests (the decision units)
n_offloaded        operators on the CIM accelerator / nests on PIM
crossbars_used     CIM: crossbars of the offloaded operators; PIM: empty
host_busy_s        CIM: host latency of the host operators; PIM: T_host of Eq. 9
accel_busy_s       CIM: accelerator latency of the CIM operators; PIM: T_pim of Eq. 9
gap                HiGHS's relative gap of the reported placement
solve_seconds      HiGHS's solve time (the only column that varies between runs)
verified           true when the independent verifier passed (never a result without it)
message            why a point failed (``status`` = ``error``), else empty
=================  ===========================================================================

Resume: re-running the same command (same models, grid, hardware and solver options,
recorded in the manifest) skips the points already in ``points.jsonl``; the profiles
saved in ``profiles/`` are reused, never re-measured. Another sweep's directory is
refused (nothing is touched) unless ``force`` is given, which discards its results.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.io import write_json_atomic, write_text_atomic

FORMAT = "placement-sweep"
FORMAT_VERSION = 1
TARGETS = ("cim", "pim")
# --crossbar-size N sets both crossbar_rows and crossbar_cols (square crossbars).
CROSSBAR_SIZE = "crossbar_size"
ID_COLUMNS = ("point_id", "target", "model", "hardware")
RESULT_COLUMNS = (
    "status", "objective_s", "cpu_only_s", "speedup", "n_operators", "n_offloaded",
    "crossbars_used", "host_busy_s", "accel_busy_s", "gap", "solve_seconds", "verified",
    "message",
)  # fmt: skip
ERROR = "error"

Number = int | float


# --------------------------------------------------------------------------- grid


def known_keys(target: str) -> list[str]:
    """The keys a grid may sweep for ``target``, in file units."""
    if target == "cim":
        from placement.hardware.cim import CIM_KEYS

        return [*CIM_KEYS, CROSSBAR_SIZE]
    if target == "pim":
        from placement.hardware.pim import PIM_KEYS

        return list(PIM_KEYS)
    raise PlacementError(f"unknown target {target!r} (expected one of {', '.join(TARGETS)})")


def _is_integral(target: str, key: str) -> bool:
    if key == CROSSBAR_SIZE:
        return True
    if target == "cim":
        from placement.hardware.cim import CIM_KEYS

        return CIM_KEYS[key][2]
    from placement.hardware.pim import PIM_KEYS

    return PIM_KEYS[key][2]


def check_key(target: str, key: str) -> str:
    keys = known_keys(target)
    if key not in keys:
        raise PlacementError(
            f"unknown {target.upper()} spec field {key!r} in the grid (known: {', '.join(keys)})"
        )
    return key


def parse_values(target: str, key: str, text: str) -> tuple[Number, ...]:
    """'25,50,100' -> (25, 50, 100) for ``key``: positive numbers, whole where the key is.

    Repeated values are kept once (first occurrence), like ``--pim-cores``.
    """
    check_key(target, key)
    integral = _is_integral(target, key)
    kind = "positive whole numbers" if integral else "positive numbers"
    if not isinstance(text, str) or not text.strip():
        raise PlacementError(f"grid value for {key!r} is empty: expected comma-separated {kind}")
    out: list[Number] = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not part or not math.isfinite(value) or value <= 0:
            raise PlacementError(
                f"grid value {part!r} for {key!r} in {text!r}: expected comma-separated {kind}"
            )
        if integral:
            if value != int(value):
                raise PlacementError(
                    f"grid value {part!r} for {key!r}: must be a whole number (in {text!r})"
                )
            value = int(value)
        if value not in out:
            out.append(value)
    return tuple(out)


def parse_setting(target: str, text: str) -> tuple[str, tuple[Number, ...]]:
    """``KEY=V1,V2,...`` (the ``--set`` syntax)."""
    key, sep, values = str(text).partition("=")
    if not sep or not key.strip():
        raise PlacementError(f"--set {text!r}: expected KEY=V1,V2,... (e.g. crossbars=25,50)")
    key = key.strip().replace("-", "_")
    return key, parse_values(target, key, values)


@dataclass(frozen=True)
class Grid:
    """What to sweep: hardware descriptions x values of each key (keys in the order given)."""

    target: str
    hardware: tuple[str, ...]  # preset names or TOML files, as given
    parameters: tuple[tuple[str, tuple[Number, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise PlacementError(f"unknown target {self.target!r}")
        if not self.hardware:
            raise PlacementError("the grid has no hardware")
        keys = [k for k, _ in self.parameters]
        for key, values in self.parameters:
            check_key(self.target, key)
            if not values:
                raise PlacementError(f"grid value for {key!r} is empty")
            if keys.count(key) > 1:
                raise PlacementError(f"{key!r} is swept twice; give its values once")
        if CROSSBAR_SIZE in keys and {"crossbar_rows", "crossbar_cols"} & set(keys):
            raise PlacementError(
                "crossbar_size sets both crossbar_rows and crossbar_cols: sweep either it or them"
            )

    @property
    def keys(self) -> list[str]:
        return [k for k, _ in self.parameters]

    def combinations(self) -> list[dict[str, Number]]:
        """Every combination of the swept values (one empty dict when nothing is swept)."""
        return [
            dict(zip(self.keys, combo, strict=True))
            for combo in itertools.product(*(values for _, values in self.parameters))
        ]

    @property
    def size_per_model(self) -> int:
        return len(self.hardware) * math.prod(len(v) for _, v in self.parameters)

    def to_json(self) -> dict[str, Any]:
        return {
            "hardware": list(self.hardware),
            "parameters": {k: list(v) for k, v in self.parameters},
        }


def build_grid(target: str, hardware: Sequence[str], settings: Sequence[tuple[str, str]]) -> Grid:
    """A grid from ``(key, 'v1,v2,...')`` pairs (``--set`` and the convenience flags)."""
    params = []
    for key, text in settings:
        key = key.strip().replace("-", "_")
        params.append((key, parse_values(target, key, text)))
    return Grid(target, tuple(hardware), tuple(params))


def load_grid_hardware(grid: Grid) -> list[Any]:
    """The :class:`Hardware` / :class:`PimHardware` of each grid entry; names must differ."""
    if grid.target == "cim":
        from placement.hardware.cim import load_hardware as load
    else:
        from placement.hardware.pim import load_pim_hardware as load
    out = [load(h) for h in grid.hardware]
    names = [h.name for h in out]
    for name in names:
        if names.count(name) > 1:
            raise PlacementError(
                f"two hardware descriptions are named {name!r}: give each a distinct 'name'"
            )
    return out


def apply_parameters(target: str, hw: Any, params: Mapping[str, Number]) -> Any:
    """``hw`` with the point's values (file units) applied."""
    values = dict(params)
    if CROSSBAR_SIZE in values:
        size = values.pop(CROSSBAR_SIZE)
        values["crossbar_rows"] = values["crossbar_cols"] = size
    if target == "cim":
        from placement.hardware.cim import with_overrides

        return with_overrides(hw, **values)
    from placement.hardware.pim import with_pim_overrides

    return with_pim_overrides(hw, **values)


def _hardware_identity(hw: Any) -> dict[str, Any]:
    doc = hw.to_json()
    doc.pop("source", None)  # where the file was found does not change the machine
    return doc


# --------------------------------------------------------------------------- points


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
        return f"profiles/{self.name}.{self.sha256[:12]}.json"


@dataclass(frozen=True)
class Point:
    point_id: str
    target: str
    model: str
    hardware: str
    params: tuple[tuple[str, Number], ...]

    def row_prefix(self) -> dict[str, Any]:
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
        "hardware": _hardware_identity(hw),
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
    out = []
    for model in models:
        for base in hardware:
            for params in grid.combinations():
                try:
                    hw = apply_parameters(target, base, params)
                except PlacementError as exc:
                    shown = ", ".join(f"{k}={v}" for k, v in params.items())
                    raise PlacementError(f"grid point {base.name} {shown}: {exc}") from None
                pid = make_point_id(target, model, base, params)
                point = Point(pid, target, model.name, base.name, tuple(params.items()))
                out.append((point, model, hw))
    return out


# --------------------------------------------------------------------------- solving a point


@dataclass(frozen=True)
class SolverOptions:
    time_limit: float = 600.0  # seconds per point
    rel_gap: float = 1e-4
    threads: int = 1  # HiGHS threads per point: 1 keeps results independent of the executor
    copy: str = "upper_bound"  # PIM only
    granularity: str = "loop"  # PIM only

    def to_json(self, target: str) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        if target != "pim":
            doc.pop("copy")
            doc.pop("granularity")
        return doc


@dataclass(frozen=True)
class PointTask:
    """Plain, picklable data for one point: what a worker needs and nothing more."""

    point: Point
    instance: Any  # CimInstance or PimInstance; None when building it failed
    options: SolverOptions
    context: dict[str, Any]  # model path/sha256 and hardware JSON for the schedule document
    error: str | None = None


@dataclass
class PointOutcome:
    row: dict[str, Any]
    document: dict[str, Any] | None  # the schedule document; None for failed points


def build_task(point: Point, model: ModelInput, hw: Any, options: SolverOptions) -> PointTask:
    """The point's instance, built here once (cheap) so workers receive plain data."""
    context = {
        "model": {"name": model.name, "path": model.path, "sha256": model.sha256},
        "hardware": hw.to_json(),
    }
    try:
        if point.target == "cim":
            from placement.cim.instance import cim_instance

            instance = cim_instance(model.graph, model.profile.latencies, hw.cim)
        else:
            from placement.models.pim import PimInstance

            profile = model.profile
            instance = PimInstance(
                nests=tuple(profile.nests), t_cpu=profile.t_cpu, spec=hw.pim,
                counters=profile.counters,
            )  # fmt: skip
    except PlacementError as exc:
        return PointTask(point, None, options, context, error=str(exc))
    return PointTask(point, instance, options, context)


def solve_point(task: PointTask) -> PointOutcome:
    """Solve and verify one point; every failure of the point becomes an ``error`` row.

    Runs in whichever worker the executor chose; it reads nothing but ``task``.
    """
    row = task.point.row_prefix() | dict.fromkeys(RESULT_COLUMNS)
    if task.error is not None:
        return PointOutcome(row | {"status": ERROR, "message": task.error}, None)
    try:
        if task.point.target == "cim":
            values, doc = _solve_cim_point(task)
        else:
            values, doc = _solve_pim_point(task)
    except PlacementError as exc:
        return PointOutcome(row | {"status": ERROR, "message": str(exc)}, None)
    except Exception as exc:  # noqa: BLE001 -- one broken point must not end a long sweep
        message = f"unexpected {type(exc).__name__}: {exc}"
        return PointOutcome(row | {"status": ERROR, "message": message}, None)
    row.update(values)
    doc["point"] = {"point_id": task.point.point_id, "params": dict(task.point.params)}
    doc["model"] = task.context["model"] | doc.get("model", {})
    doc["hardware"] = task.context["hardware"]
    return PointOutcome(row, doc)


def _solve_cim_point(task: PointTask) -> tuple[dict[str, Any], dict[str, Any]]:
    from placement.cim.solve import solve_cim

    inst = task.instance
    opts = task.options
    placement = solve_cim(
        inst, time_limit=opts.time_limit, rel_gap=opts.rel_gap, threads=opts.threads
    )
    res, sched = placement.result, placement.schedule
    values: dict[str, Any] = {
        "status": res.status.value,
        "cpu_only_s": placement.cpu_only,
        "n_operators": len(inst.operators),
        "gap": res.gap,
        "solve_seconds": res.solve_seconds,
        "verified": placement.verification is not None and placement.verification.ok,
    }
    if sched is not None:
        on_cim = [op for op in inst.operators if not sched.on_host[op.name]]
        values |= {
            "objective_s": sched.makespan,
            "speedup": _finite(placement.speedup),
            "n_offloaded": len(on_cim),
            "crossbars_used": placement.crossbars_used,
            "host_busy_s": math.fsum(op.t_host for op in inst.operators if sched.on_host[op.name]),
            "accel_busy_s": math.fsum(op.t_acc or 0.0 for op in on_cim),
        }
    doc = placement.to_json()
    doc["model"] = {"operators": len(inst.operators)}
    return values, doc


def _solve_pim_point(task: PointTask) -> tuple[dict[str, Any], dict[str, Any]]:
    from placement.devices.pim import speedup
    from placement.models.pim import solve_pim
    from placement.pim.rules import rule_placement
    from placement.pim.verify import evaluate_placement

    inst = task.instance
    opts = task.options
    placement = solve_pim(
        inst, copy=opts.copy, granularity=opts.granularity, time_limit=opts.time_limit,
        rel_gap=opts.rel_gap, threads=opts.threads,
    )  # fmt: skip
    res, hybrid = placement.result, placement.hybrid
    values: dict[str, Any] = {
        "status": res.status.value,
        "cpu_only_s": placement.cpu_only,
        "n_operators": len(inst.nests),
        "gap": res.gap,
        "solve_seconds": res.solve_seconds,
        "verified": placement.verification is not None and placement.verification.ok,
    }
    if hybrid is not None and placement.on_pim is not None:
        values |= {
            "objective_s": hybrid.total,
            "speedup": _finite(placement.speedup),
            "n_offloaded": sum(placement.on_pim.values()),
            "host_busy_s": hybrid.host,
            "accel_busy_s": hybrid.pim,
        }
    # The paper's threshold rule on the same point, for rule-vs-optimum figures.
    rule = rule_placement(inst)
    rule_hybrid = evaluate_placement(inst, {k: d.on_pim for k, d in rule.items()}, copy=opts.copy)
    doc = placement.to_json()
    doc["rule"] = {
        "hybrid": rule_hybrid.to_json(),
        "speedup": _finite(speedup(placement.cpu_only, rule_hybrid.total)),
        "on_pim": [k for k, d in rule.items() if d.on_pim],
    }
    return values, doc


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


# --------------------------------------------------------------------------- executors


def execute(
    tasks: Iterable[PointTask],
    on_result: Callable[[PointOutcome], None],
    *,
    workers: int = 1,
    client: Any = None,
) -> None:
    """Run :func:`solve_point` on every task, calling ``on_result`` as each finishes.

    ``client``: a ``distributed.Client`` (Dask); else ``workers`` local processes
    (``ProcessPoolExecutor``), or this process when ``workers`` is 1. At most a few
    tasks per worker are in flight, so a large grid never sits in memory as payloads.
    Raises :class:`PlacementError` when the executor itself fails (a worker died, the
    package is missing on a Dask worker); the points finished before are kept.
    """
    if client is not None:
        _execute_dask(tasks, on_result, client)
    elif workers <= 1:
        for task in tasks:
            on_result(solve_point(task))
    else:
        _execute_processes(tasks, on_result, workers)


def _execute_processes(
    tasks: Iterable[PointTask], on_result: Callable[[PointOutcome], None], workers: int
) -> None:
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool

    # spawn: the parent may hold threads (ONNX Runtime, Dask) that fork would copy badly.
    context = multiprocessing.get_context("spawn")
    pending: dict[Any, Point] = {}
    it = iter(tasks)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        try:
            for task in itertools.islice(it, 2 * workers):
                pending[pool.submit(solve_point, task)] = task.point
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    point = pending.pop(fut)
                    try:
                        outcome = fut.result()
                    except BrokenProcessPool as exc:
                        raise PlacementError(
                            f"a worker process died while solving {point.point_id} ({exc})"
                        ) from None
                    on_result(outcome)
                    nxt = next(it, None)
                    if nxt is not None:
                        pending[pool.submit(solve_point, nxt)] = nxt.point
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _execute_dask(
    tasks: Iterable[PointTask], on_result: Callable[[PointOutcome], None], client: Any
) -> None:
    from distributed import as_completed

    threads = sum(client.nthreads().values()) or 1
    window = max(4, 2 * threads)
    it = iter(tasks)
    points: dict[str, Point] = {}
    outstanding: dict[str, Any] = {}

    def submit(task: PointTask) -> Any:
        fut = client.submit(solve_point, task, pure=False)
        points[fut.key] = task.point
        outstanding[fut.key] = fut
        return fut

    futures = as_completed([submit(t) for t in itertools.islice(it, window)], loop=client.loop)
    try:
        for fut in futures:
            point = points.pop(fut.key)
            outstanding.pop(fut.key, None)
            try:
                outcome = fut.result()
            except Exception as exc:  # solve_point catches its own: this is the cluster
                hint = (
                    "; the Dask workers need the placement package installed"
                    if isinstance(exc, ImportError)
                    else ""
                )
                raise PlacementError(
                    f"point {point.point_id} failed on the Dask cluster:"
                    f" {type(exc).__name__}: {exc}{hint}"
                ) from None
            on_result(outcome)
            nxt = next(it, None)
            if nxt is not None:
                futures.add(submit(nxt))
    except BaseException:
        client.cancel(list(outstanding.values()))
        raise


def connect(address: str, timeout: float = 10.0) -> Any:
    """A ``distributed.Client`` for the scheduler at ``address`` with at least one worker.

    Fails with one line after ``timeout`` seconds rather than waiting forever.
    """
    from distributed import Client

    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise PlacementError(
            f"cannot connect to the Dask scheduler at {address} within {timeout:g} s"
            f" ({exc}); check --scheduler, or raise --scheduler-timeout"
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        client.close()
        raise PlacementError(
            f"the Dask scheduler at {address} has no workers after {timeout:g} s;"
            " start some with `dask worker " + address + "`"
        ) from None
    return client


# --------------------------------------------------------------------------- store


class SweepStore:
    """The sweep directory: manifest, durable per-point log, schedules, final tables."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.manifest_path = self.dir / "manifest.json"
        self.log_path = self.dir / "points.jsonl"
        self.csv_path = self.dir / "points.csv"
        self.json_path = self.dir / "points.json"
        self.profiles_dir = self.dir / "profiles"
        self.schedules_dir = self.dir / "schedules"
        self._log: io.TextIOWrapper | None = None

    # -- opening

    def existing_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.exists():
            return None
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PlacementError(
                f"{self.manifest_path}: unreadable sweep manifest ({exc})"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise PlacementError(f"{self.manifest_path}: not a placement sweep manifest")
        return data

    def check_directory(self, identity: dict[str, Any], force: bool) -> dict[str, Any] | None:
        """The existing manifest when it describes the same sweep; refuse any other sweep.

        With ``force`` a different sweep's files are deleted (only the files a sweep writes).
        """
        if self.dir.exists() and not self.dir.is_dir():
            raise PlacementError(f"-o {self.dir}: exists and is not a directory")
        if not self.dir.exists():
            parent = self.dir.parent if str(self.dir.parent) else Path(".")
            if not parent.is_dir():
                raise PlacementError(f"-o {self.dir}: directory {parent} does not exist")
            return None
        old = self.existing_manifest() if not force else _try(self.existing_manifest)
        if old is None:
            if any(self.dir.iterdir()):
                if not force:
                    raise PlacementError(
                        f"-o {self.dir}: not empty and not a sweep directory (no readable"
                        " manifest.json); choose another directory or pass --force"
                    )
                self.discard()
            return None
        difference = _identity_difference(old.get("identity", {}), identity)
        if difference is None:
            return old
        if not force:
            raise PlacementError(
                f"-o {self.dir} holds another sweep ({difference}); nothing was changed."
                " Use another directory, or --force to discard its"
                f" {self.count_logged()} finished point(s)"
            )
        self.discard()
        return None

    def count_logged(self) -> int:
        try:
            return sum(1 for line in self.log_path.open(encoding="utf-8") if line.strip())
        except OSError:
            return 0

    def discard(self) -> None:
        for path in (self.manifest_path, self.log_path, self.csv_path, self.json_path):
            path.unlink(missing_ok=True)
        for folder in (self.profiles_dir, self.schedules_dir):
            shutil.rmtree(folder, ignore_errors=True)

    def create(self, manifest: dict[str, Any]) -> None:
        self.dir.mkdir(exist_ok=True)
        self.profiles_dir.mkdir(exist_ok=True)
        self.schedules_dir.mkdir(exist_ok=True)
        write_json_atomic(self.manifest_path, manifest)

    # -- points

    def load_done(self, point_ids: set[str]) -> dict[str, dict[str, Any]]:
        """Rows already finished (last record wins); a torn last line is dropped."""
        if not self.log_path.exists():
            return {}
        raw = self.log_path.read_bytes()
        if raw and not raw.endswith(b"\n"):  # interrupted mid-write: drop the partial line
            keep = raw.rfind(b"\n") + 1
            with self.log_path.open("r+b") as fh:
                fh.truncate(keep)
            raw = raw[:keep]
        done: dict[str, dict[str, Any]] = {}
        for n, line in enumerate(raw.decode("utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                pid = row["point_id"]
            except (ValueError, KeyError, TypeError):
                raise PlacementError(
                    f"{self.log_path}: line {n} is not a point record; fix or delete that line"
                ) from None
            if pid not in point_ids:
                continue
            has_doc = (self.schedules_dir / f"{pid}.json").exists()
            if row.get("status") == ERROR or has_doc:  # a lost schedule: solve again
                done[pid] = row
        return done

    def record(self, outcome: PointOutcome) -> None:
        """Schedule first, then the log line (fsynced): a logged point always has both."""
        pid = outcome.row["point_id"]
        if outcome.document is not None:
            write_json_atomic(self.schedules_dir / f"{pid}.json", outcome.document)
        if self._log is None:
            self._log = self.log_path.open("a", encoding="utf-8")
        self._log.write(json.dumps(_clean(outcome.row), allow_nan=False) + "\n")
        self._log.flush()
        os.fsync(self._log.fileno())

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def write_tables(self, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
        rows = sorted(rows, key=lambda r: r["point_id"])
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_csv_cell(row.get(c)) for c in columns])
        write_text_atomic(self.csv_path, buf.getvalue(), "sweep table")
        write_json_atomic(
            self.json_path, [{c: _clean_value(row.get(c)) for c in columns} for row in rows]
        )


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except PlacementError:
        return None


def _identity_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    if old == new:
        return None
    if old.get("target") != new.get("target"):
        return f"target {old.get('target')}, not {new.get('target')}"
    if old.get("models") != new.get("models"):
        shown = ", ".join(
            f"{m.get('name')} (sha256 {str(m.get('sha256'))[:12]})" for m in old.get("models", [])
        )
        return f"of model(s) {shown}"
    if old.get("grid") != new.get("grid") or old.get("hardware") != new.get("hardware"):
        return f"another grid: {json.dumps(old.get('grid'))}"
    return f"other solver options: {json.dumps(old.get('solver'))}"


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return value


def _clean_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _clean(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _clean_value(v) for k, v in row.items()}


# --------------------------------------------------------------------------- the sweep


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]  # sorted by point_id
    columns: list[str]
    resumed: int  # points taken from an earlier run
    solved: int  # points solved now
    seconds: float
    store: SweepStore

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == ERROR]


Progress = Callable[[int, int, int], None]  # (done, total, resumed)


def columns_for(grid: Grid) -> list[str]:
    return [*ID_COLUMNS, *grid.keys, *RESULT_COLUMNS]


def run_sweep(
    target: str,
    model_paths: Sequence[str | Path],
    grid: Grid,
    output: str | Path,
    *,
    options: SolverOptions | None = None,
    profiles: Sequence[str | Path] = (),
    measure: Callable[[str], Any] | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    scheduler_timeout: float = 10.0,
    client: Any = None,
    force: bool = False,
    info: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """Run (or resume) a sweep into ``output``; see the module docstring.

    ``measure(path)`` profiles a model without a ``profiles`` entry (HostProfile for
    CIM, NestProfile for PIM); ``client`` is an existing ``distributed.Client``,
    ``scheduler`` an address to connect to. Everything the user gave is checked
    before anything is measured or written.
    """
    started = time.perf_counter()
    options = options or SolverOptions()
    say = info or (lambda _text: None)
    if grid.target != target:
        raise PlacementError(f"the grid is for target {grid.target}, not {target}")
    _check_options(options, workers, scheduler_timeout)
    hardware = load_grid_hardware(grid)
    models = _model_inputs(target, model_paths)
    given = _given_profiles(target, profiles, models)
    store = SweepStore(output)
    identity = {
        "target": target,
        "models": [{"name": m.name, "sha256": m.sha256} for m in models],
        "grid": grid.to_json(),
        "hardware": [_hardware_identity(h) for h in hardware],
        "solver": options.to_json(target),
    }
    old = store.check_directory(identity, force)
    # Check the grid against the hardware before the (slow) profiling.
    planned = plan_points(target, models, hardware, grid)
    if client is None and scheduler is not None:
        client = connect(scheduler, scheduler_timeout)  # fail fast, before profiling
        owns_client = True
    else:
        owns_client = False
    try:
        # The manifest comes first: a run interrupted while profiling resumes too.
        if old is None:
            store.create(_manifest(target, models, grid, hardware, options, identity))
        models = _with_profiles(target, models, given, store, measure, say)
        by_name = {m.name: m for m in models}
        planned = [(p, by_name[m.name], hw) for p, m, hw in planned]
        done = store.load_done({p.point_id for p, _, _ in planned})
        total = len(planned)
        if done:
            say(f"resuming {output}: {len(done)} of {total} points already done")
        todo = [(p, m, hw) for p, m, hw in planned if p.point_id not in done]
        rows = dict(done)
        where = (
            f"Dask scheduler {client.scheduler.address}" if client is not None
            else ("this process" if workers <= 1 else f"{workers} local worker processes")
        )  # fmt: skip
        if todo:
            say(f"solving {len(todo)} point(s) on {where} ...")
        if progress is not None:
            progress(len(done), total, len(done))

        def on_result(outcome: PointOutcome) -> None:
            store.record(outcome)
            rows[outcome.row["point_id"]] = outcome.row
            if progress is not None:
                progress(len(rows), total, len(done))

        tasks = (build_task(p, m, hw, options) for p, m, hw in todo)
        try:
            execute(tasks, on_result, workers=workers, client=client)
        finally:
            store.close()
        columns = columns_for(grid)
        ordered = sorted(rows.values(), key=lambda r: r["point_id"])
        store.write_tables(ordered, columns)
    finally:
        if owns_client:
            client.close()
    return SweepResult(
        [{c: r.get(c) for c in columns} for r in ordered], columns, len(done), len(todo),
        time.perf_counter() - started, store,
    )  # fmt: skip


def _check_options(options: SolverOptions, workers: int, scheduler_timeout: float) -> None:
    if not options.time_limit > 0:
        raise PlacementError(
            f"--time-limit must be a positive number of seconds, got {options.time_limit}"
        )
    if not options.rel_gap >= 0:
        raise PlacementError(f"--gap must be a non-negative fraction, got {options.rel_gap}")
    if options.threads < 1:
        raise PlacementError(f"--solver-threads must be at least 1, got {options.threads}")
    if workers < 1:
        raise PlacementError(f"--workers must be at least 1, got {workers}")
    if not scheduler_timeout > 0:
        raise PlacementError(f"--scheduler-timeout must be positive, got {scheduler_timeout}")
    from placement.pim.verify import check_mode

    check_mode(options.copy, options.granularity)


def _model_inputs(target: str, paths: Sequence[str | Path]) -> list[ModelInput]:
    """Hash (and, for CIM, ingest) every model once; names must be distinct."""
    if not paths:
        raise PlacementError("no model given")
    out: list[ModelInput] = []
    for path in paths:
        if target == "cim":
            from placement.graph import load_graph

            graph = load_graph(str(path))
            model = ModelInput(Path(path).stem, str(path), graph.sha256, graph=graph)
        else:
            from placement.pim.pipeline import model_sha256

            model = ModelInput(Path(path).stem, str(path), model_sha256(path))
        for other in out:
            if other.sha256 == model.sha256:
                raise PlacementError(f"{path}: the same model as {other.path}, given twice")
            if other.name == model.name:
                raise PlacementError(
                    f"{path} and {other.path} have the same name {model.name!r} (the model"
                    " column): rename one"
                )
        out.append(model)
    return out


def _load_profile(target: str, path: str | Path) -> Any:
    if target == "cim":
        from placement.profiling.host_profile import HostProfile

        return HostProfile.load(path)
    from placement.profiling.nest_profile import NestProfile

    return NestProfile.load(path)


def _given_profiles(
    target: str, paths: Sequence[str | Path], models: Sequence[ModelInput]
) -> dict[str, Any]:
    """``--profile`` files, matched to the models by the SHA-256 they record."""
    out: dict[str, Any] = {}
    for path in paths:
        profile = _load_profile(target, path)
        match = [m for m in models if m.sha256 == profile.model_sha256]
        if not match:
            raise PlacementError(
                f"profile {path} was measured on {profile.model_path} (sha256"
                f" {profile.model_sha256[:12]}), which is none of the sweep's models"
            )
        if match[0].name in out:
            raise PlacementError(f"two profiles given for {match[0].path}")
        out[match[0].name] = profile
    return out


def _with_profiles(
    target: str,
    models: Sequence[ModelInput],
    given: Mapping[str, Any],
    store: SweepStore,
    measure: Callable[[str], Any] | None,
    say: Callable[[str], None],
) -> list[ModelInput]:
    """Each model with its profile: the directory's (resume), given, or measured now, once."""
    out = []
    for m in models:
        saved = store.dir / m.profile_file
        if saved.exists():  # a resumed sweep: the points done used this profile
            profile = _load_profile(target, saved)
            if m.name in given and given[m.name].to_json() != profile.to_json():
                raise PlacementError(
                    f"--profile for {m.path} differs from the profile this sweep used"
                    f" ({saved}); resume without --profile, or start a new sweep"
                )
            say(f"{m.name}: profile reused from {saved}")
        elif m.name in given:
            profile = given[m.name]
            say(f"{m.name}: profile loaded from {profile.source}")
        else:
            if measure is None:
                raise PlacementError(f"{m.path}: no profile given and no way to measure one")
            profile = measure(m.path)
        if profile.model_sha256 != m.sha256:
            profile.check_matches(m.sha256, m.path)
        if not saved.exists():
            profile.save(saved)
        out.append(dataclasses.replace(m, profile=profile))
    return out


def _manifest(
    target: str,
    models: Sequence[ModelInput],
    grid: Grid,
    hardware: Sequence[Any],
    options: SolverOptions,
    identity: dict[str, Any],
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "target": target,
        "models": [
            {"name": m.name, "path": m.path, "sha256": m.sha256, "profile": m.profile_file}
            for m in models
        ],
        "grid": grid.to_json(),
        "hardware": [h.to_json() for h in hardware],
        "solver": options.to_json(target),
        "columns": columns_for(grid),
        "points": len(models) * grid.size_per_model,
        "placement_version": _package_version(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "identity": identity,  # what a resumed run must match
    }


def _package_version() -> str | None:
    try:
        return version("placement")
    except PackageNotFoundError:
        return None


def iter_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a finished sweep's points.json (for reports and plots)."""
    data = json.loads((Path(path) / "points.json").read_text(encoding="utf-8"))
    yield from data
