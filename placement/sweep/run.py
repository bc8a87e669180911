"""Design-space sweeps: one verified solve per point of a cartesian grid of hardware values.

A sweep takes one or more models, a target (``cim`` or ``pim``), a list of hardware
descriptions (presets or TOML files) and, per swept key, a list of values in file
units (``crossbars``, ``t_mvm_ns``, ... for CIM; any ``[pim]`` key such as ``cores``
or ``t_sw_us`` for PIM; :func:`~placement.sweep.grid.known_keys`). The grid is
``models x hardware x values(key1) x values(key2) x ...``; every point is solved and
verified as ``placement solve`` would (the same formulation and solver choice, "auto"
unless the sweep names one).

Monotone where physics says so (CIM): a placement that fits C crossbars fits any C' >
C, and the same placement is no slower with a faster MVM or bus. Each point therefore
starts from the schedules of its solved neighbours one grid step worse
(:func:`~placement.sweep.plan.neighbours`), re-timed under its own parameters, and the
pipeline never reports worse than its start: the reported makespans are monotone
across the grid whatever the time limit. Points run in rounds
(:func:`~placement.sweep.plan.rounds`) so that the neighbours of a point are always
finished before it.

Work done once: every model is ingested and profiled once up front (or its
``--profile`` is loaded), the profile is saved under ``profiles/``, and the points
receive plain data only (a :class:`~placement.cim.instance.CimInstance` or a
:class:`~placement.pim.instance.PimInstance`): workers never profile.

Execution: :func:`~placement.sweep.executors.execute` runs
:func:`~placement.sweep.plan.solve_point` in this process (1 worker), in a
``concurrent.futures.ProcessPoolExecutor`` (N workers) or on a Dask cluster
(``distributed.Client``). The workers of a Dask cluster must be able to import this
package (``pip install`` it there, same version), and a scheduler is trusted with code
execution: the client sends pickled functions for the workers to run, and accepts the
pickled results they send back. Each point is solved on its own
(from the same neighbours' results, whatever ran them), with one solver thread by
default, so the rows do not depend on the executor or the worker count. One caveat:
two different placements with the same optimal objective (or within the relative gap)
are both correct answers, and a different HiGHS version or thread count may return the
other one; compare sweeps on ``status``/``objective_s``, not on assignments. With the
same inputs, HiGHS with one thread is deterministic, so the same installation gives
identical rows everywhere (except ``solve_seconds``, a wall-clock time).

Output directory (``-o DIR``)::

    DIR/manifest.json            target, models (path, sha256, profile), grid, hardware specs,
                                 solver options, placement version, creation date
    DIR/points.jsonl             one JSON row per finished point, appended and fsynced as
                                 points finish: what a resumed sweep skips
    DIR/points.csv, points.json  all rows, sorted by point_id (regenerated atomically at the end;
                                 points.json is a list of row objects)
    DIR/profiles/<model-stem>.<sha12>.json   the host (CIM) or nest (PIM) profile used
    DIR/.lock                    while a sweep runs here: its process id, the file held (flock)
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
n_operators        operators of the model (PIM: the ONNX nodes the nests come from; empty
                   for an MLIR input)
n_nests            PIM: loop nests, the units it places; CIM: empty
n_offloaded        operators on the CIM accelerator / nests on PIM
crossbars_used     CIM: crossbars of the offloaded operators; PIM: empty
host_busy_s        CIM: host latency of the host operators; PIM: T_host of Eq. 9
accel_busy_s       CIM: accelerator latency of the CIM operators; PIM: T_pim of Eq. 9
gap                HiGHS's relative gap of the reported placement
solve_seconds      HiGHS's solve time (the only column that varies between runs)
verified           true when the independent verifier passed (never a result without it)
message            why a point failed (``status`` = ``error``), else empty
host_latencies     where the host latencies came from: "measured on x86_64 (<cpu>)",
                   "modelled for <host> (estimate)" (hardware with ``[host] latency =
                   "model"``), or "measured on x86_64 but the hardware describes aarch64:
                   mismatch" (:mod:`placement.hardware.hostcheck`)
host_mismatch      true when the profile was measured on another architecture than the
                   hardware's host (every such model x hardware is also a warning)
memory             PIM: the hardware's memory architecture (shared, partitioned; empty
                   when the hardware does not state one); CIM: empty
copy               PIM: the copy accounting of objective_s (upper_bound, exact, shared,
                   partitioned); CIM: empty
energy_j           CIM: the placement's energy per inference (the hardware's energy model;
                   empty without one); PIM: empty
energy_source      which parts of energy_j are measured, modelled or estimated: "host
                   estimated, CIM modelled" ("host measured" with a RAPL power)
frames_per_s       CIM: frames per second of a pipelined stream of frames through the
                   placement (1 / the busiest resource's load, placement.cim.stream); PIM:
                   empty
=================  ===========================================================================

Host latencies: hardware whose host sets ``latency = "model"`` (presets ``arm-a72-model``,
``x86-ryzen-model``) takes them from the analytical host model; when every hardware of a
CIM sweep does, nothing is profiled. Each schedule document carries a ``host`` section
(``HostLatencySource.to_json()``).

Resume: re-running the same command (same models, grid, hardware and solver options,
recorded in the manifest) skips the points already in ``points.jsonl``; the profiles
saved in ``profiles/`` are reused, never re-measured. Another sweep's directory is
refused (nothing is touched) unless ``force`` is given, which discards its results.

This module runs a sweep (:func:`run_sweep`): it checks the inputs, prepares the models
and their profiles, writes the manifest and drives the executor. The parts:
:mod:`~placement.sweep.targets` (what differs between CIM and PIM),
:mod:`~placement.sweep.grid` (what to sweep), :mod:`~placement.sweep.plan` (the points
and solving one), :mod:`~placement.sweep.executors` (where points are solved) and
:mod:`~placement.sweep.store` (the directory).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.solvers.workers import check_scheduler_address, connect
from placement.sweep.executors import execute
from placement.sweep.grid import Grid, load_grid_hardware
from placement.sweep.plan import (
    ERROR,
    ModelInput,
    PointOutcome,
    SolverOptions,
    build_task,
    columns_for,
    hardware_identity,
    neighbours,
    plan_points,
    rounds,
)
from placement.sweep.store import FORMAT, FORMAT_VERSION, SweepStore
from placement.sweep.targets import get_target


@dataclass
class SweepResult:
    """A finished sweep: every row (resumed and new), its columns, counts and the directory."""

    rows: list[dict[str, Any]]  # sorted by point_id
    columns: list[str]
    resumed: int  # points taken from an earlier run
    solved: int  # points solved now
    seconds: float
    store: SweepStore

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The rows of the points that could not be solved (status ``error``)."""
        return [r for r in self.rows if r["status"] == ERROR]


