"""Blocks of a CIM instance between its cut operators, and what is known of each.

A *cut* operator is one that every other operator precedes or follows (everything
before it in a topological order is its ancestor, everything after it its descendant)
and that no edge which may carry a transfer jumps over: every such edge runs inside one
side or touches the cut (an edge between two host-only operators never carries one, and
its precedence follows from the paths through the cut: YOLO's skip connections from the
backbone's activations into the neck's Concats). So the schedule splits exactly there.
The operators strictly between two consecutive cuts (a *block*) run inside the window
from the first cut's finish to the second one's start, and no two blocks ever share the
host. Only two things couple the blocks: the crossbar budget (Eq. 14) and the device of
each cut (it decides which transfers into and out of the neighbouring blocks are paid).

So a block is solved alone, as a small :class:`CimInstance`: its operators, the cut
before it as a zero-length *entry* at time 0 and the cut after it as a zero-length
*exit* (each on a given device, with the original edges and transfers); its makespan
is the block's window. What the whole needs of a block is its best window f(r) for
every number r of crossbars it may be left (for each device of its entry and exit):
its *frontier*, non-increasing in r. A :class:`Frontier` holds what is known of it:

* placements found (points): a placement using u crossbars bounds f from above on
  [u, oo);
* a solve with at most c crossbars: its solver's bound bounds f from below on [0, c];
* a priced solve (the crossbars priced at p seconds each instead of the budget: the
  Lagrangian relaxation of Eq. 14): a lower bound v of the least window + p x crossbars
  over all the block's placements gives f(r) >= v - p r for every r;
* floors that need no solve: the longest path at the faster latencies, and the host
  work (the host runs one operator at a time inside the window) of every operator
  minus the most host time r crossbars can take off it (a 0/1 knapsack).

:mod:`placement.cim.combine` combines the frontiers; :mod:`placement.cim.decompose`
decides what to solve.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import networkx as nx
import numpy as np

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import (
    CimSchedule,
    CrossbarCost,
    asap_schedule,
    crossbar_cost,
    retime,
)
from placement.models.cim_makespan.structure import reachability, structure

HOST, CIM = True, False
ENTRY, EXIT = "__entry__", "__exit__"

#: A block solver: (block instance, seconds or None, feasible schedules of it to start
#: from, crossbar price or None) -> (its best schedule, a lower bound in seconds). Without
#: a price: of the block's least makespan within its budget; with a price p (seconds per
#: crossbar): of the least makespan + p x crossbars (within the budget too).
BlockSolver = Callable[
    [CimInstance, "float | None", "list[CimSchedule]", "float | None"],
    tuple[CimSchedule, float],
]


@dataclass(frozen=True)
class Block:
    """The operators strictly between two cuts (or before the first, after the last)."""

    entry: str | None  # the cut before it; None for the first block
    exit: str | None  # the cut after it; None for the last block
    operators: tuple[str, ...]  # in instance order


@dataclass(frozen=True)
class FrontierPoint:
    """One block placement: valid for every budget in [used, budget]."""

    budget: int  # solved with at most this many crossbars
    used: int  # crossbars the placement uses
    window: float  # its window (seconds): an upper bound of the optimum for that budget
    bound: float  # a lower bound of the block's optimum with ``budget`` crossbars
    on_host: dict[str, bool] = field(default_factory=dict)  # the block's operators
    host_order: tuple[str, ...] = ()  # the block's host operators, in order

    @property
    def proven(self) -> bool:
        return self.bound >= self.window * (1 - 1e-9) - 1e-15


@dataclass(frozen=True)
class PricedBound:
    """What a priced solve proved: every placement of the block has window + what its
    crossbars cost at ``price`` >= ``value``, so f(r) >= value - cost(r) for every r (the
    cost never decreases: a placement within r crossbars uses at most r)."""

    price: float | CrossbarCost  # seconds per crossbar, or by the count
    value: float  # seconds

    def at(self, rooms: np.ndarray) -> np.ndarray:
        """The bound of f at each of ``rooms``."""
        if isinstance(self.price, CrossbarCost):
            cost = np.array([self.price(int(r)) for r in rooms])
        else:
            cost = self.price * rooms
        return self.value - cost


def carries_transfer(instance: CimInstance, edge: CimEdge) -> bool:
    """Whether some placement pays ``edge``'s transfer: it has one, and one of its ends
    may run on the accelerator (two host-only operators never pay it)."""
    return edge.t_transfer > 0.0 and (len(devices_of(instance, edge.src)) > 1
                                      or len(devices_of(instance, edge.dst)) > 1)


def cut_operators(instance: CimInstance, order: list[str] | None = None) -> list[str]:
    """The operators comparable with every other one that no edge which may carry a
    transfer jumps over (:func:`carries_transfer`), in ``order`` (a topological order
    of the instance; default: networkx's). A cut's place is the same in every
    topological order: its ancestors before it, the rest after. An edge that never
    carries a transfer may jump over it: its precedence follows from the paths through
    the cut (its source is an ancestor of the cut, its destination a descendant)."""
    order = order or list(nx.topological_sort(instance.graph))
    position = {v: i for i, v in enumerate(order)}
    anc, desc = reachability(instance.graph, order)
    # cover[i]: edges (u, w) with position u < i < position w that may carry a transfer,
    # by a difference array
    cover = [0] * (len(order) + 1)
    for e in instance.edges:
        i, j = position[e.src], position[e.dst]
        if j > i + 1 and carries_transfer(instance, e):
            cover[i + 1] += 1
            cover[j] -= 1
    cuts, running = [], 0
    for i, v in enumerate(order):
        running += cover[i]
        if running == 0 and (anc[v] | desc[v]).bit_count() == len(order) - 1:
            cuts.append(v)
    return cuts


def split(instance: CimInstance) -> tuple[list[Block], list[str]]:
    """The blocks between consecutive cuts (empty ones included) and the cuts."""
    order = list(nx.topological_sort(instance.graph))
    cuts = cut_operators(instance, order)
    is_cut = set(cuts)
    position = {op.name: i for i, op in enumerate(instance.operators)}
    groups: list[list[str]] = [[]]
    for v in order:
        if v in is_cut:
            groups.append([])
        else:
            groups[-1].append(v)
    blocks = [
        Block(cuts[k - 1] if k > 0 else None, cuts[k] if k < len(cuts) else None,
              tuple(sorted(ops, key=position.__getitem__)))
        for k, ops in enumerate(groups)
    ]  # fmt: skip
    return blocks, cuts


def devices_of(instance: CimInstance, name: str) -> list[bool]:
    """Where an operator can run: the host, and the accelerator if it fits the budget."""
    op = instance.by_name[name]
    if op.supported and op.crossbars <= instance.crossbar_budget:
        return [HOST, CIM]
    return [HOST]


def block_instance(
    instance: CimInstance, block: Block, entry_on: bool | None, exit_on: bool | None,
    budget: int,
) -> CimInstance:  # fmt: skip
    """The block with its cuts as zero-length ``ENTRY``/``EXIT`` operators on the given
    devices (``HOST``/``CIM``; None where the block has no such cut). Every block
    operator descends from the entry and precedes the exit, so the makespan is the
    window. An end on the accelerator costs so much on the host that no sensible
    placement moves it there (:meth:`Frontier.record` moves it back if one does)."""
    members = set(block.operators)
    huge = 1.0 + 10.0 * (instance.cpu_only_latency + instance.transfer_total)
    # blocks are solved for latency only: their operators leave the energies behind
    ops = [replace(instance.by_name[v], e_host=None, e_mvm=None, e_internal=None)
           for v in block.operators]  # fmt: skip
    ends = {}
    for name, cut, device in ((ENTRY, block.entry, entry_on), (EXIT, block.exit, exit_on)):
        if cut is None:
            continue
        ends[cut] = name
        ops.append(CimOperator(name, 0.0) if device is HOST else CimOperator(name, huge, 0.0, 0))
    # the edges out of the block's operators and its entry, into them or its exit
    graph, transfer = instance.graph, instance.transfer
    sources = [*block.operators, *([block.entry] if block.entry is not None else [])]
    edges = []
    for u in sources:
        for w in graph.successors(u):
            if w in members or (w == block.exit and w is not None):
                edges.append(CimEdge(ends.get(u, u), ends.get(w, w), transfer[u, w]))
    return CimInstance.build(ops, edges, budget)


def _pinned(sub: CimInstance, schedule: CimSchedule, entry_on, exit_on) -> CimSchedule:
    """``schedule`` with the ends on their given devices (an end moved to the host by a
    time-limited solver goes back: zero time and zero crossbars there, never worse)."""
    want = {ENTRY: entry_on, EXIT: exit_on}
    if all(schedule.on_host.get(v, want[v]) == want[v] for v in want if want[v] is not None):
        return schedule
    on_host = dict(schedule.on_host)
    for v, device in want.items():
        if device is not None and v in on_host:
            on_host[v] = device
    return retime(sub, CimSchedule(on_host, schedule.start, schedule.finish, schedule.makespan))


def trivial_bound(sub: CimInstance) -> float:
    """A lower bound of any placement's makespan: the longest path at each operator's
    faster latency, and the host work of operators only the host can run (all of it:
    the host runs one operator at a time)."""
    st = structure(sub, 1.0)
    ops = sub.by_name
    best = math.fsum(op.t_host for op in sub.operators if not op.supported)
    for v in st["order"]:
        fast = min(ops[v].t_host, ops[v].t_acc if ops[v].t_acc is not None else math.inf)
        best = max(best, st["head"][v] + fast + st["tail"][v])
    return best


def floor_bound(instance: CimInstance) -> float:
    """A lower bound of any placement's makespan that needs no solve: the better of
    :func:`trivial_bound` and the host work that the budget leaves at the least
    (:func:`host_work_floor`)."""
    names = [op.name for op in instance.operators]
    top = max_crossbars(instance, names)
    return max(trivial_bound(instance), float(host_work_floor(instance, names, top)[top]))


def _restricted(sub: CimInstance, room: int) -> CimInstance:
    """``sub`` with the operators that need more than ``room`` crossbars host-only."""
    ops = [op if not op.supported or op.crossbars <= room else CimOperator(op.name, op.t_host)
           for op in sub.operators]  # fmt: skip
    return CimInstance.build(ops, sub.edges, sub.crossbar_budget)


def max_crossbars(instance: CimInstance, names: Iterable[str]) -> int:
    """The most crossbars these operators can use together within the budget."""
    ops = instance.by_name
    total = sum(ops[v].crossbars for v in names if CIM in devices_of(instance, v))
    return min(instance.crossbar_budget, total)


def host_work_floor(sub: CimInstance, names: Iterable[str], top: int) -> np.ndarray:
    """For every r in 0..top, a lower bound of the window with at most r crossbars: the
    host work of the operators ``names`` (the host runs them one at a time inside the
    window) minus the most host time that CIM operators using at most r crossbars
    together can take off it (a 0/1 knapsack over their crossbars)."""
    ops = sub.by_name
    total = math.fsum(ops[v].t_host for v in names)
    off = np.zeros(top + 1)
    for v in names:
        op = ops[v]
        if not op.supported or op.crossbars > top:
            continue
        if op.crossbars == 0:
            off += op.t_host
        else:
            w = op.crossbars
            off[w:] = np.maximum(off[w:], off[: top + 1 - w] + op.t_host)
    # a relative 1e-12 below: numpy's sums may round the other way than math.fsum's
    return np.maximum(total - off - 1e-12 * total, 0.0)


#: The path floor of a frontier is computed at this many crossbar counts (the least, the
#: largest and evenly between): enough where paths bound the window, and host work bounds
#: it at every count.
FLOOR_LEVELS = 4


@dataclass
class Frontier:
    """What is known of one block's best window f(r) with at most r crossbars, for one
    device of its entry and of its exit: the placements solved so far and a floor."""

    instance: CimInstance
    block: Block
    entry_on: bool | None
    exit_on: bool | None
    top: int  # the most crossbars the block can use: f(r) = f(top) for r >= top
    floors: dict[int, float]  # r -> a lower bound of f(r'), r' in [r, next key)
    points: list[FrontierPoint]
    tried: dict[int, float | None] = field(default_factory=dict)  # budget -> time limit
    solves: int = 0
    # the crossbar counts a placement of the block can use (subset sums up to ``top``):
    # f(r) = f(the largest of them <= r), so bounds and solves only matter at these
    sums: tuple[int, ...] = (0,)
    host_floor: np.ndarray | None = None  # :func:`host_work_floor` at each of ``sums``
    priced: list[PricedBound] = field(default_factory=list)
    priced_tried: dict[float, float | None] = field(default_factory=dict)  # price -> limit
    # cached, dropped at every new solve: :meth:`lower` at each of ``sums``, and the lower
    # convex hulls of the lower bounds and of the points (what a price can reach)
    _lower: np.ndarray | None = None
    _lower_hull: _Hull | None = None
    _upper_hull: _Hull | None = None

    @classmethod
    def start(cls, instance: CimInstance, block: Block, entry_on: bool | None,
              exit_on: bool | None) -> Frontier:  # fmt: skip
        """Nothing solved yet: the all-host placement (feasible for any r) and the floors
        (:func:`trivial_bound` with the operators that need more than r crossbars on the
        host; :func:`host_work_floor`); an empty block is known exactly (a transfer between
        its cuts, if on two devices)."""
        top = max_crossbars(instance, block.operators)
        if not block.operators:
            window = 0.0
            if entry_on is not None and exit_on is not None and entry_on != exit_on:
                window = instance.transfer.get((block.entry, block.exit), 0.0)  # type: ignore[arg-type]
            return cls(instance, block, entry_on, exit_on, 0, {0: window},
                       [FrontierPoint(0, 0, window, window)], {0: None})  # fmt: skip
        sub = block_instance(instance, block, entry_on, exit_on, 0)
        cim_ops = [v for v in block.operators if CIM in devices_of(instance, v)]
        xbars = [sub.by_name[v].crossbars for v in cim_ops]
        # the path floor at a few counts (each a pass over the block's structure), not at
        # every one: between them the floor of the count below holds, and the host-work
        # floor follows every count
        counts = sorted({0, *xbars})
        levels = sorted({counts[round(i * (len(counts) - 1) / (FLOOR_LEVELS - 1))]
                         for i in range(FLOOR_LEVELS)})  # fmt: skip
        floors = {r: trivial_bound(_restricted(sub, r)) for r in levels}
        order = structure(sub, 1.0)["order"]
        ends = {ENTRY: entry_on, EXIT: exit_on}
        on_host = {v: True if ends.get(v) is None else bool(ends[v]) for v in order}
        everything_on_host = asap_schedule(sub, on_host, [v for v in order if on_host[v]])
        # Bit s set: some subset of the block's CIM operators uses s crossbars. Masked at
        # every step, so the integer stays top + 1 bits (unmasked it grows to the block's
        # total crossbar count: quadratic in the block's size).
        mask = (1 << (top + 1)) - 1
        reachable = 1
        for c in xbars:
            reachable = (reachable | reachable << c) & mask
        sums = tuple(s for s in range(top + 1) if reachable >> s & 1)
        host_floor = host_work_floor(sub, block.operators, top)[list(sums)]
        return cls(instance, block, entry_on, exit_on, top, floors,
                   [_point(sub, block, 0, everything_on_host, max(floors[0], host_floor[0]))],
                   sums=sums, host_floor=host_floor)  # fmt: skip

    def snap(self, room: int) -> int:
        """The most crossbars a placement within ``room`` can use: f(room) = f(snap)."""
        return self.sums[bisect.bisect_right(self.sums, room) - 1]  # every sum is <= top

    def floor(self, room: int) -> float:
        """A lower bound of f(room) that needs no solve."""
        step = self.floors[max(r for r in self.floors if r <= room)]
        if self.host_floor is None:
            return step
        return max(step, float(self.host_floor[bisect.bisect_right(self.sums, room) - 1]))

    def upper(self, room: int) -> float:
        """The best window found within ``room`` crossbars."""
        return min(p.window for p in self.points if p.used <= room)

    def lower(self, room: int) -> float:
        """A lower bound of f(room): the floor, a bound found with at least that many
        crossbars, or a priced bound."""
        return float(self.lower_at_sums()[bisect.bisect_right(self.sums, room) - 1])

    def lower_at_sums(self) -> np.ndarray:
        """:meth:`lower` at each of :attr:`sums` (recomputed after each new solve)."""
        if self._lower is None:
            sums = np.array(self.sums, dtype=float)
            keys = sorted(self.floors)
            steps = np.array([self.floors[r] for r in keys])
            best = steps[np.searchsorted(keys, sums, side="right") - 1]
            if self.host_floor is not None:
                best = np.maximum(best, self.host_floor)
            for p in self.points:  # a bound found with b crossbars holds for every r <= b
                reach = bisect.bisect_right(self.sums, p.budget)
                best[:reach] = np.maximum(best[:reach], p.bound)
            for pb in self.priced:
                best = np.maximum(best, pb.at(sums))
            self._lower = best
        return self._lower

    def priced_lower(self, price: float) -> tuple[float, int]:
        """The least lower bound of window + ``price`` x crossbars over every room, and a
        room where it is reached (the fewest crossbars among ties)."""
        if self._lower_hull is None:
            self._lower_hull = _Hull(self.sums, self.lower_at_sums())
        return self._lower_hull.least(price)

    def priced_upper(self, price: float) -> tuple[float, int]:
        """The least window + ``price`` x crossbars over the placements found, and the
        crossbars of that placement (the fewest among ties)."""
        if self._upper_hull is None:
            self._upper_hull = _Hull([p.used for p in self.points],
                                     [p.window for p in self.points])  # fmt: skip
        return self._upper_hull.least(price)

    def known(self, room: int, rel_gap: float) -> bool:
        return self.lower(room) >= self.upper(room) * (1 - rel_gap) - 1e-15

    def rooms(self) -> list[int]:
        """Where :meth:`lower` may change: at a floor, and at the next usable count above
        each budget solved with (a bound found with b crossbars holds up to it)."""
        solved = (self.sums[bisect.bisect_right(self.sums, p.budget)] for p in self.points
                  if p.budget < self.sums[-1])  # fmt: skip
        return sorted({*(r for r in self.floors if r <= self.top), *solved})

    def budget_to_learn(self, room: int, seconds: float | None) -> int | None:
        """The budget to solve with, within ``seconds``, to learn f(room): all the block
        can use first (its bound holds for every r), then ``room`` itself. A budget solved
        before comes again only if that solve ended at its time limit and ``seconds`` is at
        least twice what it had; None when there is nothing to learn here in that time."""
        room = self.snap(room)
        for budget in (self.sums[-1], room):
            if budget not in self.tried:
                return budget
            if not any(p.proven for p in self.points if p.budget == budget):
                before = self.tried[budget]
                if before is not None and (seconds is None or seconds >= 2 * before):
                    return budget
        return None

    def priced_bounds(self, price: float | CrossbarCost) -> tuple[float, float]:
        """The least window + what the crossbars cost at ``price``: a lower bound over every
        room, and the least over the placements found."""
        if not isinstance(price, CrossbarCost):
            return self.priced_lower(price)[0], self.priced_upper(price)[0]
        low = min(lb + price(r) for r, lb in zip(self.sums, self.lower_at_sums(), strict=True))
        return float(low), min(p.window + price(p.used) for p in self.points)

    def price_to_learn(self, price: float | CrossbarCost, seconds: float | None,
                       rel_gap: float) -> bool:  # fmt: skip
        """Whether a priced solve at ``price`` within ``seconds`` would teach something:
        what is known there is not within ``rel_gap``, and no solve at this price ended at
        a limit at least half of ``seconds``."""
        lower, upper = self.priced_bounds(price)
        if lower >= upper * (1 - rel_gap) - 1e-15:
            return False
        if price not in self.priced_tried:
            return True
        before = self.priced_tried[price]
        return before is not None and (seconds is None or seconds >= 2 * before)

    def learn(self, budget: int, solve_block: BlockSolver, seconds: float | None,
              price: float | CrossbarCost | None = None) -> None:  # fmt: skip
        """Solve the block with at most ``budget`` crossbars (with ``price``: priced, within
        all it can use), from the best placement known to fit; keep its placement and
        bound."""
        sub, starts = self.task(budget, price)
        self.record(budget, sub, *solve_block(sub, seconds, starts, price), seconds, price)

    def task(self, budget: int, price: float | CrossbarCost | None = None
             ) -> tuple[CimInstance, list[CimSchedule]]:  # fmt: skip
        """What a solve with at most ``budget`` crossbars (with ``price``: priced) needs:
        the block instance and the best placement known to fit, as a start."""
        sub = block_instance(self.instance, self.block, self.entry_on, self.exit_on, budget)
        # not the everything-on-host point a frontier starts with: every solve starts at
        # least from it, and without a start of its own the block solve runs the heuristic
        fits = [p for p in self.points[1:] if p.used <= budget and p.on_host]

        def cost(p: FrontierPoint) -> float:
            return p.window + (0.0 if price is None else crossbar_cost(price, p.used))

        starts = [self._schedule(sub, min(fits, key=cost))] if fits else []
        return sub, starts

    def record(self, budget: int, sub: CimInstance, schedule: CimSchedule, bound: float,
               seconds: float | None,
               price: float | CrossbarCost | None = None) -> None:  # fmt: skip
        """Keep what a solve of :meth:`task` (within ``seconds``) found: without a price,
        ``bound`` bounds f(budget); with one, the least window + what the crossbars cost."""
        schedule = _pinned(sub, schedule, self.entry_on, self.exit_on)
        self._lower = self._lower_hull = self._upper_hull = None
        self.solves += 1
        if price is None:
            self.points.append(_point(sub, self.block, budget, schedule,
                                      max(bound, self.floor(budget))))  # fmt: skip
            self.tried[budget] = seconds
            return
        used = schedule.crossbars_used(sub)
        self.priced.append(PricedBound(price, bound))
        self.priced_tried[price] = seconds
        # the placement is the best for at most ``used`` crossbars as far as the priced
        # bound proves: f(used) >= bound - cost(used)
        self.points.append(_point(sub, self.block, used, schedule,
                                  max(bound - crossbar_cost(price, used),
                                      self.floor(used))))  # fmt: skip

    def _schedule(self, sub: CimInstance, point: FrontierPoint) -> CimSchedule:
        """A point's placement as a schedule of the block instance ``sub``."""
        on_host = dict(point.on_host)
        order = list(point.host_order)
        if self.entry_on is not None:
            on_host[ENTRY] = bool(self.entry_on)
            order = [ENTRY, *order] if self.entry_on else order
        if self.exit_on is not None:
            on_host[EXIT] = bool(self.exit_on)
            order = [*order, EXIT] if self.exit_on else order
        return asap_schedule(sub, on_host, order)


class _Hull:
    """The lower convex hull of points (x, y), for the least y + p x at any price p >= 0:
    reached at a vertex, the one where the hull's slope passes -p."""

    def __init__(self, xs: Iterable[int], ys: Iterable[float]) -> None:
        best: dict[int, float] = {}
        for x, y in zip(xs, ys, strict=True):
            y = float(y)
            if x not in best or y < best[x]:
                best[x] = y
        hull: list[tuple[int, float]] = []
        for x in sorted(best):
            y = best[x]
            if hull and y >= hull[-1][1]:
                continue  # no price prefers more crossbars for no less time
            while len(hull) >= 2:
                (x1, y1), (x2, y2) = hull[-2], hull[-1]
                if (y2 - y1) * (x - x1) >= (y - y1) * (x2 - x1):  # hull[-1] not below
                    hull.pop()
                else:
                    break
            hull.append((x, y))
        self.xs = [x for x, _ in hull]
        self.ys = [y for _, y in hull]
        # -slope of each hull edge, decreasing: the price above which the left end wins
        self.prices = [(self.ys[i] - self.ys[i + 1]) / (self.xs[i + 1] - self.xs[i])
                       for i in range(len(hull) - 1)]  # fmt: skip

    def least(self, price: float) -> tuple[float, int]:
        """min over the points of y + price x, and its x (the smallest among ties)."""
        # edges whose price exceeds ``price`` are worth crossing: they are a prefix
        lo, hi = 0, len(self.prices)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.prices[mid] > price:
                lo = mid + 1
            else:
                hi = mid
        return self.ys[lo] + price * self.xs[lo], self.xs[lo]


def _point(sub: CimInstance, block: Block, budget: int, schedule: CimSchedule,
           bound: float) -> FrontierPoint:  # fmt: skip
    members = set(block.operators)
    return FrontierPoint(
        budget=budget,
        used=schedule.crossbars_used(sub),
        window=schedule.makespan,
        bound=min(bound, schedule.makespan),
        on_host={v: schedule.on_host[v] for v in block.operators},
        host_order=tuple(v for v in schedule.host_order if v in members),
    )
