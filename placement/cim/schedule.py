"""A CIM placement as a schedule, and the earliest-start schedule of a placement.

The timing model is exactly the paper's (Section IV-B): host operators run one
at a time; CIM operators run in parallel with each other and with the host
(each on its own crossbars); a transfer is paid on an edge whose ends are on
different devices and is never serialized with other transfers. All times are
in seconds.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from placement.cim.instance import CimInstance
from placement.errors import PlacementError


@dataclass
class CimSchedule:
    on_host: dict[str, bool]  # True: host CPU (x_v = 1); False: CIM accelerator
    start: dict[str, float]  # s_v, seconds
    finish: dict[str, float]  # f_v, seconds
    makespan: float  # T, seconds

    @property
    def host_order(self) -> list[str]:
        """Host operators by start time (ties: by finish, then name)."""
        host = [v for v, h in self.on_host.items() if h]
        return sorted(host, key=lambda v: (self.start[v], self.finish[v], v))

    def crossbars_used(self, instance: CimInstance) -> int:
        return sum(
            instance.by_name[v].crossbars
            for v, h in self.on_host.items()
            if not h and v in instance.by_name
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "makespan": self.makespan,
            "operators": {
                v: {
                    "device": "host" if self.on_host[v] else "cim",
                    "start": self.start[v],
                    "finish": self.finish[v],
                }
                for v in self.on_host
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CimSchedule:
        try:
            ops = data["operators"]
            return cls(
                on_host={v: d["device"] == "host" for v, d in ops.items()},
                start={v: float(d["start"]) for v, d in ops.items()},
                finish={v: float(d["finish"]) for v, d in ops.items()},
                makespan=float(data["makespan"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PlacementError(f"malformed schedule document: {exc!r}") from None


def latency(instance: CimInstance, name: str, on_host: bool) -> float:
    """Device latency of one operator; PlacementError for an unsupported operator on CIM."""
    op = instance.by_name[name]
    if on_host:
        return op.t_host
    if op.t_acc is None:
        raise PlacementError(f"operator {name!r} is not supported by the CIM accelerator")
    return op.t_acc


def asap_schedule(
    instance: CimInstance, on_host: Mapping[str, bool], host_order: Iterable[str]
) -> CimSchedule:
    """Earliest-start schedule of an assignment with a given sequence of the host operators.

    ``s_v = max(f_u + T_transfer,(u,v) if u, v on different devices, over preds u;
    finish of the previous host operator in ``host_order`` if v is on the host)``.
    ``host_order`` must list every host operator exactly once; a sequence that
    contradicts precedence (also through paths via CIM operators) is an error.
    """
    graph = instance.graph
    missing = [v for v in graph.nodes if v not in on_host]
    if missing:
        raise PlacementError(f"the assignment has no device for operator {missing[0]!r}")
    unknown = [v for v in on_host if v not in instance.by_name]
    if unknown:
        raise PlacementError(f"the assignment names unknown operator {unknown[0]!r}")
    order = list(host_order)
    host_ops = {v for v in graph.nodes if on_host[v]}
    seen: set[str] = set()
    for v in order:
        if v not in host_ops:
            raise PlacementError(f"host order lists {v!r}, which is not a host operator")
        if v in seen:
            raise PlacementError(f"host order lists {v!r} more than once")
        seen.add(v)
    if seen != host_ops:
        absent = sorted(host_ops - seen)
        raise PlacementError(f"host order misses host operator {absent[0]!r}")

    # Precedence plus the host sequence as one DAG; a cycle means the sequence is impossible.
    timing = nx.DiGraph(graph)
    timing.add_edges_from(zip(order, order[1:], strict=False))
    if not nx.is_directed_acyclic_graph(timing):
        pos = {v: i for i, v in enumerate(order)}
        for i, u in enumerate(order):
            for v in order[i + 1 :]:
                if nx.has_path(graph, v, u):
                    raise PlacementError(
                        f"host order puts {u!r} (position {pos[u]}) before {v!r}"
                        f" (position {pos[v]}), but {v!r} precedes {u!r} in the graph"
                    )
        raise PlacementError("host order contradicts precedence")  # pragma: no cover

    prev_host = {v: u for u, v in zip(order, order[1:], strict=False)}
    start: dict[str, float] = {}
    finish: dict[str, float] = {}
    for v in nx.topological_sort(timing):
        s = 0.0
        for u in graph.predecessors(v):
            t = finish[u] + (instance.transfer[(u, v)] if on_host[u] != on_host[v] else 0.0)
            s = max(s, t)
        if v in prev_host:
            s = max(s, finish[prev_host[v]])
        start[v] = s
        finish[v] = s + latency(instance, v, on_host[v])
    names = [op.name for op in instance.operators]
    return CimSchedule(
        on_host={v: bool(on_host[v]) for v in names},
        start={v: start[v] for v in names},
        finish={v: finish[v] for v in names},
        makespan=max(finish.values()) if finish else 0.0,
    )


def host_order_by_start(
    instance: CimInstance, on_host: Mapping[str, bool], start: Mapping[str, float]
) -> list[str]:
    """Host operators by start time, as a linear extension of precedence.

    Among host operators whose host ancestors are all placed, the earliest start goes
    next (ties: instance order), so start-time ties within a solver's tolerance can
    never produce an order that contradicts the graph. Kahn's algorithm in which
    operators off the host are passed through as soon as they are ready.
    """
    graph = instance.graph
    index = {op.name: i for i, op in enumerate(instance.operators)}
    waiting = {v: graph.in_degree(v) for v in graph.nodes}
    free = [v for v, n in waiting.items() if n == 0 and not on_host[v]]
    host_ready = [(start[v], index[v], v) for v, n in waiting.items() if n == 0 and on_host[v]]
    heapq.heapify(host_ready)
    order: list[str] = []
    while free or host_ready:
        if free:
            v = free.pop()
        else:
            v = heapq.heappop(host_ready)[2]
            order.append(v)
        for w in graph.successors(v):
            waiting[w] -= 1
            if waiting[w] == 0:
                if on_host[w]:
                    heapq.heappush(host_ready, (start[w], index[w], w))
                else:
                    free.append(w)
    return order


def retime(instance: CimInstance, schedule: CimSchedule) -> CimSchedule:
    """The best timing of ``schedule``'s decisions: same devices, same host order (by
    start time), every operator as early as precedence, transfers and the host allow.

    Any valid timing of these decisions finishes no earlier, so the makespan never
    grows; it is what an independent recomputation of the schedule gives.
    """
    order = host_order_by_start(instance, schedule.on_host, schedule.start)
    return asap_schedule(instance, schedule.on_host, order)


@dataclass(frozen=True)
class CrossbarCost:
    """A cost (seconds) of the crossbars a placement uses that need not be linear:
    ``values[c]`` for c crossbars, never decreasing in c (the last value for more). A
    decomposition prices a block's crossbars with what the other blocks lose when it takes
    them (:mod:`placement.cim.decompose`)."""

    values: tuple[float, ...]

    def __call__(self, used: int) -> float:
        return self.values[min(used, len(self.values) - 1)]


def crossbar_cost(price: float | CrossbarCost, used: int) -> float:
    """What ``used`` crossbars cost at ``price`` (seconds)."""
    return price(used) if isinstance(price, CrossbarCost) else price * used


def priced_makespan(instance: CimInstance, schedule: CimSchedule,
                    price: float | CrossbarCost) -> float:  # fmt: skip
    """T + what the crossbars ``schedule`` uses cost at ``price`` (seconds): the objective
    of a priced solve (:mod:`placement.cim.priced`)."""
    return schedule.makespan + crossbar_cost(price, schedule.crossbars_used(instance))


def all_host_schedule(instance: CimInstance) -> CimSchedule:
    """Every operator on the host in a topological order: makespan = CPU-only latency."""
    order = list(nx.lexicographical_topological_sort(instance.graph, key=_op_index(instance)))
    return asap_schedule(instance, {v: True for v in order}, order)


def _op_index(instance: CimInstance):
    index = {op.name: i for i, op in enumerate(instance.operators)}
    return lambda v: f"{index[v]:09d}"


def fitted(instance: CimInstance, schedule: CimSchedule) -> CimSchedule | None:
    """``schedule`` re-timed on ``instance``, or None when it does not fit it (another
    model's operators, over the crossbar budget, an operator the accelerator lacks)."""
    if set(schedule.on_host) != set(instance.by_name):
        return None  # another model's schedule
    if schedule.crossbars_used(instance) > instance.crossbar_budget:
        return None
    try:
        return retime(instance, schedule)
    except PlacementError:  # an operator on CIM that this instance cannot offload
        return None


def best_start(
    instance: CimInstance,
    candidates: Sequence[tuple[str, CimSchedule]],
    key: Callable[[CimSchedule], float] | None = None,
) -> tuple[str, CimSchedule]:
    """The fastest of the CPU-only schedule and ``candidates`` (origin, schedule), each
    re-timed on ``instance``; a candidate that does not fit it (:func:`fitted`) is passed
    over. Ties go to the earlier one. ``key``: the value to rank by instead of the
    makespan (a priced one)."""
    rank = key or (lambda schedule: schedule.makespan)
    best = ("CPU-only", all_host_schedule(instance))
    for origin, schedule in candidates:
        timed = fitted(instance, schedule)
        if timed is not None and rank(timed) < rank(best[1]):
            best = (origin, timed)
    return best
