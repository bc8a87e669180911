"""The Pareto front of a CIM placement as a figure (``placement pareto``).

Two axes: the points of the front, joined by the staircase of the region they dominate
(the attainment curve, as the multi-objective literature draws fronts), each end named;
three axes: the three pairwise projections, the third axis as each point's colour. Points
not proven optimal carry a red cross and their gap, as in the sweep figures
(:mod:`placement.plots.common`). Rows are ``front.csv``'s (numbers or numeric strings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure

from placement.plots.common import (
    PlotDataError,
    Row,
    caption_panel,
    mark_unproven,
    new_figure,
    num,
    placement_title,
    time_unit,
)

#: Column, label and unit kind of each axis.
_AXES = {
    "latency": ("latency_s", "single-frame latency", "time"),
    "energy": ("energy_j", "energy per inference, modelled", "energy"),
    "crossbars": ("crossbars", "crossbars used (count)", "count"),
    "throughput": ("throughput_fps", "pipelined throughput (frames/s)", "count"),
}
_ENERGY_UNITS = ((1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ"), (1e-9, "nJ"))


def _scale(axis: str, values: Sequence[float]) -> tuple[float, str]:
    """Multiplier and axis label for ``axis`` given its values."""
    _column, label, kind = _AXES[axis]
    top = max(values, default=1.0)
    if kind == "time":
        factor, unit = time_unit(top)
        return factor, f"{label} ({unit})"
    if kind == "energy":
        for size, unit in _ENERGY_UNITS:
            if top >= size:
                return 1.0 / size, f"{label} ({unit})"
        return 1e9, f"{label} (nJ)"
    return 1.0, label


def front_figure(
    rows: Sequence[Row], axes: Sequence[str], title: str, host: Mapping[str, Any] | None = None
) -> Figure:
    """The front of ``rows`` over ``axes`` (two or three of :data:`_AXES`), titled
    ``title`` (the model and hardware); ``host``: where the host latencies came from
    (``HostLatencySource.to_json()``), the caption of every panel."""
    if not rows:
        raise PlotDataError("Pareto front: no points")
    for a in axes:
        if a not in _AXES:
            raise PlotDataError(f"Pareto front: unknown axis {a!r}")
        if all(num(r, _AXES[a][0]) is None for r in rows):
            raise PlotDataError(f"Pareto front: no values of {a} ({_AXES[a][0]})")
    if len(axes) == 2:
        fig = new_figure(5.6, 4.2)
        _panel(fig.subplots(), rows, axes[0], axes[1], None, host)
    else:
        fig = new_figure(14.5, 4.4)
        panels = fig.subplots(1, 3)
        for ax, (x, y, c) in zip(panels, ((0, 1, 2), (0, 2, 1), (1, 2, 0)), strict=True):
            _panel(ax, rows, axes[x], axes[y], axes[c], host)
    fig.suptitle(f"{title}: Pareto front of the {placement_title(rows, 'placements')}",
                 fontsize="medium")  # fmt: skip
    return fig


def _panel(
    ax: Any, rows: Sequence[Row], x_axis: str, y_axis: str, c_axis: str | None,
    host: Mapping[str, Any] | None,
) -> None:  # fmt: skip
    xs = [num(r, _AXES[x_axis][0]) for r in rows]
    ys = [num(r, _AXES[y_axis][0]) for r in rows]
    pts = sorted((x, y, r) for x, y, r in zip(xs, ys, rows, strict=True)
                 if x is not None and y is not None)  # fmt: skip
    fx, xlabel = _scale(x_axis, [p[0] for p in pts])
    fy, ylabel = _scale(y_axis, [p[1] for p in pts])
    if c_axis is None:  # the staircase between neighbours bounds what the front dominates
        stair_x, stair_y = [], []
        for x, y, _ in pts:
            if stair_x:
                stair_x.append(x * fx)
                stair_y.append(stair_y[-1])
            stair_x.append(x * fx)
            stair_y.append(y * fy)
        ax.plot(stair_x, stair_y, color="0.55", lw=1.0, ls="--", zorder=1,
                label="attainment staircase")  # fmt: skip
        ax.scatter([p[0] * fx for p in pts], [p[1] * fy for p in pts], s=36, color="C0",
                   zorder=3, label="Pareto-optimal placement")  # fmt: skip
        if len(pts) >= 2:
            for (x, y, _), text in ((pts[0], f"min {x_axis}"), (pts[-1], f"min {y_axis}")):
                ax.annotate(text, (x * fx, y * fy), textcoords="offset points", xytext=(6, 6),
                            fontsize="small")  # fmt: skip
    else:
        colors = [num(r, _AXES[c_axis][0]) for _, _, r in pts]
        fc, clabel = _scale(c_axis, [c for c in colors if c is not None])
        drawn = ax.scatter([p[0] * fx for p in pts], [p[1] * fy for p in pts], s=36, zorder=3,
                           c=[(c or 0.0) * fc for c in colors], cmap="viridis")  # fmt: skip
        ax.figure.colorbar(drawn, ax=ax, label=clabel)
    mark_unproven(ax, [(x * fx, y * fy, r) for x, y, r in pts])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    caption_panel(ax, f"{x_axis} vs {y_axis}", [{"host": host}] if host else [])
    if c_axis is None:
        ax.legend(fontsize="small")
