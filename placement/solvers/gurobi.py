"""Gurobi through Pyomo's ``gurobi_direct`` interface (needs ``gurobipy`` and ``scipy``).

The pip wheel carries a size-limited licence (2,000 variables / 2,000 rows). A model
it refuses is not a failure of ours: the result is ``SolveStatus.ERROR`` with
``options["licence_limit"] = True`` and a message starting with :data:`LICENCE_LIMIT`
(``placement bench`` shows it as its own status).
"""

from __future__ import annotations

from placement.solvers.base import SolveResult, SolveStatus
from placement.solvers.contrib import ResultBuilder, contrib_solver
from placement.solvers.scip import ScipBackend

LICENCE_LIMIT = "licence limit"
_SIZE_LIMIT_ERRNO = 10010  # GurobiError code: "Model too large for size-limited license"


class GurobiBackend(ScipBackend):
    name = "gurobi"
    label = "Gurobi"
    interface = "gurobi_direct"
    install = "pip install gurobipy (the pip wheel has a size-limited licence)"

    def unavailable_reason(self) -> str | None:
        """Also without scipy: ``gurobi_direct`` hands Gurobi the model through Pyomo's
        standard-form compiler, which needs ``scipy.sparse``. Without it every solve fails,
        the first with that reason and the later ones with "'NoneType' object is not
        callable" (Pyomo's deferred import), so it is refused up front."""
        reason = super().unavailable_reason()
        if reason is None and not scipy_available():
            return (
                f"{self.name} is not available: Pyomo's gurobi_direct needs scipy (its"
                " standard-form compiler): pip install scipy, or pip install -e '.[solvers]'"
            )
        return reason

    def record_options(self, options: dict[str, object]) -> None:
        options["licence"] = licence()

    def failure(self, exc: Exception, result: ResultBuilder) -> SolveResult:
        if getattr(exc, "errno", None) == _SIZE_LIMIT_ERRNO:
            result.options["licence_limit"] = True
            size = result.size
            return result(
                SolveStatus.ERROR,
                result.elapsed(),
                f"{LICENCE_LIMIT}: Gurobi's size-limited licence refuses this model"
                f" ({size.variables} variables, {size.constraints} rows)",
            )
        return super().failure(exc, result)


def scipy_available() -> bool:
    """Whether ``scipy.sparse`` imports (as Pyomo's standard-form compiler imports it)."""
    from pyomo.common.dependencies import scipy_available as available

    return bool(available)


def licence() -> str | None:
    """'LimitedLicense' / 'FullLicense' when gurobipy is usable, else None."""
    try:
        avail = contrib_solver(GurobiBackend.interface).available()
    except Exception:
        return None
    return avail.name if avail else None
