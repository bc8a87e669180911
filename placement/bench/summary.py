"""Table I of the CIM paper from benchmark rows: one line per (network, hardware,
formulation, solver) over grid points and repeats (gaps in %, times in s)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

LICENCE_STATUS = "licence_limit"  # Gurobi's size-limited licence refused the model
UNAVAILABLE_STATUS = "unavailable"


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (network, hardware, formulation, solver), over grid points and repeats."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["network"], row["hardware"], row["formulation"], row["solver"])
        groups.setdefault(key, []).append(row)
    out = []
    for (net, hw, form, solver), rs in groups.items():
        ran = [r for r in rs if r.get("total_s") is not None and r["status"] not in
               (UNAVAILABLE_STATUS, LICENCE_STATUS)]
        gaps = [r["gap"] for r in ran if r.get("gap") is not None]
        statuses = sorted({r["status"] for r in rs})
        out.append({
            "network": net, "hardware": hw, "formulation": form, "solver": solver,
            "operators": _first(rs, "operators"),
            "variables": _max(rs, "variables"), "binaries": _max(rs, "binaries"),
            "constraints": _max(rs, "constraints"),
            "runs": len(rs),
            "optimal": sum(1 for r in rs if r["status"] == "optimal"),
            "verified": sum(1 for r in rs if r["verified"]),
            "mean_total_s": _mean([r["total_s"] for r in ran]),
            "max_total_s": max((r["total_s"] for r in ran), default=None),
            "mean_solve_s": _mean([r["solve_s"] for r in ran if r.get("solve_s") is not None]),
            "mean_gap": _mean(gaps), "max_gap": max(gaps, default=None),
            "no_gap_runs": len(ran) - len(gaps),
            "mean_build_share": _mean([r["build_share"] for r in ran
                                       if r.get("build_share") is not None]),
            "statuses": ",".join(statuses),
        })
    return out


def _first(rows: Sequence[dict[str, Any]], key: str) -> Any:
    return next((r[key] for r in rows if r.get(key) is not None), None)


def _max(rows: Sequence[dict[str, Any]], key: str) -> Any:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return max(vals) if vals else None


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _pct(v: float | None) -> float | None:
    return None if v is None else 100 * v


def format_summary(summary: Sequence[dict[str, Any]]) -> list[str]:
    """The Table-I-shaped text table (gaps in %, times in s)."""
    w = max([14, *(len(str(s["network"])) + 2 for s in summary)])
    hw_w = max([10, *(len(str(s["hardware"])) + 2 for s in summary)])
    head = (f"{'network':<{w}}{'hw':<{hw_w}}{'formulation':<12}{'solver':<12}{'ops':>5}{'vars':>7}"
            f"{'bins':>7}{'rows':>7}{'mean s':>9}{'max s':>9}{'mean gap%':>10}{'max gap%':>9}"
            f"{'opt/pts':>9}{'verif':>7}{'build%':>7}")
    lines = [head, "-" * len(head)]

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    for s in summary:
        lines.append(
            f"{s['network']:<{w}}{s['hardware']:<{hw_w}}{s['formulation']:<12}{s['solver']:<12}"
            f"{num(s['operators'], 'd'):>5}{num(s['variables'], 'd'):>7}"
            f"{num(s['binaries'], 'd'):>7}{num(s['constraints'], 'd'):>7}"
            f"{num(s['mean_total_s'], '.3f'):>9}{num(s['max_total_s'], '.2f'):>9}"
            f"{num(None if s['mean_gap'] is None else 100 * s['mean_gap'], '.3f'):>10}"
            f"{num(None if s['max_gap'] is None else 100 * s['max_gap'], '.3f'):>9}"
            f"{s['optimal']:>5}/{s['runs']:<3}{s['verified']:>7}"
            f"{num(_pct(s['mean_build_share']), '.1f'):>7}"
            + ("" if s["statuses"] in ("optimal", "optimal,time_limit", "time_limit")
               else f"  [{s['statuses']}]")
        )
    return lines
