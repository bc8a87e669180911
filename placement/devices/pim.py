"""Analytical PIM device model (Torch-PIM, Sections 4.4 and 5.1-5.2). All times in seconds.

* :func:`t_pim_min` -- the lower bound in C1: ``N_total * I_min / (N_core * f_pim)``
  (divided by the issue width, 1 for the paper's single-issue cores). It stays
  analytical even when measured or simulated PIM times replace :func:`t_pim`
  (``--pim-times``, :mod:`placement.pim.times`): the rule decides from host-side
  information only, as in the paper.
* :func:`t_pim` -- this tool's analytical estimate of a nest's PIM time (the paper
  measures it in the PIMProf/Sniper simulator, Section 5.1). Per invocation of the
  nest, on ``c = min(N_core, N_iter)`` participating cores (every extent is a
  compile-time constant, so the offload launches only cores that have work):

  - compute: the busiest core runs ``ceil(N_iter / c)`` parallel iterations of
    ``N_total / N_iter`` innermost iterations each, at ``I`` instructions per
    innermost iteration and ``issue_width`` per cycle. ``I`` comes from the loop
    body when the nest has ``body_ops`` (counted from the MLIR): the cost table
    of :class:`PimSpec` (integer, float add/multiply/divide, transcendental ops)
    summed over the executed ops, divided by ``N_total`` (:func:`instructions_per_iteration`);
    otherwise it is ``instr_per_iter`` (hand-built nests, old profiles). An
    ``instr_per_iter`` given to :func:`t_pim` overrides both;
  - memory: every operand byte (read and written; an in-place operand twice)
    over the participating cores' bank bandwidth ``c * B_bank``;
  - synchronization and result aggregation: ``c * t_sync`` (:func:`t_sync`). The
    paper attributes layernorm's slowdown from 64 to 128 cores to exactly this
    (Section 5.2: "adding cores shrinks the per-core work but adds synchronization and
    result-aggregation overhead; the fewer parallel iterations a region has, the
    smaller the core count at which the overhead wins"). The form is a barrier and
    gather that serialize one access per core: a centralized barrier counter that
    every core increments in memory, or the host collecting each core's completion
    flag and partial result (PIM cores share no cache; UPMEM's DPUs communicate only
    through the host). A combining tree would cost ``log2(c)`` steps instead: going
    from 64 to 128 cores adds one step, so the overhead would win only for nests under
    ``128 * t_step`` of single-core work (12.8 us at a 100 ns step), far less than any
    nest of the benchmark set's layernorm (about 360 us at its smallest size).

  In-order single-issue cores stall on memory, so the terms add. The total is
  multiplied by the nest's ``trip_count``. Because ``I >= I_min`` (enforced by
  :class:`PimSpec` for ``instr_per_iter``; a measured body whose counted ops
  average less than ``I_min`` per innermost iteration -- loop bookkeeping is
  not counted -- is charged ``I_min``), ``t_pim >= t_pim_min`` always.

  The physical floor. For every nest and spec, on ``c = min(N_core, N_iter)`` cores,
  ``t_pim`` is at least each of the device's two limits:

  - bytes over bandwidth: ``trip_count * sum(operand bytes x (read + written)) /
    (c * B_bank)`` -- every distinct byte a nest reads or writes crosses some core's bank
    port at least once per invocation, and ``c`` cores have ``c * B_bank`` of it;
  - instructions over issue rate: ``instructions(nest) / (c * f_pim * issue_width)`` --
    the cost table's count (``I * N_total * trip_count``) at the issue rate of the cores
    used.

  Both hold with ``N_core`` in place of ``c`` too (``c <= N_core``). The memory term *is*
  the first limit; the compute term is at least the second because the busiest core runs
  ``ceil(N_iter / c) >= N_iter / c`` parallel iterations (an integer ceiling, exact for any
  size). Synchronization only adds. So ``t_pim >= max(both limits)``, up to floating-point
  rounding (a few units in the last place); ``tests/devices/test_devices_pim_floor.py``
  checks it on random nests for every preset. Measured or simulated PIM times
  (``--pim-times``) replace this model and are not bound by it.

  Closed form of the crossover. Write ``W`` for a nest's single-core time per
  invocation (compute + memory on one core; both shrink as ``1/c`` while ``c`` divides
  ``N_iter``). Then ``T(c) = W / c + c * t_sync`` and, for ``N_iter >= 2c``,
  ``T(2c) > T(c)`` exactly when ``W < 2 c^2 t_sync``; ``T`` is least near
  ``c* = sqrt(W / t_sync)`` (:func:`sync_crossover_work`). With pim-icelake's 100 ns
  per core a nest with less than 819 us of single-core work per invocation is slower on
  128 cores than on 64 -- layernorm's elementwise nests on 64 rows of 1024 (about
  360 us each) -- while streaming nests of 10^6 elements (several ms) keep speeding up.
  ``tests/devices/test_devices_pim.py`` checks this on hand-built nests and on the
  lowered layernorm and ew_add workloads.
* :func:`t_copy` -- Eq. 8 over a set of nests: ``fetch / B_rd + flush / B_wb``,
  each nest charged its whole read and write sets per invocation (the paper's
  upper bound). The other copy accountings (:data:`COPY_MODES`: ``exact`` residency,
  the ``shared`` and ``partitioned`` memory architectures) depend on the placement as a
  whole and live in :mod:`placement.models.pim_loopnest.copy_terms`;
  :func:`resolve_copy` says which one a spec's memory architecture implies and
  :func:`copy_bandwidths` at which bandwidths data moves under each.
* :func:`hybrid_time` -- Eq. 9; :func:`speedup` over CPU-only execution.

Work over all invocations: ``N_total`` counts innermost iterations of one
invocation, so C1 and ``t_pim`` use ``n_total * trip_count``, like ``T_cpu``,
which accumulates over all invocations.

Every constant the model uses is a field of :class:`~placement.hardware.pim.PimSpec`,
documented with its source there and in the preset files.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from placement.errors import PlacementError
from placement.hardware.pim import PARTITIONED, SHARED, PimSpec
from placement.nests import LoopNest

# Copy accountings (module docstring). "auto" resolves to the spec's memory architecture.
UPPER_BOUND = "upper_bound"
EXACT_COPY = "exact"
SHARED_COPY = SHARED
PARTITIONED_COPY = PARTITIONED
AUTO_COPY = "auto"
COPY_MODES = (UPPER_BOUND, EXACT_COPY, SHARED_COPY, PARTITIONED_COPY)
COPY_CHOICES = (AUTO_COPY, *COPY_MODES)
COPY_DESCRIPTIONS = {
    UPPER_BOUND: "Eq. 8, the paper's upper bound: every PIM nest moves its read and write sets",
    EXACT_COPY: "residency within PIM segments, every operand over B_rd / B_wb",
    SHARED_COPY: "shared memory: host-dirty data written back before PIM touches it, data"
    " PIM wrote re-read by the host",
    PARTITIONED_COPY: "partitioned memory: operands over the host-PIM link with residency"
    " within segments, weights resident in the banks from model load",
}


@dataclass(frozen=True)
class PimTime:
    """Breakdown of :func:`t_pim`, over all invocations of the nest."""

    compute: float
    memory: float
    sync: float
    cores_used: int

    @property
    def total(self) -> float:
        return self.compute + self.memory + self.sync


@dataclass(frozen=True)
class HybridTime:
    """Eq. 9: T_hybrid(N) = T_host + T_pim(N) + T_copy + N_region * T_sw.

    ``load``: a one-time cost at model load, not per inference and not in ``total``
    (partitioned memory: the weights placed in the banks)."""

    host: float
    pim: float
    copy: float
    n_region: int
    t_sw: float
    load: float = 0.0

    @property
    def switch(self) -> float:
        return self.n_region * self.t_sw

    @property
    def total(self) -> float:
        return self.host + self.pim + self.copy + self.switch

    def to_json(self) -> dict[str, float | int]:
        return {
            "total": self.total,
            "host": self.host,
            "pim": self.pim,
            "copy": self.copy,
            "n_region": self.n_region,
            "switch": self.switch,
            "load_once": self.load,
        }


def check_cores(n_cores: int) -> int:
    if isinstance(n_cores, bool) or not isinstance(n_cores, int) or n_cores < 1:
        raise PlacementError(f"n_cores must be a positive whole number, got {n_cores!r}")
    return n_cores


def total_iterations(nest: LoopNest) -> int:
    """Innermost iterations over all invocations: N_total * trip count."""
    return nest.n_total * nest.trip_count


def t_pim_min(nest: LoopNest, spec: PimSpec, n_cores: int | None = None) -> float:
    """C1's lower bound: N_total * I_min / (N_core * f_pim), over all invocations."""
    cores = check_cores(spec.cores if n_cores is None else n_cores)
    return total_iterations(nest) * spec.i_min / (cores * spec.clock * spec.issue_width)


