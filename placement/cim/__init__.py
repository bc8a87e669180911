"""The CPU + CIM target: operators of an ONNX graph on the host or on crossbars.

Modules: ``instance`` (the ILP's data, built from a graph, a host profile and a CIM
spec), ``schedule`` (a placement as a schedule; earliest-start timing),
``list_scheduling`` (the heuristic), ``verifier`` (independent checks), ``cpsat_route``
(the CP-SAT route), ``pipeline`` (the one solve pipeline), ``energy`` (a placement's
energy, part by part), ``stream`` (a pipelined stream of frames: period, modulo schedule,
simulation), ``objectives`` (other objectives than latency, bounds, lexicographic
stages), ``pareto`` (Pareto fronts), ``output`` (terminal and JSON output). The functions
below are the public API; the Pyomo model itself is ``placement.models.cim_makespan``.
"""

from __future__ import annotations

from placement.cim.instance import (
    CimEdge,
    CimInstance,
    CimOperator,
    build_instance,
)
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.objectives import Objective, ObjectivePlacement, build_model, solve
from placement.cim.pareto import Front, pareto_front
from placement.cim.pipeline import (
    FORMULATION_CHOICES,
    SOLVERS,
    CimPlacement,
)
from placement.cim.schedule import CimSchedule, asap_schedule
from placement.cim.verifier import CimVerification, verify_cim

__all__ = [
    "FORMULATION_CHOICES", "SOLVERS", "CimEdge", "CimInstance", "CimOperator", "CimPlacement",
    "CimSchedule", "CimVerification", "Front", "Objective", "ObjectivePlacement",
    "asap_schedule", "build_instance", "build_model", "heuristic", "pareto_front", "solve",
    "verify",
]  # fmt: skip

heuristic = heuristic_schedule
verify = verify_cim
