"""The Torch-PIM two-stage threshold rule (Section 4.4, Eqs. 1-7), per loop nest.

``offload(r) = g_work(r) and g_mem(r)`` (Eq. 1), with

* stage 1, ``g_work = C1 and C2`` (Eq. 2):
  C1 ``T_cpu >= T_ctx + T_pim_min`` (Eq. 3, ``T_pim_min`` from
  :func:`placement.devices.pim.t_pim_min`); C2 ``N_iter >= N_core`` (Eq. 4).
  A nest failing either stays on the host; stage 2 is not evaluated.
* stage 2, ``g_mem = C3 or C4`` (Eq. 5):
  C3 ``BW_read = n_rd * L / T_cpu > theta`` (Eq. 6), where ``theta = theta_ratio x
  B_cpu`` with ``B_cpu`` measured on the profiling host where the profile has it
  (:attr:`placement.pim.instance.PimInstance.theta`; the spec's otherwise), and
  ``T_cpu`` is the elapsed time of the program the counters were counted on
  (``counter_seconds``; the nest's ``T_cpu`` unless given). The two differ with ONNX
  Runtime host times: the counters then come from the compiled program, whose traffic
  over ONNX Runtime's time is a bandwidth no program achieved (the compiled, untiled
  2048^3 matmul's simulated L2 misses over ONNX Runtime's time, 6-7x shorter than its
  own (docs/results.md), read as 380 GB/s, above any single core's DRAM read bandwidth);
  C4 ``StoreBound = c_store / c_backend > sigma`` (Eq. 7), where, following the
  paper's text, ``c_backend`` is the sum of the three backend-bound events
  (``CYCLE_ACTIVITY.STALLS_TOTAL``, ``EXE_ACTIVITY.1_PORTS_UTIL``,
  ``EXE_ACTIVITY.2_PORTS_UTIL``) plus ``c_store``
  (``EXE_ACTIVITY.BOUND_ON_STORES``).

Missing data. Counters (the five Table 1 events) may be absent for a nest, or
only some of them. A condition whose inputs are missing is "not evaluated" and
the record says which event was missing. Only when the caller passes
``allow_estimates=True`` is C3 estimated, as ``BW_read ~ fetch_bytes / T_cpu``
(the bytes a PIM placement would fetch, as if each crossed the LLC once); the
condition is then labelled "estimated". C4 has no estimate. A nest whose stage 2
has no passing condition and at least one unevaluated one stays on the host
(offloading needs evidence), with ``undetermined=True`` in its record.

Simulated counters (:mod:`placement.profiling.simulated`, a callgrind cache
simulation of the same program; used where the Table 1 events are absent, labelled
``simulated`` in every record):

* C3: ``BW_read = sim.offcore_read_bytes / T_cpu``, the simulated LL read misses x the
  line size over the measured time. The simulated LL is the core's last private cache
  (the L2 here), whose read misses are what ``OFFCORE_REQUESTS.ALL_DATA_RD`` counts.
* C4: ``StoreBound_sim = c_store / c_backend`` with cycles estimated the way
  KCachegrind's cycle estimate (CEst) does, one cycle per instruction plus a fixed
  penalty per miss -- ``P_L1 = 10`` cycles for a D1 miss served by the LL and
  ``P_LL = 100`` for an LL miss (the cachegrind manual: an L1 miss costs ~10 cycles,
  an LL miss up to ~200)::

      c_store   = P_LL * DLmw                                  (stores waiting off-core)
      c_backend = Ir + P_L1 * (D1mr + D1mw - DLmr - DLmw) + P_LL * (DLmr + DLmw)

  i.e. the share of the nest's estimated cycles spent on stores whose lines are not
  in the core's caches (read-for-ownership from beyond the LL). Relation to the
  paper: ``EXE_ACTIVITY.BOUND_ON_STORES`` counts cycles the store buffer is full,
  which for a write stream means stores waiting on lines that come from outside the
  core -- the write traffic the off-core *read* counter never sees, which is why the
  paper has C4 at all; ``c_store`` charges exactly those misses. The paper's
  ``c_backend`` (stall cycles + cycles with 1 or 2 ports busy + store-bound cycles)
  becomes the whole data-side estimate: ``Ir`` plays the part of the low-port cycles
  (CEst assumes one instruction per cycle), the miss penalties of the stalls. Stores
  that miss D1 but hit the LL count in ``c_backend`` only: a fill of a buffer that
  stays in the core's caches is not memory traffic PIM could take over. The
  denominator also counts cycles the PMU would call retiring, so the simulated
  fraction is at most the hardware ratio for the same stalls: a conservative C4.
  Typical values: a streaming fill past the LL ~0.8-0.95, an elementwise add (two
  read misses per write miss) ~0.3, nests that stay in cache or call libm per
  element ~0. The simulation has no non-temporal stores (callgrind treats them as
  ordinary write-allocate stores), so the paper's NT-store fill shows up here as LL
  write misses.

Operator level (Table 5's baseline): the same threshold rule, one decision per ONNX node.

Torch-PIM compares loop-level decisions with "operator-level offloading: the same
decision rule is applied at the granularity of the operators the model is written
in, so that all loop nests in a single operator are governed by the same decision"
(Section 5.1; Table 5). Here every ONNX node is one region ``r`` made of its loop
nests (nests with no known node are regions of their own, as in
:meth:`~placement.pim.instance.PimInstance.operator_groups`). The region is described
as if a profiler had measured the operator as a black box -- markers around the
whole operator -- and :func:`decide` is applied to that description
unchanged. The decision is then copied to every nest of the node.

Aggregation (what a measurement around the whole operator would report):

* ``T_cpu(r) = sum T_cpu(n)``: one timing region covers all its nests; likewise the
  counted program's time C3 divides by (``counter_seconds``).
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
from dataclasses import dataclass, field, replace
from typing import Any

from placement.devices.pim import check_cores, t_pim_min
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.nests import LoopNest
from placement.pim.instance import PimInstance
from placement.profiling.counters import (
    BACKEND_EVENTS,
    EV_BOUND_ON_STORES,
    EV_OFFCORE_RD,
    SIM_D1_READ_MISSES,
    SIM_D1_WRITE_MISSES,
    SIM_INSTRUCTIONS,
    SIM_LL_READ_MISSES,
    SIM_LL_WRITE_MISSES,
    SIM_OFFCORE_READ_BYTES,
)
from placement.units import fmt_bandwidth, fmt_time

HOST, PIM = "host", "pim"

# C4 from simulated counters: cycles charged per miss (see the module docstring).
SIM_L1_MISS_CYCLES = 10.0  # P_L1: a D1 miss served by the simulated LL
SIM_LL_MISS_CYCLES = 100.0  # P_LL: an LL miss (off-core)
SIM_C4_EVENTS = (
    SIM_INSTRUCTIONS, SIM_D1_READ_MISSES, SIM_D1_WRITE_MISSES, SIM_LL_READ_MISSES,
    SIM_LL_WRITE_MISSES,
)  # fmt: skip


def simulated_store_bound(events: Mapping[str, float]) -> tuple[float, float] | None:
    """``(c_store, c_backend)`` of the simulated C4 (module docstring), None when an
    input is missing."""
    if any(e not in events for e in SIM_C4_EVENTS):
        return None
    ll_misses = events[SIM_LL_READ_MISSES] + events[SIM_LL_WRITE_MISSES]
    l1_only = max(0.0, events[SIM_D1_READ_MISSES] + events[SIM_D1_WRITE_MISSES] - ll_misses)
    c_store = SIM_LL_MISS_CYCLES * events[SIM_LL_WRITE_MISSES]
    c_backend = (
        events[SIM_INSTRUCTIONS] + SIM_L1_MISS_CYCLES * l1_only + SIM_LL_MISS_CYCLES * ll_misses
    )
    return c_store, c_backend


@dataclass(frozen=True)
class Condition:
    name: str  # "C1" .. "C4"
    passed: bool | None  # None: could not be evaluated
    text: str  # "T_cpu 1.2 us < T_ctx + T_pim_min 2.4 us", or why it was not evaluated
    value: float | None = None
    threshold: float | None = None
    estimated: bool = False
    simulated: bool = False  # from simulated counters (a cache simulation), not hardware
    summary: str = ""  # ``text`` without the nest's own values, e.g. "T_cpu < T_ctx + ..."

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "text": self.text,
            "value": self.value,
            "threshold": self.threshold,
            "estimated": self.estimated,
            "simulated": self.simulated,
        }


@dataclass(frozen=True)
class RuleDecision:
    nest: str
    place: str  # "host" | "pim"
    reason: str  # the deciding condition(s), e.g. "C1 failed: T_cpu 1.2 us < ..."
    conditions: tuple[Condition, ...] = field(default_factory=tuple)
    undetermined: bool = False  # stage 2 could not be decided from the data given
    # The reason without this nest's values: nests decided for the same reason share it.
    summary: str = ""

    @property
    def on_pim(self) -> bool:
        return self.place == PIM

    @property
    def estimated(self) -> bool:
        return any(c.estimated for c in self.conditions)

    @property
    def simulated(self) -> bool:
        return any(c.simulated for c in self.conditions)

    def to_json(self) -> dict[str, Any]:
        return {
            "nest": self.nest,
            "place": self.place,
            "reason": self.reason,
            "summary": self.summary,
            "undetermined": self.undetermined,
            "estimated": self.estimated,
            "simulated": self.simulated,
            "conditions": [c.to_json() for c in self.conditions],
        }


def decide(
    nest: LoopNest,
    t_cpu: float | None,
    counters: Mapping[str, float] | None,
    spec: PimSpec,
    n_cores: int | None = None,
    *,
    allow_estimates: bool = False,
    counter_seconds: float | None = None,
    theta: float | None = None,
) -> RuleDecision:
    """Apply Eqs. 1-7 to one nest; the record names the deciding condition.
    ``counter_seconds``: the counted program's time for C3 (module docstring); ``theta``:
    C3's threshold in B/s (default ``spec.theta``, the spec's own ``B_cpu``)."""
    cores = check_cores(spec.cores if n_cores is None else n_cores)
    events = _normalize(counters, nest.id)

    # Stage 1 (Eq. 2): both conditions are cheap, so both are recorded.
    c1 = _c1(nest, t_cpu, spec, cores)
    c2 = _c2(nest, cores)
    stage1 = (c1, c2)
    for c in stage1:
        if c.passed is False:
            return RuleDecision(
                nest.id, HOST, f"{c.name} failed: {c.text}", stage1,
                summary=f"{c.name} failed: {c.summary}",
            )  # fmt: skip
    for c in stage1:
        if c.passed is None:
            return RuleDecision(
                nest.id, HOST, f"{c.name} not evaluated: {c.text}; kept on host", stage1, True,
                summary=f"{c.name} not evaluated: {c.summary}; kept on host",
            )  # fmt: skip

    # Stage 2 (Eq. 5): C3 or C4.
    assert t_cpu is not None  # C1 passed
    if counter_seconds is not None:
        _check_time(counter_seconds, nest.id, "counted-program time")
    theta = spec.theta if theta is None else theta
    c3 = _c3(nest, t_cpu, events, theta, spec.cache_line, allow_estimates, counter_seconds)
    c4 = _c4(events, spec)
    conds = (*stage1, c3, c4)
    passed = [c for c in (c3, c4) if c.passed]
    if passed:
        reason = "; ".join(f"{c.name} passed{_est(c)}: {c.text}" for c in passed)
        summary = "; ".join(f"{c.name} passed{_est(c)}: {c.summary}" for c in passed)
        return RuleDecision(nest.id, PIM, reason, conds, summary=summary)
    unknown = [c for c in (c3, c4) if c.passed is None]
    tail = "; kept on host" if unknown else ""

    def verdict(c: Condition) -> str:
        return f"{c.name} {'not evaluated' if c.passed is None else 'failed'}{_est(c)}"

    reason = "; ".join(f"{verdict(c)}: {c.text}" for c in (c3, c4)) + tail
    summary = "; ".join(f"{verdict(c)}: {c.summary}" for c in (c3, c4)) + tail
    return RuleDecision(nest.id, HOST, reason, conds, bool(unknown), summary)


def apply_rule(
    nests: list[LoopNest] | tuple[LoopNest, ...],
    t_cpu: Mapping[str, float | None],
    counters: Mapping[str, Mapping[str, float] | None] | None,
    spec: PimSpec,
    n_cores: int | None = None,
    *,
    allow_estimates: bool = False,
    counter_seconds: Mapping[str, float] | None = None,
    theta: float | None = None,
) -> dict[str, RuleDecision]:
    """The rule's decision for every nest, keyed by nest id, in program order."""
    counters = counters or {}
    seconds = counter_seconds or {}
    return {
        n.id: decide(
            n, t_cpu.get(n.id), counters.get(n.id), spec, n_cores,
            allow_estimates=allow_estimates, counter_seconds=seconds.get(n.id), theta=theta,
        )  # fmt: skip
        for n in nests
    }


