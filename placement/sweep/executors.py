"""Executors: run :func:`~placement.sweep.plan.solve_point` on many points, here or elsewhere.

In this process (1 worker), in a pool of local processes, or on a Dask cluster
(``distributed.Client``, imported only when a cluster is used); the pool and the
connection are :mod:`placement.solvers.workers`' (workers that die with the sweep and
ignore its Ctrl-C). Every executor gives the same rows: each point is solved on its own,
from plain data.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from placement.errors import PlacementError
from placement.solvers.workers import cluster_threads, process_pool
from placement.sweep.plan import Point, PointOutcome, PointTask, solve_point


def execute(
    tasks: Iterable[PointTask],
    on_result: Callable[[PointOutcome], None],
    *,
    workers: int = 1,
    client: Any = None,
    run: Callable[[Any], PointOutcome] = solve_point,
) -> None:
    """Run :func:`solve_point` (or ``run``: a module-level function, so that worker
    processes and Dask can import it, taking tasks with a ``point.point_id``) on every
    task, calling ``on_result`` as each finishes.

    ``client``: a ``distributed.Client`` (Dask); else ``workers`` local processes
    (``ProcessPoolExecutor``), or this process when ``workers`` is 1. At most a few
    tasks per worker are in flight, so a large grid never sits in memory as payloads.
    Raises :class:`PlacementError` when the executor itself fails (a worker died, the
    package is missing on a Dask worker); the points finished before are kept.
    """
    if client is not None:
        _execute_dask(tasks, on_result, client, run)
    elif workers <= 1:
        for task in tasks:
            on_result(run(task))
    else:
        _execute_processes(tasks, on_result, workers, run)


def _execute_processes(
    tasks: Iterable[PointTask], on_result: Callable[[PointOutcome], None], workers: int,
    run: Callable[[Any], PointOutcome],
) -> None:
    pending: dict[Any, Point] = {}
    it = iter(tasks)
    with process_pool(workers) as pool:
        for task in itertools.islice(it, 2 * workers):
            pending[pool.submit(run, task)] = task.point
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
                    pending[pool.submit(run, nxt)] = nxt.point


def _execute_dask(
    tasks: Iterable[PointTask], on_result: Callable[[PointOutcome], None], client: Any,
    run: Callable[[Any], PointOutcome],
) -> None:
    from distributed import as_completed

    window = max(4, 2 * cluster_threads(client))
    it = iter(tasks)
    points: dict[str, Point] = {}
    outstanding: dict[str, Any] = {}

    def submit(task: PointTask) -> Any:
        fut = client.submit(run, task, pure=False)
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
