"""Independent recomputation of the hybrid time (Eq. 9) of any PIM placement.

Nothing here uses Pyomo or the model code: from the instance's raw data (nests,
``T_cpu``, PIM times) and the per-nest decisions alone, the placement is walked
in program order, segment by segment, and ``T_host``, ``T_pim``, ``T_copy`` and
``N_region`` are recomputed. The model states the same quantities as linear
constraints over per-occurrence variables; a disagreement is a bug in one of
them (or in the solver) and becomes a violation.

Definitions (shared with ``placement.models.pim_loopnest.build``, stated there in full):

* ``N_region``: host<->PIM transitions in the sequence ``host, y_1 .. y_n,
  host`` -- execution starts and ends on the host, so every maximal PIM segment
  costs two transitions.
* ``auto`` copy: the instance's memory architecture (``upper_bound`` when not stated).
* ``upper_bound`` copy: Eq. 8, each PIM nest fetches its read set and flushes
  its write set per invocation.
* ``exact`` copy: per maximal PIM segment, a buffer is fetched once if its first
  access in the segment reads it; a buffer written in the segment is flushed
  once, after its last write there, if that value is read after the segment
  (before being overwritten) or the buffer is not a temporary (``kind !=
  "alloc"``) and is not written again. Fetches of a buffer that no nest inside
  an enclosing loop writes (no writer with ``trip_count > 1``) count once;
  otherwise per invocation of the reading nest. Flushes count per invocation.
* ``partitioned`` copy: ``exact`` over the host-PIM link, except for the weights and
  constants resident in the banks (never written, loaded once at model load: the
  one-time ``load`` of the result). Which are resident is given (the optimum's choice)
  or chosen here: all when the banks hold them, else by fetch time saved per byte.
* ``shared`` copy: a walk with, per buffer, the side that wrote its value and whether
  the other side has touched it since: that first touch pays ``min(bytes, host
  cache)`` -- written back at ``B_wb`` before PIM touches host-written data, re-read at
  ``B_rd`` when the host reads PIM-written data (and after the program, for a
  non-temporary PIM wrote last); a host write alone moves nothing. Before the program
  only a model input under a warm cache is host-written. For a buffer some nest inside
  an enclosing loop writes, a move counts the smaller trip count of the writer and of
  the nest that pays.
* ``basic-block`` granularity (:func:`evaluate_blocks`): a decision per basic block
  (:mod:`placement.blocks`). Each block costs its share of its nest's ``T_cpu`` or PIM
  time; the copies above follow where each nest's body blocks run; transitions are
  counted between the nests' outermost headers (as between nests above) and, inside a
  nest, ``count * trip_count`` times for every edge whose two blocks are placed apart,
  each moving the edge's live loop indices (into PIM over ``B_rd``, back over ``B_wb``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement.devices.pim import (
    EXACT_COPY,
    SHARED_COPY,
    UPPER_BOUND,
    HybridTime,
    copy_bandwidths,
    resolve_copy,
)
from placement.errors import PlacementError, raise_violations
from placement.models.pim_loopnest.build import BASIC_BLOCK, check_mode
from placement.nests import CONSTANT, INPUT, WEIGHT
from placement.pim.instance import PimInstance

_ABS_SLACK = 1e-12  # seconds


@dataclass
class PimVerification:
    ok: bool
    violations: list[str] = field(default_factory=list)
    recomputed: HybridTime | None = None

    def raise_if_failed(self) -> None:
        if not self.ok:
            raise_violations(self.violations)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "violations": list(self.violations),
            "recomputed": None if self.recomputed is None else self.recomputed.to_json(),
        }



def evaluate_placement(
    instance: PimInstance,
    on_pim: Mapping[str, bool],
    *,
    copy: str = "auto",
    resident: Iterable[str] | None = None,
) -> HybridTime:
    """Eq. 9 of the placement ``on_pim`` (nest id -> True for PIM), from the raw data.

    ``resident``: partitioned copy only, the weights kept in the banks (default: chosen
    here, see the module doc); more than the banks hold is an error."""
    check_mode(copy, "loop")
    spec = instance.spec
    copy = resolve_copy(copy, spec)
    nests = instance.nests
    missing = [n.id for n in nests if n.id not in on_pim]
    if missing:
        raise PlacementError(f"the placement has no decision for nest {missing[0]!r}")
    y = [bool(on_pim[n.id]) for n in nests]

    host = math.fsum(instance.t_cpu[n.id] for n, p in zip(nests, y, strict=True) if not p)
    pim = math.fsum(instance.pim_time(n.id) for n, p in zip(nests, y, strict=True) if p)
    states = [False, *y, False]  # start and end on the host
    n_region = sum(1 for a, b in zip(states, states[1:], strict=False) if a != b)

    to_pim, to_host = copy_bandwidths(spec, copy)
    load = 0.0
    if copy == UPPER_BOUND:  # Eq. 8
        fetch = sum(n.fetch_bytes for n, p in zip(nests, y, strict=True) if p)
        flush = sum(n.flush_bytes for n, p in zip(nests, y, strict=True) if p)
        t_copy = fetch / to_pim + flush / to_host
    elif copy == EXACT_COPY:
        t_copy = _exact_copy(instance, y, to_pim, to_host, frozenset())
    elif copy == SHARED_COPY:
        t_copy = _shared_copy(instance, y, to_pim, to_host)
    else:
        in_banks = _residents(instance, y, resident, to_pim, to_host)
        t_copy = _exact_copy(instance, y, to_pim, to_host, in_banks)
        load = _load_bytes(instance, y, in_banks) / to_pim
    return HybridTime(
        host=host, pim=pim, copy=t_copy, n_region=n_region, t_sw=spec.t_sw, load=load
    )


Use = tuple[int, bool, bool, str, str]  # bytes, read, written, kind, role


def _uses(instance: PimInstance) -> list[dict[str, Use]]:
    """Per nest, its buffers with operands naming the same buffer merged."""
    uses: list[dict[str, Use]] = []
    for n in instance.nests:
        merged: dict[str, Use] = {}
        for op in n.operands:
            old = merged.get(op.buffer)
            if old is None:
                merged[op.buffer] = (op.nbytes, op.read, op.written, op.kind, op.buffer_role)
            else:
                merged[op.buffer] = (max(old[0], op.nbytes), old[1] or op.read,
                                     old[2] or op.written, old[3], old[4])  # fmt: skip
        uses.append(merged)
    return uses


def _variant(instance: PimInstance, uses: list[dict[str, Use]]) -> set[str]:
    """Buffers some nest inside an enclosing loop writes."""
    return {b for n, u in zip(instance.nests, uses, strict=True) if n.trip_count > 1
            for b, use in u.items() if use[2]}  # fmt: skip


def _exact_copy(
    instance: PimInstance, y: list[bool], to_pim: float, to_host: float, skip: frozenset[str]
) -> float:
    """Residency within segments; buffers in ``skip`` (resident in the banks) never move."""
    nests = instance.nests
    uses = _uses(instance)
    variant = _variant(instance, uses)
    kind = {b: u[3] for merged in uses for b, u in merged.items()}

    def read_later(buffer: str, after: int) -> bool:
        """Is the value ``buffer`` holds after position ``after`` read before it is overwritten?"""
        for k in range(after + 1, len(nests)):
            use = uses[k].get(buffer)
            if use is None:
                continue
            if use[1]:
                return True
            if use[2]:
                return False  # overwritten unread: dead
        return kind[buffer] != "alloc"  # survives to the end: the program may read it

    fetch = 0.0
    flush = 0.0
    i = 0
    while i < len(nests):
        if not y[i]:
            i += 1
            continue
        end = i
        while end + 1 < len(nests) and y[end + 1]:
            end += 1
        present: set[str] = set(skip)
        last_write: dict[str, int] = {}
        for k in range(i, end + 1):
            for b, (nbytes, r, w, _, _) in uses[k].items():
                if r and b not in present:
                    mult = nests[k].trip_count if b in variant else 1
                    fetch += nbytes * mult
                if r or w:
                    present.add(b)
                if w:
                    last_write[b] = k
        for b, k in last_write.items():
            if read_later(b, end):
                flush += uses[k][b][0] * nests[k].trip_count
        i = end + 1
    return fetch / to_pim + flush / to_host


def _shared_copy(instance: PimInstance, y: list[bool], to_pim: float, to_host: float) -> float:
    """The shared-memory walk of the module doc."""
    nests = instance.nests
    limit = instance.spec.host_cache
    assert limit is not None  # resolve_copy checked it
    uses = _uses(instance)
    variant = _variant(instance, uses)
    owner: dict[str, bool] = {}  # buffer -> side that wrote its value (True = PIM)
    writer_trips: dict[str, int] = {}  # buffer -> trip count of the nest that wrote it
    pending: set[str] = set()  # buffers whose value the other side has not touched yet
    for merged in uses:
        for b, (_, _, _, _, role) in merged.items():
            if b not in owner and role == INPUT and instance.cache == "warm":
                owner[b] = False  # the host just wrote the model's input
                pending.add(b)
            owner.setdefault(b, False)
    written_back = reread = 0.0
    for n, on_pim, merged in zip(nests, y, uses, strict=True):
        for b, (nbytes, r, w, _, _) in merged.items():
            if b in pending and owner[b] != on_pim and (on_pim or r):
                trips = min(n.trip_count, writer_trips.get(b, 1)) if b in variant else 1
                moved = min(nbytes, limit) * trips
                if on_pim:
                    written_back += moved
                else:
                    reread += moved
                pending.discard(b)
            if w:
                owner[b] = on_pim
                writer_trips[b] = n.trip_count
                pending.add(b)
    last = {b: u for merged in uses for b, u in merged.items() if u[2]}  # last write's use
    for b in pending:
        if owner[b] and last[b][3] != "alloc":  # the caller reads what PIM wrote last
            reread += min(last[b][0], limit)
    return written_back / to_pim + reread / to_host


def _candidates(instance: PimInstance) -> dict[str, int]:
    """Weights and constants some nest reads and none writes, with their bytes."""
    sizes: dict[str, int] = {}
    written: set[str] = set()
    read: set[str] = set()
    for merged in _uses(instance):
        for b, (nbytes, r, w, _, role) in merged.items():
            if role in (WEIGHT, CONSTANT):
                sizes[b] = max(sizes.get(b, 0), nbytes)
            if w:
                written.add(b)
            if r:
                read.add(b)
    return {b: s for b, s in sizes.items() if b in read and b not in written}


def _residents(
    instance: PimInstance, y: list[bool], given: Iterable[str] | None,
    to_pim: float, to_host: float,
) -> frozenset[str]:  # fmt: skip
    """The weights in the banks: ``given`` (checked), else all that fit, else a choice by
    fetch time saved per byte."""
    candidates = _candidates(instance)
    per_core = instance.spec.bank_capacity_per_core
    capacity = None if per_core is None else per_core * instance.n_cores
    if given is not None:
        chosen = frozenset(given)
        unknown = sorted(chosen - set(candidates))
        if unknown:
            raise PlacementError(
                f"buffer {unknown[0]!r} cannot be resident: not a weight or constant read"
                " and never written"
            )
        used = _load_bytes(instance, y, chosen)
        if capacity is not None and used > capacity * (1 + 1e-9):
            raise PlacementError(
                f"the resident weights take {used / 2**20:.6g} MiB, more than the"
                f" {capacity / 2**20:.6g} MiB of {instance.n_cores} cores' banks"
            )
        return chosen
    if capacity is None or sum(candidates.values()) <= capacity:
        return frozenset(candidates)
    base = _exact_copy(instance, y, to_pim, to_host, frozenset())
    saving = {
        b: base - _exact_copy(instance, y, to_pim, to_host, frozenset({b})) for b in candidates
    }
    chosen: set[str] = set()
    room = capacity
    for b in sorted(candidates, key=lambda b: (-saving[b] / candidates[b], b)):
        if saving[b] > 0 and candidates[b] <= room:
            chosen.add(b)
            room -= candidates[b]
    return frozenset(chosen)


def _load_bytes(instance: PimInstance, y: list[bool], resident: frozenset[str]) -> float:
    """Bytes of the resident weights some PIM nest reads: placed in the banks at model load."""
    sizes: dict[str, int] = {}
    for on_pim, merged in zip(y, _uses(instance), strict=True):
        if on_pim:
            for b, (nbytes, r, _, _, _) in merged.items():
                if r and b in resident:
                    sizes[b] = max(sizes.get(b, 0), nbytes)
    return float(sum(sizes.values()))


def body_placement(instance: PimInstance, on_block: Mapping[str, bool]) -> dict[str, bool]:
    """Nest id -> where its body blocks run (the first body block's decision)."""
    blocks = instance.nest_blocks
    return {n.id: bool(on_block[blocks[n.id].blocks[blocks[n.id].body[0]].id])
            for n in instance.nests}  # fmt: skip


def block_crossings(instance: PimInstance, on_block: Mapping[str, bool]) -> tuple[int, int]:
    """(transitions between nests incl. start and end, transitions inside nests)."""
    blocks = instance.nest_blocks
    states = [False, *(bool(on_block[blocks[n.id].blocks[0].id]) for n in instance.nests), False]
    between = sum(1 for a, b in zip(states, states[1:], strict=False) if a != b)
    inside = 0
    for n in instance.nests:
        nb = blocks[n.id]
        for e in nb.edges:
            if bool(on_block[nb.blocks[e.src].id]) != bool(on_block[nb.blocks[e.dst].id]):
                inside += e.count * n.trip_count
    return between, inside


def evaluate_blocks(
    instance: PimInstance,
    on_block: Mapping[str, bool],
    *,
    copy: str = "auto",
    resident: Iterable[str] | None = None,
) -> HybridTime:
    """Eq. 9 of the basic-block placement ``on_block`` (block id -> True for PIM)."""
    check_mode(copy, BASIC_BLOCK)
    copy = resolve_copy(copy, instance.spec)
    blocks = instance.nest_blocks
    for n in instance.nests:
        for b in blocks[n.id].blocks:
            if b.id not in on_block:
                raise PlacementError(f"the placement has no decision for block {b.id!r}")
    spec = instance.spec
    host: list[float] = []
    pim: list[float] = []
    moved_in = moved_out = 0
    for n in instance.nests:
        nb = blocks[n.id]
        for b, share in zip(nb.blocks, nb.shares, strict=True):
            if on_block[b.id]:
                pim.append(instance.pim_time(n.id) * share)
            else:
                host.append(instance.t_cpu[n.id] * share)
        for e in nb.edges:
            src, dst = bool(on_block[nb.blocks[e.src].id]), bool(on_block[nb.blocks[e.dst].id])
            if dst and not src:
                moved_in += e.count * n.trip_count * e.live_bytes
            elif src and not dst:
                moved_out += e.count * n.trip_count * e.live_bytes
    nests = evaluate_placement(
        instance, body_placement(instance, on_block), copy=copy, resident=resident
    )
    between, inside = block_crossings(instance, on_block)
    to_pim, to_host = copy_bandwidths(spec, copy)
    indices = moved_in / to_pim + moved_out / to_host
    return HybridTime(host=math.fsum(host), pim=math.fsum(pim), copy=nests.copy + indices,
                      n_region=between + inside, t_sw=spec.t_sw, load=nests.load)  # fmt: skip


def verify_pim(
    instance: PimInstance,
    on_pim: Mapping[str, bool],
    *,
    copy: str = "auto",
    granularity: str = "loop",
    claimed: float | None = None,
    tol: float = 1e-6,
    resident: Iterable[str] | None = None,
) -> PimVerification:
    """Check a placement's completeness and granularity; recompute Eq. 9; compare a claim.

    At basic-block granularity ``on_pim`` maps block ids (:mod:`placement.blocks`) to
    True for PIM, and a nest's body blocks must be placed together. ``resident``: the
    weights a partitioned placement keeps in the banks (checked against their capacity)."""
    check_mode(copy, granularity)
    if granularity == BASIC_BLOCK:
        blocks = instance.nest_blocks
        return _verify(
            [b for n in instance.nests for b in blocks[n.id].ids], on_pim, "block",
            [[blocks[n.id].ids[k] for k in blocks[n.id].body] for n in instance.nests],
            lambda ref, other: f"basic-block granularity: body blocks {ref!r} and {other!r}"
            f" of nest {other.rsplit('.', 1)[0]!r} (its memory accesses) are placed differently",
            lambda: evaluate_blocks(instance, on_pim, copy=copy, resident=resident), claimed,
            tol,
        )  # fmt: skip
    node = {n.id: n.onnx_node for n in instance.nests}
    return _verify(
        list(node), on_pim, "nest", instance.operator_groups() if granularity == "operator" else [],
        lambda ref, other: f"operator granularity: nests {ref!r} and {other!r} of ONNX node"
        f" {node[other]!r} are placed differently",
        lambda: evaluate_placement(instance, on_pim, copy=copy, resident=resident), claimed, tol,
    )  # fmt: skip


def _verify(
    ids: list[str], decisions: Mapping[str, bool], what: str, groups: Iterable[Sequence[str]],
    apart: Callable[[str, str], str], evaluate: Callable[[], HybridTime], claimed: float | None,
    tol: float,
) -> PimVerification:  # fmt: skip
    """Complete decisions, each group placed together (else ``apart(first, member)``), then
    the recomputed Eq. 9 against the claim."""
    known = set(ids)
    bad = [f"{what} {i!r} has no decision in the placement" for i in ids if i not in decisions]
    bad += [f"the placement names unknown {what} {i!r}" for i in decisions if i not in known]
    if bad:
        return PimVerification(ok=False, violations=bad)
    bad = [apart(g[0], k) for g in groups for k in g[1:]
           if bool(decisions[k]) != bool(decisions[g[0]])]  # fmt: skip
    try:
        recomputed = evaluate()
    except PlacementError as exc:  # e.g. more resident weights than the banks hold
        return PimVerification(ok=False, violations=[*bad, str(exc)])
    bad += _claim_violations(recomputed, claimed, tol)
    return PimVerification(ok=not bad, violations=bad, recomputed=recomputed)


def _claim_violations(recomputed: HybridTime, claimed: float | None, tol: float) -> list[str]:
    bad: list[str] = []
    if claimed is not None:
        if not (isinstance(claimed, (int, float)) and math.isfinite(claimed)):
            bad.append(f"claimed hybrid time {claimed!r} is not a finite number")
        else:
            total = recomputed.total
            slack = tol * max(abs(total), abs(claimed)) + _ABS_SLACK
            if abs(total - claimed) > slack:
                bad.append(
                    f"claimed hybrid time {claimed:.9g} s differs from the recomputed"
                    f" {total:.9g} s (T_host {recomputed.host:.6g}, T_pim {recomputed.pim:.6g},"
                    f" T_copy {recomputed.copy:.6g}, N_region {recomputed.n_region})"
                )
    return bad
