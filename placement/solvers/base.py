"""The one result type every solve returns."""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field


class SolveStatus(str, enum.Enum):
    OPTIMAL = "optimal"  # proven optimal within the requested relative gap
    TIME_LIMIT = "time_limit"  # stopped by the limit with an incumbent; see gap
    TIME_LIMIT_NO_SOLUTION = "time_limit_no_solution"
    INFEASIBLE = "infeasible"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT)


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
