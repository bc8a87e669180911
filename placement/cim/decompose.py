"""Exact decomposition of a CIM instance at its cut operators.

A *cut* operator is one that every other operator precedes or follows (everything
before it in a topological order is its ancestor, everything after it its descendant)
and that no edge jumps over: every edge runs inside one side or touches the cut. So
the schedule splits exactly there. The operators strictly between two consecutive cuts
(a *block*) run inside the window from the first cut's finish to the second one's
start, and no two blocks ever share the host. Only two things couple the blocks: the
crossbar budget (Eq. 14) and the device of each cut (it decides which transfers into
and out of the neighbouring blocks are paid).

So a block is solved alone, as a small :class:`CimInstance`: its operators, the cut
before it as a zero-length *entry* at time 0 and the cut after it as a zero-length
*exit* (each on a given device, with the original edges and transfers); its makespan
is the block's window. What the whole needs of a block is its best window f(r) for
every number r of crossbars it may be left (for each device of its entry and exit):
its *frontier*, non-increasing in r. Solving a block with at most c crossbars gives a
placement using u <= c, so an upper bound of f on [u, c], and the solver's bound, a
lower bound of f on [0, c].

Frontiers are learnt on demand. Two dynamic programs over the blocks (state: the
device of the current cut and the crossbars so far) combine what is known: over the
placements found, the best combination within the budget (an upper bound of the
optimum, and the placement reported); over the lower bounds, the least any split of
the budget could reach (a certified lower bound), together with the split that reaches
it. Wherever that split leaves a block a number of crossbars at which its frontier is
not yet known exactly, the block is solved there (first with all it can use, then with
that number), and the programs run again. When the two meet, the combination is
optimal; when the time is up or nothing is left to learn (block solves that ended at
their time limit), the gap between them is certified. Blocks whose frontier is never
needed are never solved. The combination is re-timed on the whole instance; the caller
verifies it like any other placement.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import CimSchedule, asap_schedule, latency, retime
from placement.models.cim_makespan.structure import reachability, structure

HOST, CIM = True, False
ENTRY, EXIT = "__entry__", "__exit__"

#: A block solver: (block instance, seconds or None, feasible schedules of it to start
#: from) -> (its best schedule, a lower bound of its optimal makespan in seconds).
BlockSolver = Callable[
    [CimInstance, "float | None", "list[CimSchedule]"], tuple[CimSchedule, float]
]
#: Several block solves at once (each as for :data:`BlockSolver`), results in order.
BatchSolver = Callable[
    [list[tuple[CimInstance, "float | None", "list[CimSchedule]"]]],
    list[tuple[CimSchedule, float]],
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


def cut_operators(instance: CimInstance) -> list[str]:
    """The operators comparable with every other one that no edge jumps over, in a
    topological order."""
    order = structure(instance, 1.0)["order"]
    position = {v: i for i, v in enumerate(order)}
    anc, desc = reachability(instance.graph, order)
    # cover[i]: edges (u, w) with position u < i < position w, by a difference array
    cover = [0] * (len(order) + 1)
    for e in instance.edges:
        i, j = position[e.src], position[e.dst]
        if j > i + 1:
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
    order = structure(instance, 1.0)["order"]
    cuts = cut_operators(instance)
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
    placement moves it there (:class:`Frontier` moves it back if one does)."""
    members = set(block.operators)
    transfers = math.fsum(e.t_transfer for e in instance.edges)
    huge = 1.0 + 10.0 * (instance.cpu_only_latency + transfers)
    # blocks are solved for latency only: their operators leave the energies behind
    ops = [replace(instance.by_name[v], e_host=None, e_mvm=None, e_internal=None)
           for v in block.operators]  # fmt: skip
    ends = {}
    for name, cut, device in ((ENTRY, block.entry, entry_on), (EXIT, block.exit, exit_on)):
        if cut is None:
            continue
        ends[cut] = name
        ops.append(CimOperator(name, 0.0) if device is HOST else CimOperator(name, huge, 0.0, 0))
    edges = []
    for e in instance.edges:
        src = e.src if e.src in members else ends.get(e.src) if e.src == block.entry else None
        dst = e.dst if e.dst in members else ends.get(e.dst) if e.dst == block.exit else None
        if src is not None and dst is not None:
            edges.append(CimEdge(src, dst, e.t_transfer))
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

    @classmethod
    def start(cls, instance: CimInstance, block: Block, entry_on: bool | None,
              exit_on: bool | None) -> Frontier:  # fmt: skip
        """Nothing solved yet: the all-host placement (feasible for any r) and the floors
        (:func:`trivial_bound` with the operators that need more than r crossbars on the
        host); an empty block is known exactly (a transfer between its cuts, if on two
        devices)."""
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
        floors = {r: trivial_bound(_restricted(sub, r)) for r in sorted({0, *xbars})}
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
        return cls(instance, block, entry_on, exit_on, top, floors,
                   [_point(sub, block, 0, everything_on_host, floors[0])], sums=sums)  # fmt: skip

    def snap(self, room: int) -> int:
        """The most crossbars a placement within ``room`` can use: f(room) = f(snap)."""
        return self.sums[bisect.bisect_right(self.sums, room) - 1]  # every sum is <= top

    def floor(self, room: int) -> float:
        return self.floors[max(r for r in self.floors if r <= room)]

    def upper(self, room: int) -> float:
        """The best window found within ``room`` crossbars."""
        return min(p.window for p in self.points if p.used <= room)

    def lower(self, room: int) -> float:
        """A lower bound of f(room): a bound found with at least that many crossbars."""
        room = self.snap(room)
        return max([self.floor(room), *(p.bound for p in self.points if p.budget >= room)])

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

    def learn(self, budget: int, solve_block: BlockSolver, seconds: float | None) -> None:
        """Solve the block with at most ``budget`` crossbars, from the best placement known
        to fit; keep its placement and bound."""
        sub, starts = self.task(budget)
        self.record(budget, sub, *solve_block(sub, seconds, starts), seconds)

    def task(self, budget: int) -> tuple[CimInstance, list[CimSchedule]]:
        """What a solve with at most ``budget`` crossbars needs: the block instance and
        the best placement known to fit, as a start."""
        sub = block_instance(self.instance, self.block, self.entry_on, self.exit_on, budget)
        fits = [p for p in self.points if p.used <= budget and p.on_host]
        starts = [self._schedule(sub, min(fits, key=lambda p: p.window))] if fits else []
        return sub, starts

    def record(self, budget: int, sub: CimInstance, schedule: CimSchedule, bound: float,
               seconds: float | None) -> None:  # fmt: skip
        """Keep what a solve of :meth:`task` (within ``seconds``) found."""
        schedule = _pinned(sub, schedule, self.entry_on, self.exit_on)
        self.points.append(_point(sub, self.block, budget, schedule,
                                  max(bound, self.floor(budget))))  # fmt: skip
        self.tried[budget] = seconds
        self.solves += 1

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


