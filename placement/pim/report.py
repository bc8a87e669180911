"""What a PIM solve reports: the table on the terminal and the JSON document.

Derived values that are estimated rather than measured carry ``"estimated": true``
next to the value in the document and a ``*`` in the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.hardware.pim import PimHardware
from placement.nests import LoopNest
from placement.pim.solve import CoreResult
from placement.profiling.counters import BACKEND_EVENTS, EV_BOUND_ON_STORES, EV_OFFCORE_RD
from placement.profiling.nest_profile import FILE, MEASURED, NestProfile
from placement.solvers.base import SolveStatus
from placement.solvers.registry import get_backend
from placement.units import fmt_bandwidth, fmt_bytes, fmt_time

RESULT_FORMAT = "placement-pim-result"
RESULT_VERSION = 1


# --------------------------------------------------------------------------- derived values


@dataclass(frozen=True)
class Derived:
    """A value derived for display; ``estimated`` when not from a measured counter."""

    value: float | None
    estimated: bool

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "estimated": self.estimated}


def read_bandwidth(
    nest: LoopNest, t_cpu: float, counters: Mapping[str, float] | None, cache_line: int
) -> Derived:
    """Eq. 6 from the off-core read counter, else fetch_bytes / T_cpu (estimated)."""
    if t_cpu <= 0:
        return Derived(None, counters is None or EV_OFFCORE_RD not in counters)
    if counters is not None and EV_OFFCORE_RD in counters:
        return Derived(counters[EV_OFFCORE_RD] * cache_line / t_cpu, False)
    return Derived(nest.fetch_bytes / t_cpu, True)


def store_bound(counters: Mapping[str, float] | None) -> Derived:
    """Eq. 7 from the counters; no estimate exists (None without them)."""
    if counters is None or any(e not in counters for e in (EV_BOUND_ON_STORES, *BACKEND_EVENTS)):
        return Derived(None, False)
    c_store = counters[EV_BOUND_ON_STORES]
    backend = math.fsum(counters[e] for e in BACKEND_EVENTS) + c_store
    return Derived(c_store / backend if backend > 0 else 0.0, False)


# --------------------------------------------------------------------------- JSON


def pim_document(
    profile: NestProfile,
    hw: PimHardware,
    results: Sequence[CoreResult],
    *,
    copy: str,
    granularity: str,
    allow_estimates: bool,
) -> dict[str, Any]:
    """The complete JSON document of a PIM solve (see the module docstring)."""
    spec = hw.pim
    counters = profile.counters or {}
    nests = []
    for n in profile.nests:
        t = profile.t_cpu[n.id]
        row = n.to_json()
        row["t_cpu"] = t
        row["counters"] = counters.get(n.id)
        row["read_bandwidth"] = read_bandwidth(n, t, counters.get(n.id), spec.cache_line).to_json()
        row["store_bound"] = store_bound(counters.get(n.id)).to_json()
        nests.append(row)
    per_core = []
    for r in results:
        model = r.placement.to_json()
        rs = r.rule_speedup
        per_core.append(
            {
                "n_cores": r.cores,
                "rule": {
                    "hybrid": r.rule_hybrid.to_json(),
                    "speedup": None if math.isinf(rs) else rs,
                    "on_pim": r.rule_on_pim,
                    "estimated": any(d.estimated for d in r.rule.values()),
                    "decisions": {k: d.to_json() for k, d in r.rule.items()},
                },
                "model": model,
            }
        )
    return {
        "format": RESULT_FORMAT,
        "version": RESULT_VERSION,
        "target": "pim",
        "model": {
            "path": profile.model_path,
            "sha256": profile.model_sha256,
            "source_kind": profile.source_kind,
            "nests": len(profile.nests),
        },
        "hardware": hw.to_json(),
        "options": {
            "copy": copy,
            "granularity": granularity,
            "allow_estimates": allow_estimates,
            "cores": [r.cores for r in results],
        },
        "nest_profile": {
            "source": profile.source,
            "counter_source": profile.counter_source,
            "metadata": profile.metadata,
        },
        "estimates": {
            "read_bandwidth": "fetch_bytes / T_cpu where the off-core read counter is missing",
            "t_pim": "analytical model (placement.devices.pim), not measured",
        },
        "cpu_only": profile.cpu_only,
        "nests": nests,
        "results": per_core,
    }



# --------------------------------------------------------------------------- terminal


def nest_table(nests: Sequence[Any]) -> list[str]:
    rows = [
        f"{'nest':<6}{'origin':<30}{'linalg op':<17}{'N_iter':>10}{'N_total':>12}"
        f"{'trips':>7}{'fetch':>11}{'flush':>11}"
    ]
    for n in nests:
        rows.append(
            f"{n.id:<6}{_origin(n)[:29]:<30}{n.linalg_op.removeprefix('linalg.')[:16]:<17}"
            f"{n.n_iter:>10}{n.n_total:>12}{n.trip_count:>7}"
            f"{fmt_bytes(n.fetch_bytes):>11}{fmt_bytes(n.flush_bytes):>11}"
        )
    return rows


def summary_lines(
    profile: Any,
    hw: Any,
    results: Sequence[Any],
    copy: str,
    granularity: str,
    allow_estimates: bool,
) -> list[str]:
    spec = hw.pim
    counters = profile.counters or {}
    lines = [
        f"model: {profile.model_path} ({profile.source_kind}), {len(profile.nests)} loop nests;"
        f" CPU-only {fmt_time(profile.cpu_only)} (sum of nest T_cpu)",
        f"hardware counters: {_counter_status(profile)}",
        "",
    ]
    estimated_bw = False
    header = (
        f"{'nest':<6}{'origin':<26}{'N_iter':>9}{'N_total':>11}{'fetch':>10}{'flush':>10}"
        f"{'T_cpu':>10}{'BW_read':>12}{'StoreBnd':>9}"
    )
    header += "".join(f"{'N=' + str(r.cores):>13}" for r in results)
    lines.append(header)
    lines.append(" " * (len(header) - 13 * len(results)) + f"{'(rule/model)':>13}")
    for n in profile.nests:
        t = profile.t_cpu[n.id]
        bw = read_bandwidth(n, t, counters.get(n.id), spec.cache_line)
        sb = store_bound(counters.get(n.id))
        estimated_bw |= bw.estimated
        bw_text = (
            "-" if bw.value is None else fmt_bandwidth(bw.value) + ("*" if bw.estimated else "")
        )
        sb_text = "-" if sb.value is None else f"{sb.value:.3f}"
        row = (
            f"{n.id:<6}{_origin(n)[:25]:<26}{n.n_iter:>9}{n.n_total:>11}"
            f"{fmt_bytes(n.fetch_bytes):>10}{fmt_bytes(n.flush_bytes):>10}"
            f"{fmt_time(t):>10}{bw_text:>12}{sb_text:>9}"
        )
        for r in results:
            d = r.rule[n.id]
            rule = d.place + ("*" if d.estimated else "")
            model = (
                "-"
                if r.placement.on_pim is None
                else ("pim" if r.placement.on_pim[n.id] else "host")
            )
            row += f"{rule + '/' + model:>13}"
        lines.append(row)

    lines.append("")
    lines.append("rule decisions (Eqs. 1-7) and their reasons:")
    for n in profile.nests:
        groups: dict[tuple[str, str, bool], list[int]] = {}
        for r in results:
            d = r.rule[n.id]
            groups.setdefault((d.place, d.reason, d.estimated), []).append(r.cores)
        for (place, reason, est), cores in groups.items():
            mark = "*" if est else ""
            lines.append(f"  {n.id} N={','.join(map(str, cores))}: {place}{mark}: {reason}")

    lines.append("")
    lines.append(
        f"{'N_core':>6}{'T_hybrid':>11}{'T_host':>11}{'T_pim':>11}{'T_copy':>11}"
        f"{'N_reg*T_sw':>14}{'speed-up':>10}{'on PIM':>8}   |{'rule T_hybrid':>14}"
        f"{'speed-up':>10}{'on PIM':>8}"
    )
    any_rule_estimated = False
    for r in results:
        p = r.placement
        rule_est = any(d.estimated for d in r.rule.values())
        any_rule_estimated |= rule_est
        mark = "*" if rule_est else ""
        rh = r.rule_hybrid
        rule_part = (
            f"{fmt_time(rh.total) + mark:>14}{_fmt_speedup(r.rule_speedup) + mark:>10}"
            f"{len(r.rule_on_pim):>8}"
        )
        if p.hybrid is None:
            lines.append(f"{r.cores:>6}{'no solution':>11}{'':>57}{'-':>8}   |{rule_part}")
            continue
        h = p.hybrid
        switch = f"{h.n_region}x{fmt_time(h.t_sw)}"
        lines.append(
            f"{r.cores:>6}{fmt_time(h.total):>11}{fmt_time(h.host):>11}{fmt_time(h.pim):>11}"
            f"{fmt_time(h.copy):>11}{switch:>14}{_fmt_speedup(p.speedup):>10}"
            f"{len(r.model_on_pim or []):>8}   |{rule_part}"
        )

    lines.append("")
    lines.append(_solver_line(results))
    lines.append(
        "T_hybrid = T_host + T_pim + T_copy + N_region*T_sw (Eq. 9); T_pim from the analytical"
        " PIM model (not measured); T_copy: "
        + ("Eq. 8 upper bound" if copy == "upper_bound" else "exact residency within segments")
        + f"; model granularity: {granularity}; the rule decides per nest"
    )
    if estimated_bw or any_rule_estimated:
        use = (
            "used by rule C3 (--allow-estimates)"
            if allow_estimates
            else "shown only; rule C3 is not evaluated without the counter (--allow-estimates)"
        )
        lines.append(
            "* estimated, not measured: BW_read = fetch bytes / T_cpu where the off-core read"
            f" counter is missing; {use}"
        )
    return lines


def _counter_status(profile: Any) -> str:

    reason = profile.counters_unavailable_reason
    if reason is not None:
        return (
            f"unavailable: {reason}. Rule conditions C3/C4 are not evaluated; load counters"
            " measured elsewhere with --counters FILE, or estimate C3 with --allow-estimates"
        )
    have = len(profile.counters or {})
    if profile.counter_source == MEASURED:
        return f"measured on this host (Table 1 events, perf_event_open) for {have} nests"
    if profile.counter_source == FILE:
        where = profile.metadata.get("counters_file", "a file")
        return f"loaded from {where} for {have} of {len(profile.nests)} nests"
    return profile.counter_source


def _solver_line(results: Sequence[Any]) -> str:
    parts = []
    for r in results:
        res = r.placement.result
        status = {SolveStatus.OPTIMAL: "optimal", SolveStatus.TIME_LIMIT: "TIME LIMIT"}.get(
            res.status, res.status.value
        )
        gap = (
            ""
            if res.gap is None or res.status == SolveStatus.OPTIMAL
            else (f" gap {res.gap * 100:.3g}%")
        )
        parts.append(f"N={r.cores} {status}{gap}")
    verified = all(
        r.placement.verification is not None and r.placement.verification.ok
        for r in results
        if r.placement.on_pim is not None
    )
    check = (
        "verification passed (Eq. 9 recomputed independently)"
        if verified
        else ("verification NOT run")
    )
    labels = sorted({get_backend(r.placement.result.solver).label for r in results})
    return f"solver: {'/'.join(labels)} {', '.join(parts)}; {check}"


# --------------------------------------------------------------------------- helpers


def _origin(nest: Any) -> str:
    if nest.onnx_node:
        return f"{nest.onnx_node} ({nest.onnx_op_type})" if nest.onnx_op_type else nest.onnx_node
    return nest.linalg_op.removeprefix("linalg.") or "?"


def _fmt_speedup(s: float | None) -> str:
    if s is None:
        return "-"
    return "inf" if s == float("inf") else f"{s:.2f}x"