def rule_placement(
    instance: PimInstance, *, allow_estimates: bool = False
) -> dict[str, RuleDecision]:
    """The rule applied to a :class:`~placement.pim.instance.PimInstance` (its counters, if
    any; its theta, :attr:`~placement.pim.instance.PimInstance.theta`)."""
    return apply_rule(
        *_rule_inputs(instance), allow_estimates=allow_estimates,
        counter_seconds=instance.counter_seconds, theta=instance.theta,
    )  # fmt: skip


# --- conditions -----------------------------------------------------------------------


def _c1(nest: LoopNest, t_cpu: float | None, spec: PimSpec, cores: int) -> Condition:
    bound = t_pim_min(nest, spec, cores)
    need = spec.t_ctx + bound
    if t_cpu is None:
        text = "no T_cpu measured for this nest"
        return Condition("C1", None, text, None, need, summary=text)
    _check_time(t_cpu, nest.id)
    ok = t_cpu >= need  # Eq. 3
    op = ">=" if ok else "<"
    text = f"T_cpu {fmt_time(t_cpu)} {op} T_ctx + T_pim_min {fmt_time(need)}"
    summary = f"T_cpu {op} T_ctx + T_pim_min"
    return Condition("C1", ok, text, t_cpu, need, summary=summary)


def _c2(nest: LoopNest, cores: int) -> Condition:
    ok = nest.n_iter >= cores  # Eq. 4
    op = ">=" if ok else "<"
    return Condition(
        "C2", ok, f"N_iter {nest.n_iter} {op} N_core {cores}", nest.n_iter, cores,
        summary=f"N_iter {op} N_core",
    )  # fmt: skip


