"""Exact decomposition of a CIM instance at its cut operators: what to solve, and when
to stop.

The instance splits into blocks between cut operators, coupled only by the crossbar
budget and the cuts' devices (:mod:`placement.cim.frontier`); what is known of each
block's frontier is combined into an upper bound (the best combination of the
placements found, reported) and two certified lower bounds (:mod:`placement.cim.combine`):
the dynamic program over the blocks' lower bounds, and the Lagrangian dual of the
budget over the same bounds. The reported bound is the better of the two.

Frontiers are learnt in rounds of block solves, each round's solves independent of one
another (so they may run in parallel, :mod:`placement.cim.blockwise`):

* *pricing rounds*: at the price where the placements found so far balance the budget
  (the Dantzig-Wolfe price of :func:`~placement.cim.combine.dual`), every block on the
  least priced path whose priced value is not known within the gap is solved priced
  there (at price 0: with all the crossbars it can use). Each such solve gives the
  block a lower bound at every budget at once (f(r) >= v - p r) and a placement, so no
  frontier is walked point by point; the Lagrangian bound climbs to the dual optimum.
* *closing rounds*, once the price is settled (no block left to price, or two pricing
  rounds that moved no bound): the split of the budget that the certified dynamic
  program picks names, per block, the number of crossbars it would get; where the
  block's frontier is not known there within the gap, the block is solved with that
  budget (after its priced solves, these are the budget points near the optimum).

A block that ``by_rest`` names (the pipeline's: one that HiGHS has left unproven, for
CP-SAT to solve) is instead priced by what the rest of the chain takes at least when it
uses c crossbars (:class:`~placement.cim.combine.RestCosts`), in closing rounds and in
pricing rounds once it has been priced: one solve bounds the whole at every split of the
budget between it and the rest, where budget solves would walk its frontier one count
at a time.

When the upper and the lower bound meet, the combination is optimal; when the time is
up or nothing is left to learn (block solves that ended at their time limit), the gap
between them is certified. The combination is re-timed on the whole instance; the
caller verifies it like any other placement.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from placement.cim.combine import (
    Dual,
    FrontierKey,
    RestCosts,
    assemble,
    best_combination,
    certified_bound,
    dual,
    exit_devices,
    priced_path,
    split_with,
)
from placement.cim.frontier import Block, BlockSolver, Frontier, split
from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule, CrossbarCost
from placement.solvers.base import DEFAULT_REL_GAP

#: Several block solves at once (each as for :data:`~placement.cim.frontier.BlockSolver`),
#: results in order.
BatchSolver = Callable[
    [list[tuple[CimInstance, "float | None", "list[CimSchedule]", "float | None"]]],
    list[tuple[CimSchedule, float]],
]


@dataclass
class Decomposed:
    """A decomposed solve: the placement, its certified bound and what it took."""

    schedule: CimSchedule  # the best combination, timed on the whole instance
    lower_bound: float  # certified (seconds): the better of the two below
    program_bound: float  # the dynamic program's over the blocks' lower bounds
    lagrangian_bound: float  # the Lagrangian dual's over the same bounds, at ``price``
    price: float  # seconds per crossbar
    blocks: int  # blocks with operators
    cuts: int
    largest_block: int  # operators
    rounds: int  # rounds of block solves
    solves: int  # block solves in all
    priced_solves: int  # of which priced
    rest_priced_solves: int  # of which priced by what the rest takes
    ended: str  # why it stopped: "optimal", or what kept it from proving more

    def to_json(self) -> dict[str, object]:
        return {"method": "decomposition", "blocks": self.blocks, "cuts": self.cuts,
                "largest_block": self.largest_block, "rounds": self.rounds,
                "block_solves": self.solves, "priced_block_solves": self.priced_solves,
                "lower_bound": self.lower_bound, "program_bound": self.program_bound,
                "lagrangian_bound": self.lagrangian_bound, "crossbar_price": self.price,
                "rest_priced_block_solves": self.rest_priced_solves,
                "ended": self.ended}  # fmt: skip


#: Each round of block solves may take this share of the time left: later rounds,
#: which refine what the first one found, get the rest.
ROUND_SHARE = 0.5
#: A block solve may take at least this long (seconds) while the deadline allows.
MIN_BLOCK_SECONDS = 1.0
#: A frontier with at most this many usable crossbar counts is tried at every one of them
#: by the certified program (an exact program over its bounds) while the program stays
#: small: at most this many (count x budget) steps in all.
EVERY_ROOM_MAX_SUMS = 64
EVERY_ROOM_MAX_STEPS = 20_000_000
#: Pricing rounds in a row that may leave both bounds where they were before closing
#: rounds take over.
PRICING_STALLS = 2

#: :attr:`Decomposed.ended` when ``hand_over`` stopped it.
HANDED_OVER = "handed over"

#: What a round wants learnt of a frontier: the room to learn f at (closing), or the
#: price to solve it at (pricing; price 0: with all the crossbars it can use), or both (a
#: closing want priced by what the rest takes: the room if that solve has nothing to
#: learn in its time).
_Want = tuple[Frontier, "int | None", "float | CrossbarCost | None"]


def decompose(
    instance: CimInstance,
    solve_block: BlockSolver,
    *,
    rel_gap: float = DEFAULT_REL_GAP,
    left: Callable[[], float | None] = lambda: None,
    blocks_and_cuts: tuple[list[Block], list[str]] | None = None,
    progress: Callable[[str], None] | None = None,
    bounds: Callable[[float, float], None] | None = None,
    solve_batch: BatchSolver | None = None,
    parallel: int = 1,
    hand_over: Callable[[float, float], bool] | None = None,
    ready: Callable[[], bool] | None = None,
    by_rest: Callable[[CimInstance], bool] | None = None,
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
    does not depend on the others of its round. ``ready()``, when given, says whether
    ``solve_batch`` can start now (worker processes still starting cannot): until it does,
    block solves run in this process, one at a time, and what is left of a round goes to
    ``solve_batch`` once it is (so a decomposition done in less than the workers take to
    start never waits for them). ``hand_over(best, bound)``, asked before each round
    until a block has been priced by what the rest takes, stops the decomposition when
    true (another method takes over). ``by_rest(block
    instance)``: whether ``solve_block`` should solve that block priced by a
    :class:`~placement.cim.schedule.CrossbarCost` now (closing rounds then do, and
    pricing rounds once it has been priced; module docstring)."""
    blocks, cuts = blocks_and_cuts or split(instance)
    frontiers: dict[FrontierKey, Frontier] = {}
    entry_devices: list[bool | None] = [None]
    for k, block in enumerate(blocks):
        exits = exit_devices(instance, block)
        for e in entry_devices:
            for x in exits:
                frontiers[k, e, x] = Frontier.start(instance, block, e, x)
        entry_devices = exits
    subs: dict[FrontierKey, CimInstance] = {}  # block instances, for ``by_rest``

    def rest_pays(key: FrontierKey) -> bool:
        if by_rest is None:
            return False
        if key not in subs:
            front = frontiers[key]
            subs[key] = front.task(front.top)[0]
        return by_rest(subs[key])

    rounds, stalls, before = 0, 0, (float("inf"), 0.0)
    while True:
        tick = time.perf_counter()
        upper, picks = best_combination(instance, blocks, frontiers)
        lagrange = dual(instance, blocks, frontiers, Frontier.priced_lower)
        rooms = _room_choice(instance, frontiers, lagrange)
        program, split_rooms = certified_bound(instance, blocks, frontiers, rooms)
        lower = max(program, lagrange.value)
        if bounds is not None:
            bounds(upper, lower)
        if upper - lower <= rel_gap * upper + 1e-15:
            ended = "optimal"
            break
        # A block priced by what the rest takes closes the gap in one solve when it ends
        # (CP-SAT's on a block HiGHS did not prove), where the whole model did no better
        # (YOLOv5nu-P2 at 500 ns: benchmarks/README.md): such a decomposition keeps the time.
        rest_priced = any(isinstance(pb.price, CrossbarCost)
                          for f in frontiers.values() for pb in f.priced)  # fmt: skip
        if hand_over is not None and not rest_priced and hand_over(upper, lower):
            ended = HANDED_OVER
            break
        pricing = stalls < PRICING_STALLS
        wants = _pricing(instance, blocks, frontiers, rel_gap, lagrange) if pricing else []
        if wants and by_rest is not None:
            wants = _priced_by_rest(instance, blocks, frontiers, wants, rooms, rest_pays,
                                    rel_gap, closing=False)
        if not wants:
            pricing = False
            wants = _closing(frontiers, split_rooms, rooms, rel_gap)
            if by_rest is not None:
                wants = _priced_by_rest(instance, blocks, frontiers, wants, rooms, rest_pays,
                                        rel_gap, closing=True)
        if not wants and stalls >= PRICING_STALLS:  # nothing to close: price again
            pricing = True
            wants = _pricing(instance, blocks, frontiers, rel_gap, lagrange)
        if not wants:  # every block within its gap at the split, as far as it is known
            ended = "nothing left to learn at the split of the budget"
            break
        # the next round ends with the programs again: keep their time back from its solves
        evaluation = time.perf_counter() - tick
        now = left()
        if now is not None:
            now -= evaluation
        if now is not None and now <= 0.0:
            ended = "out of time"
            break
        if solve_batch is not None and (ready is None or ready()):
            solved = _batch_round(wants, solve_batch, parallel, now, rel_gap)
        else:
            solved, rest = _round(wants, solve_block, left, evaluation, now, rel_gap,
                                  None if solve_batch is None else ready)  # fmt: skip
            now = left()
            now = None if now is None else now - evaluation
            if rest and solve_batch is not None and (now is None or now > 0.0):
                # the workers became ready: the rest of the round goes to them
                solved += _batch_round(rest, solve_batch, parallel, now, rel_gap)
        if not solved:
            out = left()
            if out is not None and out - evaluation <= 0.0:
                ended = "out of time"
                break
            if pricing and stalls < PRICING_STALLS:  # priced solves done: close instead
                stalls = PRICING_STALLS
                continue
            ended = "block solves that ended at their time limit leave a gap"
            break
        rounds += 1
        if pricing:  # a pricing round that moved neither bound counts as a stall
            moved = upper < before[0] * (1 - rel_gap / 4) or lower > before[1] * (1 + rel_gap / 4)
            stalls = 0 if moved else stalls + 1
            before = (upper, lower)
        if progress is not None:
            total = sum(f.solves for f in frontiers.values())
            prices = [w[2] for w in wants if not isinstance(w[2], CrossbarCost)]
            kinds = []
            if prices:
                priced = pricing and prices[0]
                kinds.append(f"priced at {prices[0]:.3g} s/crossbar" if priced else "at budgets")
            if len(prices) < len(wants):
                kinds.append("priced by what the rest takes")
            kind = " or ".join(kinds)
            progress(f"decomposition round {rounds}: {solved} block solves {kind} ({total} in"
                     f" all); before it, best {upper:.6g} s, bound {lower:.6g} s")  # fmt: skip
    sizes = [len(b.operators) for b in blocks]
    return Decomposed(
        assemble(instance, blocks, frontiers, picks), min(lower, upper), min(program, upper),
        min(lagrange.value, upper), lagrange.price, sum(1 for s in sizes if s), len(cuts),
        max(sizes), rounds, sum(f.solves for f in frontiers.values()),
        sum(len(f.priced) for f in frontiers.values()),
        sum(isinstance(pb.price, CrossbarCost) for f in frontiers.values() for pb in f.priced),
        ended,
    )  # fmt: skip


