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
``m.move[kind, buf, n]``   every copy accounting but upper_bound: 1 when the placement
                           moves buffer ``buf`` at nest ``n``, [0, 1] (``kind``: fetch,
                           flush, writeback, reread; :mod:`.copy_terms`)
``m.resident[buf]``        partitioned copy, banks too small for every weight: 1 = weight
                           ``buf`` kept in the banks from model load
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

Copy accounting (``copy=``, :data:`placement.devices.pim.COPY_MODES`; ``"auto"``, the
default, is the instance's memory architecture, :func:`placement.devices.pim.resolve_copy`):

* ``"upper_bound"`` -- Eq. 8: every PIM nest fetches its read set and flushes
  its write set, ``trip_count`` times (``LoopNest.fetch_bytes``/``flush_bytes``).
* ``"exact"`` -- residency within a segment: a buffer is fetched when a segment first
  reads it and flushed when a value the segment wrote is read outside it.
* ``"partitioned"`` -- ``exact`` over the host-PIM link, weights resident in the banks.
* ``"shared"`` -- no copies: write-backs of host-dirty data before PIM touches it,
  re-reads of what PIM wrote when the host touches it.

The rows of all but Eq. 8 are in :mod:`placement.models.pim_loopnest.copy_terms`, with
their definitions. Each exact, shared and partitioned term is at most the corresponding
Eq. 8 term at the same bandwidths, so for every placement they cost no more than the
upper bound.

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
from typing import Any, Protocol

import pyomo.environ as pyo

from placement.blocks import NestBlocks
from placement.devices.pim import (
    COPY_MODES,
    EXACT_COPY,
    SHARED_COPY,
    UPPER_BOUND,
    copy_bandwidths,
    resolve_copy,
)
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.models.common import power_of_ten_unit
from placement.models.pim_loopnest.basic_blocks import add_block_terms
from placement.models.pim_loopnest.copy_terms import (
    add_copy_terms,
    exact_terms,
    partitioned_terms,
    shared_terms,
)
from placement.nests import LoopNest

_DECADE = 4  # the objective's upper bound lands in [1e4, 1e5) model units

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
    def n_cores(self) -> int: ...

    @property
    def cache(self) -> str: ...  # the profile's cache state, "warm" or "cold"

    @property
    def cpu_only(self) -> float: ...

    @property
    def pim_times(self) -> Mapping[str, float]: ...

    def pim_time(self, nest_id: str) -> float: ...

    def operator_groups(self) -> list[list[str]]: ...

    @property
    def nest_blocks(self) -> Mapping[str, NestBlocks]: ...  # basic-block granularity only


def check_mode(copy: str, granularity: str) -> None:
    """One-line errors for an unknown copy accounting (``auto`` or one of
    :data:`COPY_MODES`) or granularity."""
    if copy != "auto" and copy not in COPY_MODES:
        raise PlacementError(
            f"unknown copy accounting {copy!r}; known: auto, {', '.join(COPY_MODES)}"
        )
    if granularity not in GRANULARITIES:
        raise PlacementError(
            f"unknown granularity {granularity!r}; known: {', '.join(GRANULARITIES)}"
        )


# --- model ------------------------------------------------------------------------------


def time_unit_for(instance: PimProblem, copy: str = UPPER_BOUND) -> float:
    """Seconds per model unit: a power of ten putting an objective upper bound in [1e4, 1e5)
    (Eq. 8's bytes at the bandwidths of accounting ``copy`` bound every accounting's)."""
    spec = instance.spec
    to_pim, to_host = copy_bandwidths(spec, copy)
    bound = (
        instance.cpu_only
        + math.fsum(instance.pim_times.values())
        + sum(n.fetch_bytes for n in instance.nests) / to_pim
        + sum(n.flush_bytes for n in instance.nests) / to_host
        + (len(instance.nests) + 1) * spec.t_sw
    )
    return power_of_ten_unit(bound, _DECADE)


def build_pim_model(
    instance: PimProblem, *, copy: str = "auto", granularity: str = "loop"
) -> pyo.ConcreteModel:
    """Minimize Eq. 9 over host/PIM decisions of ``instance``'s nests (see module docstring)."""
    check_mode(copy, granularity)
    spec = instance.spec
    copy = resolve_copy(copy, spec)
    nests = instance.nests
    ids = [n.id for n in nests]
    unit = time_unit_for(instance, copy)

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

    if copy == UPPER_BOUND:
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
    elif copy == EXACT_COPY:
        add_copy_terms(m, exact_terms(nests, *copy_bandwidths(spec, copy)), unit)
    elif copy == SHARED_COPY:
        add_copy_terms(m, shared_terms(nests, spec, instance.cache), unit)
    else:
        add_copy_terms(m, partitioned_terms(nests, spec, instance.n_cores), unit)

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



