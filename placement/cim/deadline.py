"""The deadline of a CIM solve and its phases: how ``--time-limit`` is shared between the
heuristic, CP-SAT and the MIP, and the record of what ran (``options["phases"]``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from placement.cim.instance import CimInstance
from placement.solvers.base import SolveMonitor


@dataclass
class Deadline:
    """``--time-limit`` as one deadline for the whole solve: preprocessing, heuristic, every
    solver phase, extraction and verification (``limit`` None: no deadline)."""

    limit: float | None
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def left(self) -> float | None:
        """Seconds left (never negative), None without a limit."""
        return None if self.limit is None else max(self.limit - self.elapsed(), 0.0)

    def share(self, fraction: float) -> float | None:
        """``fraction`` of the time left, None without a limit."""
        left = self.left()
        return None if left is None else fraction * left


#: Shares of the time left: the heuristic; CP-SAT's half of cpsat+highs.
HEURISTIC_SHARE = 0.25
CPSAT_SHARE = 0.5
#: Least solver time worth starting a phase for, in seconds.
MIN_SOLVE = 0.2
#: Seconds to start the CP-SAT worker interpreter and hand it the model (an allowance; the
#: measurement behind it is in benchmarks/README.md).
WORKER_START = 0.5
#: A conservative rate at which Pyomo builds rows (benchmarks/README.md); used to skip a MIP
#: that could not even be built in time.
ROWS_PER_SECOND = 15_000.0


def phase_limit(seconds: float) -> float:
    """A solver phase's time limit from the time left: whole seconds (rounded down) above
    two, so that a long limit is the same number at every point (solvers are deterministic
    for the same limit; a limit that differs in its last digits can change their result
    in its last bits), tenths below; never under the least worth starting for."""
    limit = math.floor(seconds) if seconds >= 2.0 else math.floor(seconds * 10) / 10
    return max(limit, MIN_SOLVE)


def end_reserve(instance: CimInstance) -> float:
    """Seconds kept back for extraction, re-timing and verification (linear in size; a
    decomposed 10,000-operator fork-join graph, ``fork_join(10000, 2)`` of
    benchmarks/cim_scale.py, spent 0.56-0.64 s of wall time outside its solve phase on
    this 2-core VM at load 0.7-1.0, and ~1.1 s in an earlier run at load 1.5: 1.2 s are
    kept for its 22,000 operators and edges)."""
    return 0.1 + 5e-5 * (len(instance.operators) + len(instance.edges))


def build_estimate(instance: CimInstance) -> float:
    """Seconds to build the Pyomo model (big-M rows of the parallel pairs dominate)."""
    rows = 2 * len(instance.parallel_pairs) + 3 * len(instance.edges) + 4 * len(instance.operators)
    return rows / ROWS_PER_SECOND


class Phases:
    """What a solve did, in order: each phase's seconds, or why it was skipped; each phase
    announced to the solve's monitor as it starts."""

    def __init__(self, monitor: SolveMonitor | None = None) -> None:
        self.records: list[dict[str, object]] = []
        self.monitor = monitor

    def start(self, name: str, incumbent: float | None = None) -> None:
        """Phase ``name`` starts (a label for people); ``incumbent``: the best makespan
        known when it does (seconds)."""
        if self.monitor is not None:
            self.monitor.phase(name)
            if incumbent is not None:
                self.monitor.improved(incumbent, None)

    def ran(self, phase: str, seconds: float) -> None:
        self.records.append({"phase": phase, "seconds": seconds})

    def skipped(self, phase: str, why: str) -> None:
        self.records.append({"phase": phase, "skipped": why})
