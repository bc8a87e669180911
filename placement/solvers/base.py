"""What every solver backend shares: the options going in and the one result coming out.

A backend (``placement.solvers.highs``, ``scip``, ``cbc``, ``gurobi``, ``cpsat``) solves
a model it is given and nothing else: it knows no formulation. It returns a
:class:`SolveResult` whose objective and bound are in the model's own units, and it
loads the solution into the model (Pyomo variables, or ``CpSatModel.solution``). Its
status is OPTIMAL only when the solver itself proved optimality; the status mapping is
written once per backend, the reaction to it once (``placement.models.common``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol, TextIO

from placement.errors import PlacementError


class SolveStatus(str, enum.Enum):
    OPTIMAL = "optimal"  # proven optimal within the requested relative gap
    TIME_LIMIT = "time_limit"  # stopped by the limit with an incumbent; see gap
    TIME_LIMIT_NO_SOLUTION = "time_limit_no_solution"
    INFEASIBLE = "infeasible"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT)


#: The relative MIP gap at which a solve may stop, CIM and PIM alike (HiGHS's own default).
DEFAULT_REL_GAP = 1e-4


@dataclass
class ModelSize:
    variables: int
    binaries: int
    constraints: int


@dataclass
class SolveResult:
    """Outcome of one solver run on one model, independent of what the model means."""

    status: SolveStatus
    solver: str
    objective: float | None  # incumbent objective, None without a solution
    best_bound: float | None
    gap: float | None  # relative: (incumbent - bound) / |incumbent|
    build_seconds: float
    solve_seconds: float
    size: ModelSize
    message: str = ""  # solver's own words when status is ERROR/INFEASIBLE or unusual
    options: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict:
        data = asdict(self)
        data["status"] = self.status.value
        return data


class SolveMonitor(Protocol):
    """Who watches a solve while it runs (``placement solve``'s progress line).

    A backend that can (HiGHS, CP-SAT) calls :meth:`improved` from its solver's callbacks
    as the incumbent or the bound improves, in the model's units (the pipeline converts:
    :func:`in_units`); the pipeline calls :meth:`phase` as each phase starts. Either call
    may come from another thread, and must return at once: it runs inside the solve.
    """

    def phase(self, name: str) -> None: ...

    def improved(self, incumbent: float | None, bound: float | None) -> None:
        """A new incumbent objective and/or bound (None: not known, or unchanged)."""
        ...


@dataclass(frozen=True)
class SolveOptions:
    """What the caller asks of any backend; validated by :meth:`check`."""

    time_limit: float | None = None  # seconds, None: no limit
    rel_gap: float = DEFAULT_REL_GAP  # relative MIP gap at which the solver may stop
    threads: int | None = None  # None: the solver's default
    tee: bool | list[TextIO] = False  # True: the solver's log on stdout; or these streams
    monitor: SolveMonitor | None = field(default=None, compare=False, repr=False)

    def check(self) -> None:
        """One-line errors for values no solver can take."""
        t = self.time_limit
        if t is not None and not (isinstance(t, (int, float)) and t > 0 and math.isfinite(t)):
            raise PlacementError(f"time limit must be a positive number of seconds, got {t!r}")
        g = self.rel_gap
        if not (isinstance(g, (int, float)) and g >= 0 and math.isfinite(g)):
            raise PlacementError(f"relative gap must be a non-negative number, got {g!r}")
        n = self.threads
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise PlacementError(f"solver threads must be a positive integer, got {n!r}")

    def recorded(self) -> dict[str, object]:
        """The options as a result records them (``SolveResult.options``)."""
        return {"time_limit": self.time_limit, "rel_gap": self.rel_gap, "threads": self.threads}


@dataclass(frozen=True)
class _Scaled:
    """A monitor that receives model units and passes seconds on."""

    inner: SolveMonitor
    unit: float

    def phase(self, name: str) -> None:
        self.inner.phase(name)

    def improved(self, incumbent: float | None, bound: float | None) -> None:
        self.inner.improved(None if incumbent is None else incumbent * self.unit,
                            None if bound is None else bound * self.unit)  # fmt: skip


def in_units(options: SolveOptions, unit: float) -> SolveOptions:
    """``options`` for a model whose objective is in ``unit`` seconds: its monitor gets
    the backend's values converted to seconds."""
    if options.monitor is None:
        return options
    return replace(options, monitor=_Scaled(options.monitor, unit))


class SolverError(PlacementError):
    """A backend ended in ERROR; ``result`` keeps what it reported (status, size, message)."""

    def __init__(self, message: str, result: SolveResult) -> None:
        super().__init__(message)
        self.result = result


class Backend(Protocol):
    """One solver behind one interface (``placement.solvers.registry`` lists them)."""

    name: str  # as on the command line: "highs", "scip", ...
    label: str  # as in messages: "HiGHS", "SCIP", ...

    def unavailable_reason(self) -> str | None:
        """None when usable here, else why not and how to install it."""
        ...

    def available(self) -> bool: ...

    def solve(
        self, model: Any, options: SolveOptions, *, start: Mapping[Any, float] | None = None
    ) -> SolveResult:
        """Solve ``model``; load the incumbent into it when there is one."""
        ...


class BackendBase:
    """What every backend shares: ``available()`` and the checks before a solve."""

    name = ""
    label = ""

    def unavailable_reason(self) -> str | None:
        raise NotImplementedError

    def available(self) -> bool:
        return self.unavailable_reason() is None

    def check_ready(self, options: SolveOptions) -> None:
        """Valid options and an installed solver, or a one-line error."""
        options.check()
        reason = self.unavailable_reason()
        if reason is not None:
            raise PlacementError(reason)


def relative_gap(incumbent: float | None, bound: float | None) -> float | None:
    """|incumbent - bound| / |incumbent|; None when undefined."""
    if incumbent is None or bound is None:
        return None
    diff = abs(incumbent - bound)
    if incumbent == 0.0:
        return 0.0 if diff <= 1e-12 else None
    return diff / abs(incumbent)


def gap_to_lower_bound(incumbent: float, bound: float) -> float:
    """(incumbent - bound) / incumbent of a minimization whose ``bound`` is a valid lower
    bound: 0 where the bound reaches the incumbent (or passes it by rounding) and for a
    zero incumbent."""
    return max(incumbent - bound, 0.0) / incumbent if incumbent > 0 else 0.0


def finite_or_none(value: float | None) -> float | None:
    """A solver's bound or objective, None when it is missing or infinite."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)
