"""Table I of the CIM paper from benchmark rows: one line per (network, hardware,
formulation, solver) over grid points and repeats (gaps in %, times in s)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from placement.tables import text_table

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
    """The Table-I-shaped text table (gaps in %, times in s): a heading per network and
    hardware, a row per formulation and solver."""

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in summary:
        groups.setdefault((str(s["network"]), str(s["hardware"])), []).append(s)
    lines: list[str] = []
    for (network, hardware), rows in groups.items():
        ops = next((s["operators"] for s in rows if s["operators"] is not None), None)
        lines += [""] if lines else []
        heading = f"{network} on {hardware}"
        lines.append(heading + (f" ({ops} operators)" if ops is not None else ""))
        body = [
            [s["formulation"], s["solver"], num(s["variables"], "d"), num(s["binaries"], "d"),
             num(s["constraints"], "d"), num(s["mean_total_s"], ".3f"),
             num(s["max_total_s"], ".2f"),
             num(None if s["mean_gap"] is None else 100 * s["mean_gap"], ".3f"),
             num(None if s["max_gap"] is None else 100 * s["max_gap"], ".3f"),
             f"{s['optimal']}/{s['runs']}", str(s["verified"]),
             num(_pct(s["mean_build_share"]), ".1f"),
             "" if s["statuses"] in ("optimal", "optimal,time_limit", "time_limit")
             else f"[{s['statuses']}]"]
            for s in rows
        ]  # fmt: skip
        lines += text_table(
            [["", "", "", "", "", "mean", "max", "mean", "max", "", "", "build", ""],
             ["formulation", "solver", "vars", "bins", "rows", "s", "s", "gap%", "gap%",
              "optimal", "verified", "%", ""]],
            body, right=range(2, 12),
        )  # fmt: skip
    return lines
