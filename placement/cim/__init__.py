"""The CPU + CIM target: operators of an ONNX graph on the host or on crossbars.

Modules: ``instance`` (the ILP's data, built from a graph, a host profile and a CIM
spec), ``schedule`` (a placement as a schedule; earliest-start timing), ``heuristic``
(list scheduling), ``verify`` (independent checks), ``cpsat`` (the CP-SAT route),
``solve`` (the one pipeline), ``report`` (terminal and JSON output). The functions
below are the public API; the Pyomo model itself is ``placement.models.cim``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placement.cim.heuristic import heuristic_schedule
from placement.cim.instance import CimEdge, CimInstance, CimOperator, cim_instance
from placement.cim.schedule import CimSchedule, asap_schedule
from placement.cim.solve import FORMULATION_CHOICES, SOLVERS, CimPlacement, build_model, solve
from placement.cim.verify import Verification, verify_cim
from placement.errors import PlacementError
from placement.graph import OpGraph
from placement.hardware.cim import CimSpec, Hardware

__all__ = [
    "FORMULATION_CHOICES", "SOLVERS", "CimEdge", "CimInstance", "CimOperator", "CimPlacement",
    "CimSchedule", "Verification", "asap_schedule", "build_model", "heuristic", "instance",
    "solve", "verify",
]  # fmt: skip


def instance(
    graph: OpGraph, profile: Any, hardware: Hardware | CimSpec
) -> CimInstance:
    """The ILP's data: ``graph``'s operators with host latencies from ``profile`` (a host
    profile of this very model, or a mapping operator -> seconds) on ``hardware``.

    Hardware whose host sets ``latency = "model"`` (e.g. preset ``arm-a72-model``) takes
    the host latencies from the analytical host model, an estimate; ``profile`` may then
    be None and is not used."""
    latencies: Mapping[str, float] | None
    host = hardware.host if isinstance(hardware, Hardware) else None
    if profile is None or (host is not None and host.modelled):
        latencies = None
    elif isinstance(profile, Mapping):
        latencies = profile
    else:
        if not hasattr(profile, "latencies"):
            raise PlacementError(
                f"a host profile or a mapping of operator latencies, not {type(profile).__name__}"
            )
        profile.check_matches(graph.sha256, graph.path)
        latencies = profile.latencies
    spec = hardware.cim if isinstance(hardware, Hardware) else hardware
    return cim_instance(graph, latencies, spec, host=host)


heuristic = heuristic_schedule
verify = verify_cim