FrontierKey = tuple[int, "bool | None", "bool | None"]  # block index, entry and exit devices
Pick = tuple[FrontierKey, int]  # a frontier and a point index (upper) or a room (lower)
_Chain = "tuple[Pick, _Chain] | None"  # picks, last first


def _cut_cost(instance: CimInstance, cut: str | None, on: bool | None) -> tuple[float, int]:
    """A cut's latency and crossbars on a device (nothing for a missing cut)."""
    if cut is None:
        return 0.0, 0
    return latency(instance, cut, bool(on)), 0 if on else instance.by_name[cut].crossbars


def _exit_devices(instance: CimInstance, block: Block) -> list[bool | None]:
    return list(devices_of(instance, block.exit)) if block.exit is not None else [None]


def _program(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    choices: Callable[[Frontier], list[tuple[int, int, float]]],
) -> tuple[float, tuple[Pick, ...]]:
    """The least total over the blocks: per frontier, ``choices`` are (label, crossbars,
    window) options; a state is the device of the current cut and the crossbars so far,
    and only states that no state with fewer crossbars matches are kept. A state's picks
    are a linked list (pick, picks before it), unwound once at the end: copying a tuple
    per state made the program quadratic in the number of blocks."""
    budget = instance.crossbar_budget
    states: dict[bool | None, dict[int, tuple[float, _Chain]]] = {None: {0: (0.0, None)}}
    for k, block in enumerate(blocks):
        reached: dict[bool | None, dict[int, tuple[float, _Chain]]] = {}
        for entry_on, table in states.items():
            for exit_on in _exit_devices(instance, block):
                key = (k, entry_on, exit_on)
                cost, extra = _cut_cost(instance, block.exit, exit_on)
                options = choices(frontiers[key])
                target = reached.setdefault(exit_on, {})
                for so_far, (value, picks) in table.items():
                    for label, crossbars, window in options:
                        total = so_far + crossbars + extra
                        if total > budget:
                            continue
                        candidate = value + window + cost
                        best = target.get(total)
                        if best is None or candidate < best[0]:
                            target[total] = (candidate, ((key, label), picks))
        states = {device: _undominated(table) for device, table in reached.items()}
    value, chain = min((v for table in states.values() for v in table.values()),
                       key=lambda v: v[0])  # fmt: skip
    picks: list[Pick] = []
    while chain is not None:
        pick, chain = chain
        picks.append(pick)
    return value, tuple(reversed(picks))


