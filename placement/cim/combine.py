"""Combining what is known of the blocks' frontiers (:mod:`placement.cim.frontier`) into
bounds of the whole instance's optimum.

The blocks form a chain: a path picks, per block, the device of the cut after it and
what the block gets. Three programs over that chain:

* :func:`best_combination`: over the placements found, the fastest combination within
  the budget (dynamic programming over the crossbars used so far): the placement
  reported, an upper bound of the optimum;
* :func:`certified_bound`: over the blocks' lower bounds, the least any split of the
  budget could reach (the same program), a certified lower bound, and the split that
  reaches it;
* :func:`dual`: the Lagrangian relaxation of the budget (Eq. 14). With the crossbars
  priced at p seconds each, every block takes what minimizes its window + p x
  crossbars on its own, and the least path minus p x budget bounds the optimum from
  below for every p >= 0 (the budget is met, so the priced crossbars cost at most
  p x budget). Over the blocks' lower bounds that is a certified bound that needs no
  budget dimension; over the placements found, its best price is where a priced solve
  of the blocks teaches most (Dantzig-Wolfe: the price at which the placements found
  balance the budget).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from placement.cim.frontier import Block, Frontier, devices_of
from placement.cim.instance import CimInstance
from placement.cim.schedule import CimSchedule, CrossbarCost, asap_schedule, latency

FrontierKey = tuple[int, "bool | None", "bool | None"]  # block index, entry and exit devices
Pick = tuple[FrontierKey, int]  # a frontier and a point index (upper) or a room (lower)
_Chain = "tuple[Pick, _Chain] | None"  # picks, last first


def cut_cost(instance: CimInstance, cut: str | None, on: bool | None) -> tuple[float, int]:
    """A cut's latency and crossbars on a device (nothing for a missing cut)."""
    if cut is None:
        return 0.0, 0
    return latency(instance, cut, bool(on)), 0 if on else instance.by_name[cut].crossbars


def exit_devices(instance: CimInstance, block: Block) -> list[bool | None]:
    return list(devices_of(instance, block.exit)) if block.exit is not None else [None]


#: Bounds on the size of a combining program (see :func:`_program`): slot updates (one
#: numpy operation each per option, ~0.1 s per 1e7 here), and slots kept for the way back
#: (5 bytes each).
PROGRAM_MAX_STEPS = 50_000_000
PROGRAM_MAX_SLOTS = 20_000_000


