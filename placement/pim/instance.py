"""Plain data that the PIM loop-nest placement model and the threshold rule are built from.

A :class:`PimInstance` holds the nests of one program (``placement.nests``), the
measured host time of each, the PIM machine's spec and core count, optional PIM times
that override the analytical model (``placement.devices.pim``): per core count from a
file (``measured``, :mod:`placement.pim.times`) or for this core count in code
(``t_pim``), and optional Table 1 counters (used only by the rule). All times are in
seconds. For basic-block granularity it also holds each nest's control structure
(``blocks``, from which :mod:`placement.blocks` derives the nest's basic blocks).

:func:`build_instance` (the public ``pim.build_instance``) makes one from a nest profile
(:mod:`placement.profiling.nest_measure`) and a PIM machine description.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from placement.blocks import Loop, NestBlocks, basic_blocks
from placement.devices.pim import check_cores, t_pim
from placement.errors import PlacementError
from placement.hardware.pim import PimHardware, PimSpec
from placement.nests import LoopNest
from placement.pim.times import FILE_SOURCE, MODEL_SOURCE, PimTimes


@dataclass(frozen=True)
class PimInstance:
    """Plain data for the loop-nest placement model. All times in seconds.

    ``t_cpu``: measured host time of every nest (all invocations). ``measured``:
    PIM times per nest and core count from a file (measured or simulated), overriding
    the analytical model of ``placement.devices.pim`` for the nests it names; it must
    hold this instance's core count for each of them. ``t_pim``: PIM times at this
    core count given in code, overriding both. ``counters``: optional Table 1 events
    per nest, used only by the threshold rule. ``n_cores`` defaults to ``spec.cores``.
    ``blocks``: optional, every nest's loops (:class:`placement.blocks.Loop`), needed at
    basic-block granularity only. ``counter_seconds``: optional, per nest, the time of the
    program its counters were counted on (rule C3's denominator,
    :attr:`placement.profiling.nest_profile.NestProfile.counter_seconds`); ``t_cpu`` where
    absent. ``cache``: the cache state the host times were measured in (``warm`` or
    ``cold``); the shared-memory copy accounting reads it (a model input the host just
    wrote is dirty in its caches when warm, written back when cold).
    ``host_dram_bandwidth``: ``B_cpu`` measured on the host that profiled the nests
    (:attr:`placement.profiling.nest_profile.NestProfile.host_dram_bandwidth`), B/s; rule
    C3's ``theta = spec.theta_ratio x B_cpu`` (:attr:`theta`) uses it, or the spec's
    ``host_dram_bandwidth`` when it is None.
    """

    nests: tuple[LoopNest, ...]
    t_cpu: Mapping[str, float]
    spec: PimSpec
    n_cores: int | None = None  # None: spec.cores; always an int after construction
    t_pim: Mapping[str, float] | None = None
    counters: Mapping[str, Mapping[str, float] | None] | None = None
    measured: PimTimes | None = None
    blocks: Mapping[str, Loop] | None = None
    counter_seconds: Mapping[str, float] | None = None
    cache: str = "warm"
    host_dram_bandwidth: float | None = None

    def __post_init__(self) -> None:
        if self.cache not in ("warm", "cold"):
            raise PlacementError(f"cache state must be 'warm' or 'cold', got {self.cache!r}")
        b_cpu = self.host_dram_bandwidth
        if b_cpu is not None and not (
            isinstance(b_cpu, (int, float)) and not isinstance(b_cpu, bool)
            and math.isfinite(b_cpu) and b_cpu > 0
        ):  # fmt: skip
            raise PlacementError(f"B_cpu must be a bandwidth > 0 B/s, got {b_cpu!r}")
        object.__setattr__(self, "nests", tuple(self.nests))
        cores = self.spec.cores if self.n_cores is None else self.n_cores
        object.__setattr__(self, "n_cores", check_cores(cores))
        if not self.nests:
            raise PlacementError("the PIM instance has no loop nests")
        seen: set[str] = set()
        last = None
        for n in self.nests:
            if n.id in seen:
                raise PlacementError(f"nest id {n.id!r} appears twice")
            seen.add(n.id)
            if last is not None and n.index <= last:
                raise PlacementError(
                    f"nest {n.id!r}: nests must be in program order (index {n.index} after {last})"
                )
            last = n.index
            if n.trip_count < 1 or n.n_iter < 0 or n.n_total < n.n_iter:
                raise PlacementError(
                    f"nest {n.id!r}: need trip_count >= 1 and 0 <= n_iter <= n_total"
                )
        check_times(self.t_cpu, seen, "T_cpu", required=True)
        if self.counter_seconds is not None:
            check_times(self.counter_seconds, seen, "counted-program time", required=False)
        if self.t_pim is not None:
            check_times(self.t_pim, seen, "T_pim", required=False)
        if self.measured is not None:
            self.measured.check(self.spec.memory, [self.n_cores], (n.id for n in self.nests))
        if self.counters is not None:
            unknown = [k for k in self.counters if k not in seen]
            if unknown:
                raise PlacementError(f"counters given for unknown nest {unknown[0]!r}")
        if self.blocks is not None:
            unknown = [k for k in self.blocks if k not in seen]
            if unknown:
                raise PlacementError(f"basic blocks given for unknown nest {unknown[0]!r}")
            missing = [n.id for n in self.nests if n.id not in self.blocks]
            if missing:
                raise PlacementError(f"nest {missing[0]!r} has no basic blocks")

    @property
    def b_cpu_measured(self) -> bool:
        """``B_cpu`` comes from the profiling host, not from the hardware description."""
        return self.host_dram_bandwidth is not None

    @property
    def b_cpu(self) -> float:
        """``B_cpu`` (B/s) that rule C3's theta scales: measured, else the spec's."""
        measured = self.host_dram_bandwidth
        return self.spec.host_dram_bandwidth if measured is None else measured

    @property
    def theta(self) -> float:
        """Rule C3's threshold, B/s: ``theta_ratio x B_cpu`` (Section 4.4's ratio)."""
        return self.spec.theta_ratio * self.b_cpu

    @cached_property
    def pim_times(self) -> dict[str, float]:
        """T_pim(N) per nest: ``t_pim`` if given, else the file's, else the analytical model."""
        given = {**(self.measured.at(self.n_cores) if self.measured else {}), **(self.t_pim or {})}
        return {
            n.id: float(given[n.id]) if n.id in given else t_pim(n, self.spec, self.n_cores)
            for n in self.nests
        }

    @property
    def pim_time_sources(self) -> dict[str, str]:
        """Nest id -> where its T_pim comes from: ``given`` (``t_pim``), ``file``
        (``measured``) or ``analytical model``."""
        from_file = set(self.measured.times) if self.measured else set()
        given = set(self.t_pim or ())
        return {
            n.id: "given" if n.id in given else FILE_SOURCE if n.id in from_file else MODEL_SOURCE
            for n in self.nests
        }

    @cached_property
    def nest_blocks(self) -> dict[str, NestBlocks]:
        """Every nest's basic blocks (:mod:`placement.blocks`); an error without ``blocks``."""
        if self.blocks is None:
            raise PlacementError(
                "basic-block granularity needs the nests' basic blocks, which this instance"
                " does not hold (they come from lowering the model:"
                " placement.profiling.nest_measure.profile_loops)"
            )
        return {n.id: basic_blocks(n.id, self.blocks[n.id]) for n in self.nests}

    def pim_time(self, nest_id: str) -> float:
        return self.pim_times[nest_id]

    @property
    def cpu_only(self) -> float:
        return math.fsum(self.t_cpu[n.id] for n in self.nests)

    def with_cores(self, n_cores: int) -> PimInstance:
        """The same program on ``n_cores`` PIM cores (analytical T_pim recomputed)."""
        return dataclasses.replace(self, n_cores=n_cores)

    def operator_groups(self) -> list[list[str]]:
        """Nest ids sharing one decision at operator granularity (singletons for unknown nodes)."""
        groups: dict[str, list[str]] = {}
        out: list[list[str]] = []
        for n in self.nests:
            if not n.onnx_node:
                out.append([n.id])
                continue
            if n.onnx_node not in groups:
                groups[n.onnx_node] = []
                out.append(groups[n.onnx_node])
            groups[n.onnx_node].append(n.id)
        return out


