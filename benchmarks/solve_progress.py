"""What `placement solve`'s progress line costs: the same solve with and without it.

    python benchmarks/solve_progress.py [--ops 150] [--budget 30] [--runs 5] [--solvers highs,cpsat]

One synthetic branched instance (``dense_branched_instance`` of cim_formulations.py, as
many parallel pairs per operator as YOLOv5n) solved to proven optimality with the
tightened formulation, one solver thread, no time limit that binds: the wall time of
``placement.cim.pipeline`` with a ``SolveProgress`` monitor (terminal mode, redrawn twice a
second into /dev/null: the most work the line does) and without, alternated, ``--runs``
of each. Prints every run, then per solver the medians side by side, the number of
progress callbacks the monitor received, and the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cim_formulations import dense_branched_instance  # noqa: E402

from placement.cim.pipeline import solve  # noqa: E402
from placement.cli.progress import SolveProgress  # noqa: E402


class Counting(SolveProgress):
    """The real progress line, counting the solver's callbacks."""

    calls = 0

    def improved(self, incumbent: float | None, bound: float | None) -> None:
        self.calls += 1
        super().improved(incumbent, bound)


def one(
    instance, solver: str, with_progress: bool, limit: float
) -> tuple[float, float, int, float]:
    """(wall seconds, makespan, callbacks, the solver's own seconds) of one solve."""
    kwargs = dict(formulation="tightened", solver=solver, time_limit=limit, threads=1,
                  method="monolithic")  # fmt: skip
    tick = time.perf_counter()
    if with_progress:
        with open(os.devnull, "w") as sink, Counting(limit, stream=sink, tty=True) as monitor:
            placed = solve(instance, monitor=monitor, **kwargs)
        calls = monitor.calls
    else:
        placed, calls = solve(instance, **kwargs), 0
    seconds = time.perf_counter() - tick
    assert placed.result.status.value == "optimal", placed.result.status
    return seconds, placed.schedule.makespan, calls, placed.result.solve_seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=150)
    ap.add_argument("--budget", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--solvers", default="highs,cpsat")
    ap.add_argument("--time-limit", type=float, default=600.0)
    args = ap.parse_args()
    instance = dense_branched_instance(args.ops, seed=args.seed, budget=args.budget)
    print(f"instance: {len(instance.operators)} operators, {len(instance.parallel_pairs)}"
          f" parallel pairs, budget {args.budget}; load average {os.getloadavg()}")  # fmt: skip
    for solver in args.solvers.split(","):
        times: dict[bool, list[float]] = {False: [], True: []}
        inner: dict[bool, list[float]] = {False: [], True: []}
        makespans, calls = set(), []
        for i in range(args.runs):
            for with_progress in ((False, True) if i % 2 == 0 else (True, False)):
                seconds, makespan, n, own = one(instance, solver, with_progress, args.time_limit)
                times[with_progress].append(seconds)
                inner[with_progress].append(own)
                makespans.add(round(makespan, 12))
                if with_progress:
                    calls.append(n)
                print(f"  {solver} run {i + 1} {'with' if with_progress else 'without'}"
                      f" progress: {seconds:.2f} s (solver {own:.2f} s), makespan {makespan:.9g} s"
                      + (f", {n} callbacks" if with_progress else ""), flush=True)  # fmt: skip
        off, on = statistics.median(times[False]), statistics.median(times[True])
        own_off, own_on = statistics.median(inner[False]), statistics.median(inner[True])
        print(f"{solver}: median {off:.2f} s without, {on:.2f} s with progress"
              f" ({100 * (on - off) / off:+.1f} %); the solver's own time {own_off:.2f} s"
              f" without, {own_on:.2f} s with ({100 * (own_on - own_off) / own_off:+.1f} %);"
              f" callbacks per solve"
              f" {statistics.median(calls):.0f}; makespans {sorted(makespans)};"
              f" load average {os.getloadavg()}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
