"""Basic-block granularity of the PIM placement model (``granularity="basic-block"``).

The decision units are the basic blocks of every nest (:mod:`placement.blocks`: the
blocks ``convert-scf-to-cf`` makes of the nest, their executions and the edges between
them). :func:`add_block_terms` adds them to the loop model of
:mod:`placement.models.pim_loopnest.build`, whose ``m.pim[n]`` becomes the decision of nest
``n``'s body blocks (the blocks that access memory, one decision per nest), so the loop model's copy
terms (Eq. 8 or exact residency) apply unchanged to where each nest's buffers are
accessed. Components added:

=========================  ===========================================================
``m.CONTROL``              ids of the other blocks (loop headers, steps), program order
``m.block_pim[b]``         1 = block ``b`` on PIM
``m.EDGES``                (nest id, edge index) of the edges inside nests that can be
                           crossed (executed at least once and not tied)
``m.enter_pim[e]``         crossing of edge ``e`` from a host block into a PIM block, [0, 1]
``m.leave_pim[e]``         crossing from a PIM block into a host block, [0, 1]
``m.edge_tie``             ``y_src == y_dst`` for edges too costly to cross (below)
=========================  ===========================================================

Costs, in the terms of Eq. 9:

* ``T_host``, ``T_pim``: block ``b`` of nest ``n`` costs ``share_b * T_cpu(n)`` on the host
  and ``share_b * T_pim(n)`` on PIM (shares by dynamic op counts, an apportioning; see
  :mod:`placement.blocks`). A nest whose blocks all run on one side costs what it costs
  at loop granularity.
* ``N_region``: the loop model's boundaries between nests (``m.switch``, once each, not
  multiplied by enclosing loops' trips), taken between the nests' outermost headers
  (where control enters and leaves a nest), plus every crossing of an edge inside a
  nest: ``count * trip_count`` times per crossing edge (control passes it that often).
* ``T_copy``: the loop model's copies of the nests' buffers, plus the loop indices live
  across each crossing (``live_bytes``; into PIM over ``B_rd``, back over ``B_wb``), moved
  at every crossing.

So a placement that keeps every nest whole costs exactly its loop-granularity Eq. 9,
and the basic-block optimum is never above the loop optimum.

Ties: a placement crossing edge ``e`` pays at least ``count * trip_count * T_sw``. When
that exceeds the CPU-only time (the all-host placement's Eq. 9, always feasible), no
optimal placement crosses ``e``, so its two blocks are tied: the optimum is unchanged,
and no coefficient dwarfs the objective (an edge inside a hot loop runs millions of
times; its coefficient would otherwise make a binary's integrality tolerance worth more
than the whole objective).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyomo.environ as pyo

from placement.blocks import NestBlocks
from placement.devices.pim import copy_bandwidths
from placement.errors import PlacementError


@dataclass
class BlockTerms:
    """The expressions :func:`add_block_terms` hands back to the loop model."""

    entry: dict[str, Any]  # nest id -> decision of its outermost header (its boundary)
    t_host: Any
    t_pim: Any
    crossings: Any  # switches inside nests (N_region's share)
    t_copy: Any  # loop indices moved at those crossings, model time units


def add_block_terms(m: pyo.ConcreteModel, instance: Any, unit: float) -> BlockTerms:
    """Add the basic-block components to ``m`` (module docstring); ``m.pim`` must exist."""
    spec = instance.spec
    nests = instance.nests
    all_blocks: dict[str, NestBlocks] = instance.nest_blocks
    body_cpu: dict[str, float] = {}
    body_pim: dict[str, float] = {}
    ctl_cpu: dict[str, float] = {}
    ctl_pim: dict[str, float] = {}
    owner: dict[str, str | None] = {}  # block id -> its nest when a body block
    for n in nests:
        nb = all_blocks[n.id]
        shares = nb.shares
        body = set(nb.body)
        t_cpu, t_pim = instance.t_cpu[n.id] / unit, instance.pim_time(n.id) / unit
        body_cpu[n.id] = t_cpu * math.fsum(shares[k] for k in body)
        body_pim[n.id] = t_pim * math.fsum(shares[k] for k in body)
        for k, b in enumerate(nb.blocks):
            owner[b.id] = n.id if k in body else None
            if k not in body:
                ctl_cpu[b.id] = t_cpu * shares[k]
                ctl_pim[b.id] = t_pim * shares[k]
    m.block_owner = owner  # plain attribute: how to read a block's decision back

    m.CONTROL = pyo.Set(initialize=list(ctl_cpu), ordered=True)
    m.block_pim = pyo.Var(m.CONTROL, within=pyo.Binary)
    m.t_cpu_body = pyo.Param(m.NESTS, initialize=body_cpu)
    m.t_pim_body = pyo.Param(m.NESTS, initialize=body_pim)
    m.t_cpu_block = pyo.Param(m.CONTROL, initialize=ctl_cpu)
    m.t_pim_block = pyo.Param(m.CONTROL, initialize=ctl_pim)

    def y(block_id: str) -> Any:
        nest = owner[block_id]
        return m.pim[nest] if nest is not None else m.block_pim[block_id]

    limit = instance.cpu_only  # the all-host placement's Eq. 9
    to_pim, to_host = copy_bandwidths(spec, m.copy_mode)  # the live indices move like data
    free: dict[tuple[str, int], tuple[str, str, float, float, float]] = {}
    tied: list[tuple[str, str]] = []
    for n in nests:
        nb = all_blocks[n.id]
        for k, e in enumerate(nb.edges):
            times = e.count * n.trip_count
            src, dst = nb.blocks[e.src].id, nb.blocks[e.dst].id
            if times == 0 or owner[src] is not None and owner[src] == owner[dst]:
                continue  # never executed, or one decision at both ends
            if times * spec.t_sw > limit:
                tied.append((src, dst))
                continue
            into = times * e.live_bytes / to_pim / unit
            back = times * e.live_bytes / to_host / unit
            free[n.id, k] = (src, dst, float(times), into, back)
    m.EDGES = pyo.Set(dimen=2, initialize=list(free), ordered=True)
    m.enter_pim = pyo.Var(m.EDGES, bounds=(0, 1))
    m.leave_pim = pyo.Var(m.EDGES, bounds=(0, 1))
    m.enter_row = pyo.Constraint(
        m.EDGES, rule=lambda m, n, k: m.enter_pim[n, k] >= y(free[n, k][1]) - y(free[n, k][0])
    )
    m.leave_row = pyo.Constraint(
        m.EDGES, rule=lambda m, n, k: m.leave_pim[n, k] >= y(free[n, k][0]) - y(free[n, k][1])
    )
    m.TIED = pyo.Set(dimen=2, initialize=tied, ordered=True)
    m.edge_tie = pyo.Constraint(m.TIED, rule=lambda m, a, b: y(a) == y(b))

    return BlockTerms(
        entry={n.id: y(all_blocks[n.id].blocks[0].id) for n in nests},
        t_host=sum((1 - m.pim[i]) * m.t_cpu_body[i] for i in m.NESTS)
        + sum((1 - m.block_pim[b]) * m.t_cpu_block[b] for b in m.CONTROL),
        t_pim=sum(m.pim[i] * m.t_pim_body[i] for i in m.NESTS)
        + sum(m.block_pim[b] * m.t_pim_block[b] for b in m.CONTROL),
        crossings=sum(free[e][2] * (m.enter_pim[e] + m.leave_pim[e]) for e in m.EDGES),
        t_copy=sum(free[e][3] * m.enter_pim[e] + free[e][4] * m.leave_pim[e] for e in m.EDGES),
    )


def block_decisions(model: pyo.ConcreteModel) -> dict[str, bool]:
    """Block id -> True when the solver put it on PIM (binaries rounded at 0.5)."""
    out: dict[str, bool] = {}
    for block_id, nest in model.block_owner.items():
        var = model.pim[nest] if nest is not None else model.block_pim[block_id]
        if var.value is None:
            raise PlacementError(f"the solver returned no value for block {block_id!r}")
        out[block_id] = var.value > 0.5
    return out