def check_times(table: Mapping[str, float], ids: set[str], what: str, *, required: bool) -> None:
    for key in table:
        if key not in ids:
            raise PlacementError(f"{what} given for unknown nest {key!r}")
    for nid in sorted(ids) if required else table:
        if nid not in table:
            raise PlacementError(f"nest {nid!r} has no {what}")
        t = table[nid]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise PlacementError(f"nest {nid!r}: {what} must be a time >= 0 s, got {t!r}")


def build_instance(
    profile: Any,
    hardware: PimHardware | PimSpec,
    cores: int | None = None,
    pim_times: PimTimes | None = None,
    blocks: Mapping[str, Loop] | None = None,
) -> PimInstance:
    """The nests of ``profile`` (a :class:`~placement.profiling.nest_profile.NestProfile`)
    on ``hardware`` with ``cores`` PIM cores (default: the hardware's); ``pim_times``
    (:mod:`placement.pim.times`) replace the analytical T_pim of the nests they name;
    ``blocks`` (:func:`~placement.profiling.nest_measure.profile_loops`) for basic-block
    granularity. Rule C3 divides the counted traffic by the counted program's time
    (:attr:`~placement.profiling.nest_profile.NestProfile.counter_seconds`) and compares
    it with ``theta_ratio x`` the profile's measured ``B_cpu`` where it has one."""
    spec = hardware.pim if isinstance(hardware, PimHardware) else hardware
    return PimInstance(
        nests=tuple(profile.nests), t_cpu=profile.t_cpu, spec=spec, n_cores=cores,
        counters=profile.counters, measured=pim_times, blocks=blocks,
        counter_seconds=profile.counter_seconds if profile.counters else None,
        cache=profile.cache, host_dram_bandwidth=profile.host_dram_bandwidth,
    )  # fmt: skip