def read_traffic(events: Mapping[str, float], cache_line: int) -> tuple[float, bool] | None:
    """Eq. 6's ``n_rd * L`` in bytes from the off-core read counter, else from the
    simulated off-core read bytes, and whether it is simulated; None without either."""
    if EV_OFFCORE_RD in events:
        return events[EV_OFFCORE_RD] * cache_line, False
    if SIM_OFFCORE_READ_BYTES in events:
        return events[SIM_OFFCORE_READ_BYTES], True
    return None


def _c3(
    nest: LoopNest, t_cpu: float, events: dict[str, float], theta: float, cache_line: int,
    allow_estimates: bool, counter_seconds: float | None = None,
) -> Condition:  # fmt: skip
    simulated = False
    counted = t_cpu if counter_seconds is None else counter_seconds
    traffic = read_traffic(events, cache_line)
    if traffic is not None:
        if counted <= 0:
            text = "the counted program's time is 0: no bandwidth"
            return Condition("C3", None, text, None, theta, summary=text)
        nbytes, simulated = traffic
        bw = nbytes / counted  # Eq. 6 (simulated n_rd * L: module docstring)
        estimated = False
    elif allow_estimates:
        bw = nest.fetch_bytes / t_cpu  # documented estimate, never silent
        estimated = True
    else:
        text = f"counter {EV_OFFCORE_RD} missing"
        return Condition("C3", None, text, None, theta, summary=text)
    ok = bw > theta
    op = ">" if ok else "<="
    what = "fetch_bytes / T_cpu" if estimated else "BW_read"
    text = f"{what} {fmt_bandwidth(bw)} {op} theta {fmt_bandwidth(theta)}"
    summary = f"{what} {op} theta {fmt_bandwidth(theta)}"
    return Condition("C3", ok, text, bw, theta, estimated, simulated, summary)


