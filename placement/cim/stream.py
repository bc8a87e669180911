"""A stream of frames through a CIM placement: resource loads, a modulo schedule, and an
event simulation of the stream that checks the period independently.

Frames arrive one after another (a camera, a detection stream) and nothing flows from one
frame to the next. With weight-stationary crossbars every offloaded operator keeps its
own crossbars, so the resources a frame needs are the host (one operator at a time), the
shared bus (one transfer at a time, each of Eq. 4's duration) and each offloaded
operator's crossbars. Different frames may use different resources at once, so the
steady-state period is bounded by the busiest resource's load per frame
(:func:`resource_loads`), and without dependences between frames that bound is reached
by a modulo schedule (:func:`modulo_schedule`): each resource runs its frame's work back
to back within one period, the same pattern every period, every task shifted by whole
periods ("stages") until its inputs are there.

:func:`simulate_stream` is the check: a discrete-event simulation of ``frames`` frames,
released one period apart, in which every resource executes its tasks in the modulo
schedule's cyclic order as soon as the task's inputs are there and the resource is free.
It knows nothing of the optimization model; it measures the period the stream sustains
(the spacing of the last frames' completions) and each frame's latency, and reports a
violation when the claimed period is not sustained.

Single-frame latency: the makespan of the paper's model (one frame alone, transfers not
serialized); a frame's latency in the stream (the modulo schedule's, then the
simulation's) can be longer: it waits for resources another frame holds. All times in
seconds.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule
from placement.errors import PlacementError

HOST = "host"
BUS = "bus"


def crossbar_resource(name: str) -> str:
    """The resource of operator ``name``'s crossbars."""
    return f"crossbars:{name}"


def resource_loads(instance: CimInstance, on_host: Mapping[str, bool]) -> dict[str, float]:
    """Busy seconds per frame of every resource the placement uses: the host, the shared
    bus and each offloaded operator's crossbars."""
    loads = {
        HOST: math.fsum(op.t_host for op in instance.operators if on_host[op.name]),
        BUS: math.fsum(e.t_transfer for e in instance.edges if on_host[e.src] != on_host[e.dst]),
    }
    for op in instance.operators:
        if not on_host[op.name]:
            if op.t_acc is None:
                raise PlacementError(f"operator {op.name!r} is not supported by the accelerator")
            loads[crossbar_resource(op.name)] = op.t_acc
    return loads


def minimum_period(instance: CimInstance, on_host: Mapping[str, bool]) -> tuple[float, str]:
    """The smallest steady-state period of the placement and the resource that sets it."""
    loads = resource_loads(instance, on_host)
    busiest = max(loads, key=lambda r: (loads[r], r == HOST, r == BUS))
    return loads[busiest], busiest


# --------------------------------------------------------------------------- modulo schedule


@dataclass(frozen=True)
class Task:
    """An operator, or a transfer on an edge between devices (``edge`` set)."""

    name: str  # the operator, or "src->dst"
    resource: str
    duration: float
    edge: tuple[str, str] | None = None


@dataclass
class ModuloSchedule:
    """Frame-relative start times of one frame's tasks, repeated every ``period``."""

    period: float
    tasks: dict[str, Task]
    start: dict[str, float]  # frame-relative start of every task
    preds: dict[str, list[str]]  # the tasks whose end a task waits for
    order: dict[str, list[str]] = field(default_factory=dict)  # per resource, cyclic order

    @property
    def frame_latency(self) -> float:
        """A frame's latency in the stream: the last task's end."""
        return max((self.start[t] + self.tasks[t].duration for t in self.tasks), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"period": self.period, "frame_latency": self.frame_latency,
                "start": dict(self.start)}  # fmt: skip


def stream_tasks(
    instance: CimInstance, on_host: Mapping[str, bool]
) -> tuple[dict[str, Task], dict[str, list[str]]]:
    """The tasks of one frame (operators, transfers between devices) and what each waits for."""
    tasks: dict[str, Task] = {}
    preds: dict[str, list[str]] = {}
    for op in instance.operators:
        if on_host[op.name]:
            tasks[op.name] = Task(op.name, HOST, op.t_host)
        else:
            if op.t_acc is None:
                raise PlacementError(f"operator {op.name!r} is not supported by the accelerator")
            tasks[op.name] = Task(op.name, crossbar_resource(op.name), op.t_acc)
        preds[op.name] = []
    for e in instance.edges:
        if on_host[e.src] != on_host[e.dst]:
            name = f"{e.src}->{e.dst}"
            tasks[name] = Task(name, BUS, e.t_transfer, (e.src, e.dst))
            preds[name] = [e.src]
            preds[e.dst].append(name)
        else:
            preds[e.dst].append(e.src)
    return tasks, preds