Progress = Callable[[int, int, int], None]  # (done, total, resumed)


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
    warn: Callable[[str], None] | None = None,
    memory_limit_gb: float | None = None,
) -> SweepResult:
    """Run (or resume) a sweep into ``output``; see the module docstring.

    ``measure(path)`` profiles a model without a ``profiles`` entry (HostProfile for
    CIM, NestProfile for PIM); ``client`` is an existing ``distributed.Client``,
    ``scheduler`` an address to connect to. Everything the user gave is checked
    before anything is measured or written, including the memory profiling a model will
    take against ``memory_limit_gb`` (:mod:`placement.profiling.memory`). ``warn``
    receives one sentence per model and hardware whose profile was measured on another
    architecture than the hardware's host.
    """
    started = time.perf_counter()
    options = options or SolverOptions()
    say = info or (lambda _text: None)
    if grid.target != target:
        raise PlacementError(f"the grid is for target {grid.target}, not {target}")
    _check_options(target, options, workers, scheduler_timeout)
    if client is None and scheduler is not None:
        check_scheduler_address(scheduler)  # its syntax, before anything is read or written
    hardware = load_grid_hardware(grid)
    needs_profile = any(get_target(target).needs_profile(h) for h in hardware)
    models = _model_inputs(target, model_paths)
    given = _given_profiles(target, profiles, models)
    store = SweepStore(output)
    identity = {
        "target": target,
        "models": [{"name": m.name, "sha256": m.sha256} for m in models],
        "grid": grid.to_json(),
        "hardware": [hardware_identity(h) for h in hardware],
        "solver": options.to_json(target),
    }
    # Check the grid against the hardware, and the memory profiling will take, before
    # the directory is touched (--force discards another sweep) and before profiling.
    planned = plan_points(target, models, hardware, grid)
    if needs_profile:
        for m in models:
            if m.name not in given and not (store.dir / m.profile_file).exists():
                get_target(target).check_memory(m.path, memory_limit_gb)
    # One sweep at a time in a directory; the hold ends with this function, or with the
    # process (a crash, a kill) since the operating system drops it.
    with store.held():
        old = store.check_directory(identity, force)
        if client is None and scheduler is not None:
            client = connect(scheduler, scheduler_timeout)  # fail fast, before profiling
            owns_client = True
        else:
            owns_client = False
        try:
            # The manifest comes first: a run interrupted while profiling resumes too. A model
            # that cannot be profiled (an error, not an interruption) leaves nothing behind.
            try:
                if old is None:
                    store.create(
                        _manifest(target, models, grid, hardware, options, identity, needs_profile)
                    )
                if needs_profile:
                    models = _with_profiles(target, models, given, store, measure, say)
                else:
                    say("host latencies: modelled for every hardware (estimate); nothing is"
                        " profiled")
            except PlacementError:
                if old is None:
                    store.remove_started()
                raise
            for m in models:  # once per model x hardware
                for hw in hardware:
                    mismatch = m.host_source(hw).warning
                    if mismatch and warn is not None:
                        warn(f"{m.name} on {hw.name}: {mismatch}")
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

            documents: dict[str, dict[str, Any] | None] = {}

            def on_result(outcome: PointOutcome) -> None:
                store.record(outcome)
                pid = outcome.row["point_id"]
                rows[pid] = outcome.row
                documents[pid] = outcome.document
                if progress is not None:
                    progress(len(rows), total, len(done))

            def document(pid: str) -> dict[str, Any] | None:
                if pid not in documents:  # solved by an earlier, interrupted run
                    documents[pid] = store.load_document(pid)
                return documents[pid]

            # Rounds: a point starts from its solved neighbours (placement.sweep.plan.neighbours),
            # so every point's neighbours are finished before it; within a round, any order.
            before = neighbours(target, [p for p, _, _ in planned])
            pending = {p.point_id: (p, m, hw) for p, m, hw in todo}
            try:
                for round_ids in rounds([p.point_id for p, _, _ in todo], before):
                    tasks = [
                        build_task(*pending[pid], options,
                                   [d for q in before[pid] if (d := document(q)) is not None])
                        for pid in round_ids
                    ]  # fmt: skip
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


