"""Sweep targets: everything that differs between a CIM and a PIM sweep, one adapter per target.

A :class:`Target` knows its sweepable keys, its hardware descriptions, how a model is
ingested and profiled, how a point's instance is built and how it is solved and turned
into row values and a schedule document. The rest of :mod:`placement.sweep` is
target-agnostic: it looks an adapter up in :data:`TARGETS` (:func:`get_target`) and calls
its methods. Every call into the CIM and PIM pipelines made by a sweep is in this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from placement.cim.energy import energy_source, host_power, placement_energy
from placement.cim.instance import check_latencies, cim_instance
from placement.cim.pipeline import FORMULATION_CHOICES, SOLVERS, unavailable_reason
from placement.cim.pipeline import solve as solve_cim
from placement.cim.schedule import CimSchedule
from placement.cim.stream import minimum_period
from placement.devices.pim import speedup
from placement.errors import PlacementError
from placement.graph import load_graph
from placement.hardware.cim import CIM_KEYS, load_hardware, with_overrides
from placement.hardware.pim import PIM_KEYS, load_pim_hardware, with_pim_overrides
from placement.models.pim_loopnest.build import check_mode
from placement.onnxfile import read_onnx
from placement.pim.instance import build_instance as pim_instance
from placement.pim.pipeline import solve as solve_pim
from placement.pim.rules import rule_placement
from placement.pim.verifier import evaluate_placement
from placement.profiling.host_profile import HostProfile
from placement.profiling.memory import check_model_memory
from placement.profiling.nest_measure import is_mlir, model_sha256
from placement.profiling.nest_profile import NestProfile
from placement.solvers.names import MIP_BACKENDS
from placement.solvers.registry import get_backend

Number = int | float  # a grid value, in file units
# --crossbar-size N sets both crossbar_rows and crossbar_cols (square crossbars).
CROSSBAR_SIZE = "crossbar_size"


class SolveSettings(Protocol):
    """The solver settings a target reads (:class:`placement.sweep.plan.SolverOptions`)."""

    @property
    def time_limit(self) -> float: ...
    @property
    def rel_gap(self) -> float: ...
    @property
    def threads(self) -> int: ...
    @property
    def copy(self) -> str: ...
    @property
    def granularity(self) -> str: ...
    @property
    def formulation(self) -> str: ...
    @property
    def solver(self) -> str: ...


class Target(Protocol):
    """What a sweep needs to know about one target (``cim`` or ``pim``)."""

    name: str  # the ``target`` column
    unused_options: tuple[str, ...]  # solver settings it ignores: left out of the manifest

    def monotone_keys(self) -> dict[str, int]:
        """Keys along which the optimum can only improve: +1 when a larger value is never
        worse (more crossbars), -1 when a smaller one is never worse (a faster MVM)."""
        ...

    def keys(self) -> list[str]:
        """The keys a grid may sweep, in file units."""
        ...

    def is_integral(self, key: str) -> bool:
        """Whether the values of ``key`` (a known key) must be whole numbers."""
        ...

    def check_keys(self, keys: Sequence[str]) -> None:
        """Refuse a combination of (known, distinct) swept keys that contradict each other."""
        ...

    def load_hardware(self, name_or_path: str) -> Any:
        """The hardware description of a preset name or TOML file."""
        ...

    def apply_parameters(self, hw: Any, params: Mapping[str, Number]) -> Any:
        """``hw`` with a point's values (file units) applied (checked)."""
        ...

    def ingest(self, path: str | Path) -> tuple[str, Any]:
        """A model file's SHA-256 and what its instances are built from besides the profile."""
        ...

    def load_profile(self, path: str | Path) -> Any:
        """A saved profile of this target's kind."""
        ...

    def check_profile(self, graph: Any, profile: Any) -> None:
        """Refuse a profile (of the model's SHA-256) that does not fit what :meth:`ingest`
        returned, before any point is planned."""
        ...

    def check_memory(self, path: str | Path, memory_limit_gb: float | None) -> None:
        """Refuse a model whose profiling would need more memory than the limit."""
        ...

    def check_options(self, options: SolveSettings) -> None:
        """Refuse solver settings this target cannot use."""
        ...

    def build_instance(self, graph: Any, profile: Any, hw: Any) -> Any:
        """A point's solver instance (plain, picklable data); ``profile`` is None when no
        hardware of the sweep :meth:`needs_profile`."""
        ...

    def needs_profile(self, hw: Any) -> bool:
        """Whether instances on ``hw`` need the model's measured profile."""
        ...

    def energy_source(self, hw: Any, profile: Any) -> str | None:
        """Which parts of the rows' ``energy_j`` are measured, modelled or estimated
        (None: the target or the hardware has no energy model)."""
        ...

    def solve(self, instance: Any, options: SolveSettings) -> tuple[dict[str, Any], dict[str, Any]]:
        """Solve and verify one instance: the row's result values and the schedule document."""
        ...


