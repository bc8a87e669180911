"""Human-readable summaries and JSON documents of CIM placements.

Both say where the host latencies came from (:mod:`placement.hardware.hostcheck`):
measured on which machine, or modelled (an estimate, labelled as such on every number
that depends on it), and whether the profile's machine matches the hardware's host.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from placement.cim.energy import energy_source, placement_energy
from placement.cim.pipeline import CimPlacement
from placement.cim.stream import minimum_period
from placement.graph import OpGraph
from placement.hardware.cim import Hardware
from placement.hardware.hostcheck import HostLatencySource, host_latency_source
from placement.solvers.base import SolveResult, SolveStatus
from placement.tables import text_table
from placement.units import fmt_energy, fmt_gap, fmt_rate, time_scale


def format_seconds(t: float) -> str:
    if t >= 1.0:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"


def host_source(hw: Hardware, profile_meta: Mapping[str, Any] | None) -> HostLatencySource:
    """Where the host latencies of a placement on ``hw`` came from (profile metadata, or
    the host model when ``hw``'s host says so)."""
    return host_latency_source(hw.name, hw.host, profile_meta)


def summary_lines(
    placement: CimPlacement,
    graph: OpGraph,
    hw: Hardware,
    details: bool,
    profile_meta: Mapping[str, Any] | None = None,
) -> list[str]:
    """The terminal summary. ``profile_meta``: the host profile's metadata (None with
    modelled host latencies, or when unknown)."""
    inst, res, sched = placement.instance, placement.result, placement.schedule
    source = host_source(hw, profile_meta)
    est = " (estimate: host latencies modelled)" if source.estimate else ""
    lines = []
    status = {
        SolveStatus.OPTIMAL: "optimal",
        SolveStatus.TIME_LIMIT: "TIME LIMIT reached: best placement found, NOT proven optimal",
    }.get(res.status, res.status.value)
    gap = fmt_gap(res.gap)
    if res.options.get("method") == "decomposition":
        o = res.options
        rounds = f"{o['rounds']} round" + ("s" if o["rounds"] != 1 else "")
        where = ""  # a result of an earlier version holds neither
        if o.get("scheduler"):
            where = f", on the Dask cluster at {o['scheduler']}"
        elif o.get("workers", 1) > 1:
            where = (f", {o.get('block_solves_in_workers', '?')} of them in {o['workers']}"
                     " worker processes")  # fmt: skip
        if o.get("block_solves_by_cpsat"):  # large blocks HiGHS did not prove
            where += f", {o['block_solves_by_cpsat']} ended by CP-SAT"
        lines.append(
            f"solver: decomposition into {o['blocks']} blocks at {o['cuts']} cut operators,"
            f" each block by {_solver_label(res)}{_formulation_note(res)}"
            f" ({o['block_solves']} block solves in {rounds}{where}): {status},"
            f" certified gap {gap}, {res.solve_seconds:.2f} s"
        )
        if res.status != SolveStatus.OPTIMAL:
            lines.append(f"  stopped: {o['ended']}")
    else:
        lines.append(
            f"solver: {_solver_label(res)}{_formulation_note(res)}:"
            f" {status}, gap {gap}, solve {res.solve_seconds:.2f} s"
            f" (build {res.build_seconds:.2f} s{_heuristic_note(res)});"
            f" {res.size.variables} variables ({res.size.binaries} binary),"
            f" {res.size.constraints} constraints"
        )
    if sched is None:
        return lines
    ver = placement.verification
    lines.append(
        "verification: passed, makespan recomputed independently"
        f" ({format_seconds(ver.recomputed_makespan)})"
        if ver is not None and ver.ok
        else "verification: NOT run"
    )
    host_ops = [op for op in inst.operators if sched.on_host[op.name]]
    cim_ops = [op for op in inst.operators if not sched.on_host[op.name]]
    host_busy = sum(op.t_host for op in host_ops)
    cim_busy = sum(op.t_acc or 0.0 for op in cim_ops)
    busy = host_busy + cim_busy or 1.0
    lines.append("")
    lines += text_table(
        [["device", "operators", "busy time", "share"]],
        [[name, str(len(ops)), format_seconds(t), f"{t / busy * 100:.1f}%"]
         for name, ops, t in (("host CPU", host_ops, host_busy), ("CIM", cim_ops, cim_busy))],
        right=(1, 2, 3),
    )  # fmt: skip
    lines.append("")
    lines.append(f"crossbars used: {placement.crossbars_used} of {inst.crossbar_budget}")
    lines.append(f"host latencies: {source.detail}")
    if source.mismatch:
        lines.append(
            f"  (MISMATCH: the numbers below are the measuring machine's, not those of"
            f" {hw.host.name}, the host of '{hw.name}')"
        )
    lines.append(f"CPU-only latency: {format_seconds(placement.cpu_only)}{est}")
    objective = getattr(placement, "objective", None)
    what = "optimized makespan" if objective is None else "single-frame latency (makespan)"
    lines.append(
        f"{what}: {format_seconds(sched.makespan)}"
        f"  (speed-up {placement.speedup:.2f}x over CPU-only on {hw.name}"
        + (", estimate)" if source.estimate else ")")
    )
    lines += measure_lines(placement, hw, profile_meta)
    if details:
        lines.append("")
        lines += operator_table(placement, graph, estimate=source.estimate)
    return lines


def measure_lines(
    placement: CimPlacement, hw: Hardware, profile_meta: Mapping[str, Any] | None = None
) -> list[str]:
    """The placement's energy beside its latency, part by part with what is measured,
    modelled or estimated, and the frame rate of a pipelined stream beside one frame at a
    time (:mod:`placement.cim.energy`, :mod:`placement.cim.stream`)."""
    inst, sched = placement.instance, placement.schedule
    if sched is None:
        return []
    lines = []
    objective = getattr(placement, "objective", None)
    if objective is not None:
        stages = ", ".join(f"{s.axis} {s.status.value} (gap {fmt_gap(s.gap)})"
                           for s in placement.stages)  # fmt: skip
        lines.append(f"objective: {objective.describe()}; {stages}")
    energy = placement_energy(inst, sched.on_host, sched.makespan)
    source = energy_source(hw, profile_meta)
    if energy is not None and source is not None:
        cpu = placement_energy(inst, {op.name: True for op in inst.operators}, placement.cpu_only)
        assert cpu is not None
        lines += [
            f"energy per inference: {fmt_energy(energy.total)} (CPU-only {fmt_energy(cpu.total)}):"
            f" host {fmt_energy(energy.host)}, CIM {fmt_energy(energy.accelerator)}",
            f"  host: {source.host}",
            f"  CIM: modelled, published component energies: crossbars"
            f" {fmt_energy(energy.crossbars)}, internal bus {fmt_energy(energy.internal)},"
            f" shared bus {fmt_energy(energy.bus)}, static {fmt_energy(energy.static)}",
        ]
    else:
        lines.append("energy: not modelled (the hardware has no [cim] energy constants or no"
                     " host power)")  # fmt: skip
    period, busiest = minimum_period(inst, sched.on_host)
    if period > 0:
        lines.append(
            f"pipelined stream: {fmt_rate(1.0 / period)} frames/s (period"
            f" {format_seconds(period)}, set by {busiest}); one frame at a time"
            f" {fmt_rate(1.0 / sched.makespan)} frames/s"
        )
    return lines


def measures_document(
    placement: CimPlacement, hw: Hardware, profile_meta: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``energy`` and ``stream`` sections of a result document (None without a
    placement, or ``energy`` None without an energy model)."""
    inst, sched = placement.instance, placement.schedule
    if sched is None:
        return {"energy": None, "stream": None}
    energy = placement_energy(inst, sched.on_host, sched.makespan)
    source = energy_source(hw, profile_meta)
    doc: dict[str, Any] = {"energy": None}
    if energy is not None and source is not None:
        cpu = placement_energy(inst, {op.name: True for op in inst.operators}, placement.cpu_only)
        assert cpu is not None
        doc["energy"] = energy.to_json() | {"cpu_only_j": cpu.total, "source": source.to_json()}
    period, busiest = minimum_period(inst, sched.on_host)
    doc["stream"] = {"period_s": period, "frames_per_s": 1.0 / period if period > 0 else None,
                     "bottleneck": busiest, "single_frame_latency_s": sched.makespan}  # fmt: skip
    return doc


def operator_table(placement: CimPlacement, graph: OpGraph, estimate: bool = False) -> list[str]:
    """The per-operator schedule; ``estimate``: T_host is the host model's ("T_host~")."""
    sched = placement.schedule
    assert sched is not None
    t_host = "T_host~" if estimate else "T_host"
    scale, unit, digits = time_scale(sched.makespan)

    def t(seconds: float) -> str:
        return f"{seconds * scale:.{digits}f}"

    header = [["operator", "type", "device", t_host, "T_acc", "xbars", "start", "finish"],
              ["", "", "", f"({unit})", f"({unit})", "", f"({unit})", f"({unit})"]]
    body = [
        [op.name, op.op_type, "host" if sched.on_host[op.name] else "CIM", t(op.t_host),
         "-" if op.t_acc is None else t(op.t_acc), str(op.crossbars or "-"),
         t(sched.start[op.name]), t(sched.finish[op.name])]
        for op in sorted(placement.instance.operators, key=lambda o: (sched.start[o.name], o.name))
    ]  # fmt: skip
    rows = text_table(header, body, right=range(3, 8), shrink=0)
    if estimate:
        rows.append("T_host~: estimated by the analytical host model, not measured")
    return rows


def result_document(
    placement: CimPlacement,
    graph: OpGraph,
    hw: Hardware,
    profile_meta: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The full result (``--json``): placement, schedule, model, hardware, the profile's
    metadata (None with modelled host latencies) and the ``host`` section saying where
    the host latencies came from (:class:`~placement.hardware.hostcheck.HostLatencySource`)."""
    doc = placement.to_json() | measures_document(placement, hw, profile_meta)
    doc["model"] = {"path": graph.path, "sha256": graph.sha256, "operators": len(graph.operators)}
    doc["hardware"] = hw.to_json()
    doc["host_profile"] = profile_meta
    doc["host"] = host_source(hw, profile_meta).to_json()
    return doc


def _solver_label(res: SolveResult) -> str:
    if res.solver != "highs":
        return res.solver
    try:
        return f"HiGHS (highspy {version('highspy')})"
    except PackageNotFoundError:
        return "HiGHS"


def _heuristic_note(res: SolveResult) -> str:
    seconds = res.options.get("heuristic_seconds") if res.options else None
    return "" if seconds is None else f", heuristic start {seconds:.2f} s"


def _formulation_note(res: SolveResult) -> str:
    formulation = res.options.get("formulation") if res.options else None
    return f" on the {formulation} model" if formulation else ""