def _pricing(
    instance: CimInstance, blocks: list[Block], frontiers: dict[FrontierKey, Frontier],
    rel_gap: float, lagrange: Dual,
) -> list[_Want]:  # fmt: skip
    """The priced solves worth a round: at the price where the placements found balance
    the budget, the frontiers on the least path (over the placements found, and over the
    lower bounds) whose priced value is not known within ``rel_gap``. Before any solve,
    the only placements known use no crossbars, so that price would be 0 (every block
    with all it can use); the best price of the lower bounds (``lagrange``) is a better
    guess then, where the budget binds."""
    price = dual(instance, blocks, frontiers, Frontier.priced_upper).price
    if not any(f.solves for f in frontiers.values()) and lagrange.price > 0:
        price = lagrange.price
    keys: dict[FrontierKey, None] = {}
    for priced in (Frontier.priced_upper, Frontier.priced_lower):
        path = priced_path(instance, blocks, frontiers, priced, price)[2]
        keys |= dict.fromkeys(key for key, _ in path)
    wants: list[_Want] = []
    for key in keys:
        front = frontiers[key]
        low, high = front.priced_lower(price)[0], front.priced_upper(price)[0]
        if low < high * (1 - rel_gap) - 1e-15:
            wants.append((front, None, price))
    return wants


