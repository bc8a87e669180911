"""The copy terms of the PIM loop-nest model: what moves between the host and PIM, as rows.

One function per accounting (:data:`placement.devices.pim.COPY_MODES`) turns the nests'
buffer accesses into variables in [0, 1] with a cost each and the linear rows that force
them up; :func:`add_copy_terms` puts them into a model as ``m.T_copy``. Every variable
multiplies a positive cost, so at an optimum each sits at the largest right-hand side of
its rows: 1 exactly when the placement makes the move, 0 otherwise (the rows are exact
linearizations for binary ``y``). ``placement.pim.verifier`` recomputes the same
accounting by walking the program, and the tests' oracle by a third formulation.

Accesses: a nest's operands naming one buffer are merged (bytes: the largest; read if
any reads, written if any writes). A buffer is *variant* when a nest with
``trip_count > 1`` writes it; a move made at a nest of a variant buffer counts
``trip_count`` times, otherwise once (the value stays put across the iterations of the
enclosing loops). Wrap-around from one iteration of an enclosing loop to the next is not
seen: the nests carry no loop identity.

``exact`` (residency within a segment, at ``B_rd`` / ``B_wb``)
    *fetch*: a read of buffer ``B`` at PIM nest ``i`` moves ``B`` unless an earlier nest
    of the same segment accessed it: ``fetch[B,i] >= y_i - y_k`` for every ``k`` from
    ``B``'s previous access to ``i - 1``, or ``>= y_i`` for its first access. *flush*: the
    value written at PIM nest ``j`` moves back if one of its readers (up to and including
    the next write, which may read in place) runs outside ``j``'s segment:
    ``flush[B,j] >= y_j - y_k``; if nothing writes ``B`` after ``j`` and ``B`` is not a
    temporary, the caller may read it: ``flush[B,j] >= y_j``.

``partitioned`` (each core reaches only its own bank: UPMEM)
    ``exact``'s rows over the link (``link_to_pim`` / ``link_to_host`` bandwidths),
    except for weights and constants (:data:`RESIDENT_ROLES`): they are placed in the
    banks once, at model load (a one-time cost reported beside the per-inference time,
    not in it), and cost nothing per inference. When the banks cannot hold them all
    (``cores x bank_capacity_per_core`` bytes; no limit when the capacity is not given),
    a binary ``resident[B]`` per weight chooses which stay, under that capacity, and a
    weight not resident is fetched like any operand: its fetch rows subtract
    ``resident[B]``. The activations' space in the banks is not counted.

``shared`` (host and PIM address the same DRAM: the paper's Section 2 devices)
    Nothing is copied. A buffer's value belongs to the side that last wrote it; the
    first access from the other side after that write pays once (for the host: the
    first that reads it), and the value is then clean for both sides until the next
    write. A move at a nest of a variant buffer counts ``min(trip_count of the writer,
    trip_count of the nest)`` times: each value written moves at most once, and each
    access moves at most one value; 1 otherwise:

    * host wrote it, a PIM nest accesses it (``writeback[B,i]``): the host's dirty lines
      of ``B`` are written back to DRAM before the segment, ``min(bytes, host_cache)``
      at ``B_wb`` (the host cannot hold more of it dirty than its caches hold; a PIM
      write needs the dirty lines gone too, as x86 has no unprivileged invalidation
      without write-back). ``writeback[B,i] >= y_i - y_w - sum of y_k`` over the
      accesses ``k`` between the write ``w`` and ``i``.
    * PIM wrote it, a host nest reads it (``reread[B,i]``): the host's stale lines are
      invalidated and it re-reads ``min(bytes, host_cache)`` from DRAM at ``B_rd`` (what
      it would have found in its caches had it written the value itself); a host nest
      that only overwrites the value moves nothing.
      ``reread[B,i] >= y_w - y_i - sum of (1 - y_k)``. A value PIM wrote last that the
      caller may read (not a temporary) is re-read once after the program
      (``reread[B, "end"]``).
    * before the program, weights, constants and outputs are clean; a model input is
      dirty in the host's caches when the profile's cache state is ``warm`` (the host
      just wrote it) and clean when it is ``cold`` (written back before the run, as the
      profile measured it): with ``warm`` its first PIM access pays a write-back.

    The bound on dirty bytes is per buffer: the sum over the buffers of one segment is
    not capped by the cache size as well (that would make the cost concave). Every term
    is at most Eq. 8's term for the same buffer at the same nest (a write-back) or at its
    PIM writer (a re-read), so ``shared`` never costs more than Eq. 8.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyomo.environ as pyo

from placement.devices.pim import PARTITIONED_COPY, SHARED_COPY, copy_bandwidths
from placement.hardware.pim import PimSpec
from placement.nests import CONSTANT, INPUT, WEIGHT, LoopNest

#: Buffers a partitioned device keeps in its banks from model load on.
RESIDENT_ROLES = frozenset({WEIGHT, CONSTANT})
#: The key of the caller's read after the program (shared accounting).
END = "end"


@dataclass(frozen=True)
class Access:
    """One nest's access of one buffer (its operands on that buffer merged)."""

    pos: int
    nbytes: int
    read: bool
    written: bool
    kind: str
    role: str


