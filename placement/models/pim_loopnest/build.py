"""Optimal host/PIM placement of loop nests (Torch-PIM's Eq. 9 as the objective) in Pyomo.

The paper decides per nest with a threshold rule (``placement.pim.rules``) and only
*measures* the result with Eq. 9. Here Eq. 9 is minimized exactly over all
placements, with its switch and copy costs, so the rule can be compared with
the optimum on the same cost model.

``build_pim_model(instance, copy=..., granularity=...)`` returns a plain
:class:`pyomo.environ.ConcreteModel`. Components:

=========================  ===========================================================
``m.NESTS``                nest ids in program order
``m.BOUNDARIES``           0..n: boundary b lies before nest b (b = n: after the last)
``m.pim[n]``               y_n, binary, 1 = nest on PIM
``m.switch[b]``            transition at boundary b, in [0, 1] (integral at any optimum)
``m.fetch[buf, n]``        exact copy only: buffer fetched for its read at nest n, [0, 1]
``m.flush[buf, n]``        exact copy only: value written at nest n flushed, [0, 1]
``m.T_host, m.T_pim,``     Expressions of Eq. 9's terms, in model time units
``m.T_copy, m.N_region``
``m.objective``            Eq. 9: T_host + T_pim(N) + T_copy + N_region * T_sw
``m.time_unit``            seconds per model time unit (see "Scaling")
=========================  ===========================================================

N_region. Execution starts and ends on the host. With ``y_{-1} = y_n = 0``,
boundary ``b`` is a transition when ``y_{b-1} != y_b``; ``N_region`` counts
them, so each maximal run of consecutive PIM nests (a *segment*) costs two
transitions (enter and leave), ``2 * T_sw``. The program order is the flat
order of the nests; repetitions by enclosing loops are not multiplied (the
nests carry no loop identity, only a trip count).

Copy accounting (``copy=``):

* ``"upper_bound"`` -- Eq. 8: every PIM nest fetches its read set and flushes
  its write set, ``trip_count`` times (``LoopNest.fetch_bytes``/``flush_bytes``).
* ``"exact"`` -- residency within a segment. Operands naming the same buffer in
  one nest are merged (bytes: the largest). Within a segment:

  - *fetch*: a read of buffer ``B`` at nest ``i`` moves ``B`` to PIM unless an
    earlier nest of the same segment already accessed ``B`` (read it: it is
    resident; wrote it: it was produced there). With ``p`` the latest access of
    ``B`` before ``i``: ``fetch[B,i] >= y_i - y_k`` for every ``k`` in ``[p, i-1]``
    (some host nest in between breaks the segment), or ``fetch[B,i] >= y_i``
    when there is no ``p``. Counted once if no nest with ``trip_count > 1``
    writes ``B`` (unchanged across iterations of any enclosing loop, so it stays
    resident), else ``trip_count`` of nest ``i`` times.
  - *flush*: the value written at nest ``j`` must reach the host if one of its
    readers -- reads after ``j`` up to and including the next write ``w`` of
    ``B`` (an in-place write reads first) -- runs outside ``j``'s segment:
    ``flush[B,j] >= y_j - y_k`` for ``k`` in ``[j+1, last reader]``. If nothing
    writes ``B`` after ``j`` and ``B`` is not a temporary (``kind`` argument or
    global: the caller may read it), ``flush[B,j] >= y_j``. A value overwritten
    unread is dead and never flushed. Counted ``trip_count`` of nest ``j`` times.

  Each term is at most the corresponding Eq. 8 term, so for every placement
  exact <= upper bound. Residency does not survive a host segment: data a PIM
  segment wrote and a later PIM segment reads is flushed and fetched again.

Granularity (``granularity=``): ``"loop"`` decides per nest; ``"operator"`` ties
all nests of one ONNX node (``m.tie``: ``y_n = y_first``), as the paper's
operator-level baseline. Nests with an unknown node (``onnx_node == ""``) stay
free. ``"basic-block"`` decides per basic block of every nest, the paper's
basic-block baseline (:mod:`placement.models.pim_loopnest.basic_blocks`: ``m.pim[n]`` is then the
decision of nest ``n``'s body blocks, which hold all its memory accesses, so the copy
terms below are unchanged; the other blocks get ``m.block_pim``, and switches are
counted at every crossing of an edge between blocks as well as between nests).

Scaling: times are built in a power-of-ten unit ``m.time_unit`` seconds so that
an upper bound of the objective (CPU-only time + all PIM times + Eq. 8 for all
nests + (n+1) switches) lies in [1e4, 1e5) model units, where HiGHS's absolute
tolerances are negligible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyomo.environ as pyo

from placement.blocks import NestBlocks
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.models.common import power_of_ten_unit
from placement.models.pim_loopnest.basic_blocks import add_block_terms
from placement.nests import LoopNest

_DECADE = 4  # the objective's upper bound lands in [1e4, 1e5) model units

COPY_MODES = ("upper_bound", "exact")
BASIC_BLOCK = "basic-block"
GRANULARITIES = ("loop", "operator", BASIC_BLOCK)


class PimProblem(Protocol):
    """What the model reads from an instance (a :class:`placement.pim.instance.PimInstance`)."""

    @property
    def nests(self) -> tuple[LoopNest, ...]: ...

    @property
    def t_cpu(self) -> Mapping[str, float]: ...

    @property
    def spec(self) -> PimSpec: ...

    @property
    def cpu_only(self) -> float: ...

    @property
    def pim_times(self) -> Mapping[str, float]: ...

    def pim_time(self, nest_id: str) -> float: ...

    def operator_groups(self) -> list[list[str]]: ...

    @property
    def nest_blocks(self) -> Mapping[str, NestBlocks]: ...  # basic-block granularity only


def check_mode(copy: str, granularity: str) -> None:
    """One-line errors for an unknown copy accounting or granularity."""
    if copy not in COPY_MODES:
        raise PlacementError(f"unknown copy accounting {copy!r}; known: {', '.join(COPY_MODES)}")
    if granularity not in GRANULARITIES:
        raise PlacementError(
            f"unknown granularity {granularity!r}; known: {', '.join(GRANULARITIES)}"
        )


# --- copy bookkeeping -------------------------------------------------------------------


@dataclass(frozen=True)
class _Access:
    pos: int
    nbytes: int
    read: bool
    written: bool
    kind: str


def _accesses(nests: tuple[LoopNest, ...]) -> dict[str, list[_Access]]:
    """Per buffer, its accesses in program order; operands of one nest on one buffer merged."""
    out: dict[str, list[_Access]] = {}
    for pos, n in enumerate(nests):
        merged: dict[str, _Access] = {}
        for op in n.operands:
            old = merged.get(op.buffer)
            if old is None:
                merged[op.buffer] = _Access(pos, op.nbytes, op.read, op.written, op.kind)
            else:
                merged[op.buffer] = _Access(
                    pos, max(old.nbytes, op.nbytes), old.read or op.read,
                    old.written or op.written, old.kind,
                )
        for buf, acc in merged.items():
            if acc.read or acc.written:
                out.setdefault(buf, []).append(acc)
    return out


@dataclass
class _ExactTerms:
    """Exact copy: variables (buffer, nest) with byte multipliers and their forcing rows."""

    fetch_bytes: dict[tuple[str, str], float] = field(default_factory=dict)
    fetch_always: list[tuple[str, str]] = field(default_factory=list)  # f >= y_i
    fetch_rows: list[tuple[str, str, str]] = field(default_factory=list)  # f >= y_i - y_k
    flush_bytes: dict[tuple[str, str], float] = field(default_factory=dict)
    flush_always: list[tuple[str, str]] = field(default_factory=list)
    flush_rows: list[tuple[str, str, str]] = field(default_factory=list)


def _exact_terms(nests: tuple[LoopNest, ...]) -> _ExactTerms:
    ids = [n.id for n in nests]
    terms = _ExactTerms()
    for buf, accs in _accesses(nests).items():
        # Loop-invariant: no writer inside an enclosing loop, so it stays resident.
        invariant = not any(a.written and nests[a.pos].trip_count > 1 for a in accs)
        for idx, a in enumerate(accs):
            nid = ids[a.pos]
            if a.read:
                mult = 1 if invariant else nests[a.pos].trip_count
                terms.fetch_bytes[buf, nid] = a.nbytes * mult
                if idx == 0:
                    terms.fetch_always.append((buf, nid))
                else:
                    p = accs[idx - 1].pos
                    terms.fetch_rows.extend((buf, nid, ids[k]) for k in range(p, a.pos))
            if a.written:
                later = accs[idx + 1:]
                nxt = next((i for i, b in enumerate(later) if b.written), None)
                window = later if nxt is None else later[: nxt + 1]
                readers = [b.pos for b in window if b.read]
                escapes = nxt is None and a.kind != "alloc"
                if not escapes and not readers:
                    continue  # overwritten or dropped unread: never flushed
                terms.flush_bytes[buf, nid] = a.nbytes * nests[a.pos].trip_count
                if escapes:
                    terms.flush_always.append((buf, nid))
                else:
                    terms.flush_rows.extend(
                        (buf, nid, ids[k]) for k in range(a.pos + 1, max(readers) + 1)
                    )
    return terms


# --- model ------------------------------------------------------------------------------


def time_unit_for(instance: PimProblem) -> float:
    """Seconds per model unit: a power of ten putting an objective upper bound in [1e4, 1e5)."""
    spec = instance.spec
    bound = (
        instance.cpu_only
        + math.fsum(instance.pim_times.values())
        + sum(n.fetch_bytes for n in instance.nests) / spec.read_bandwidth
        + sum(n.flush_bytes for n in instance.nests) / spec.writeback_bandwidth
        + (len(instance.nests) + 1) * spec.t_sw
    )
    return power_of_ten_unit(bound, _DECADE)


def build_pim_model(
    instance: PimProblem, *, copy: str = "upper_bound", granularity: str = "loop"
) -> pyo.ConcreteModel:
    """Minimize Eq. 9 over host/PIM decisions of ``instance``'s nests (see module docstring)."""
    check_mode(copy, granularity)
    spec = instance.spec
    nests = instance.nests
    ids = [n.id for n in nests]
    unit = time_unit_for(instance)

    m = pyo.ConcreteModel(name="pim_placement")
    m.copy_mode = copy  # plain attributes: how the model was built
    m.granularity = granularity
    m.NESTS = pyo.Set(initialize=ids, ordered=True)
    m.BOUNDARIES = pyo.RangeSet(0, len(ids))
    m.time_unit = pyo.Param(initialize=unit)
    m.t_cpu = pyo.Param(m.NESTS, initialize={i: instance.t_cpu[i] / unit for i in ids})
    m.t_pim = pyo.Param(m.NESTS, initialize={i: instance.pim_time(i) / unit for i in ids})
    m.t_sw = pyo.Param(initialize=spec.t_sw / unit)

    m.pim = pyo.Var(m.NESTS, within=pyo.Binary)
    m.switch = pyo.Var(m.BOUNDARIES, bounds=(0, 1))
    blocks = add_block_terms(m, instance, unit) if granularity == BASIC_BLOCK else None
    entry = m.pim if blocks is None else blocks.entry  # what decides at a nest's boundary

    def y(b: int) -> Any:  # y_{-1} = y_n = 0: start and end on the host
        return entry[ids[b]] if 0 <= b < len(ids) else 0

    # N_region (Eq. 9): switch_b >= |y_b - y_{b-1}|, as two rows.
    m.switch_up = pyo.Constraint(m.BOUNDARIES, rule=lambda m, b: m.switch[b] >= y(b) - y(b - 1))
    m.switch_down = pyo.Constraint(
        m.BOUNDARIES, rule=lambda m, b: m.switch[b] >= y(b - 1) - y(b)
    )

    if granularity == "operator":
        pairs = [(g[0], other) for g in instance.operator_groups() for other in g[1:]]
        m.TIES = pyo.Set(dimen=2, initialize=pairs, ordered=True)
        m.tie = pyo.Constraint(m.TIES, rule=lambda m, a, b: m.pim[b] == m.pim[a])

    if copy == "upper_bound":
        # Eq. 8: fetch / B_rd + flush / B_wb of every PIM nest.
        m.t_copy = pyo.Param(
            m.NESTS,
            initialize={
                n.id: n.fetch_bytes / spec.read_bandwidth / unit
                + n.flush_bytes / spec.writeback_bandwidth / unit
                for n in nests
            },
        )
        m.T_copy = pyo.Expression(expr=sum(m.pim[i] * m.t_copy[i] for i in m.NESTS))
    else:
        _add_exact_copy(m, _exact_terms(nests), spec, unit)

    if blocks is None:
        m.T_host = pyo.Expression(expr=sum((1 - m.pim[i]) * m.t_cpu[i] for i in m.NESTS))
        m.T_pim = pyo.Expression(expr=sum(m.pim[i] * m.t_pim[i] for i in m.NESTS))
        m.N_region = pyo.Expression(expr=sum(m.switch[b] for b in m.BOUNDARIES))
    else:
        m.T_host = pyo.Expression(expr=blocks.t_host)
        m.T_pim = pyo.Expression(expr=blocks.t_pim)
        m.N_region = pyo.Expression(expr=sum(m.switch[b] for b in m.BOUNDARIES) + blocks.crossings)
        m.T_copy_indices = pyo.Expression(expr=blocks.t_copy)  # part of T_copy
        m.T_copy.set_value(m.T_copy.expr + m.T_copy_indices)
    # Eq. 9: T_hybrid(N) = T_host + T_pim(N) + T_copy + N_region * T_sw.
    m.objective = pyo.Objective(
        expr=m.T_host + m.T_pim + m.T_copy + m.N_region * m.t_sw, sense=pyo.minimize
    )
    return m