def _closing(
    frontiers: dict[FrontierKey, Frontier],
    split_rooms: tuple[tuple[FrontierKey, int], ...],
    rooms: Callable[[FrontierKey, Frontier], list[int]],
    rel_gap: float,
) -> list[_Want]:
    """The budget solves worth a round: the frontiers on the certified program's split
    whose bound, as the program charged it (at the end of the room's interval), is not
    within ``rel_gap`` of the best placement found for that room."""
    wants: list[_Want] = []
    for key, room in split_rooms:
        front = frontiers[key]
        tried = rooms(key, front)
        i = tried.index(room)
        end = tried[i + 1] - 1 if i + 1 < len(tried) else front.top
        if front.lower(end) < front.upper(room) * (1 - rel_gap) - 1e-15:
            wants.append((front, room, None))
    return wants


def _priced_by_rest(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    wants: list[_Want],
    rooms: Callable[[FrontierKey, Frontier], list[int]],
    by_rest: Callable[[FrontierKey], bool],
    rel_gap: float,
    closing: bool,
) -> list[_Want]:
    """``wants`` with each frontier that ``by_rest`` allows priced by what the rest takes
    (:class:`~placement.cim.combine.RestCosts`, over the lower bounds at ``rooms``, as the
    certified program charges them). In a pricing round, only frontiers priced before: over
    the others' priced bounds, that cost is at least their priced value minus the price of
    what is left of the budget, so the solve bounds what another price would, and more.
    In a closing round, where that is known within ``rel_gap`` already, the rest is what is
    not known: in its place, the closing wants of the split where the block takes its best
    placement at that cost."""
    keys = {id(front): key for key, front in frontiers.items()}
    costs = None
    priced: dict[int, _Want] = {}
    for front, room, price in wants:
        key = keys[id(front)]
        if (closing or front.priced) and by_rest(key):
            if costs is None:
                costs = RestCosts(instance, blocks, frontiers, rooms)
            price = costs(key)
            lower, upper = front.priced_bounds(price)
            if closing and lower >= upper * (1 - rel_gap) - 1e-15:
                best = min(front.points, key=lambda p: p.window + price(p.used))
                split_rooms = split_with(instance, blocks, frontiers, key, best.used, rooms)
                for want in _closing(frontiers, split_rooms, rooms, rel_gap):
                    if want[0] is not front:
                        priced.setdefault(id(want[0]), want)
                continue
        priced[id(front)] = (front, room, price)
    return list(priced.values())