def buffer_accesses(nests: Sequence[LoopNest]) -> dict[str, list[Access]]:
    """Per buffer, its accesses in program order; operands of one nest on one buffer merged."""
    out: dict[str, list[Access]] = {}
    for pos, n in enumerate(nests):
        merged: dict[str, Access] = {}
        for op in n.operands:
            old = merged.get(op.buffer)
            if old is None:
                merged[op.buffer] = Access(
                    pos, op.nbytes, op.read, op.written, op.kind, op.buffer_role
                )
            else:
                merged[op.buffer] = Access(
                    pos, max(old.nbytes, op.nbytes), old.read or op.read,
                    old.written or op.written, old.kind, old.role,
                )  # fmt: skip
        for buf, acc in merged.items():
            if acc.read or acc.written:
                out.setdefault(buf, []).append(acc)
    return out


def is_variant(nests: Sequence[LoopNest], accesses: Sequence[Access]) -> bool:
    """Is the buffer written inside an enclosing loop (its value changes every trip)?"""
    return any(a.written and nests[a.pos].trip_count > 1 for a in accesses)


@dataclass
class CopyTerms:
    """Variables ``(name, buffer, nest id)`` with their cost in seconds and their rows.

    A row ``(key, coefficients, constant)`` reads ``var[key] >= constant + sum of
    coefficient * y[nest]``; a term ``("resident", buffer)`` in the coefficients stands for
    the residency binary of that weight (partitioned accounting, capacity binding).
    """

    cost: dict[tuple[str, str, str], float] = field(default_factory=dict)
    rows: list[tuple[tuple[str, str, str], tuple[tuple[Any, float], ...], float]] = field(
        default_factory=list
    )
    resident_bytes: dict[str, int] = field(default_factory=dict)  # choosable residents
    capacity: float | None = None  # bytes the banks hold (binding: resident_bytes is set)


def exact_terms(
    nests: Sequence[LoopNest], to_pim: float, to_host: float,
    resident: frozenset[str] = frozenset(), choosable: frozenset[str] = frozenset(),
) -> CopyTerms:  # fmt: skip
    """``exact``'s fetch and flush rows at the given bandwidths (B/s); buffers in
    ``resident`` are never fetched, those in ``choosable`` unless ``resident[B]``."""
    ids = [n.id for n in nests]
    terms = CopyTerms()
    for buf, accs in buffer_accesses(nests).items():
        if buf in resident:
            continue
        invariant = not is_variant(nests, accs)
        minus = ((("resident", buf), -1.0),) if buf in choosable else ()
        for idx, a in enumerate(accs):
            nid = ids[a.pos]
            if a.read:
                mult = 1 if invariant else nests[a.pos].trip_count
                key = ("fetch", buf, nid)
                terms.cost[key] = a.nbytes * mult / to_pim
                if idx == 0:
                    terms.rows.append((key, ((nid, 1.0), *minus), 0.0))
                else:
                    for k in range(accs[idx - 1].pos, a.pos):
                        terms.rows.append((key, ((nid, 1.0), (ids[k], -1.0), *minus), 0.0))
            if a.written:
                later = accs[idx + 1 :]
                nxt = next((i for i, b in enumerate(later) if b.written), None)
                window = later if nxt is None else later[: nxt + 1]
                readers = [b.pos for b in window if b.read]
                escapes = nxt is None and a.kind != "alloc"
                if not escapes and not readers:
                    continue  # overwritten or dropped unread: never flushed
                key = ("flush", buf, nid)
                terms.cost[key] = a.nbytes * nests[a.pos].trip_count / to_host
                if escapes:
                    terms.rows.append((key, ((nid, 1.0),), 0.0))
                else:
                    for k in range(a.pos + 1, max(readers) + 1):
                        terms.rows.append((key, ((nid, 1.0), (ids[k], -1.0)), 0.0))
    return terms


def partitioned_terms(nests: Sequence[LoopNest], spec: PimSpec, n_cores: int) -> CopyTerms:
    """``partitioned``: exact residency over the link, weights and constants in the banks
    (all of them, or a choice under the banks' capacity)."""
    to_pim, to_host = copy_bandwidths(spec, PARTITIONED_COPY)
    candidates = resident_candidates(nests)
    capacity = bank_capacity(spec, n_cores)
    if capacity is None or sum(candidates.values()) <= capacity:
        return exact_terms(nests, to_pim, to_host, resident=frozenset(candidates))
    terms = exact_terms(nests, to_pim, to_host, choosable=frozenset(candidates))
    terms.resident_bytes = dict(candidates)
    terms.capacity = capacity
    return terms


def resident_candidates(nests: Sequence[LoopNest]) -> dict[str, int]:
    """Weights and constants that some nest reads and none writes, with their bytes."""
    return {
        buf: max(a.nbytes for a in accs)
        for buf, accs in buffer_accesses(nests).items()
        if accs[0].role in RESIDENT_ROLES
        and any(a.read for a in accs)
        and not any(a.written for a in accs)
    }


