"""The names of the solver backends, without importing any of them (the command line's
parser and ``placement --help`` read these; :mod:`placement.solvers.registry` maps them to
the backends)."""

from __future__ import annotations

#: Backends that solve a Pyomo (MIP) model, in the order they are listed to users.
MIP_BACKENDS: tuple[str, ...] = ("highs", "scip", "cbc", "gurobi")
#: What a CIM solve's ``solver=`` accepts (``cpsat+highs``: CP-SAT's placement, then HiGHS).
SOLVERS: tuple[str, ...] = ("auto", "highs", "cpsat+highs", "cpsat", "scip", "cbc", "gurobi")
#: The CIM model's formulations (:data:`placement.models.cim_makespan.build.FORMULATIONS`' keys).
FORMULATION_NAMES: tuple[str, ...] = ("faithful", "bounded", "tightened")
