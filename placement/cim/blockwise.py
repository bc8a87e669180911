"""The CIM pipeline's decomposed solve: :func:`placement.cim.decompose.decompose` with each
block solved by the pipeline itself, whole (or priced, and large tightened blocks at a
budget too: :mod:`placement.cim.priced`), in this process, in worker processes or on a
Dask cluster.

The pipeline (:func:`placement.cim.pipeline.solve`) passes itself in as ``solve_fn``, so this
module does not import it: the layers stay a tree. With ``workers > 1`` a round's block
solves run in that many spawned processes (:func:`placement.solvers.workers.process_pool`:
they die with this one and leave Ctrl-C to it); each worker imports the pipeline once
(two spawned workers were ready in 1.0-1.2 s on the project's 2-core VM at load 0.9).
They are started only once the decomposition has run for
:data:`~placement.solvers.workers.WORKERS_AFTER` seconds, and until they are ready this
process solves the blocks itself, so a decomposition that ends sooner never waits for
them. With a Dask ``client``, they run on its cluster (whose
workers need this package installed). Either way each block solve by a MIP solver uses
one thread and one by CP-SAT :data:`CPSAT_BLOCK_WORKERS`, unless the caller set
``threads``. Blocks are independent, so results are the
same as in one process, up to what time-limited block solves find in their time (each
gets its share of the round times the number of solves running at once).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import ExitStack
from typing import Any

from placement.cim.deadline import HEURISTIC_SHARE, MIN_SOLVE, Deadline, Phases, end_reserve
from placement.cim.decompose import Decomposed, decompose
from placement.cim.frontier import floor_bound
from placement.cim.instance import CimInstance
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.priced import cpsat_pays, lazy_ordering_pays, solve_priced
from placement.cim.schedule import (
    CimSchedule,
    CrossbarCost,
    all_host_schedule,
    best_start,
    priced_makespan,
)
from placement.errors import PlacementError
from placement.solvers.base import (
    ModelSize,
    SolveOptions,
    SolveResult,
    SolveStatus,
    gap_to_lower_bound,
)
from placement.solvers.workers import WORKERS_AFTER, cluster_threads, process_pool, stop_pool

NO_TIME = "not solved (no time)"
BLOCK_ERROR = "solver error (its start kept)"
BlockOutcome = tuple[CimSchedule, float, "ModelSize | None", str]
#: A block solve as handed out: (block instance, limit, starts, price, settings).
_Job = tuple[CimInstance, "float | None", list[CimSchedule], "float | CrossbarCost | None",
             dict[str, Any]]
#: Block settings that are not options of the pipeline's solve.
_BLOCK_ONLY = ("heuristic_pairs", "cpsat_threads", "large_block")
#: A solve of a block that may go to CP-SAT (:class:`_LargeBlocks`) that HiGHS takes first
#: gives it at most this many seconds before CP-SAT takes the rest: long enough for the
#: blocks HiGHS proves at once (0.3 s median on the branched family's blocks of 500+
#: pairs, benchmarks/README.md), short enough that a block it cannot prove costs little.
PROBE_SECONDS = 2.0
HIGHS_FIRST, CPSAT = "HiGHS first", "CP-SAT"
#: CP-SAT's search workers in a block solve unless the caller set ``threads``: its full
#: portfolio, whatever the cores. Measured on YOLOv5nu's 88-operator head block at
#: 500 ns priced by what the rest takes (2-core VM, benchmarks/README.md): 8 workers
#: proved it in 5.6-8.0 s (4 runs), CP-SAT's default (one per core, 2) in 16.8, 30.5
#: and 58.2 s and not within 60 s in 2 of 5 runs: the workers that raise the bound are
#: not among the first two.
CPSAT_BLOCK_WORKERS = 8


class _LargeBlocks:
    """How the next solve of each block with many parallel pairs goes
    (:func:`~placement.cim.priced.cpsat_pays`, when the solver was left to choose), by
    measurement: HiGHS (its ordering rows as violated) within :data:`PROBE_SECONDS`,
    then CP-SAT for the rest of the limit if HiGHS did not prove it (``HIGHS_FIRST``);
    or CP-SAT alone (``CPSAT``) once HiGHS has left more of the block's solves unproven
    than CP-SAT has. Neither wins everywhere: CP-SAT proved YOLOv5nu's head block where
    HiGHS ended at its limit, HiGHS the branched family's 16-wide blocks in a fraction
    of the time (benchmarks/README.md)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.misses: dict[tuple[str, ...], dict[str, int]] = {}

    def plan(self, sub: CimInstance, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings of the next solve of ``sub``."""
        if not self.enabled or not cpsat_pays(sub):
            return settings
        misses = self._counts(sub)
        how = CPSAT if misses[CPSAT] < misses[HIGHS_FIRST] else HIGHS_FIRST
        return {**settings, "large_block": how}

    def learn(self, sub: CimInstance, settings: dict[str, Any], status: str) -> None:
        """Count what a solve of ``sub`` with ``settings`` that ended with ``status``
        (:func:`_large_block_task`'s, naming the solver that ended it) says of each."""
        how = settings.get("large_block")
        if how is None or status == NO_TIME:
            return
        misses = self._counts(sub)
        proven = status.startswith(SolveStatus.OPTIMAL.value)
        if how == HIGHS_FIRST and not status.endswith(f"({CPSAT})"):
            misses[HIGHS_FIRST] += not proven
            return
        if how == HIGHS_FIRST:
            misses[HIGHS_FIRST] += 1  # its probe did not prove it
        misses[CPSAT] += not proven

    def highs_missed(self, sub: CimInstance) -> bool:
        """Whether a solve of ``sub`` may be priced by what the rest takes (CP-SAT alone):
        HiGHS has left one of its solves unproven. Blocks HiGHS proves stay with it (the
        branched family's 16-wide blocks: with every solve of them on CP-SAT, row 23 ended
        at 0.057 % where HiGHS had proven it, benchmarks/README.md)."""
        return self.enabled and cpsat_pays(sub) and self._counts(sub)[HIGHS_FIRST] > 0

    def _counts(self, sub: CimInstance) -> dict[str, int]:
        return self.misses.setdefault(_key(sub), {HIGHS_FIRST: 0, CPSAT: 0})


def _key(sub: CimInstance) -> tuple[str, ...]:
    """A block instance's operators: the same for every budget, price and end device."""
    return tuple(op.name for op in sub.operators)


def _large_block_task(
    sub: CimInstance, limit: float | None, known: list[CimSchedule],
    settings: dict[str, Any], price: float,
) -> BlockOutcome:  # fmt: skip
    """A solve of a large block as :class:`_LargeBlocks` planned it (priced, at price 0
    for a budget solve); the status names the solver that ended it. Both solvers' bounds
    are of the same least priced value, so the better one stands, with the better
    placement. CP-SAT keeps its own workers (:data:`CPSAT_BLOCK_WORKERS`): its strength
    is its portfolio of parallel searches (one search alone proved none of YOLOv5nu's
    head-block solves in 20 s that two proved in 1-7 s: benchmarks/README.md)."""
    if settings["large_block"] == CPSAT:
        return _cpsat_task(sub, limit, known, settings, price)
    tick = time.perf_counter()
    probe = PROBE_SECONDS if limit is None else min(limit, PROBE_SECONDS)
    first = solve_priced(sub, price, formulation=settings["formulation"],
                         solver=settings["solver"], time_limit=probe,
                         rel_gap=settings["rel_gap"],
                         threads=settings["threads"], starts=known)  # fmt: skip
    rest = None if limit is None else limit - (time.perf_counter() - tick)
    if (first[3] == SolveStatus.OPTIMAL.value or (rest is not None and rest < MIN_SOLVE)
            or price > 0.0):
        # A priced solve HiGHS did not prove ends here: the decomposition prices the block
        # by what the rest takes next (CP-SAT), which bounds what this price would, and
        # more. CP-SAT at this price took 17-30 s of YOLOv5nu's first round at 500 ns.
        return (*first[:3], f"{first[3]} (HiGHS)")
    second = _cpsat_task(sub, rest, [first[0], *known], settings, price)
    schedule = min(first[0], second[0], key=lambda s: priced_makespan(sub, s, price))
    return schedule, max(first[1], second[1]), second[2], second[3]


def _cpsat_task(
    sub: CimInstance, limit: float | None, known: list[CimSchedule],
    settings: dict[str, Any], price: float | CrossbarCost,
) -> BlockOutcome:  # fmt: skip
    """A priced solve of a block by CP-SAT, with its own workers
    (:data:`CPSAT_BLOCK_WORKERS` unless the caller set them); the status says so."""
    schedule, bound, size, status = solve_priced(
        sub, price, solver="cpsat", time_limit=limit, rel_gap=settings["rel_gap"],
        threads=settings["cpsat_threads"], starts=known)  # fmt: skip
    return schedule, bound, size, f"{status} ({CPSAT})"


def block_task(
    solve_fn: Callable[..., Any],
    sub: CimInstance,
    limit: float | None,
    known: list[CimSchedule],
    settings: dict[str, Any],
    price: float | CrossbarCost | None = None,
    finish_by: float | None = None,
) -> BlockOutcome:
    """One block solve (picklable: a worker process runs it): its schedule, its bound,
    the model size and the status; a limit below the least worth starting is no solve.
    ``finish_by`` (seconds since the epoch) shortens the limit to what is left when the
    solve starts: a round's solves queue for the workers, and a limit set when the round
    was handed out would let the last of them run past the deadline.
    With ``price``: a priced solve (:func:`placement.cim.priced.solve_priced`), whose
    bound is of the least makespan + what the crossbars cost (by the count, a
    :class:`~placement.cim.schedule.CrossbarCost`: by CP-SAT). Without one, a block where
    :func:`~placement.cim.priced.lazy_ordering_pays` is solved as the priced one at price
    0 (its ordering rows as violated), otherwise whole by ``solve_fn``."""
    if finish_by is not None:
        now = finish_by - time.time()
        limit = now if limit is None else min(limit, now)
    if limit is not None and limit < MIN_SOLVE:
        return best_start(sub, [("known", s) for s in known])[1], 0.0, None, NO_TIME
    if not known and len(sub.parallel_pairs) <= settings["heuristic_pairs"]:
        # few ordering decisions: the model closes faster than the heuristic runs
        known = [all_host_schedule(sub)]
    if price is None and not known:
        # The heuristic first, stopped as soon as it meets the floor: many blocks are
        # bound by their host work, and then its placement is proven without a model.
        tick = time.perf_counter()
        floor = floor_bound(sub)
        first = heuristic_schedule(sub, seconds=None if limit is None else HEURISTIC_SHARE
                                   * limit, target=floor * (1 + settings["rel_gap"]))  # fmt: skip
        if first.makespan <= floor * (1 + settings["rel_gap"]):
            return first, floor, None, "optimal"
        known = [first]
        if limit is not None:
            limit = max(limit - (time.perf_counter() - tick), MIN_SOLVE)
    if isinstance(price, CrossbarCost):  # only CP-SAT prices by the count
        return _cpsat_task(sub, limit, known, settings, price)
    if settings.get("large_block") is not None:  # _LargeBlocks planned it
        return _large_block_task(sub, limit, known, settings, price or 0.0)
    if price is None and lazy_ordering_pays(sub, settings["formulation"], settings["solver"]):
        price = 0.0  # a budget solve is the priced one at price 0 (the budget row stays)
    if price is not None:
        return solve_priced(sub, price, formulation=settings["formulation"],
                            solver=settings["solver"], time_limit=limit,
                            rel_gap=settings["rel_gap"], threads=settings["threads"],
                            starts=known)  # fmt: skip
    options = {k: v for k, v in settings.items() if k not in _BLOCK_ONLY}
    try:
        placed = solve_fn(sub, time_limit=limit, starts=known, method="monolithic", **options)
    except PlacementError:
        # A block's solver error (a claim its own decisions do not meet, a failed solve):
        # its starts stand, with no bound; the other blocks and the rounds go on.
        return best_start(sub, [("known", s) for s in known])[1], 0.0, None, BLOCK_ERROR
    schedule = placed.schedule or best_start(sub, [("known", s) for s in known])[1]
    return schedule, placed.result.best_bound or 0.0, placed.result.size, placed.result.status.value


def _started(solve_fn: Callable[..., Any]) -> int:
    """A worker's first task: unpickling ``solve_fn`` imports the pipeline it runs (most
    of a worker's start); its process id."""
    return os.getpid()


def _on_dask(
    client: Any,
    solve_fn: Callable[..., Any],
    jobs: list[_Job],
    finish_by: float | None,
) -> list[BlockOutcome]:
    """A round's block solves on a Dask cluster, results in order; the round's tasks are
    cancelled when this process is interrupted or one of them fails."""
    futures = [client.submit(block_task, solve_fn, sub, limit, known, settings, price,
                             finish_by, pure=False)
               for sub, limit, known, price, settings in jobs]  # fmt: skip
    try:
        return client.gather(futures)
    except BaseException as exc:
        client.cancel(futures)
        if not isinstance(exc, Exception) or isinstance(exc, PlacementError):
            raise
        hint = ("; the Dask workers need the placement package installed"
                if isinstance(exc, ImportError) else "")  # fmt: skip
        raise PlacementError(
            f"a block solve failed on the Dask cluster: {type(exc).__name__}: {exc}{hint}"
        ) from None


def solve_decomposed(
    instance: CimInstance,
    solve_fn: Callable[..., Any],
    *,
    formulation: str,
    solver: str,
    options: SolveOptions,
    deadline: Deadline,
    starts: Sequence[tuple[str, CimSchedule]],
    blocks_and_cuts: Any,
    warm_start: bool | None,
    progress: Callable[[str], None] | None,
    workers: int = 1,
    client: Any = None,
    heuristic_pairs: int = 0,
    hand_over: Callable[[float, float], bool] | None = None,
    cpsat_blocks: bool = False,
) -> tuple[SolveResult, CimSchedule]:
    """The decomposition with each block solved by ``solve_fn`` (the pipeline), whole;
    the result against the best start, with the certified bound. A round's block solves
    run on the Dask cluster of ``client`` (a ``distributed.Client``) if given, else in
    ``workers`` local processes when more than one. A block with at most
    ``heuristic_pairs`` parallel pairs is first solved from the everything-on-host
    placement, a larger one from the heuristic's (which stops at the block's floor: then
    proven without a model). ``hand_over(best, bound)`` is asked before each round whether
    to stop for another method (:func:`~placement.cim.decompose.decompose`).
    ``cpsat_blocks``: a block where :func:`~placement.cim.priced.cpsat_pays` may be solved
    by CP-SAT, at a budget and priced, as :class:`_LargeBlocks` chooses, and in closing
    rounds priced by what the rest takes (the solver was left to choose)."""
    reserve = end_reserve(instance)
    sizes: list[ModelSize] = []
    statuses: dict[str, int] = {}
    alone = workers == 1 and client is None
    threads = options.threads if options.threads is not None or alone else 1
    settings = {"formulation": formulation, "solver": solver, "rel_gap": options.rel_gap,
                "threads": threads, "warm_start": warm_start,
                "heuristic_pairs": heuristic_pairs,
                "cpsat_threads": options.threads or CPSAT_BLOCK_WORKERS}

    large = _LargeBlocks(cpsat_blocks)

    def planned(jobs: list[tuple[CimInstance, float | None, list[CimSchedule],
                                 float | CrossbarCost | None]]) -> list[_Job]:  # fmt: skip
        return [(sub, limit, known, price, large.plan(sub, settings))
                for sub, limit, known, price in jobs]

    def keep(job: _Job, outcome: BlockOutcome) -> tuple[CimSchedule, float]:
        schedule, bound, size, status = outcome
        if size is not None:
            sizes.append(size)
        statuses[status] = statuses.get(status, 0) + 1
        if not isinstance(job[3], CrossbarCost):  # CP-SAT alone: it compares nothing
            large.learn(job[0], job[4], status)
        return schedule, bound

    def solve_block(sub: CimInstance, limit: float | None, known: list[CimSchedule],
                    price: float | CrossbarCost | None):  # fmt: skip
        job = planned([(sub, limit, known, price)])[0]
        sub, limit, known, price, job_settings = job
        return keep(job, block_task(solve_fn, sub, limit, known, job_settings, price))

    def left() -> float | None:
        now = deadline.left()
        return None if now is None else max(now - reserve, 0.0)

    def finish_by() -> float | None:  # wall clock, as Dask hosts' clocks agree (NTP)
        now = left()
        return None if now is None else time.time() + now

    monitor = options.monitor
    phases = Phases(monitor)
    phases.start("decomposition")
    tick = time.perf_counter()
    with ExitStack() as stack:
        solve_batch = None
        parallel = 1
        ready = None
        pooled = [0]  # block solves handed to worker processes or the Dask cluster
        if client is not None:
            parallel = cluster_threads(client)

            def solve_batch(jobs):
                pooled[0] += len(jobs)
                ready_jobs = planned(jobs)
                return [keep(j, o) for j, o in zip(ready_jobs, _on_dask(
                    client, solve_fn, ready_jobs, finish_by()), strict=True)]

        elif workers > 1:
            parallel = workers
            pool: Any = None
            starting: list[Any] = []

            def ready() -> bool:
                # Whether the workers have started. They are started once the
                # decomposition has run for WORKERS_AFTER seconds (at once, and waited
                # for, when it is 0), while this process goes on solving, and killed at
                # the end if they are still starting.
                nonlocal pool
                if pool is None:
                    if time.perf_counter() - tick < WORKERS_AFTER:
                        return False
                    pool = stack.enter_context(process_pool(workers))
                    starting.extend(pool.submit(_started, solve_fn) for _ in range(workers))
                    stack.callback(lambda: None if ready() else stop_pool(pool))
                    if WORKERS_AFTER <= 0.0:
                        wait(starting)
                return all(f.done() for f in starting)

            def solve_batch(jobs):
                try:
                    end = finish_by()
                    ready_jobs = planned(jobs)
                    futures = [pool.submit(block_task, solve_fn, sub, limit, known,
                                           job_settings, price, end)
                               for sub, limit, known, price, job_settings in ready_jobs]
                    pooled[0] += len(jobs)
                    return [keep(j, f.result()) for j, f in zip(ready_jobs, futures,
                                                                strict=True)]
                except BrokenProcessPool as exc:
                    raise PlacementError(
                        f"a worker process solving blocks ended abruptly ({exc}); a script"
                        " that solves with workers > 1 must start from an"
                        " `if __name__ == \"__main__\":` block (worker processes are"
                        " spawned and import the script again)"
                    ) from None

        done: Decomposed = decompose(
            instance, solve_block, rel_gap=options.rel_gap, left=left,
            blocks_and_cuts=blocks_and_cuts, progress=progress,
            bounds=None if monitor is None else monitor.improved,
            solve_batch=solve_batch, parallel=parallel, hand_over=hand_over, ready=ready,
            by_rest=large.highs_missed if cpsat_blocks else None,
        )  # fmt: skip
    seconds = time.perf_counter() - tick
    phases.ran("decomposition", seconds)
    # The combination is never slower than everything on the host (one of the
    # combinations); only a given start can beat it.
    origin, schedule = "decomposition", done.schedule
    if starts:
        other, start = best_start(instance, starts)
        if start.makespan < schedule.makespan:
            origin, schedule = other, start
    makespan = schedule.makespan
    bound = min(done.lower_bound, makespan)
    gap = gap_to_lower_bound(makespan, bound)
    status = SolveStatus.OPTIMAL if gap <= options.rel_gap else SolveStatus.TIME_LIMIT
    where = ""
    if client is not None:
        where = f" on the Dask cluster at {client.scheduler.address} ({parallel} threads)"
    elif workers > 1:
        where = f" ({pooled[0]} of them in {workers} worker processes)"
    by_cpsat = sum(n for status, n in statuses.items() if status.endswith(f"({CPSAT})"))
    if by_cpsat:
        where += f"; CP-SAT ended {by_cpsat} of them"
    notes = [f"decomposed into {done.blocks} blocks at {done.cuts} cut operators,"
             f" {done.solves} block solves in {done.rounds} rounds{where}"]  # fmt: skip
    if status != SolveStatus.OPTIMAL:
        notes.append(f"stopped: {done.ended}")
    if origin != "decomposition":
        notes.append(f"{origin} schedule reported (better than the combination)")
    size = ModelSize(sum(s.variables for s in sizes), sum(s.binaries for s in sizes),
                     sum(s.constraints for s in sizes))  # fmt: skip
    extra = options.recorded() | done.to_json() | {
        "formulation": formulation, "block_statuses": statuses, "start_from": origin,
        "workers": parallel if client is None else 1, "block_solves_in_workers": pooled[0],
        "block_solves_by_cpsat": by_cpsat,
        "scheduler": None if client is None else client.scheduler.address,
        "phases": phases.records,
    }  # fmt: skip
    result = SolveResult(
        status=status, solver=solver, objective=makespan, best_bound=bound, gap=gap,
        build_seconds=0.0, solve_seconds=seconds, size=size, message="; ".join(notes),
        options=extra,
    )  # fmt: skip
    return result, schedule