def bank_capacity(spec: PimSpec, n_cores: int) -> float | None:
    """Bytes the PIM banks of ``n_cores`` cores hold; None when the spec does not say."""
    per_core = spec.bank_capacity_per_core
    return None if per_core is None else per_core * n_cores


def initially_dirty(role: str, cache: str) -> bool:
    """Before the program, is the buffer's value dirty in the host's caches?"""
    return role == INPUT and cache == "warm"


def shared_terms(nests: Sequence[LoopNest], spec: PimSpec, cache: str) -> CopyTerms:
    """``shared``: write-backs of host-dirty data before PIM touches it, re-reads of what
    PIM wrote when the host touches it (module docstring)."""
    to_pim, to_host = copy_bandwidths(spec, SHARED_COPY)
    assert spec.host_cache is not None  # the spec's memory checks guarantee it
    limit = spec.host_cache
    ids = [n.id for n in nests]
    terms = CopyTerms()
    for buf, accs in buffer_accesses(nests).items():
        variant = is_variant(nests, accs)
        writer: int | None = None  # index in accs of the latest write before idx
        for idx, a in enumerate(accs):
            nid = ids[a.pos]
            trips = 1
            if variant and writer is not None:
                trips = min(nests[a.pos].trip_count, nests[accs[writer].pos].trip_count)
            moved = min(a.nbytes, limit) * trips
            between = accs[(0 if writer is None else writer + 1) : idx]
            if writer is None:
                if initially_dirty(a.role, cache):  # the first PIM access writes it back
                    key = ("writeback", buf, nid)
                    terms.cost[key] = moved / to_pim
                    coefs = ((nid, 1.0), *((ids[b.pos], -1.0) for b in between))
                    terms.rows.append((key, coefs, 0.0))
            else:
                w = ids[accs[writer].pos]
                key = ("writeback", buf, nid)
                terms.cost[key] = moved / to_pim
                coefs = ((nid, 1.0), (w, -1.0), *((ids[b.pos], -1.0) for b in between))
                terms.rows.append((key, coefs, 0.0))
                if a.read:
                    key = ("reread", buf, nid)
                    terms.cost[key] = moved / to_host
                    coefs = ((w, 1.0), (nid, -1.0), *((ids[b.pos], 1.0) for b in between))
                    terms.rows.append((key, coefs, -float(len(between))))
            if a.written:
                writer = idx
        if writer is not None and accs[writer].kind != "alloc":  # the caller reads it
            last = accs[writer]
            after = accs[writer + 1 :]
            key = ("reread", buf, END)
            terms.cost[key] = min(last.nbytes, limit) / to_host
            coefs = ((ids[last.pos], 1.0), *((ids[b.pos], 1.0) for b in after))
            terms.rows.append((key, coefs, -float(len(after))))
    return terms


def add_copy_terms(m: pyo.ConcreteModel, terms: CopyTerms, unit: float) -> None:
    """``m.MOVES``, ``m.move_time``, ``m.move`` and ``m.move_needed`` (and, when the banks'
    capacity binds, ``m.RESIDENT_CHOICES``, ``m.resident``, ``m.bank_capacity``), and
    ``m.T_copy`` as their cost, in model time units."""
    keys = list(terms.cost)
    m.MOVES = pyo.Set(dimen=3, initialize=keys, ordered=True)
    m.move_time = pyo.Param(m.MOVES, initialize={k: terms.cost[k] / unit for k in keys})
    m.move = pyo.Var(m.MOVES, bounds=(0, 1))
    if terms.resident_bytes:
        m.RESIDENT_CHOICES = pyo.Set(initialize=list(terms.resident_bytes), ordered=True)
        m.resident = pyo.Var(m.RESIDENT_CHOICES, within=pyo.Binary)
        # Scaled to GiB so that the row's coefficients stay near 1.
        m.bank_capacity = pyo.Constraint(
            expr=sum(terms.resident_bytes[b] / 2**30 * m.resident[b] for b in m.RESIDENT_CHOICES)
            <= terms.capacity / 2**30
        )

    def term(t: Any) -> Any:
        return m.resident[t[1]] if isinstance(t, tuple) else m.pim[t]

    m.move_needed = pyo.Constraint(
        range(len(terms.rows)),
        rule=lambda m, r: m.move[terms.rows[r][0]]
        >= terms.rows[r][2] + sum(c * term(t) for t, c in terms.rows[r][1]),
    )
    m.T_copy = pyo.Expression(expr=sum(m.move[k] * m.move_time[k] for k in m.MOVES))


def moves_made(m: pyo.ConcreteModel) -> dict[tuple[str, str, str], bool]:
    """The moves a solved model makes (variables rounded at 0.5)."""
    return {k: (m.move[k].value or 0.0) > 0.5 for k in m.MOVES}


def chosen_residents(m: pyo.ConcreteModel) -> frozenset[str] | None:
    """The weights a solved model keeps in the banks where it chose (None: no choice made)."""
    if not hasattr(m, "resident"):
        return None
    return frozenset(b for b in m.RESIDENT_CHOICES if (m.resident[b].value or 0.0) > 0.5)