def _undominated(table: dict[int, tuple]) -> dict[int, tuple]:
    """The states that no state with fewer crossbars matches."""
    kept, best = {}, math.inf
    for used in sorted(table):
        if table[used][0] < best:
            kept[used] = table[used]
            best = table[used][0]
    return kept


def best_combination(
    instance: CimInstance, blocks: list[Block], frontiers: dict[FrontierKey, Frontier]
) -> tuple[float, tuple[Pick, ...]]:
    """The fastest combination of the placements found, within the budget."""
    return _program(instance, blocks, frontiers, lambda f: [
        (i, p.used, p.window) for i, p in enumerate(f.points)])  # fmt: skip


def certified_bound(
    instance: CimInstance, blocks: list[Block], frontiers: dict[FrontierKey, Frontier]
) -> tuple[float, tuple[Pick, ...]]:
    """A lower bound of the optimum: the least sum of the blocks' lower bounds over every
    choice of cut devices and split of the budget; and the split (rooms) that reaches it.
    A block's bound only changes at :meth:`Frontier.rooms`, the rooms worth trying."""
    return _program(instance, blocks, frontiers, lambda f: [
        (room, room, f.lower(room)) for room in f.rooms()])  # fmt: skip


def assemble(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    picks: tuple[Pick, ...],
) -> CimSchedule:
    """The whole placement from one point per block and the cuts' devices, timed."""
    on_host: dict[str, bool] = {}
    order: list[str] = []
    for (k, _, exit_on), i in picks:
        point = frontiers[k, _, exit_on].points[i]
        on_host |= point.on_host
        order += point.host_order
        cut = blocks[k].exit
        if cut is not None:
            on_host[cut] = bool(exit_on)
            if exit_on:
                order.append(cut)
    return asap_schedule(instance, on_host, order)


@dataclass
class Decomposed:
    """A decomposed solve: the placement, its certified bound and what it took."""

    schedule: CimSchedule  # the best combination, timed on the whole instance
    lower_bound: float  # certified (seconds)
    blocks: int  # blocks with operators
    cuts: int
    largest_block: int  # operators
    rounds: int  # rounds of block solves
    solves: int  # block solves in all
    ended: str  # why it stopped: "optimal", or what kept it from proving more

    def to_json(self) -> dict[str, object]:
        return {"method": "decomposition", "blocks": self.blocks, "cuts": self.cuts,
                "largest_block": self.largest_block, "rounds": self.rounds,
                "block_solves": self.solves, "lower_bound": self.lower_bound,
                "ended": self.ended}  # fmt: skip


#: Each round of block solves may take this share of the time left: later rounds,
#: which refine what the first one found, get the rest.
ROUND_SHARE = 0.5
#: A block solve may take at least this long (seconds) while the deadline allows.
MIN_BLOCK_SECONDS = 1.0


