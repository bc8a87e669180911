"""Plain data that the CIM makespan model is built from.

A :class:`CimInstance` holds exactly the numbers of the paper's ILP
(Section IV-B): per operator the host latency ``T_host,v``, the accelerator
latency ``T_acc,v`` (``None`` when the operator is not in ``V_acc``) and its
crossbar count ``N_crossbar,v``; per data edge the transfer latency
``T_transfer,(u,v)``; and the crossbar budget ``C``. The class knows nothing about
ONNX, profiling or hardware files, so models, solvers, verifiers and oracles
can be tested on hand-made instances. All times are in seconds.

Energies (the model of :mod:`placement.devices.cim_energy`, not the paper's), all in
joules, present together or not at all (:attr:`CimInstance.has_energy`): per operator
``e_host`` (E5) and, for CIM-capable ones, ``e_mvm`` (E1) and ``e_internal`` (E2); per
edge ``e_transfer`` (E3); the accelerator's static power ``p_static`` (E4, watts).

:func:`cim_instance` is where the three sources of numbers meet (:func:`build_instance`,
the public ``cim.build_instance``, takes them from a profile and a hardware description):
host latencies (``T_host,v``: measured by ONNX Runtime, or estimated by the analytical host model
:mod:`placement.devices.host` when the hardware's host says ``latency = "model"``), the
analytical accelerator model (``T_acc,v``, ``N_crossbar,v``) and the bus model
(``T_transfer``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx

from placement.devices.cim import accelerator_latency, crossbars_needed, transfer_latency
from placement.devices.cim_energy import (
    accelerator_energy,
    host_energy,
    static_power,
    transfer_energy,
)
from placement.devices.host import host_latencies as modelled_host_latencies
from placement.errors import PlacementError
from placement.graph import OpGraph
from placement.hardware.base import HostSpec
from placement.hardware.cim import CimSpec, Hardware
from placement.models.cim_makespan.structure import bits_of, reachability
from placement.profiling.rapl import measured_power


@dataclass(frozen=True)
class CimOperator:
    name: str
    t_host: float
    t_acc: float | None = None  # None: not supported by the accelerator (v not in V_acc)
    crossbars: int = 0  # N_crossbar,v (Eq. 1); 0 for unsupported operators
    op_type: str = ""
    e_host: float | None = None  # J on the host (E5); None: no energy model
    e_mvm: float | None = None  # J of its crossbar reads on the accelerator (E1)
    e_internal: float | None = None  # J of its loads and stores on the internal bus (E2)

    @property
    def supported(self) -> bool:
        return self.t_acc is not None

    @property
    def e_acc(self) -> float | None:
        """J on the accelerator (E1 + E2); None when unsupported or without energies."""
        if self.e_mvm is None or self.e_internal is None:
            return None
        return self.e_mvm + self.e_internal


@dataclass(frozen=True)
class CimEdge:
    src: str
    dst: str
    t_transfer: float  # paid only when src and dst are on different devices (Eq. 4, 8)
    e_transfer: float | None = None  # J, paid with the transfer (E3); None: no energy model


@dataclass(frozen=True)
class CimInstance:
    operators: tuple[CimOperator, ...]
    edges: tuple[CimEdge, ...]
    crossbar_budget: int  # C (Eq. 14)
    p_static: float | None = None  # W drawn by the accelerator over the makespan (E4)

    def __post_init__(self) -> None:
        object.__setattr__(self, "operators", tuple(self.operators))
        object.__setattr__(self, "edges", tuple(self.edges))
        self._validate()

    @classmethod
    def build(
        cls,
        operators: Iterable[CimOperator],
        edges: Iterable[CimEdge],
        crossbar_budget: int,
        p_static: float | None = None,
    ) -> CimInstance:
        return cls(tuple(operators), tuple(edges), crossbar_budget, p_static)

    def _validate(self) -> None:
        if not self.operators:
            raise PlacementError("the graph has no operators to place")
        names = [op.name for op in self.operators]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise PlacementError(f"operator name {dup!r} appears more than once")
        if not isinstance(self.crossbar_budget, int) or self.crossbar_budget < 0:
            raise PlacementError(
                f"crossbar budget must be a non-negative integer, got {self.crossbar_budget!r}"
            )
        for op in self.operators:
            _check_time(op.t_host, f"operator {op.name!r}: host latency")
            if op.t_acc is not None:
                _check_time(op.t_acc, f"operator {op.name!r}: accelerator latency")
                if not isinstance(op.crossbars, int) or op.crossbars < 0:
                    raise PlacementError(
                        f"operator {op.name!r}: crossbar count must be a non-negative integer"
                    )
        known = set(names)
        seen_edges: set[tuple[str, str]] = set()
        for e in self.edges:
            for end in (e.src, e.dst):
                if end not in known:
                    raise PlacementError(
                        f"edge {e.src!r} -> {e.dst!r} names unknown operator {end!r}"
                    )
            if e.src == e.dst:
                raise PlacementError(f"edge {e.src!r} -> {e.dst!r} is a self-loop")
            if (e.src, e.dst) in seen_edges:
                raise PlacementError(f"edge {e.src!r} -> {e.dst!r} appears more than once")
            seen_edges.add((e.src, e.dst))
            _check_time(e.t_transfer, f"edge {e.src!r} -> {e.dst!r}: transfer latency")
        self._validate_energy()
        if not nx.is_directed_acyclic_graph(self.graph):
            cycle = nx.find_cycle(self.graph)
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            raise PlacementError(f"the operator graph has a cycle: {path}")

    def _validate_energy(self) -> None:
        """Energies are all present (and non-negative) or all absent."""
        given: list[tuple[str, float | None]] = [("static power", self.p_static)]
        for op in self.operators:
            given.append((f"operator {op.name!r}: host energy", op.e_host))
            if op.supported:
                given.append((f"operator {op.name!r}: crossbar energy", op.e_mvm))
                given.append((f"operator {op.name!r}: internal-bus energy", op.e_internal))
        given += [(f"edge {e.src!r} -> {e.dst!r}: transfer energy", e.e_transfer)
                  for e in self.edges]  # fmt: skip
        missing = [what for what, value in given if value is None]
        if missing and len(missing) < len(given):
            raise PlacementError(
                f"{missing[0]} is missing: energies are given for everything or for nothing"
            )
        for what, value in given:
            if value is not None:
                _check_energy(value, what)

    @property
    def has_energy(self) -> bool:
        """True when the instance carries the energy model's numbers."""
        return self.p_static is not None

    @cached_property
    def graph(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(op.name for op in self.operators)
        g.add_edges_from((e.src, e.dst) for e in self.edges)
        return g

    @cached_property
    def by_name(self) -> dict[str, CimOperator]:
        return {op.name: op for op in self.operators}

    @cached_property
    def transfer(self) -> dict[tuple[str, str], float]:
        return {(e.src, e.dst): e.t_transfer for e in self.edges}

    @cached_property
    def sinks(self) -> list[str]:
        """Terminal operators: no successor (the set in Eq. 6)."""
        return [n for n in self.graph.nodes if self.graph.out_degree(n) == 0]

    @cached_property
    def parallel_pairs(self) -> list[tuple[str, str]]:
        """P of Eq. 10: unordered pairs not connected by a path, as (u, v) in operator order.

        Reachability as bitsets (bit i = the i-th operator): O(n^2 / 64) word operations
        plus one step per pair, not n^2 Python steps.
        """
        names = [op.name for op in self.operators]
        bit = {v: i for i, v in enumerate(names)}
        anc, desc = reachability(self.graph, list(nx.topological_sort(self.graph)), bit)
        everything = (1 << len(names)) - 1
        pairs = []
        for i, u in enumerate(names):
            later = everything & ~((1 << (i + 1)) - 1)  # operators after u
            free = later & ~(anc[u] | desc[u])
            pairs.extend((u, names[j]) for j in bits_of(free))
        return pairs

    @cached_property
    def cpu_only_latency(self) -> float:
        """Makespan with every operator on the host: the serial sum of host latencies."""
        return math.fsum(op.t_host for op in self.operators)

    @cached_property
    def transfer_total(self) -> float:
        """Every transfer latency added up (seconds)."""
        return math.fsum(e.t_transfer for e in self.edges)


def _check_energy(value: float, what: str) -> None:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PlacementError(f"{what} must be a finite non-negative number, got {value!r}")


def _check_time(value: float, what: str) -> None:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise PlacementError(
            f"{what} must be a finite non-negative number of seconds, got {value!r}"
        )


# --------------------------------------------------------------------------- from a model


def check_latencies(
    graph: OpGraph, profiled: Mapping[str, float], what: str = "the host profile"
) -> None:
    """``profiled`` must hold exactly the model's nodes: a latency for every operator, and
    none for a node the model does not have; both kinds are named in one line.

    The nodes are the original ONNX nodes (``node_names``): the operators, plus the
    nodes folded away as constants, which may be absent (their time is zero). ONNX
    Runtime's fused kernels never appear here: the profiler attributes each kernel to
    the original nodes it implements (``placement.profiling.ort.attribution``).
    """
    missing = [name for name in graph.operators if name not in profiled]
    known = set(graph.operators) | set(graph.folded)
    extra = [name for name in profiled if name not in known]
    if not missing and not extra:
        return
    problems = []
    if missing:
        problems.append(f"no latency for operator {_some(missing)} ({len(missing)} missing)")
    if extra:
        problems.append(
            f"a latency for {_some(extra)}, which the model does not have ({len(extra)} extra)"
        )
    raise PlacementError(
        f"{what} does not match the model {graph.path}: {'; '.join(problems)};"
        " re-run 'placement profile' on this model"
    )


def _some(names: list[str], shown: int = 3) -> str:
    """'a', 'b', 'c' and 2 more."""
    text = ", ".join(repr(n) for n in names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def host_latencies_for(graph: OpGraph, profiled: Mapping[str, float]) -> dict[str, float]:
    """Per-operator host latency; time of folded constant nodes goes to the operator using them.

    ONNX Runtime folds constant subgraphs too, so that time is normally zero; when
    it is not (optimizations disabled), charging it to the consumer keeps the
    per-operator sum equal to the profiled total.
    """
    check_latencies(graph, profiled)
    latency = {name: float(profiled[name]) for name in graph.operators}
    first = next(iter(graph.operators))
    for name in graph.folded:
        t = float(profiled.get(name, 0.0))
        if t > 0.0:
            latency[graph.folded_consumers.get(name, first)] += t
    return latency


def cim_instance(
    graph: OpGraph,
    profiled: Mapping[str, float] | None,
    spec: CimSpec,
    host: HostSpec | None = None,
    *,
    host_power: float | None = None,
) -> CimInstance:
    """Build the ILP's data. Raises if the budget cannot hold any CIM-capable operator.

    ``T_host,v`` comes from ``profiled`` (measured latencies per operator), unless
    ``host`` (the hardware's host) says ``latency = "model"``: then from the analytical
    host model, and ``profiled`` is not used (it may be None).

    Energies (:mod:`placement.devices.cim_energy`) when ``spec`` has the energy model's
    constants and a host power is known: ``host_power`` (watts, e.g. measured with RAPL
    while profiling), else the host's ``active_power_w``.
    """
    if host is not None and host.modelled:
        assert host.model is not None  # HostSpec parsing guarantees it
        t_host = modelled_host_latencies(graph, host.model)
    elif profiled is None:
        raise PlacementError(
            "no host latencies: measure a profile ('placement profile'), or use hardware whose"
            ' host sets latency = "model" (e.g. preset arm-a72-model) for modelled ones'
        )
    else:
        t_host = host_latencies_for(graph, profiled)
    power = host_power if host_power is not None else (host.active_power if host else None)
    energy = spec.energy if power is not None else None
    operators = []
    for name, op in graph.operators.items():
        e_host = None if energy is None else host_energy(t_host[name], power)
        if op.cim is None:
            operators.append(CimOperator(name, t_host[name], None, 0, op.op_type, e_host))
            continue
        t_acc = accelerator_latency(op.cim.n_mvm, op.n_in, op.n_out, spec).total
        xbars = crossbars_needed(op.cim.rows, op.cim.cols, spec)
        e_acc = None if energy is None else accelerator_energy(
            op.cim.rows, op.cim.cols, op.cim.groups, op.cim.n_mvm, op.n_in, op.n_out, spec,
            energy)  # fmt: skip
        operators.append(CimOperator(
            name, t_host[name], t_acc, xbars, op.op_type, e_host,
            None if e_acc is None else e_acc.mvm, None if e_acc is None else e_acc.internal,
        ))  # fmt: skip
    _check_budget(graph, operators, spec)
    edges = [
        CimEdge(src, dst, transfer_latency(graph.operators[src].n_out, spec),
                None if energy is None else transfer_energy(graph.operators[src].n_out, spec,
                                                            energy))
        for src, dst, _tensors in graph.edges
    ]  # fmt: skip
    p_static = None if energy is None else static_power(spec, energy)
    return CimInstance.build(operators, edges, spec.crossbars, p_static)


def build_instance(graph: OpGraph, profile: Any, hardware: Hardware | CimSpec) -> CimInstance:
    """The ILP's data: ``graph``'s operators with host latencies from ``profile`` (a host
    profile of this very model, or a mapping operator -> seconds) on ``hardware``.

    Hardware whose host sets ``latency = "model"`` (e.g. preset ``arm-a72-model``) takes
    the host latencies from the analytical host model, an estimate; ``profile`` may then
    be None and is not used. Energies come with hardware that has the energy model's
    constants; the host's power is the profile's RAPL measurement where it has one."""
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
    measured = None
    if latencies is not None and hasattr(profile, "metadata"):
        measured = measured_power(profile.metadata)  # RAPL, where it was measured
    return cim_instance(graph, latencies, spec, host=host,
                        host_power=None if measured is None else measured[0])  # fmt: skip


def _check_budget(graph: OpGraph, operators: list[CimOperator], spec: CimSpec) -> None:
    capable = [op for op in operators if op.supported]
    if not capable:
        raise PlacementError(
            f"{graph.path}: no operator can run on the CIM accelerator (it maps Conv, Gemm and"
            " MatMul with a constant weight, also int8 QLinear/QDQ forms): nothing to place"
        )
    smallest = min(capable, key=lambda op: op.crossbars)
    if smallest.crossbars > spec.crossbars:
        raise PlacementError(
            f"a budget of {spec.crossbars} crossbars fits no operator: the smallest CIM-capable"
            f" one, {smallest.name!r}, needs {smallest.crossbars}; raise --crossbars"
        )
