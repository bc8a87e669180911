"""Executors: run :func:`~placement.sweep.plan.solve_point` on many points, here or elsewhere.

In this process (1 worker), in a pool of local processes, or on a Dask cluster
(``distributed.Client``, imported only when a cluster is used). Every executor gives the
same rows: each point is solved on its own, from plain data.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any
from urllib.parse import urlsplit

from placement.errors import PlacementError
from placement.onnxfile import first_line
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
    # spawn: the parent may hold threads (ONNX Runtime, Dask) that fork would copy badly.
    context = multiprocessing.get_context("spawn")
    pending: dict[Any, Point] = {}
    it = iter(tasks)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        try:
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
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def _execute_dask(
    tasks: Iterable[PointTask], on_result: Callable[[PointOutcome], None], client: Any,
    run: Callable[[Any], PointOutcome],
) -> None:
    from distributed import as_completed

    threads = sum(client.nthreads().values()) or 1
    window = max(4, 2 * threads)
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


def connect(address: str, timeout: float = 10.0) -> Any:
    """A ``distributed.Client`` for the scheduler at ``address`` with at least one worker.

    The address is checked first (:func:`check_scheduler_address`); a scheduler that does
    not answer fails with one line after ``timeout`` seconds, and leaves no half-made
    client behind to print a late error when it is garbage-collected.
    """
    address = check_scheduler_address(address)
    from distributed import Client

    # Client(...) starts an event-loop thread before it connects; when it then raises,
    # the half-made client is reachable only from the traceback, and its __del__ (at
    # exit) tries to close it for 2 x timeout and prints "Exception ignored in
    # Client.__del__ ... TimeoutError". Holding it from the start lets it be closed here.
    client = Client.__new__(Client)
    try:
        client.__init__(address, timeout=timeout, set_as_default=False)
    except BaseException as exc:
        _discard(client)
        if not isinstance(exc, Exception):
            raise
        # a peer that is not a Dask scheduler (a proxy, another service) answers bytes
        # that distributed decodes as a frame length of exabytes
        reason = ("something answered there, but not in Dask's protocol"
                  if isinstance(exc, MemoryError) else first_line(exc))  # fmt: skip
        raise PlacementError(
            f"cannot connect to the Dask scheduler at {address} within {timeout:g} s"
            f" ({reason}); check --scheduler, or raise --scheduler-timeout"
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except BaseException as exc:
        _discard(client)
        if not isinstance(exc, TimeoutError | OSError):
            raise
        raise PlacementError(
            f"the Dask scheduler at {address} has no workers after {timeout:g} s;"
            " start some with `dask worker " + address + "`"
        ) from None
    return client


# The schemes of distributed's own transports that name a host and port (inproc is
# in-process only; ucx needs a separate package).
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss")


def check_scheduler_address(address: str) -> str:
    """``address`` as ``scheme://host:port`` (a bare ``host:port`` is tcp, as in Dask), or
    a one-line :class:`PlacementError` saying what is wrong, before anything connects."""
    example = "e.g. tcp://scheduler-host:8786"
    text = address.strip()
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise PlacementError(f"--scheduler {address!r} is not a scheduler address ({example})")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    scheme = scheme.lower()
    if scheme not in SCHEDULER_SCHEMES:
        raise PlacementError(
            f"--scheduler {address!r}: unknown scheme {scheme!r}; use one of"
            f" {', '.join(s + '://' for s in SCHEDULER_SCHEMES)} ({example})"
        )
    parts = urlsplit(f"{scheme}://{rest}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc or not parts.hostname:
        raise PlacementError(f"--scheduler {address!r} is not host:port ({example})")
    if port is None:
        raise PlacementError(
            f"--scheduler {address!r} has no port (a Dask scheduler listens on 8786 unless"
            f" told otherwise: {scheme}://{parts.hostname}:8786)"
        )
    if not 0 < port < 65536:
        raise PlacementError(f"--scheduler {address!r}: the port must be 1 to 65535")
    if scheme in ("tls", "wss") and not _tls_configured(address):
        raise PlacementError(
            f"--scheduler {address!r}: {scheme}:// needs the client's TLS certificates in"
            " Dask's configuration (distributed.comm.tls.ca-file, .client.cert, .client.key)"
        )
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{scheme}://{host}:{port}"


def _tls_configured(address: str) -> bool:
    from distributed.security import Security

    try:
        args = Security().get_connection_args("client")
    except Exception as exc:  # a certificate file missing or unreadable (ssl, OSError)
        raise PlacementError(
            f"--scheduler {address!r}: Dask's TLS configuration cannot be loaded"
            f" ({first_line(exc)})"
        ) from None
    return args.get("ssl_context") is not None


def _discard(client: Any) -> None:
    """Close a client that failed to start (quick: nothing is connected)."""
    with contextlib.suppress(Exception):  # already failing: the original error is reported
        client.close(timeout=5)
