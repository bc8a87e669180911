"""Where solves run besides this process: local worker processes that die with their
parent, and a Dask cluster.

Local workers (:func:`process_pool`) are spawned, never forked: the parent may hold
threads (ONNX Runtime, Dask, the progress line) that a forked child would inherit
half-held. Each worker first calls :func:`die_with_parent`:

* it ignores Ctrl-C: a terminal sends SIGINT to every process of its foreground group,
  and the parent, which reports the interrupt in one line, ends its workers itself;
  a worker that got it too would print a traceback of its own;
* it ends when its parent is gone: at once on Linux when its parent thread is the
  parent's main thread (the kernel's parent-death signal, ``prctl(PR_SET_PDEATHSIG)``),
  and in any case within :data:`WATCH_SECONDS` (a thread that watches the parent's pid;
  solvers release the GIL while they search). So a sweep or a solve killed with
  SIGKILL leaves no worker behind, nor the CP-SAT worker a worker started.

The pool's context ends its workers when the block ends with an exception (Ctrl-C
included) instead of waiting for what they are solving. A Dask cluster is reached with
:func:`connect` (the address checked first by :func:`check_scheduler_address`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from placement.errors import PlacementError, first_line
from placement.machine import end_with_parent

#: How often a worker checks that its parent is still there (seconds).
WATCH_SECONDS = 0.5
#: The ``workers`` value that asks for :func:`auto_workers`.
AUTO_WORKERS = "auto"
#: The most worker processes ``"auto"`` starts (:func:`auto_workers`). An assumption, not
#: a measurement: each spawned worker holds its own interpreter with Pyomo and HiGHS
#: (its memory and the 2 CPUs measured: benchmarks/README.md, "Block solves in worker
#: processes"); 8 keeps a large host's memory and start-up cost bounded.
AUTO_MAX_WORKERS = 8
#: A CIM decomposition's worker processes start only after it has run this long (seconds)
#: in its own process (:mod:`placement.cim.blockwise`). Starting two on a 2-core machine
#: slowed decompositions that end within 1-4 s by 0.3-1.0 s when they started after 1 s,
#: and not at all after 3 s, while those of 6-60 s still gain (benchmarks/README.md,
#: "Block solves in worker processes").
WORKERS_AFTER = 3.0


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, e.g. a container's or ``taskset``'s
    share; all of the host's where the system does not say)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def parse_workers(text: str, flag: str = "workers") -> int | str:
    """A ``workers`` value given as text (a command-line flag): :data:`AUTO_WORKERS` or a
    positive integer; anything else is a :class:`PlacementError` naming ``flag``."""
    if text == AUTO_WORKERS:
        return text
    count = int(text) if text.isdecimal() else 0
    if count < 1:
        raise PlacementError(f"{flag} must be a positive integer or 'auto', got {text!r}")
    return count


def auto_workers() -> int:
    """Worker processes for ``workers="auto"``: the usable CPUs, at most
    :data:`AUTO_MAX_WORKERS` (1: solve in this process)."""
    return min(usable_cpus(), AUTO_MAX_WORKERS)


def die_with_parent(parent: int, *, kernel: bool = True, ignore_interrupts: bool = True) -> None:
    """Make this process end when process ``parent`` (its parent now) ends; ``kernel``: also
    ask Linux for the parent-death signal (only when the parent started this process from
    its main thread: the signal comes when the starting *thread* ends);
    ``ignore_interrupts``: ignore SIGINT (the parent handles Ctrl-C)."""
    if ignore_interrupts:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if kernel:
        end_with_parent()
    if os.getppid() != parent:  # gone before the signal was asked for
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCH_SECONDS)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def _pool_worker_start(parent: int) -> None:
    die_with_parent(parent)
    # A spawned worker inherits "spawn" as its default start method, under which the
    # multiprocessing Lock that Pyomo makes when imported is a named semaphore, registered
    # with the resource tracker: a worker killed on Ctrl-C leaves it there, and the
    # tracker warns at exit. The worker starts no processes through multiprocessing, so
    # fork's semantics (the semaphore unnamed at once) are safe here.
    if "fork" in multiprocessing.get_all_start_methods():
        multiprocessing.set_start_method("fork", force=True)
    if hasattr(signal, "pthread_sigmask"):  # blocked by the parent while it started us
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class _Pool(ProcessPoolExecutor):
    """A process pool whose workers never see a Ctrl-C: ``submit`` may start one, and does
    so with SIGINT blocked (a child inherits the mask), until the worker ignores it. A
    worker killed by Ctrl-C while it starts leaves the pool's semaphores registered, and
    the resource tracker warns about them at exit."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        if not hasattr(signal, "pthread_sigmask"):
            return super().submit(fn, *args, **kwargs)
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            return super().submit(fn, *args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)  # a pending Ctrl-C comes now


@contextlib.contextmanager
def process_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` spawned processes that die with this one and ignore Ctrl-C
    (module docstring); when the block ends with an exception (a KeyboardInterrupt too),
    the workers are killed rather than waited for, and the futures not started are
    cancelled."""
    pool = _Pool(
        max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
        initializer=_pool_worker_start, initargs=(os.getpid(),),
    )  # fmt: skip
    try:
        yield pool
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Kill a pool's workers now and cancel what it has not started."""
    kill = getattr(pool, "kill_workers", None)  # Python >= 3.14
    if kill is not None:
        kill()
    else:  # the executor's own table of its processes (private before 3.14)
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                process.kill()
    # waiting is quick now that no worker runs, and it lets the pool release its queues'
    # semaphores (else the resource tracker warns at exit about leaked ones)
    pool.shutdown(wait=True, cancel_futures=True)


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


def cluster_threads(client: Any) -> int:
    """How many tasks a Dask cluster runs at once (its workers' threads)."""
    return sum(client.nthreads().values()) or 1


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