def _program(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    choices: Callable[[FrontierKey, Frontier], list[tuple[int, int, float]]],
    round_up: bool = False,
) -> tuple[float, tuple[Pick, ...]]:
    """The least total over the blocks: per frontier, ``choices`` are (label, crossbars,
    window) options; a state is the device of the current cut and the crossbars so far,
    one array slot per count, so that each option is one vector operation.

    A large program counts crossbars in units of several (at most
    :data:`PROGRAM_MAX_STEPS` slot updates, :data:`PROGRAM_MAX_SLOTS` slots kept for
    the way back): each option's crossbars rounded down (a relaxation: every split of
    the budget is still allowed, a lower bound stays valid) or, with ``round_up``, up (a
    restriction: every combination it picks fits the budget)."""
    menus = {key: choices(key, front) for key, front in frontiers.items()}
    unit, slots = _units(instance, blocks, menus)
    states: dict[bool | None, np.ndarray] = {None: _origin(slots)}
    # per block and exit device: the entry devices tried, per slot the option and entry
    # that reached it, and the options by entry
    trail: list[dict[bool | None, tuple]] = []
    for k, block in enumerate(blocks):
        way = _advance(instance, k, block, states, menus, unit, slots, round_up)
        trail.append({d: w[1:] for d, w in way.items()})
        states = {d: w[0] for d, w in way.items()}
    device, slot = min(((d, int(np.argmin(a))) for d, a in states.items()),
                       key=lambda ds: states[ds[0]][ds[1]])  # fmt: skip
    value = float(states[device][slot])
    picks: list[Pick] = []
    for k in range(len(blocks) - 1, -1, -1):
        entries, option, came, tried = trail[k][device]
        e, i = int(came[slot]), int(option[slot])
        key, menu = tried[e]
        label, crossbars, _ = menu[i]
        picks.append((key, label))
        used = crossbars + cut_cost(instance, blocks[k].exit, device)[1]
        slot -= -(-used // unit) if round_up else used // unit
        device = entries[e]
    return value, tuple(reversed(picks))


Menus = dict[FrontierKey, list[tuple[int, int, float]]]


def _units(instance: CimInstance, blocks: list[Block], menus: Menus) -> tuple[int, int]:
    """Crossbars per slot of a program over ``menus`` and its slots (:func:`_program`)."""
    budget = instance.crossbar_budget
    steps = sum(len(menu) for menu in menus.values()) * (budget + 1)
    unit = max(1, math.ceil(steps / PROGRAM_MAX_STEPS),
               math.ceil(2 * len(blocks) * (budget + 1) / PROGRAM_MAX_SLOTS))  # fmt: skip
    return unit, budget // unit + 1


def _origin(slots: int) -> np.ndarray:
    """Nothing placed yet: no time, no crossbar."""
    table = np.full(slots, np.inf)
    table[0] = 0.0
    return table


def _advance(
    instance: CimInstance, k: int, block: Block, states: dict[bool | None, np.ndarray],
    menus: Menus, unit: int, slots: int, round_up: bool = False,
) -> dict[bool | None, tuple]:  # fmt: skip
    """One block of a program: per device of its exit cut, the least total per slot of
    crossbars after it (from ``states``, the least per slot before it, by the device of
    its entry cut), per slot the option and entry that reached it, the entry devices and
    the options by entry."""
    reached: dict[bool | None, tuple] = {}
    entries = list(states)
    for exit_on in exit_devices(instance, block):
        best = np.full(slots, np.inf)
        option = np.full(slots, -1, dtype=np.int32)
        came = np.zeros(slots, dtype=np.int8)
        tried = []
        for e, entry_on in enumerate(entries):
            key = (k, entry_on, exit_on)
            cost, extra = cut_cost(instance, block.exit, exit_on)
            menu = menus[key]
            tried.append((key, menu))
            table = states[entry_on]
            for i, (_, crossbars, window) in enumerate(menu):
                used = crossbars + extra
                width = -(-used // unit) if round_up else used // unit
                if width >= slots:
                    continue
                candidate = table[: slots - width] + (window + cost)
                better = candidate < best[width:]
                if better.any():
                    best[width:][better] = candidate[better]
                    option[width:][better] = i
                    came[width:][better] = e
        reached[exit_on] = (best, entries, option, came, tried)
    return reached


def _unwound(chain: _Chain) -> tuple[Pick, ...]:
    picks: list[Pick] = []
    while chain is not None:
        pick, chain = chain
        picks.append(pick)
    return tuple(reversed(picks))


def best_combination(
    instance: CimInstance, blocks: list[Block], frontiers: dict[FrontierKey, Frontier]
) -> tuple[float, tuple[Pick, ...]]:
    """The fastest combination of the placements found, within the budget."""
    return _program(instance, blocks, frontiers, lambda _, f: [
        (i, p.used, p.window) for i, p in enumerate(f.points)], round_up=True)  # fmt: skip


def certified_bound(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    rooms: Callable[[FrontierKey, Frontier], Sequence[int]] | None = None,
) -> tuple[float, tuple[Pick, ...]]:
    """A lower bound of the optimum: the least sum of the blocks' lower bounds over every
    choice of cut devices and split of the budget; and the split (rooms) that reaches it.

    Per frontier, the program tries the ``rooms`` (sorted, starting at 0; default
    :meth:`Frontier.rooms`, where its solves change the bound): a block given room ρ_i
    is charged ρ_i crossbars and the lower bound at the last count before ρ_{i+1} (at
    ``top`` for the last), the least of the bound over [ρ_i, ρ_{i+1}) since it never
    grows with more crossbars. So any rooms give a valid bound, and rooms where the
    bound steps give the exact least sum."""
    return _program(instance, blocks, frontiers, _lower_choices(rooms))


def split_with(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    key: FrontierKey,
    room: int,
    rooms: Callable[[FrontierKey, Frontier], Sequence[int]] | None = None,
) -> tuple[Pick, ...]:
    """The split of the budget that :func:`certified_bound`'s program picks when the block
    of frontier ``key`` takes ``room`` crossbars with the key's cut devices (not a bound:
    where the others' lower bounds would have to rise for it to)."""
    others = _lower_choices(rooms)

    def choices(k: FrontierKey, f: Frontier) -> list[tuple[int, int, float]]:
        if k[0] != key[0]:
            return others(k, f)
        return [(room, room, f.lower(room))] if k == key else []

    return _program(instance, blocks, frontiers, choices)[1]


def _lower_choices(
    rooms: Callable[[FrontierKey, Frontier], Sequence[int]] | None,
) -> Callable[[FrontierKey, Frontier], list[tuple[int, int, float]]]:
    """The options of a program over the lower bounds (:func:`certified_bound`)."""
    rooms = rooms or (lambda _, f: f.rooms())

    def choices(key: FrontierKey, f: Frontier) -> list[tuple[int, int, float]]:
        tried = rooms(key, f)
        ends = [r - 1 for r in tried[1:]] + [f.top]
        return [(room, room, f.lower(end)) for room, end in zip(tried, ends, strict=True)]

    return choices


class RestCosts:
    """What the rest of the chain takes at least when the block of a frontier (with its
    entry and exit cuts on the frontier's devices) uses c crossbars, for c up to the
    budget: the least sum of the other blocks' lower bounds over every split of what is
    left of the budget (the program of :func:`certified_bound` without that block), plus
    its exit cut's latency. It never decreases in c.

    So a lower bound v of the least window + cost(crossbars used) of the block (a solve
    priced at this cost) is a lower bound of every placement of the whole instance that
    puts the cuts on those devices: its rest takes at least cost(c). As a bound of the
    block's frontier, f(r) >= v - cost(r) (:class:`~placement.cim.frontier.PricedBound`),
    the certified program gets it back at every split. Counts that leave the rest no
    placement cost twice the CPU-only latency and every transfer (more than any
    makespan).

    One pass over the blocks each way serves every frontier: per block, the least total
    of the blocks before it and of those after it, per slot of crossbars and device of
    its cut; a frontier's cost joins the two (a min-plus convolution over the slots)."""

    def __init__(
        self,
        instance: CimInstance,
        blocks: list[Block],
        frontiers: dict[FrontierKey, Frontier],
        rooms: Callable[[FrontierKey, Frontier], Sequence[int]] | None = None,
    ) -> None:
        self.instance, self.blocks = instance, blocks
        choices = _lower_choices(rooms)
        menus = {key: choices(key, front) for key, front in frontiers.items()}
        self.unit, slots = _units(instance, blocks, menus)
        # before[k]: blocks 0..k-1, by the device of block k's entry cut
        self.before: list[dict[bool | None, np.ndarray]] = [{None: _origin(slots)}]
        for k, block in enumerate(blocks):
            way = _advance(instance, k, block, self.before[-1], menus, self.unit, slots)
            self.before.append({d: w[0] for d, w in way.items()})
        # after[k]: blocks k..end, by the device of block k's entry cut
        self.after: list[dict[bool | None, np.ndarray]] = [{None: _origin(slots)}]
        for k in range(len(blocks) - 1, -1, -1):
            entries = list(self.before[k])
            self.after.append(_retreat(instance, k, blocks[k], self.after[-1], entries, menus,
                                       self.unit, slots))  # fmt: skip
        self.after.reverse()
        self.most = 2.0 * (instance.cpu_only_latency
                           + math.fsum(e.t_transfer for e in instance.edges))  # fmt: skip

    def __call__(self, key: FrontierKey) -> CrossbarCost:
        k, entry_on, exit_on = key
        head, tail = self.before[k][entry_on], self.after[k + 1][exit_on]
        slots = len(head)
        rest = np.full(slots, np.inf)  # the least total per slot of the other blocks
        for a in np.flatnonzero(np.isfinite(head)):
            np.minimum(rest[a:], head[a] + tail[: slots - a], out=rest[a:])
        rest = np.minimum.accumulate(rest)  # within that many slots
        seconds, extra = cut_cost(self.instance, self.blocks[k].exit, exit_on)
        budget = self.instance.crossbar_budget
        values = []
        for c in range(budget + 1):
            left = budget - c - extra
            # the others' options are rounded down to slots: they fit in left // unit
            value = seconds + float(rest[left // self.unit]) if left >= 0 else np.inf
            values.append(min(value, self.most))
        return CrossbarCost(tuple(values))


def _retreat(
    instance: CimInstance, k: int, block: Block, after: dict[bool | None, np.ndarray],
    entries: list[bool | None], menus: Menus, unit: int, slots: int,
) -> dict[bool | None, np.ndarray]:  # fmt: skip
    """One block of a program run backwards: per device of its entry cut (``entries``),
    the least total of it and the blocks after it per slot (from ``after``, theirs by the
    device of its exit cut). Options rounded down to slots, as :func:`_advance` does."""
    reached: dict[bool | None, np.ndarray] = {}
    for entry_on in entries:
        best = np.full(slots, np.inf)
        for exit_on in exit_devices(instance, block):
            cost, extra = cut_cost(instance, block.exit, exit_on)
            table = after[exit_on]
            for _, crossbars, window in menus[k, entry_on, exit_on]:
                width = (crossbars + extra) // unit
                if width < slots:
                    np.minimum(best[width:], table[: slots - width] + (window + cost),
                               out=best[width:])  # fmt: skip
        reached[entry_on] = best
    return reached


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


#: A frontier's least window + price x crossbars at a price, and the crossbars it takes:
#: :meth:`Frontier.priced_lower` (of the lower bounds) or :meth:`Frontier.priced_upper`
#: (of the placements found).
PricedValue = Callable[[Frontier, float], tuple[float, int]]


@dataclass(frozen=True)
class Dual:
    """The best price found for a :func:`dual` and what it gives."""

    value: float  # the least path at ``price`` minus price x budget (seconds)
    price: float  # seconds per crossbar
    path: tuple[tuple[FrontierKey, int], ...]  # the frontiers on the least path, crossbars


def priced_path(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    priced: PricedValue,
    price: float,
) -> tuple[float, int, tuple[tuple[FrontierKey, int], ...]]:
    """The least cost of a path with the crossbars priced at ``price``: its cost (the
    price of its crossbars included), its crossbars and its frontiers (each with the
    crossbars it takes)."""
    states: dict[bool | None, tuple[float, int, _Chain]] = {None: (0.0, 0, None)}
    for k, block in enumerate(blocks):
        reached: dict[bool | None, tuple[float, int, _Chain]] = {}
        for entry_on, (cost, crossbars, chain) in states.items():
            for exit_on in exit_devices(instance, block):
                key = (k, entry_on, exit_on)
                value, used = priced(frontiers[key], price)
                seconds, extra = cut_cost(instance, block.exit, exit_on)
                total = cost + value + seconds + price * extra
                best = reached.get(exit_on)
                if best is None or (total, crossbars + used + extra) < best[:2]:
                    reached[exit_on] = (total, crossbars + used + extra, ((key, used), chain))
        states = reached
    cost, crossbars, chain = min(states.values(), key=lambda s: s[:2])
    return cost, crossbars, _unwound(chain)


#: Steps of the search for the best price (each a pass over the blocks).
_DUAL_STEPS = 60


def dual(
    instance: CimInstance,
    blocks: list[Block],
    frontiers: dict[FrontierKey, Frontier],
    priced: PricedValue,
) -> Dual:
    """The price p >= 0 maximizing D(p) = least priced path - p x budget, and D there.

    D is concave and piecewise linear, its slope at p the crossbars of the least path
    minus the budget. From a price whose path uses more than the budget and one whose
    path fits, the next price tried is where their two lines meet (bisection when that
    is not strictly between them); when D there is on both lines, it is the maximum.
    """
    budget = instance.crossbar_budget

    def at(price: float) -> tuple[float, int, tuple[tuple[FrontierKey, int], ...]]:
        cost, crossbars, path = priced_path(instance, blocks, frontiers, priced, price)
        return cost - price * budget, crossbars - budget, path

    value, slope, path = at(0.0)
    if slope <= 0:
        return Dual(value, 0.0, path)
    best = Dual(value, 0.0, path)
    lo = (0.0, value, slope)  # price, D, slope > 0
    # a price at which no crossbar pays: every window is below it
    price = 2.0 * (instance.cpu_only_latency + math.fsum(e.t_transfer for e in instance.edges))
    value, slope, path = at(price)
    while slope > 0:  # zero-length windows: any price is too low; take more
        price *= 2.0
        value, slope, path = at(price)
    if value > best.value:
        best = Dual(value, price, path)
    hi = (price, value, slope)  # slope <= 0
    for _ in range(_DUAL_STEPS):
        (p1, d1, g1), (p2, d2, g2) = lo, hi
        if p2 - p1 <= 1e-12 * p2:
            break
        # lines d1 + g1 (p - p1) and d2 + g2 (p - p2) meet at
        meet = (d2 - d1 + g1 * p1 - g2 * p2) / (g1 - g2)
        if not p1 < meet < p2:
            meet = 0.5 * (p1 + p2)
        line = d1 + g1 * (meet - p1)
        value, slope, path = at(meet)
        if value > best.value:
            best = Dual(value, meet, path)
        if value >= line - 1e-12 * abs(line):
            break  # D reaches both lines' meeting point: the maximum
        if slope > 0:
            lo = (meet, value, slope)
        else:
            hi = (meet, value, slope)
    return best