def modulo_schedule(
    instance: CimInstance, schedule: CimSchedule, period: float | None = None
) -> ModuloSchedule:
    """A modulo schedule of ``schedule``'s placement with ``period`` (default the minimum,
    :func:`minimum_period`): on the host and on the bus the tasks are packed back to back
    in the order of ``schedule`` (host order, transfers by their producer's finish), each
    at a phase within the period; every task then starts at its phase plus the fewest
    whole periods that leave its inputs ready. Raises when ``period`` is below a load."""
    on_host = schedule.on_host
    loads = resource_loads(instance, on_host)
    period = minimum_period(instance, on_host)[0] if period is None else period
    short = [r for r, load in loads.items() if load > period * (1 + 1e-12) + 1e-15]
    if short:
        raise PlacementError(
            f"period {period:.9g} s is below the load of {short[0]} ({loads[short[0]]:.9g} s)"
        )
    tasks, preds = stream_tasks(instance, on_host)
    # Cyclic orders: host by the single-frame schedule, bus by when its data is ready.
    order: dict[str, list[str]] = {HOST: list(schedule.host_order)}
    order[BUS] = sorted((t for t in tasks if tasks[t].resource == BUS),
                        key=lambda t: (schedule.finish[tasks[t].edge[0]], t))  # type: ignore[index]
    for t, task in tasks.items():
        if task.resource not in (HOST, BUS):
            order[task.resource] = [t]
    phase: dict[str, float] = {}
    for resource in (HOST, BUS):
        at = 0.0
        for t in order[resource]:
            phase[t] = at
            at += tasks[t].duration
    graph = nx.DiGraph()
    graph.add_nodes_from(tasks)
    graph.add_edges_from((p, t) for t, ps in preds.items() for p in ps)
    start: dict[str, float] = {}
    for t in nx.topological_sort(graph):
        ready = max((start[p] + tasks[p].duration for p in preds[t]), default=0.0)
        if t in phase:  # a shared resource: its phase, shifted by whole periods
            stages = 0 if period <= 0 else max(0, math.ceil((ready - phase[t]) / period - 1e-12))
            start[t] = phase[t] + stages * period
        else:  # an operator's own crossbars: its copies are a period apart, never overlapping
            start[t] = ready
    return ModuloSchedule(period, tasks, start, preds, order)


# --------------------------------------------------------------------------- simulation


@dataclass
class StreamSimulation:
    """What the simulation of a stream found."""

    frames: int
    period: float  # frames were released this far apart; the stream sustains it when ok
    latencies: list[float]  # per frame: completion - release, tasks as early as possible
    violations: list[str]

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def max_latency(self) -> float:
        return max(self.latencies) if self.latencies else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "frames": self.frames, "period": self.period, "ok": self.ok,
            "first_frame_latency": self.latencies[0] if self.latencies else None,
            "max_frame_latency": self.max_latency if self.latencies else None,
            "violations": list(self.violations),
        }  # fmt: skip


def simulate_stream(
    instance: CimInstance,
    modulo: ModuloSchedule,
    *,
    frames: int = 32,
    claimed_period: float | None = None,
    tol: float = 1e-6,
) -> StreamSimulation:
    """Simulate ``frames`` frames (at least four times the schedule's stages) released
    ``modulo.period`` apart, two ways, from the instance's data and the placement alone:

    * the schedule repeated: frame ``f``'s task ``t`` at ``f * period + start[t]``; on every
      resource no two tasks of any frames may overlap, and no task may start before its
      inputs are there (its operator's predecessors, plus the transfer between devices);
    * an event simulation: every resource takes the tasks of all frames in the schedule's
      cyclic order (task ``t`` of frame ``f`` in round ``f + stage(t)``, within a round by
      phase), each as soon as its inputs are there and the resource is free. Every frame
      must complete within the schedule's frame latency after its release (then the stream
      sustains the period, with bounded latency); the latencies are what it reports.

    A ``claimed_period`` (default the schedule's) below the schedule's is a violation.
    """
    period = modulo.period
    tasks, preds = modulo.tasks, modulo.preds
    stage = {t: (0 if period <= 0 else math.floor(modulo.start[t] / period + 1e-9))
             for t in tasks}  # fmt: skip
    frames = max(frames, 4 * (max(stage.values(), default=0) + 2))
    slack = tol * max(modulo.frame_latency, period, 1e-12) + 1e-15
    violations: list[str] = []
    if claimed_period is not None and claimed_period < period - slack:
        violations.append(f"claimed period {claimed_period:.9g} s is below the schedule's"
                          f" {period:.9g} s")  # fmt: skip
    violations += _replay(tasks, preds, modulo.start, period, frames, slack)
    latencies, late = _as_early_as_possible(tasks, preds, modulo, stage, frames, slack)
    return StreamSimulation(frames, period, latencies, violations + late)


