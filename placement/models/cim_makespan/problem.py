"""What the CIM models read from an instance, stated as protocols.

The model library sits below the CIM pipeline (``placement.cim``) and must not import
it; :class:`placement.cim.instance.CimInstance` (operators, edges, budget) and
:class:`placement.cim.schedule.CimSchedule` satisfy these protocols, and so does any
hand-made object with the same attributes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

import networkx as nx


class CimOperatorData(Protocol):
    name: str
    t_host: float  # seconds
    t_acc: float | None  # seconds; None: not supported by the accelerator
    crossbars: int

    @property
    def supported(self) -> bool: ...


class CimEdgeData(Protocol):
    src: str
    dst: str
    t_transfer: float  # seconds, paid only between devices


class CimProblem(Protocol):
    """The numbers of the paper's ILP (Section IV-B), times in seconds."""

    @property
    def operators(self) -> Sequence[CimOperatorData]: ...

    @property
    def edges(self) -> Sequence[CimEdgeData]: ...

    @property
    def crossbar_budget(self) -> int: ...

    @property
    def graph(self) -> nx.DiGraph: ...

    @property
    def by_name(self) -> Mapping[str, CimOperatorData]: ...

    @property
    def parallel_pairs(self) -> Sequence[tuple[str, str]]: ...

    @property
    def sinks(self) -> Sequence[str]: ...


class ScheduleData(Protocol):
    """A feasible schedule, in seconds (for MIP starts)."""

    on_host: Mapping[str, bool]
    start: Mapping[str, float]
    finish: Mapping[str, float]

    @property
    def host_order(self) -> Sequence[str]: ...


class ScheduleValues(NamedTuple):
    """A schedule read back from a solved model, in seconds."""

    on_host: dict[str, bool]
    start: dict[str, float]
    finish: dict[str, float]
    makespan: float
