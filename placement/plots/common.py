"""What every figure shares: the data error, reading numbers from sweep rows, column
checks, figure creation, axis helpers, time units, and writing figures to files.

Figures are built with matplotlib's object-oriented API (no pyplot, no global state);
the figure modules (:mod:`placement.plots.cim`, :mod:`placement.plots.pim`,
:mod:`placement.plots.gantt`) import this one, never the reverse.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from placement.errors import PlacementError
from placement.io import check_output_file, replacing
from placement.units import fmt_gap

Row = Mapping[str, Any]

HOST_COLOR = "#1f4e79"  # darker shade: CPU (as in the CIM paper's Fig. 5)
ACCEL_COLOR = "#7fb3e0"  # lighter shade: CIM / PIM
# The columns of a sweep's points.csv (placement.sweep.run documents each): the
# point's identity, then one column per swept parameter, then its results. Defined
# here, beside the figures that read them, and written by placement.sweep.
ID_COLUMNS = ("point_id", "target", "model", "hardware")
RESULT_COLUMNS = (
    "status", "objective_s", "cpu_only_s", "speedup", "n_operators", "n_nests",
    "n_offloaded", "crossbars_used", "host_busy_s", "accel_busy_s", "gap", "solve_seconds",
    "verified", "message", "host_latencies", "host_mismatch", "memory", "copy", "energy_j",
    "energy_source", "frames_per_s",
)  # fmt: skip
_FIXED_COLUMNS = frozenset((*ID_COLUMNS, *RESULT_COLUMNS))


class PlotDataError(PlacementError):
    """The data given cannot produce this figure (the message says what is missing)."""


# --------------------------------------------------------------------------- proven or not

#: Legend entry of the marks on points that were not proven optimal.
UNPROVEN_LABEL = "not proven optimal (best found, gap)"


def status_of(row: Row) -> str | None:
    """A point's solver status: the row's ``status``, or a document's ``result.status``."""
    status = row.get("status")
    if status is None and isinstance(row.get("result"), Mapping):
        status = row["result"].get("status")
    if status is None and isinstance(row.get("schedule"), Mapping):
        return status_of(row["schedule"])
    return None if status is None else str(status)


def unproven(row: Row) -> bool:
    """True for a point with a solution that was not proven optimal (a time limit)."""
    status = status_of(row)
    return status is not None and status != "optimal"


def gap_text(row: Row) -> str:
    """The point's relative gap in %, e.g. "gap 1.2%" ("gap ?" when unknown)."""
    gap = num(row, "gap")
    if gap is None and isinstance(row.get("result"), Mapping):
        gap = num(row["result"], "gap")
    return "gap ?" if gap is None else f"gap {fmt_gap(gap)}"


def placement_title(rows: Sequence[Row], what: str = "placement") -> str:
    """"optimal placement" when every point was proven optimal, else "best placement found
    (k of n proven optimal)": a figure never says optimal for what was not proven."""
    known = [r for r in rows if status_of(r) is not None]
    proven = sum(1 for r in known if not unproven(r))
    if proven == len(known):
        return f"optimal {what}"
    return f"best {what} found ({proven} of {len(known)} points proven optimal)"


def mark_unproven(ax: Any, points: Sequence[tuple[float, float, Row]]) -> None:
    """A red cross and the gap on each (x, y) whose row was not proven optimal."""
    marked = [(x, y, r) for x, y, r in points if unproven(r)]
    if not marked:
        return
    ax.scatter([p[0] for p in marked], [p[1] for p in marked], marker="x", s=60,
               color="red", zorder=5, label=UNPROVEN_LABEL)  # fmt: skip
    for x, y, r in marked:
        ax.annotate(gap_text(r), (x, y), textcoords="offset points", xytext=(4, 4),
                    fontsize="x-small", color="red")  # fmt: skip


# --------------------------------------------------------------------------- host latencies

#: Colour of a caption that reports a host mismatch.
MISMATCH_COLOR = "#b00000"


def host_caption(rows: Sequence[Row]) -> tuple[str, bool] | None:
    """The caption line saying where the rows' host latencies came from, and whether any
    row's profile was measured on another architecture than its hardware's host.

    Reads the sweep columns ``host_latencies`` and ``host_mismatch`` (or a document's
    ``host`` section: ``label``, ``mismatch``); None when the rows do not say (sweeps
    written before these columns existed). Several sources are joined with "; ".
    """
    details: list[str] = []
    mismatch = False
    for row in rows:
        host = row.get("host")
        if isinstance(host, Mapping):
            text = str(host.get("label") or "").removeprefix("host latencies ")
            flag = host.get("mismatch")
        else:
            text, flag = str(row.get("host_latencies") or ""), row.get("host_mismatch")
        if text and text not in details:
            details.append(text)
        mismatch |= flag is True or str(flag).lower() in ("true", "1")
    if not details:
        return None
    return "host latencies " + "; ".join(details), mismatch