def _replay(
    tasks: Mapping[str, Task], preds: Mapping[str, list[str]], start: Mapping[str, float],
    period: float, frames: int, slack: float,
) -> list[str]:  # fmt: skip
    """Violations of the schedule repeated every ``period`` (first few of each kind)."""
    bad: list[str] = []
    for t, ps in preds.items():  # the same in every frame: checked once
        for p in ps:
            if start[t] < start[p] + tasks[p].duration - slack:
                bad.append(f"task {t!r} starts at {start[t]:.9g} s, before its input {p!r}"
                           f" ends at {start[p] + tasks[p].duration:.9g} s")  # fmt: skip
    by_resource: dict[str, list[tuple[float, float, str, int]]] = {}
    for t, task in tasks.items():
        for f in range(frames):
            s = start[t] + f * period
            by_resource.setdefault(task.resource, []).append((s, s + task.duration, t, f))
    for resource, intervals in by_resource.items():
        intervals.sort()
        for (_s0, e0, t0, f0), (s1, _e1, t1, f1) in zip(intervals, intervals[1:], strict=False):
            if s1 < e0 - slack:
                bad.append(f"{resource}: task {t1!r} of frame {f1} starts at {s1:.9g} s while"
                           f" task {t0!r} of frame {f0} runs until {e0:.9g} s")  # fmt: skip
                break
    return bad[:5]


def _as_early_as_possible(
    tasks: Mapping[str, Task], preds: Mapping[str, list[str]], modulo: ModuloSchedule,
    stage: Mapping[str, int], frames: int, slack: float,
) -> tuple[list[float], list[str]]:  # fmt: skip
    """The event simulation: per frame its latency, and the violations."""
    period = modulo.period
    queues: dict[str, list[tuple[int, float, str, int]]] = {}
    for t, task in tasks.items():
        for f in range(frames):
            queues.setdefault(task.resource, []).append(
                (f + stage[t], modulo.start[t] - stage[t] * period, t, f)
            )
    for q in queues.values():
        q.sort()
    succ: dict[str, list[str]] = {t: [] for t in tasks}
    for t, ps in preds.items():
        for p in ps:
            succ[p].append(t)
    waiting = {(t, f): len(preds[t]) for t in tasks for f in range(frames)}
    ready_at = {(t, f): f * period for t in tasks for f in range(frames)}
    end: dict[tuple[str, int], float] = {}
    head = dict.fromkeys(queues, 0)  # next position in each resource's order
    free = dict.fromkeys(queues, 0.0)  # when each resource is free
    events: list[tuple[float, str]] = [(0.0, r) for r in queues]  # (time, resource to try)
    heapq.heapify(events)
    while events:
        now, r = heapq.heappop(events)
        if head[r] >= len(queues[r]) or free[r] > now:
            continue
        _, _, t, f = queues[r][head[r]]
        if waiting[(t, f)] > 0:
            continue  # its inputs are not there: tried again when the last one ends
        begin = max(now, ready_at[(t, f)])
        if begin > now:
            heapq.heappush(events, (begin, r))
            continue
        head[r] += 1
        end[(t, f)] = finish = begin + tasks[t].duration
        free[r] = finish
        heapq.heappush(events, (finish, r))
        for s in succ[t]:
            waiting[(s, f)] -= 1
            ready_at[(s, f)] = max(ready_at[(s, f)], finish)
            if waiting[(s, f)] == 0:
                heapq.heappush(events, (ready_at[(s, f)], tasks[s].resource))
    stuck = [key for key in waiting if key not in end]
    if stuck:
        t, f = stuck[0]
        return [], [f"the stream deadlocks: task {t!r} of frame {f} never runs"
                    f" ({len(stuck)} tasks never run)"]  # fmt: skip
    latencies = [max(end[(t, f)] for t in tasks) - f * period for f in range(frames)]
    worst = max(range(frames), key=lambda f: latencies[f])
    if latencies[worst] > modulo.frame_latency + slack:
        return latencies, [f"frame {worst} completes {latencies[worst]:.9g} s after its release,"
                           f" later than the schedule's frame latency"
                           f" {modulo.frame_latency:.9g} s"]  # fmt: skip
    return latencies, []