def finite(x: float | None) -> float | None:
    """``x``, or None when it is missing or not finite (a JSON-safe number)."""
    return None if x is None or not math.isfinite(x) else x


def pim_backend(solver: str) -> str:
    """The MIP backend a PIM point is solved with: ``auto`` is HiGHS."""
    return "highs" if solver == "auto" else solver


def check_copy_modes(options: SolveSettings) -> None:
    """The PIM copy accounting and granularity must be known ones."""
    check_mode(options.copy, options.granularity)


class CimTarget:
    """Compute-in-memory: an ONNX operator graph, a host profile, HiGHS on the makespan MILP."""

    name = "cim"
    unused_options: tuple[str, ...] = ("copy", "granularity")

    def monotone_keys(self) -> dict[str, int]:
        """A placement that fits C crossbars fits any C' > C; the same placement is no
        slower with a faster MVM, a faster bus or faster internal links (Eqs. 2-4)."""
        return {"crossbars": +1, "t_mvm_ns": -1, "bus_gbps": +1, "internal_gbps": +1}

    def keys(self) -> list[str]:
        """Every ``[cim]`` key, plus ``crossbar_size`` (square crossbars)."""
        return [*CIM_KEYS, CROSSBAR_SIZE]

    def is_integral(self, key: str) -> bool:
        """Whole numbers for the crossbar counts and sizes."""
        if key == CROSSBAR_SIZE:
            return True
        return CIM_KEYS[key][2]

    def check_keys(self, keys: Sequence[str]) -> None:
        """``crossbar_size`` and ``crossbar_rows``/``crossbar_cols`` exclude each other."""
        if CROSSBAR_SIZE in keys and {"crossbar_rows", "crossbar_cols"} & set(keys):
            raise PlacementError(
                "crossbar_size sets both crossbar_rows and crossbar_cols: sweep either it or them"
            )

    def load_hardware(self, name_or_path: str) -> Any:
        """A CIM :class:`~placement.hardware.cim.Hardware`."""
        return load_hardware(name_or_path)

    def apply_parameters(self, hw: Any, params: Mapping[str, Number]) -> Any:
        """``hw`` with the point's ``[cim]`` values; ``crossbar_size`` sets rows and columns."""
        values = dict(params)
        if CROSSBAR_SIZE in values:
            size = values.pop(CROSSBAR_SIZE)
            values["crossbar_rows"] = values["crossbar_cols"] = size
        return with_overrides(hw, **values)

    def ingest(self, path: str | Path) -> tuple[str, Any]:
        """The model's SHA-256 and its :class:`~placement.graph.OpGraph` (loaded once)."""
        graph = load_graph(str(path))
        return graph.sha256, graph

    def load_profile(self, path: str | Path) -> Any:
        """A :class:`~placement.profiling.host_profile.HostProfile`."""
        return HostProfile.load(path)

    def check_profile(self, graph: Any, profile: Any) -> None:
        """A latency for exactly the graph's operators (:func:`~placement.cim.instance.
        check_latencies`)."""
        check_latencies(graph, profile.latencies, f"profile {profile.source or ''}".strip())

    def check_memory(self, path: str | Path, memory_limit_gb: float | None) -> None:
        """ONNX Runtime's run of the model (:mod:`placement.profiling.memory`)."""
        check_model_memory(path, read_onnx(path, load_weights=False), memory_limit_gb)

    def check_options(self, options: SolveSettings) -> None:
        """The formulation and solver names; copy/granularity are checked for every target."""
        check_copy_modes(options)
        if options.formulation not in FORMULATION_CHOICES:
            raise PlacementError(
                f"unknown CIM formulation {options.formulation!r}; known:"
                f" {', '.join(FORMULATION_CHOICES)}"
            )
        if options.solver not in SOLVERS:
            raise PlacementError(
                f"unknown solver {options.solver!r}; known: {', '.join(SOLVERS)}"
            )
        if options.solver != "auto":
            reason = unavailable_reason(options.solver)
            if reason is not None:
                raise PlacementError(f"solver {options.solver} is not available: {reason}")

    def build_instance(self, graph: Any, profile: Any, hw: Any) -> Any:
        """A :class:`~placement.cim.instance.CimInstance` of the graph's operators, host
        latencies measured (``profile``) or, when ``hw``'s host says so, modelled."""
        latencies = profile.latencies if profile is not None else None
        meta = getattr(profile, "metadata", None)
        return cim_instance(graph, latencies, hw.cim, host=hw.host,
                            host_power=host_power(hw, meta))  # fmt: skip

    def needs_profile(self, hw: Any) -> bool:
        """Whether instances on ``hw`` need a measured profile (not with modelled hosts)."""
        return not hw.host.modelled

    def energy_source(self, hw: Any, profile: Any) -> str | None:
        """"host estimated, CIM modelled" (or "host measured" with a RAPL power)."""
        source = energy_source(hw, getattr(profile, "metadata", None))
        return None if source is None else source.summary

    def solve(
        self, instance: Any, options: SolveSettings, starts: Sequence[Mapping[str, Any]] = ()
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Makespan-optimal placement, verified, as ``placement solve`` finds it (the same
        formulation and solver choice), starting from the neighbours' schedules re-timed
        here; the document is ``CimPlacement.to_json()``."""
        inst = instance
        opts = options
        placement = solve_cim(
            inst, formulation=opts.formulation, solver=opts.solver, time_limit=opts.time_limit,
            rel_gap=opts.rel_gap, threads=opts.threads,
            starts=[CimSchedule.from_json(d["schedule"]) for d in starts if d.get("schedule")],
        )  # fmt: skip
        res, sched = placement.result, placement.schedule
        values: dict[str, Any] = {
            "status": res.status.value,
            "cpu_only_s": placement.cpu_only,
            "n_operators": len(inst.operators),
            "gap": res.gap,
            "solve_seconds": res.solve_seconds,
            "verified": placement.verification is not None and placement.verification.ok,
        }
        if sched is not None:
            on_cim = [op for op in inst.operators if not sched.on_host[op.name]]
            values |= {
                "objective_s": sched.makespan,
                "speedup": finite(placement.speedup),
                "n_offloaded": len(on_cim),
                "crossbars_used": placement.crossbars_used,
                "host_busy_s": math.fsum(
                    op.t_host for op in inst.operators if sched.on_host[op.name]
                ),
                "accel_busy_s": math.fsum(op.t_acc or 0.0 for op in on_cim),
            }
            energy = placement_energy(inst, sched.on_host, sched.makespan)
            period = minimum_period(inst, sched.on_host)[0]
            values |= {"energy_j": None if energy is None else energy.total,
                       "frames_per_s": finite(1.0 / period) if period > 0 else None}
        doc = placement.to_json()
        doc["model"] = {"operators": len(inst.operators)}
        return values, doc


class PimTarget:
    """Processing-in-memory: loop nests of a nest profile, HiGHS on T_hybrid (Eq. 9)."""

    name = "pim"
    unused_options: tuple[str, ...] = ("formulation",)

    def monotone_keys(self) -> dict[str, int]:
        """None: PIM time is not monotone in the core count (synchronization grows)."""
        return {}

    def keys(self) -> list[str]:
        """Every ``[pim]`` key."""
        return list(PIM_KEYS)

    def is_integral(self, key: str) -> bool:
        """Whole numbers where the ``[pim]`` key is one (``cores``, ...)."""
        return PIM_KEYS[key][2]

    def check_keys(self, keys: Sequence[str]) -> None:
        """Any combination of ``[pim]`` keys may be swept."""

    def load_hardware(self, name_or_path: str) -> Any:
        """A :class:`~placement.hardware.pim.PimHardware`."""
        return load_pim_hardware(name_or_path)

    def apply_parameters(self, hw: Any, params: Mapping[str, Number]) -> Any:
        """``hw`` with the point's ``[pim]`` values (checked against each other)."""
        return with_pim_overrides(hw, **params)

    def ingest(self, path: str | Path) -> tuple[str, Any]:
        """The model file's SHA-256; the nests come from the profile, so nothing else."""
        return model_sha256(path), None

    def load_profile(self, path: str | Path) -> Any:
        """A :class:`~placement.profiling.nest_profile.NestProfile`."""
        return NestProfile.load(path)

    def check_profile(self, graph: Any, profile: Any) -> None:
        """Nothing to compare: the nests come from the profile itself."""

    def check_memory(self, path: str | Path, memory_limit_gb: float | None) -> None:
        """ONNX Runtime's run of an .onnx model; a .mlir program is checked once lowered
        (:func:`~placement.profiling.nest_measure.profile_nests`)."""
        if not is_mlir(path):
            check_model_memory(path, read_onnx(path, load_weights=False), memory_limit_gb)

    def check_options(self, options: SolveSettings) -> None:
        """Known copy accounting and granularity; a MIP backend that is installed (the
        models are MIPs; ``auto`` is HiGHS, as for ``placement solve --target pim``)."""
        check_copy_modes(options)
        if options.solver != "auto" and options.solver not in MIP_BACKENDS:
            raise PlacementError(
                f"--solver {options.solver}: a CIM solver; a PIM sweep solves with a MIP"
                f" backend ({', '.join(MIP_BACKENDS)}) or auto (HiGHS)"
            )
        reason = get_backend(pim_backend(options.solver), mip=True).unavailable_reason()
        if reason is not None:
            raise PlacementError(f"solver {options.solver} is not available: {reason}")

    def build_instance(self, graph: Any, profile: Any, hw: Any) -> Any:
        """A :class:`~placement.pim.instance.PimInstance` of the profile's nests."""
        return pim_instance(profile, hw.pim)

    def needs_profile(self, hw: Any) -> bool:
        """Always: the nests and their host times come from the nest profile."""
        return True

    def energy_source(self, hw: Any, profile: Any) -> str | None:
        """None: the PIM target has no energy model."""
        return None

    def solve(
        self, instance: Any, options: SolveSettings, starts: Sequence[Mapping[str, Any]] = ()
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Optimal placement, verified, plus the threshold rule's placement of the same point.

        The document is ``PimPlacement.to_json()`` with a ``rule`` entry.
        """
        inst = instance
        opts = options
        placement = solve_pim(
            inst, copy=opts.copy, granularity=opts.granularity, time_limit=opts.time_limit,
            rel_gap=opts.rel_gap, threads=opts.threads, solver=pim_backend(opts.solver),
        )  # fmt: skip
        res, hybrid = placement.result, placement.hybrid
        values: dict[str, Any] = {
            "status": res.status.value,
            "cpu_only_s": placement.cpu_only,
            "memory": inst.spec.memory,
            "copy": placement.copy,
            # The decisions are nests; the operators are the ONNX nodes they came
            # from (unknown for an MLIR input, whose nests name no node).
            "n_operators": len({n.onnx_node for n in inst.nests if n.onnx_node}) or None,
            "n_nests": len(inst.nests),
            "gap": res.gap,
            "solve_seconds": res.solve_seconds,
            "verified": placement.verification is not None and placement.verification.ok,
        }
        if hybrid is not None and placement.on_pim is not None:
            values |= {
                "objective_s": hybrid.total,
                "speedup": finite(placement.speedup),
                "n_offloaded": sum(placement.on_pim.values()),
                "host_busy_s": hybrid.host,
                "accel_busy_s": hybrid.pim,
            }
        # The paper's threshold rule on the same point, for rule-vs-optimum figures.
        rule = rule_placement(inst)
        rule_hybrid = evaluate_placement(
            inst, {k: d.on_pim for k, d in rule.items()}, copy=placement.copy
        )
        doc = placement.to_json()
        doc["rule"] = {
            "hybrid": rule_hybrid.to_json(),
            "speedup": finite(speedup(placement.cpu_only, rule_hybrid.total)),
            "on_pim": [k for k, d in rule.items() if d.on_pim],
        }
        return values, doc


TARGETS: dict[str, Target] = {"cim": CimTarget(), "pim": PimTarget()}


def get_target(name: str) -> Target:
    """The adapter of target ``name``; a one-line PlacementError for an unknown one."""
    try:
        return TARGETS[name]
    except (KeyError, TypeError):
        raise PlacementError(
            f"unknown target {name!r} (expected one of {', '.join(TARGETS)})"
        ) from None