#: Inches a panel needs so that its host caption wraps onto a few lines at most.
CAPTION_PANEL_WIDTH = 2.6


def caption_panel(ax: Any, title: str, rows: Sequence[Row]) -> None:
    """``ax``'s title, with the host-latency caption (:func:`host_caption`) as a smaller
    line under it (wrapped to the panel's width), red when the host does not match."""
    import textwrap

    caption = host_caption(rows)
    if caption is None:
        ax.set_title(title)
        return
    text, mismatch = caption
    panel_inches = ax.figure.get_figwidth() / max(1, len(ax.figure.axes))
    lines = textwrap.wrap(text, max(20, int(panel_inches * 12))) or [text]
    ax.set_title(title, pad=6 + 8.5 * len(lines))
    ax.annotate("\n".join(lines), xy=(0.5, 1.0), xycoords="axes fraction", xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=7,
                color=MISMATCH_COLOR if mismatch else "0.25")  # fmt: skip


# --------------------------------------------------------------------------- row helpers


def num(row: Row, key: str) -> float | None:
    """``row[key]`` as a float; None when absent, empty or not a finite number."""
    value = row.get(key)
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def model_label(path: Any) -> str:
    """A model's short name for legends: the file stem of its path."""
    text = str(path or "?")
    name = text.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".onnx", ".mlir"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def swept_params(rows: Sequence[Row]) -> list[str]:
    """Swept parameter columns: those of the rows that are not fixed ``points.csv`` columns."""
    out: list[str] = []
    for row in rows:
        for key in row:
            if key not in _FIXED_COLUMNS and key not in out and not key.startswith("_"):
                out.append(key)
    return out


def require_columns(rows: Sequence[Row], columns: Sequence[str], figure: str) -> None:
    """PlotDataError unless there are rows and each of ``columns`` has a number in one."""
    if not rows:
        raise PlotDataError(f"{figure}: no sweep points")
    missing = [c for c in columns if all(num(r, c) is None for r in rows)]
    if missing:
        raise PlotDataError(
            f"{figure}: needs column(s) {', '.join(missing)} with numbers; the sweep has none"
        )


def others_label(row: Row, others: Sequence[str]) -> str:
    """``k=v, ...`` of ``row`` for the parameters ``others`` (a series' legend suffix)."""
    return ", ".join(f"{k}={row.get(k)}" for k in others)


def varying(rows: Sequence[Row], keys: Iterable[str]) -> list[str]:
    """Those of ``keys`` taking more than one value in ``rows``: they must split series."""
    return [k for k in keys if len({str(r.get(k)) for r in rows}) > 1]


# --------------------------------------------------------------------------- figures, axes


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches with constrained layout."""
    return Figure(figsize=(width, height), layout="constrained")


def speedup_axis(ax: Any) -> None:
    """A speed-up y axis: a dashed line at 1x, ticks as ``2x``, horizontal grid."""
    ax.axhline(1.0, color="0.4", lw=0.8, ls="--", zorder=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.grid(True, axis="y", alpha=0.3)


def time_unit(seconds: float) -> tuple[float, str]:
    """A scale and unit that keeps axis numbers readable."""
    if seconds >= 1.0:
        return 1.0, "s"
    if seconds >= 1e-3:
        return 1e3, "ms"
    if seconds >= 1e-6:
        return 1e6, "µs"
    return 1e9, "ns"


# --------------------------------------------------------------------------- saving


def check_figure_path(path: str | Path, flag: str = "") -> Path:
    """``path`` as a Path if a figure can be written there (PNG/SVG, existing directory);
    a one-line PlacementError otherwise, so that commands fail before their real work."""
    path = Path(path)
    where = f"{flag} {path}" if flag else str(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise PlacementError(f"{where}: a figure must be written as .png or .svg")
    return check_output_file(path, where)


def save_figure(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Write ``fig`` as PNG or SVG (by the suffix), atomically: temp file beside it + rename."""
    path = check_figure_path(path)
    fmt = path.suffix.lower().lstrip(".")
    with replacing(path, suffix=f".{fmt}") as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi)
    return path