def instructions_per_iteration(nest: LoopNest, spec: PimSpec) -> float:
    """``I`` of :func:`t_pim`: instructions per innermost iteration of ``nest``.

    From the measured body (``body_ops`` priced with the spec's cost table, over
    ``N_total``), at least ``I_min``; ``spec.instr_per_iter`` without ``body_ops``.
    """
    if not nest.body_ops or nest.n_total <= 0:
        return spec.instr_per_iter
    return max(spec.body_instructions(nest.body_ops) / nest.n_total, spec.i_min)


def instructions(nest: LoopNest, spec: PimSpec) -> float:
    """PIM instructions of ``nest`` over all invocations (``I * N_total * trip_count``)."""
    return instructions_per_iteration(nest, spec) * total_iterations(nest)


def t_pim_breakdown(
    nest: LoopNest,
    spec: PimSpec,
    n_cores: int | None = None,
    *,
    instr_per_iter: float | None = None,
) -> PimTime:
    """Analytical PIM time of ``nest`` (see the module docstring): never below the device's
    physical floor, bytes over the used cores' bank bandwidth and instructions over their
    issue rate."""
    cores = check_cores(spec.cores if n_cores is None else n_cores)
    ipi = instructions_per_iteration(nest, spec) if instr_per_iter is None else instr_per_iter
    if not (math.isfinite(ipi) and ipi >= spec.i_min):
        raise PlacementError(
            f"nest {nest.id!r}: instructions per iteration must be at least I_min"
            f" ({spec.i_min:g}), got {ipi!r}"
        )
    if nest.n_iter <= 0 or nest.n_total <= 0:
        return PimTime(0.0, 0.0, 0.0, 0)  # an empty nest does nothing anywhere
    used = min(cores, nest.n_iter)
    inner = nest.n_total / nest.n_iter  # innermost iterations per parallel iteration
    per_core_iters = -(-nest.n_iter // used) * inner  # ceil, exact for any int size
    compute = per_core_iters * ipi / (spec.clock * spec.issue_width)
    touched = sum(op.nbytes * (int(op.read) + int(op.written)) for op in nest.operands)
    memory = touched / (used * spec.bank_bandwidth_per_core)
    sync = t_sync(spec, used)
    trips = nest.trip_count
    return PimTime(compute * trips, memory * trips, sync * trips, used)


def t_sync(spec: PimSpec, cores_used: int) -> float:
    """Synchronization and result aggregation of one invocation on ``cores_used`` cores:
    one serialized ``t_sync_per_core`` per participating core (module docstring)."""
    return cores_used * spec.t_sync_per_core


def sync_crossover_work(spec: PimSpec, cores: int) -> float:
    """The single-core work per invocation (seconds) below which a nest with at least
    ``2 * cores`` parallel iterations is slower on ``2 * cores`` cores than on ``cores``:
    ``W < 2 c^2 t_sync`` (the closed form of the module docstring)."""
    return 2 * check_cores(cores) ** 2 * spec.t_sync_per_core


def t_pim(
    nest: LoopNest,
    spec: PimSpec,
    n_cores: int | None = None,
    *,
    instr_per_iter: float | None = None,
) -> float:
    """Analytical PIM time of ``nest`` on ``n_cores`` cores (default ``spec.cores``), seconds."""
    return t_pim_breakdown(nest, spec, n_cores, instr_per_iter=instr_per_iter).total


def t_copy(nests: Iterable[LoopNest], spec: PimSpec) -> float:
    """Eq. 8 for the nests placed on PIM: sum of fetch / B_rd + flush / B_wb."""
    nests = list(nests)
    fetch = sum(n.fetch_bytes for n in nests)
    flush = sum(n.flush_bytes for n in nests)
    return fetch / spec.read_bandwidth + flush / spec.writeback_bandwidth


def resolve_copy(copy: str, spec: PimSpec) -> str:
    """The copy accounting ``copy`` names: ``auto`` is the spec's memory architecture
    (``upper_bound`` when the spec does not state one). An accounting the spec cannot
    price (``shared`` without the host's cache size, ``partitioned`` without the link)
    is a one-line error."""
    if copy not in COPY_CHOICES:
        raise PlacementError(
            f"unknown copy accounting {copy!r}; known: {', '.join(COPY_CHOICES)}"
        )
    if copy == AUTO_COPY:
        return spec.memory or UPPER_BOUND
    if copy == SHARED_COPY and spec.host_cache is None:
        raise PlacementError(
            "--copy shared needs the host's cache size ('pim.host_cache_mib'), which this"
            " PIM hardware does not give"
        )
    if copy == PARTITIONED_COPY and (
        spec.link_to_pim_bandwidth is None or spec.link_to_host_bandwidth is None
    ):
        raise PlacementError(
            "--copy partitioned needs the host-PIM link bandwidths ('pim.link_to_pim_gbps',"
            " 'pim.link_to_host_gbps'), which this PIM hardware does not give"
        )
    return copy


def copy_bandwidths(spec: PimSpec, copy: str) -> tuple[float, float]:
    """(to PIM, to the host) in B/s under accounting ``copy``: the link for
    ``partitioned``; otherwise Eq. 8's ``B_rd`` and ``B_wb``, the host memory system's
    bandwidth (Section 5.1), which is what a write-back and a re-read run at on a shared
    device."""
    if copy == PARTITIONED_COPY:
        assert spec.link_to_pim_bandwidth is not None  # resolve_copy checked it
        assert spec.link_to_host_bandwidth is not None
        return spec.link_to_pim_bandwidth, spec.link_to_host_bandwidth
    return spec.read_bandwidth, spec.writeback_bandwidth


def hybrid_time(
    t_host: float, t_pim_total: float, t_copy_total: float, n_region: int, spec: PimSpec
) -> HybridTime:
    """Eq. 9 from its four parts."""
    return HybridTime(
        host=t_host, pim=t_pim_total, copy=t_copy_total, n_region=n_region, t_sw=spec.t_sw
    )


def speedup(cpu_only: float, hybrid: float) -> float:
    """CPU-only time over hybrid time (inf when the hybrid time is zero and CPU-only is not)."""
    if hybrid <= 0.0:
        return 1.0 if cpu_only <= 0.0 else math.inf
    return cpu_only / hybrid
