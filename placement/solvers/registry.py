"""Every solver backend by name; which ones are usable on this machine.

==========  ==========================================================================
``highs``   :mod:`placement.solvers.highs` (contrib ``highs``), the default
``scip``    :mod:`placement.solvers.scip` (contrib ``scip_direct``, needs ``pyscipopt``)
``cbc``     :mod:`placement.solvers.cbc` (legacy shell interface, needs ``cbc``)
``gurobi``  :mod:`placement.solvers.gurobi` (contrib ``gurobi_direct``, needs ``gurobipy``)
``cpsat``   :mod:`placement.solvers.cpsat` (OR-Tools CP-SAT in a worker process; it
            solves CP-SAT models, not Pyomo models)
==========  ==========================================================================
"""

from __future__ import annotations

from placement.errors import PlacementError
from placement.solvers.base import Backend
from placement.solvers.cbc import CbcBackend
from placement.solvers.cpsat import CpSatBackend
from placement.solvers.gurobi import GurobiBackend
from placement.solvers.highs import HighsBackend
from placement.solvers.names import MIP_BACKENDS
from placement.solvers.scip import ScipBackend

BACKENDS: dict[str, Backend] = {
    b.name: b for b in (HighsBackend(), ScipBackend(), CbcBackend(), GurobiBackend(),
                        CpSatBackend())
}


def get_backend(name: str, *, mip: bool = False) -> Backend:
    """The backend called ``name``; ``mip=True`` admits only those that take a Pyomo model."""
    known = MIP_BACKENDS if mip else tuple(BACKENDS)
    if name not in known:
        raise PlacementError(f"unknown solver {name!r}; known: {', '.join(known)}")
    return BACKENDS[name]


def unavailable_reasons(names: tuple[str, ...] = MIP_BACKENDS) -> dict[str, str | None]:
    """Per backend: None when usable here, else why not (and how to install it)."""
    return {name: get_backend(name).unavailable_reason() for name in names}
