"""The paper's operator-level baseline: the same threshold rule, one decision per ONNX node.

Torch-PIM compares loop-level decisions with "operator-level offloading: the same
decision rule is applied at the granularity of the operators the model is written
in, so that all loop nests in a single operator are governed by the same decision"
(Section 5.1; Table 5). Here every ONNX node is one region ``r`` made of its loop
nests (nests with no known node are regions of their own, as in
:meth:`~placement.models.pim.PimInstance.operator_groups`). The region is described
as if a profiler had measured the operator as a black box -- markers around the
whole operator -- and :func:`placement.pim.rules.decide` is applied to that description
unchanged. The decision is then copied to every nest of the node.

Aggregation (what a measurement around the whole operator would report):

* ``T_cpu(r) = sum T_cpu(n)``: one timing region covers all its nests.
* Counters: each Table 1 event is summed over the nests (one counter read around the
  operator). So ``BW_read(r) = sum n_rd * L / sum T_cpu`` (C3) and ``StoreBound(r) =
  sum c_store / sum c_backend`` (C4) -- ratios of sums, not means of ratios. An event
  missing for any nest of the region is missing for the region (a partial sum would
  understate it).
* ``N_total(r) = sum N_total(n) * trips(n)``: the work C1's lower bound
  ``T_pim_min`` charges is the operator's total; ``T_ctx`` is charged once, since the
  operator is entered once.
* ``N_iter(r)`` (C2) = **max** over the nests by default: the operator's iteration
  space as written (its output extent) is what an operator-level framework
  distributes, and it is the largest parallel loop of the operator; a small
  bookkeeping nest (a 64-row reduction init in a softmax) does not veto the operator.
  ``n_iter="min"`` is the strict alternative (every nest must be distributable).
* ``fetch_bytes(r)`` (the estimate of C3 with ``allow_estimates``): the sum of the
  nests' fetch bytes, i.e. the sum of the per-nest read estimates -- consistent with
  summing the off-core read counter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.nests import LoopNest
from placement.pim.rules import RuleDecision, _normalize, decide

if TYPE_CHECKING:
    from placement.models.pim import PimInstance

N_ITER_AGGREGATES = ("max", "min")


@dataclass(frozen=True)
class OperatorRegion:
    """One ONNX node's nests seen as a single candidate region."""

    node: str  # ONNX node name ("" for a nest with no known node)
    nest_ids: tuple[str, ...]
    nest: LoopNest  # the aggregate, fed to placement.pim.rules.decide
    t_cpu: float | None  # None when any nest of the region has no measured time
    counters: dict[str, float] | None  # summed events present for every nest; None if none


def operator_groups(nests: Sequence[LoopNest]) -> list[list[LoopNest]]:
    """Nests grouped by ONNX node in order of first appearance; unknown nodes alone."""
    groups: dict[str, list[LoopNest]] = {}
    out: list[list[LoopNest]] = []
    for n in nests:
        if not n.onnx_node:
            out.append([n])
            continue
        if n.onnx_node not in groups:
            groups[n.onnx_node] = []
            out.append(groups[n.onnx_node])
        groups[n.onnx_node].append(n)
    return out


def aggregate_region(
    nests: Sequence[LoopNest],
    t_cpu: Mapping[str, float | None],
    counters: Mapping[str, Mapping[str, float] | None] | None,
    *,
    n_iter: str = "max",
) -> OperatorRegion:
    """The region of ``nests`` (one node's nests) as described in the module docstring."""
    if not nests:
        raise PlacementError("an operator region needs at least one loop nest")
    if n_iter not in N_ITER_AGGREGATES:
        raise PlacementError(
            f"unknown N_iter aggregate {n_iter!r}; known: {', '.join(N_ITER_AGGREGATES)}"
        )
    first = nests[0]
    pick = max if n_iter == "max" else min
    # Operands are kept per nest (buffer names prefixed) and scaled by the nest's trip
    # count, so the aggregate's fetch/flush bytes are exactly the sums over its nests.
    operands = tuple(
        replace(op, buffer=f"{n.id}:{op.buffer}", nbytes=op.nbytes * n.trip_count)
        for n in nests
        for op in n.operands
    )
    ids = tuple(n.id for n in nests)
    aggregate = LoopNest(
        id=first.id if len(nests) == 1 else f"op:{first.onnx_node or first.id}",
        index=first.index,
        onnx_node=first.onnx_node,
        onnx_op_type=first.onnx_op_type,
        linalg_op="+".join(dict.fromkeys(n.linalg_op for n in nests)),
        n_iter=pick(n.n_iter for n in nests),
        n_total=sum(n.n_total * n.trip_count for n in nests),
        trip_count=1,
        operands=operands,
    )
    times = [t_cpu.get(i) for i in ids]
    total = None if any(t is None for t in times) else math.fsum(times)  # type: ignore[arg-type]
    summed: dict[str, float] | None = None
    if counters:
        per_nest = [_normalize(counters.get(i), i) for i in ids]
        common = set(per_nest[0]).intersection(*per_nest[1:])
        if common:
            summed = {e: math.fsum(c[e] for c in per_nest) for e in sorted(common)}
    return OperatorRegion(first.onnx_node, ids, aggregate, total, summed)


def operator_regions(
    nests: Sequence[LoopNest],
    t_cpu: Mapping[str, float | None],
    counters: Mapping[str, Mapping[str, float] | None] | None = None,
    *,
    n_iter: str = "max",
) -> list[OperatorRegion]:
    """Every operator region of the program, in program order of first nest."""
    return [aggregate_region(g, t_cpu, counters, n_iter=n_iter) for g in operator_groups(nests)]


def apply_operator_rule(
    nests: Sequence[LoopNest],
    t_cpu: Mapping[str, float | None],
    counters: Mapping[str, Mapping[str, float] | None] | None,
    spec: PimSpec,
    n_cores: int | None = None,
    *,
    allow_estimates: bool = False,
    n_iter: str = "max",
) -> dict[str, RuleDecision]:
    """Nest id -> the decision of its operator's region (program order of ``nests``)."""
    by_nest: dict[str, RuleDecision] = {}
    for region in operator_regions(nests, t_cpu, counters, n_iter=n_iter):
        d = decide(
            region.nest, region.t_cpu, region.counters, spec, n_cores,
            allow_estimates=allow_estimates,
        )  # fmt: skip
        where = f"operator {region.node or region.nest_ids[0]} ({len(region.nest_ids)} nests)"
        for nid in region.nest_ids:
            by_nest[nid] = RuleDecision(
                nid, d.place, f"{where}: {d.reason}", d.conditions, d.undetermined
            )
    return {n.id: by_nest[n.id] for n in nests}


def operator_rule_placement(
    instance: PimInstance, *, allow_estimates: bool = False, n_iter: str = "max"
) -> dict[str, RuleDecision]:
    """:func:`apply_operator_rule` on a :class:`~placement.models.pim.PimInstance`."""
    return apply_operator_rule(
        instance.nests,
        instance.t_cpu,
        instance.counters,
        instance.spec,
        instance.n_cores,
        allow_estimates=allow_estimates,
        n_iter=n_iter,
    )