def _check_options(
    target: str, options: SolverOptions, workers: int, scheduler_timeout: float
) -> None:
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
    get_target(target).check_options(options)


def _model_inputs(target: str, paths: Sequence[str | Path]) -> list[ModelInput]:
    """Hash (and, for CIM, ingest) every model once; names must be distinct."""
    if not paths:
        raise PlacementError("no model given")
    adapter = get_target(target)
    out: list[ModelInput] = []
    for path in paths:
        sha256, graph = adapter.ingest(path)
        model = ModelInput(Path(path).stem, str(path), sha256, graph=graph)
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


def _given_profiles(
    target: str, paths: Sequence[str | Path], models: Sequence[ModelInput]
) -> dict[str, Any]:
    """``--profile`` files, matched to the models by the SHA-256 they record."""
    out: dict[str, Any] = {}
    for path in paths:
        profile = get_target(target).load_profile(path)
        match = [m for m in models if m.sha256 == profile.model_sha256]
        if not match:
            raise PlacementError(
                f"profile {path} was measured on {profile.model_path} (sha256"
                f" {profile.model_sha256[:12]}), which is none of the sweep's models"
            )
        if match[0].name in out:
            raise PlacementError(f"two profiles given for {match[0].path}")
        get_target(target).check_profile(match[0].graph, profile)
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
            profile = get_target(target).load_profile(saved)
            if m.name in given and given[m.name].to_json() != profile.to_json():
                raise PlacementError(
                    f"--profile for {m.path} differs from the profile this sweep used"
                    f" ({saved}); resume without --profile, or start a new sweep"
                )
            get_target(target).check_profile(m.graph, profile)
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
    needs_profile: bool = True,
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "target": target,
        "models": [
            {"name": m.name, "path": m.path, "sha256": m.sha256,
             "profile": m.profile_file if needs_profile else None}
            for m in models
        ],  # fmt: skip
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


# The Pareto command (placement.sweep.pareto) ingests its model and prepares its profile
# exactly as a sweep does.
model_inputs, with_profiles, package_version = _model_inputs, _with_profiles, _package_version
check_options = _check_options