def decompose(
    instance: CimInstance,
    solve_block: BlockSolver,
    *,
    rel_gap: float = 1e-4,
    left: Callable[[], float | None] = lambda: None,
    blocks_and_cuts: tuple[list[Block], list[str]] | None = None,
    progress: Callable[[str], None] | None = None,
    bounds: Callable[[float, float], None] | None = None,
    solve_batch: BatchSolver | None = None,
    parallel: int = 1,
) -> Decomposed:
    """Solve ``instance`` block by block until the combination is proven within
    ``rel_gap``, nothing more can be learnt, or ``left()`` (the time left, None: no
    limit) runs out (module docstring); ``progress`` gets a line after every round,
    ``bounds`` the combination's makespan and certified lower bound before each. In
    a round, each block solve may take a share
    of :data:`ROUND_SHARE` of the time left, by its number of operators, but at least
    :data:`MIN_BLOCK_SECONDS` while any time is left. With ``solve_batch`` (which runs
    ``parallel`` solves at a time), a round's block solves go to it at once, each with
    ``parallel`` times its share; the blocks are independent, so what each learns
    does not depend on the others of its round."""
    blocks, cuts = blocks_and_cuts or split(instance)
    frontiers: dict[FrontierKey, Frontier] = {}
    entry_devices: list[bool | None] = [None]
    for k, block in enumerate(blocks):
        exits = _exit_devices(instance, block)
        for e in entry_devices:
            for x in exits:
                frontiers[k, e, x] = Frontier.start(instance, block, e, x)
        entry_devices = exits
    rounds = 0
    while True:
        tick = time.perf_counter()
        upper, picks = best_combination(instance, blocks, frontiers)
        lower, split_rooms = certified_bound(instance, blocks, frontiers)
        # the next round ends with these two again: keep their time back from its solves
        evaluation = time.perf_counter() - tick
        if bounds is not None:
            bounds(upper, lower)
        if upper - lower <= rel_gap * upper + 1e-15:
            ended = "optimal"
            break
        todo = [(frontiers[key], room) for key, room in split_rooms
                if not frontiers[key].known(room, rel_gap)]  # fmt: skip
        if not todo:  # every block within its gap: the sum is within it too
            ended = "optimal"
            break
        now = left()
        if now is not None:
            now -= evaluation
        if now is not None and now <= 0.0:
            ended = "out of time"
            break
        weight = float(sum(len(front.block.operators) for front, _ in todo))
        if solve_batch is not None:
            solved = _batch_round(todo, solve_batch, parallel, now, weight)
        else:
            round_end = None if now is None else now * (1 - ROUND_SHARE)
            solved = 0
            for front, room in todo:
                share = None
                if round_end is not None:
                    time_left = (left() or 0.0) - evaluation
                    if time_left <= 0.0:  # out of time: even a skipped block solve costs work
                        break
                    share = max(time_left - round_end, 0.0) * len(front.block.operators) / weight
                    # most block solves end far below their share: a small share would only
                    # keep the solver from starting
                    share = min(time_left, max(share, MIN_BLOCK_SECONDS))
                weight -= len(front.block.operators)
                budget = front.budget_to_learn(room, share)
                if budget is not None:
                    front.learn(budget, solve_block, share)
                    solved += 1
        if not solved:
            out = left()
            if out is not None and out - evaluation <= 0.0:
                ended = "out of time"
                break
            ended = "block solves that ended at their time limit leave a gap"
            break
        rounds += 1
        if progress is not None:
            total = sum(f.solves for f in frontiers.values())
            progress(f"decomposition round {rounds}: {solved} block solves ({total} in all);"
                     f" before it, best {upper:.6g} s, bound {lower:.6g} s")  # fmt: skip
    sizes = [len(b.operators) for b in blocks]
    return Decomposed(
        assemble(instance, blocks, frontiers, picks), min(lower, upper),
        sum(1 for s in sizes if s), len(cuts), max(sizes), rounds,
        sum(f.solves for f in frontiers.values()), ended,
    )  # fmt: skip


def _batch_round(
    todo: list[tuple[Frontier, int]], solve_batch: BatchSolver, parallel: int,
    now: float | None, weight: float,
) -> int:  # fmt: skip
    """One round's block solves through ``solve_batch``; how many ran."""
    jobs: list[tuple[Frontier, int, float | None, CimInstance, list[CimSchedule]]] = []
    for front, room in todo:
        share = None
        if now is not None:
            round_end = now * (1 - ROUND_SHARE)
            share = (now - round_end) * parallel * len(front.block.operators) / weight
            share = min(now, max(share, MIN_BLOCK_SECONDS))
        budget = front.budget_to_learn(room, share)
        if budget is not None:
            jobs.append((front, budget, share, *front.task(budget)))
    results = solve_batch([(sub, share, starts) for _, _, share, sub, starts in jobs])
    for (front, budget, share, sub, _), (schedule, bound) in zip(jobs, results, strict=True):
        front.record(budget, sub, schedule, bound, share)
    return len(jobs)