def _room_choice(
    instance: CimInstance, frontiers: dict[FrontierKey, Frontier], lagrange: Dual
) -> Callable[[FrontierKey, Frontier], list[int]]:
    """The rooms the certified program tries per frontier: where its solves change the
    bound (:meth:`Frontier.rooms`), the room the Lagrangian dual gives it (and the next
    count above, so that the program can charge exactly that room), and every usable
    count of small frontiers and of those priced by what the rest takes (whose bound
    moves at nearly every count) while the program stays small."""
    budget = instance.crossbar_budget + 1

    def exact(front: Frontier) -> bool:
        return len(front.sums) <= EVERY_ROOM_MAX_SUMS or any(
            isinstance(pb.price, CrossbarCost) for pb in front.priced)

    every = sum(len(f.sums) for f in frontiers.values() if exact(f)) * budget \
        <= EVERY_ROOM_MAX_STEPS
    on_path = dict(lagrange.path)

    def rooms(key: FrontierKey, front: Frontier) -> list[int]:
        if every and exact(front):
            return list(front.sums)
        chosen = set(front.rooms())
        if key in on_path:
            room = front.snap(on_path[key])
            chosen.add(room)
            above = front.sums.index(room) + 1
            if above < len(front.sums):
                chosen.add(front.sums[above])
        return sorted(chosen)

    return rooms