def _c4(events: dict[str, float], spec: PimSpec) -> Condition:
    sigma = spec.sigma
    needed = (EV_BOUND_ON_STORES, *BACKEND_EVENTS)
    missing = [e for e in needed if e not in events]
    simulated = False
    if not missing:
        c_store = events[EV_BOUND_ON_STORES]
        c_backend = sum(events[e] for e in BACKEND_EVENTS) + c_store  # the paper's c_backend
    else:
        cycles = simulated_store_bound(events)
        if cycles is None:
            text = f"counter {', '.join(missing)} missing"
            return Condition("C4", None, text, None, sigma, summary=text)
        (c_store, c_backend), simulated = cycles, True
    if c_backend <= 0:
        text = "no backend-bound cycles (StoreBound 0)"
        return Condition("C4", False, text, 0.0, sigma, False, simulated, text)
    frac = c_store / c_backend  # Eq. 7
    ok = frac > sigma
    op = ">" if ok else "<="
    text = f"StoreBound {frac:.3g} {op} sigma {sigma:g}"
    return Condition(
        "C4", ok, text, frac, sigma, False, simulated, f"StoreBound {op} sigma {sigma:g}"
    )


# --- helpers --------------------------------------------------------------------------


def _normalize(counters: Mapping[str, float] | None, nest_id: str) -> dict[str, float]:
    if not counters:
        return {}
    out: dict[str, float] = {}
    for key, value in counters.items():
        name = str(key).lower().rsplit("::", 1)[-1]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlacementError(f"nest {nest_id!r}: counter {key!r} is not a number: {value!r}")
        if not math.isfinite(value) or value < 0:
            raise PlacementError(f"nest {nest_id!r}: counter {key!r} must be >= 0, got {value!r}")
        out[name] = float(value)
    return out