def _add_exact_copy(m: pyo.ConcreteModel, terms: _ExactTerms, spec: PimSpec, unit: float) -> None:
    m.FETCH = pyo.Set(dimen=2, initialize=list(terms.fetch_bytes), ordered=True)
    m.FLUSH = pyo.Set(dimen=2, initialize=list(terms.flush_bytes), ordered=True)
    m.fetch_time = pyo.Param(
        m.FETCH,
        initialize={k: v / spec.read_bandwidth / unit for k, v in terms.fetch_bytes.items()},
    )
    m.flush_time = pyo.Param(
        m.FLUSH,
        initialize={k: v / spec.writeback_bandwidth / unit for k, v in terms.flush_bytes.items()},
    )
    m.fetch = pyo.Var(m.FETCH, bounds=(0, 1))
    m.flush = pyo.Var(m.FLUSH, bounds=(0, 1))
    # Fetch unless the buffer was accessed earlier in the same PIM segment.
    m.fetch_first = pyo.Constraint(
        pyo.Set(dimen=2, initialize=terms.fetch_always, ordered=True),
        rule=lambda m, b, i: m.fetch[b, i] >= m.pim[i],
    )
    m.fetch_needed = pyo.Constraint(
        pyo.Set(dimen=3, initialize=terms.fetch_rows, ordered=True),
        rule=lambda m, b, i, k: m.fetch[b, i] >= m.pim[i] - m.pim[k],
    )
    # Flush when a reader of the value (or the caller, for non-temporaries) is off-segment.
    m.flush_escape = pyo.Constraint(
        pyo.Set(dimen=2, initialize=terms.flush_always, ordered=True),
        rule=lambda m, b, j: m.flush[b, j] >= m.pim[j],
    )
    m.flush_needed = pyo.Constraint(
        pyo.Set(dimen=3, initialize=terms.flush_rows, ordered=True),
        rule=lambda m, b, j, k: m.flush[b, j] >= m.pim[j] - m.pim[k],
    )
    m.T_copy = pyo.Expression(
        expr=sum(m.fetch[k] * m.fetch_time[k] for k in m.FETCH)
        + sum(m.flush[k] * m.flush_time[k] for k in m.FLUSH)
    )


def extract_decisions(model: pyo.ConcreteModel) -> dict[str, bool]:
    """Nest id -> True when the solver put it on PIM (binaries rounded at 0.5); at
    basic-block granularity, where the nest's body blocks run."""
    out: dict[str, bool] = {}
    for i in model.NESTS:
        v = model.pim[i].value
        if v is None:
            raise PlacementError(f"the solver returned no value for nest {i!r}")
        out[i] = v > 0.5
    return out



