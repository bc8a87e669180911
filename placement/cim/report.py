"""Human-readable summaries and JSON documents of CIM placements."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from placement.cim.solve import CimPlacement
from placement.graph import OpGraph
from placement.hardware.cim import Hardware
from placement.solvers.base import SolveResult, SolveStatus


def format_seconds(t: float) -> str:
    if t >= 1.0:
        return f"{t:.3f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3f} ms"
    return f"{t * 1e6:.2f} us"


def summary_lines(
    placement: CimPlacement, graph: OpGraph, hw: Hardware, details: bool
) -> list[str]:
    inst, res, sched = placement.instance, placement.result, placement.schedule
    lines = []
    status = {
        SolveStatus.OPTIMAL: "optimal",
        SolveStatus.TIME_LIMIT: "TIME LIMIT reached: best placement found, NOT proven optimal",
    }.get(res.status, res.status.value)
    gap = "n/a" if res.gap is None else f"{res.gap * 100:.3g}%"
    lines.append(
        f"solver: {_solver_label(res)}{_formulation_note(res)}:"
        f" {status}, gap {gap}, solve {res.solve_seconds:.2f} s"
        f" (build {res.build_seconds:.2f} s{_heuristic_note(res)}); {res.size.variables} variables"
        f" ({res.size.binaries} binary), {res.size.constraints} constraints"
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
    lines.append(f"{'device':<12}{'operators':>10}{'busy time':>14}{'share':>8}")
    lines.append(
        f"{'host CPU':<12}{len(host_ops):>10}{format_seconds(host_busy):>14}"
        f"{host_busy / busy * 100:>7.1f}%"
    )
    lines.append(
        f"{'CIM':<12}{len(cim_ops):>10}{format_seconds(cim_busy):>14}{cim_busy / busy * 100:>7.1f}%"
    )
    lines.append("")
    lines.append(f"crossbars used: {placement.crossbars_used} of {inst.crossbar_budget}")
    lines.append(f"CPU-only latency: {format_seconds(placement.cpu_only)}")
    lines.append(
        f"optimized makespan: {format_seconds(sched.makespan)}"
        f"  (speed-up {placement.speedup:.2f}x over CPU-only on {hw.name})"
    )
    if details:
        lines.append("")
        lines += operator_table(placement, graph)
    return lines


def operator_table(placement: CimPlacement, graph: OpGraph) -> list[str]:
    sched = placement.schedule
    assert sched is not None
    rows = [
        f"{'operator':<32}{'type':<16}{'device':<7}{'T_host':>11}{'T_acc':>11}"
        f"{'xbars':>6}{'start':>11}{'finish':>11}"
    ]
    for op in sorted(placement.instance.operators, key=lambda o: (sched.start[o.name], o.name)):
        t_acc = "-" if op.t_acc is None else format_seconds(op.t_acc)
        device = "host" if sched.on_host[op.name] else "CIM"
        rows.append(
            f"{op.name[:31]:<32}{op.op_type[:15]:<16}{device:<7}"
            f"{format_seconds(op.t_host):>11}{t_acc:>11}{op.crossbars or '-':>6}"
            f"{format_seconds(sched.start[op.name]):>11}{format_seconds(sched.finish[op.name]):>11}"
        )
    return rows


def result_document(
    placement: CimPlacement, graph: OpGraph, hw: Hardware, profile_meta: dict[str, Any]
) -> dict[str, Any]:
    doc = placement.to_json()
    doc["model"] = {"path": graph.path, "sha256": graph.sha256, "operators": len(graph.operators)}
    doc["hardware"] = hw.to_json()
    doc["host_profile"] = profile_meta
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