def _check_time(t: float, nest_id: str, what: str = "T_cpu") -> None:
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise PlacementError(f"nest {nest_id!r}: {what} must be a time >= 0 s, got {t!r}")


def _est(c: Condition) -> str:
    if c.estimated:
        return " (estimated)"
    return " (simulated)" if c.simulated else ""


# --------------------------------------------------------------------------- operator level

N_ITER_AGGREGATES = ("max", "min")


@dataclass(frozen=True)
class OperatorRegion:
    """One ONNX node's nests seen as a single candidate region."""

    node: str  # ONNX node name ("" for a nest with no known node)
    nest_ids: tuple[str, ...]
    nest: LoopNest  # the aggregate, fed to placement.pim.rules.decide
    t_cpu: float | None  # None when any nest of the region has no measured time
    counters: dict[str, float] | None  # summed events present for every nest; None if none
    counter_seconds: float | None = None  # summed counted-program time (C3), None: t_cpu


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
    counter_seconds: Mapping[str, float] | None = None,
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
    counted = None
    if counter_seconds is not None and all(i in counter_seconds for i in ids):
        counted = math.fsum(counter_seconds[i] for i in ids)
    return OperatorRegion(first.onnx_node, ids, aggregate, total, summed, counted)


def operator_regions(
    nests: Sequence[LoopNest],
    t_cpu: Mapping[str, float | None],
    counters: Mapping[str, Mapping[str, float] | None] | None = None,
    *,
    n_iter: str = "max",
    counter_seconds: Mapping[str, float] | None = None,
) -> list[OperatorRegion]:
    """Every operator region of the program, in program order of first nest."""
    return [
        aggregate_region(g, t_cpu, counters, n_iter=n_iter, counter_seconds=counter_seconds)
        for g in operator_groups(nests)
    ]


def apply_operator_rule(
    nests: Sequence[LoopNest],
    t_cpu: Mapping[str, float | None],
    counters: Mapping[str, Mapping[str, float] | None] | None,
    spec: PimSpec,
    n_cores: int | None = None,
    *,
    allow_estimates: bool = False,
    n_iter: str = "max",
    counter_seconds: Mapping[str, float] | None = None,
    theta: float | None = None,
) -> dict[str, RuleDecision]:
    """Nest id -> the decision of its operator's region (program order of ``nests``)."""
    by_nest: dict[str, RuleDecision] = {}
    regions = operator_regions(nests, t_cpu, counters, n_iter=n_iter,
                               counter_seconds=counter_seconds)  # fmt: skip
    for region in regions:
        d = decide(
            region.nest, region.t_cpu, region.counters, spec, n_cores,
            allow_estimates=allow_estimates, counter_seconds=region.counter_seconds,
            theta=theta,
        )  # fmt: skip
        where = f"operator {region.node or region.nest_ids[0]} ({len(region.nest_ids)} nests)"
        for nid in region.nest_ids:
            by_nest[nid] = RuleDecision(
                nid, d.place, f"{where}: {d.reason}", d.conditions, d.undetermined,
                f"operator level: {d.summary}",
            )  # fmt: skip
    return {n.id: by_nest[n.id] for n in nests}


def operator_rule_placement(
    instance: PimInstance, *, allow_estimates: bool = False, n_iter: str = "max"
) -> dict[str, RuleDecision]:
    """:func:`apply_operator_rule` on a :class:`~placement.pim.instance.PimInstance`."""
    return apply_operator_rule(
        *_rule_inputs(instance), allow_estimates=allow_estimates, n_iter=n_iter,
        counter_seconds=instance.counter_seconds, theta=instance.theta,
    )  # fmt: skip


def _rule_inputs(instance: PimInstance) -> tuple[Any, ...]:
    """The positional inputs of the rule (nests, T_cpu, counters, spec, N_core)."""
    return instance.nests, instance.t_cpu, instance.counters, instance.spec, instance.n_cores
