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
    :func:`minimum_period`), the shortest frame latency of a few constructions. In each,
    the host's tasks are packed back to back in a cyclic order (the host is the busiest
    resource or close to it, so its period has no room for gaps) and every task starts at
    the earliest time its inputs are ready that falls on its phase modulo the period:

    * today's order: the host in ``schedule``'s order, the bus packed by readiness;
    * the same host order, each transfer at the first free stretch of the bus's cycle once
      its data is ready (the bus is rarely busy: packing it makes a transfer wait almost a
      whole period, a frame's latency growing by one period per host-CIM round trip);
    * host orders read off a stream run by a work-conserving runtime (every resource runs
      the ready task of the oldest frame; :func:`_work_conserving_starts`): a steady-state
      frame's host tasks ordered by their start modulo the period.

    A heuristic: the latency it finds is an upper bound of the least one at this period
    (the single-frame makespan a lower one). Raises when ``period`` is below a load."""
    on_host = schedule.on_host
    loads = resource_loads(instance, on_host)
    period = minimum_period(instance, on_host)[0] if period is None else period
    short = [r for r, load in loads.items() if load > period * (1 + 1e-12) + 1e-15]
    if short:
        raise PlacementError(
            f"period {period:.9g} s is below the load of {short[0]} ({loads[short[0]]:.9g} s)"
        )
    tasks, preds = stream_tasks(instance, on_host)
    # When a task is ready in the single-frame schedule: the order every construction
    # visits tasks in (a topological order), and today's bus order.
    single = {t: schedule.start[t] if task.edge is None else schedule.finish[task.edge[0]]
              for t, task in tasks.items()}  # fmt: skip
    host_order = list(schedule.host_order)
    bus_order = sorted((t for t in tasks if tasks[t].resource == BUS), key=lambda t: (single[t], t))
    graph = nx.DiGraph()
    graph.add_nodes_from(tasks)
    graph.add_edges_from((p, t) for t, ps in preds.items() for p in ps)
    candidates = [_phased_starts(tasks, preds, graph, single, period,
                                 {HOST: host_order, BUS: bus_order})]  # fmt: skip
    if period > 0:  # else every task takes no time: nothing waits
        candidates.append(_phased_starts(tasks, preds, graph, single, period, {HOST: host_order}))
    for frame_start in _work_conserving_starts(tasks, preds, single, period):
        order = sorted(host_order, key=lambda t: (frame_start[t] % period, t))
        origin = frame_start[order[0]] % period if order else 0.0
        candidates.append(
            _phased_starts(tasks, preds, graph, frame_start, period, {HOST: order}, origin)
        )
    best = min((c for c in candidates if c is not None),
               key=lambda c: max(c[0][t] + tasks[t].duration for t in tasks))  # fmt: skip
    start, order = best
    for t, task in tasks.items():
        if task.resource not in (HOST, BUS):
            order[task.resource] = [t]
    return ModuloSchedule(period, tasks, start, preds, order)


def _phased_starts(
    tasks: Mapping[str, Task], preds: Mapping[str, list[str]], graph: nx.DiGraph,
    visit: Mapping[str, float], period: float, packed: Mapping[str, list[str]],
    origin: float = 0.0,
) -> tuple[dict[str, float], dict[str, list[str]]] | None:  # fmt: skip
    """Frame-relative starts, and each shared resource's cyclic order. The resources in
    ``packed`` run their tasks back to back in the given order from ``origin`` within the
    cycle; the bus, when not among them, places each transfer in the first free stretch
    of its cycle once its data is ready (None when a transfer finds none long enough).
    Tasks are visited in the topological order of ``graph`` (``preds`` as edges) that
    ``visit`` sorts them into."""
    phase: dict[str, float] = {}
    for order in packed.values():
        at = origin
        for t in order:
            phase[t] = at
            at += tasks[t].duration
    busy: list[tuple[float, float]] = []  # the bus's taken stretches of the cycle
    start: dict[str, float] = {}
    for t in nx.lexicographical_topological_sort(graph, key=lambda t: (visit[t], t)):
        ready = max((start[p] + tasks[p].duration for p in preds[t]), default=0.0)
        if t in phase:  # the first time from `ready` on its phase modulo the period
            wait = 0.0 if period <= 0 else (phase[t] - ready) % period
            start[t] = ready + (0.0 if wait > period * (1 - 1e-12) else wait)
        elif tasks[t].resource == BUS:
            at = _first_free(busy, ready, tasks[t].duration, period)
            if at is None:
                return None
            start[t] = at
            busy.append((at % period, at % period + tasks[t].duration))
        else:  # an operator's own crossbars: its copies are a period apart, never overlapping
            start[t] = ready
    order = {resource: list(ts) for resource, ts in packed.items()}
    if BUS not in packed:
        order[BUS] = sorted((t for t in tasks if tasks[t].resource == BUS),
                            key=lambda t: (start[t] % period if period > 0 else start[t], t))
    return start, order


def _first_free(
    busy: list[tuple[float, float]], ready: float, duration: float, period: float
) -> float | None:
    """The earliest time from ``ready`` at which ``duration`` fits in the cycle of length
    ``period`` beside the ``busy`` stretches (start in [0, period), end past it when they
    wrap), or None."""
    if period <= 0:
        return ready if not busy else None
    eps = 1e-12 * period
    x = ready % period
    offsets = {x} | {(end - x) % period + x for _, end in busy}  # ready, or a stretch's end
    for offset in sorted(offsets):
        s = offset % period
        if all(not (s < b + shift - eps and a + shift < s + duration - eps)
               for a, b in busy for shift in (-period, 0.0, period)):  # fmt: skip
            return ready + (offset - x)
    return None


def _work_conserving_starts(
    tasks: Mapping[str, Task], preds: Mapping[str, list[str]], single: Mapping[str, float],
    period: float, frames: int = 96, samples: int = 16, task_runs: int = 200_000,
) -> list[dict[str, float]]:  # fmt: skip
    """Frame-relative starts of ``samples`` frames from the second half of a stream of
    ``frames`` frames released ``period`` apart, run by a work-conserving runtime: every
    resource, when free, takes the ready task of the oldest frame (ties by ``single``).
    Large graphs simulate fewer frames (at most ``task_runs`` task runs, at least 8
    frames) so that the simulation stays a fraction of a solve."""
    if period <= 0 or not tasks:
        return []
    frames = max(8, min(frames, task_runs // len(tasks)))
    succ: dict[str, list[str]] = {t: [] for t in tasks}
    for t, ps in preds.items():
        for p in ps:
            succ[p].append(t)
    waiting = {(t, f): len(preds[t]) for t in tasks for f in range(frames)}
    events: list[tuple[float, int, str, int]] = [  # (time, 0 ready / 1 done, task, frame)
        (f * period, 0, t, f) for f in range(frames) for t in tasks if not preds[t]
    ]
    heapq.heapify(events)
    queue: dict[str, list[tuple[int, float, str]]] = {}
    free: dict[str, float] = {}
    begin: dict[tuple[str, int], float] = {}
    while events:
        now, kind, t, f = heapq.heappop(events)
        if kind == 0:
            heapq.heappush(queue.setdefault(tasks[t].resource, []), (f, single[t], t))
        else:
            for s in succ[t]:
                waiting[(s, f)] -= 1
                if waiting[(s, f)] == 0:
                    heapq.heappush(events, (now, 0, s, f))
        for resource, q in queue.items():
            if q and free.get(resource, 0.0) <= now:
                g, _, u = heapq.heappop(q)
                begin[(u, g)] = now
                free[resource] = now + tasks[u].duration
                heapq.heappush(events, (free[resource], 1, u, g))
    picked = range(frames // 2, frames, max(1, (frames - frames // 2) // samples))
    return [{t: begin[(t, f)] - f * period for t in tasks} for f in picked]


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