def _learnable(want: _Want, share: float | None, rel_gap: float
               ) -> tuple[int, float | CrossbarCost | None] | None:  # fmt: skip
    """The budget and price of the solve that ``want`` asks for within ``share``, None
    when there is nothing to learn there in that time."""
    front, room, price = want
    if isinstance(price, CrossbarCost):
        lower, upper = front.priced_bounds(price)
        if lower >= upper * (1 - rel_gap) - 1e-15:
            # the rest is the gap: f is known wherever the split may move
            return None
        if front.price_to_learn(price, share, rel_gap):
            return front.sums[-1], price
        if room is None:  # a pricing round's
            return None
        price = None  # that solve ended at its limit: the budget solve instead
    if price:
        return (front.sums[-1], price) if front.price_to_learn(price, share, rel_gap) else None
    budget = front.budget_to_learn(front.top if room is None else room, share)
    return None if budget is None else (budget, None)


def _round(
    wants: list[_Want], solve_block: BlockSolver, left: Callable[[], float | None],
    evaluation: float, now: float | None, rel_gap: float,
    stop: Callable[[], bool] | None = None,
) -> tuple[int, list[_Want]]:  # fmt: skip
    """One round's block solves in this process, each with its share of what is left
    when it starts; how many ran, and the wants not tried because ``stop()`` became
    true before them (none when it did not)."""
    weight = float(sum(len(front.block.operators) for front, _, _ in wants))
    round_end = None if now is None else now * (1 - ROUND_SHARE)
    solved = 0
    for k, want in enumerate(wants):
        if stop is not None and stop():
            return solved, wants[k:]
        size = len(want[0].block.operators)
        share = None
        if round_end is not None:
            time_left = (left() or 0.0) - evaluation
            if time_left <= 0.0:  # out of time: even a skipped block solve costs work
                break
            share = max(time_left - round_end, 0.0) * size / weight
            # most block solves end far below their share: a small share would only
            # keep the solver from starting
            share = min(time_left, max(share, MIN_BLOCK_SECONDS))
        weight -= size
        job = _learnable(want, share, rel_gap)
        if job is not None:
            want[0].learn(job[0], solve_block, share, job[1])
            solved += 1
    return solved, []


def _batch_round(
    wants: list[_Want], solve_batch: BatchSolver, parallel: int, now: float | None,
    rel_gap: float,
) -> int:  # fmt: skip
    """One round's block solves through ``solve_batch``; how many ran."""
    weight = float(sum(len(front.block.operators) for front, _, _ in wants))
    jobs = []
    for want in wants:
        share = None
        if now is not None:
            round_end = now * (1 - ROUND_SHARE)
            share = (now - round_end) * parallel * len(want[0].block.operators) / weight
            share = min(now, max(share, MIN_BLOCK_SECONDS))
        job = _learnable(want, share, rel_gap)
        if job is not None:
            budget, price = job
            jobs.append((want[0], budget, price, share, *want[0].task(budget, price)))
    results = solve_batch([(sub, share, starts, price)
                           for _, _, price, share, sub, starts in jobs])  # fmt: skip
    for (front, budget, price, share, sub, _), (schedule, bound) in zip(jobs, results,
                                                                        strict=True):
        front.record(budget, sub, schedule, bound, share, price)
    return len(jobs)
