"""Gantt charts of one placement: a CIM schedule (host lane, CIM sub-lanes, transfers)
and a host/PIM placement (sequential nests, operand copies, switches), drawn from the
placement's timeline (:mod:`placement.plots.timeline`).

Each function takes a placement JSON document and returns a
:class:`matplotlib.figure.Figure` whose boxes carry the operator or nest ids as gids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from placement.plots.common import (
    ACCEL_COLOR,
    HOST_COLOR,
    MISMATCH_COLOR,
    UNPROVEN_LABEL,
    gap_text,
    host_caption,
    new_figure,
    num,
    time_unit,
    unproven,
)
from placement.plots.pim import pim_result, placement_part
from placement.plots.timeline import cim_timeline, pim_timeline, sub_lanes

TRANSFER_COLOR = "#e08a1e"
SWITCH_COLOR = "#c0392b"
COPY_COLOR = "#f3c77b"


def _label_fitter(span: float, fig_width_in: float, fontsize: float) -> Any:
    """Box label that fits inside a box of a given duration: truncated with an ellipsis,
    or '' when not even a few characters fit (overflowing labels make Gantts unreadable)."""
    axes_pt = 0.72 * fig_width_in * 72.0  # the axes take ~72% of the width (legend right)
    char_pt = 0.62 * fontsize

    def fit(text: str, duration: float) -> str:
        room = int(duration / span * axes_pt / char_pt) - 1 if span > 0 else 0
        if room >= len(text):
            return text
        return text[: room - 1] + "…" if room >= 5 else ""

    return fit


def cim_gantt(
    placement_json: Mapping[str, Any],
    edges: Iterable[Sequence[Any]] | None = None,
    title: str | None = None,
) -> Figure:
    """Gantt chart of one CIM schedule: a host lane with one box per host operator, CIM
    sub-lanes (CIM operators run in parallel, so overlapping ones are stacked), and a
    transfer lane with one bar per edge whose ends are on different devices.

    ``placement_json``: CimPlacement.to_json() (or its ``schedule`` part). ``edges``:
    (src, dst) or (src, dst, t_transfer_s); an edge without its transfer time gets a
    marker at the producer's finish instead of a bar. The document's own
    ``edges`` list is used when ``edges`` is None. Each box's gid is its operator name.
    """
    timeline = cim_timeline(placement_json, edges)
    makespan = timeline.end
    scale, unit = time_unit(makespan)
    host_ops = [(i.name, i.start, i.finish) for i in timeline.on("host")]
    cim_ops = [(i.name, i.start, i.finish) for i in timeline.on("cim")]
    cim_lane = sub_lanes(cim_ops)
    n_cim = max(cim_lane.values(), default=-1) + 1
    transfers = [(i.name, i.start, i.finish) for i in timeline.on("bus")]
    timed = timeline.timed_transfers
    tr_lane = sub_lanes(transfers)
    n_tr = max(tr_lane.values(), default=-1) + 1

    # Lanes from the top: host, CIM sub-lanes, transfer sub-lanes (thinner).
    y_host = 0.0
    y_cim = [1.0 + k for k in range(n_cim)]
    y_tr = [1.0 + n_cim + 0.5 * k for k in range(n_tr)]
    height_in = 1.2 + 0.32 * (1 + n_cim) + 0.16 * n_tr
    fig = new_figure(11.0, max(2.8, height_in + 1.0))
    ax = fig.subplots()
    fit = _label_fitter(makespan, 11.0, 6.5)
    for group, color, lane_of in (
        (host_ops, HOST_COLOR, lambda v: y_host),
        (cim_ops, ACCEL_COLOR, lambda v: y_cim[cim_lane[v]]),
    ):
        for v, s, f in group:
            y = lane_of(v)
            box = Rectangle((s * scale, y - 0.4), max(f - s, 0.0) * scale, 0.8,
                            facecolor=color, edgecolor="white", linewidth=0.6)  # fmt: skip
            box.set_gid(v)
            ax.add_patch(box)
            text = fit(v, f - s)
            if text:
                ink = "white" if color == HOST_COLOR else "black"
                ax.text((s + f) / 2 * scale, y, text, ha="center", va="center", fontsize=6.5,
                        color=ink, clip_on=True)  # fmt: skip
    for name, s, f in transfers:
        y = y_tr[tr_lane[name]]
        if f > s:
            bar = Rectangle((s * scale, y - 0.18), (f - s) * scale, 0.36,
                            facecolor=TRANSFER_COLOR, edgecolor="none")  # fmt: skip
            bar.set_gid(f"transfer:{name}")
            ax.add_patch(bar)
        else:  # duration unknown (or zero): a marker where the producer hands over
            (mark,) = ax.plot([s * scale], [y], marker="D", ms=5, color=TRANSFER_COLOR, lw=0)
            mark.set_gid(f"transfer:{name}")
    ax.axvline(makespan * scale, color="black", lw=1, ls="--")
    ticks = [y_host, *y_cim, *([sum(y_tr) / n_tr] if n_tr else [])]
    labels = ["host CPU", *(f"CIM {k + 1}" if n_cim > 1 else "CIM" for k in range(n_cim))]
    labels += ["transfers"] if n_tr else []
    ax.set_yticks(ticks, labels)
    bottom = y_tr[-1] + 0.5 if n_tr else (y_cim[-1] + 0.6 if n_cim else 0.6)
    ax.set_ylim(bottom, -0.6)  # host on top
    _time_axis(ax, makespan * scale * 1.02, unit)
    handles = [
        Patch(color=HOST_COLOR, label=f"host operator ({len(host_ops)})"),
        Patch(color=ACCEL_COLOR, label=f"CIM operator ({len(cim_ops)})"),
    ]
    if n_tr and timed:
        handles.append(Patch(color=TRANSFER_COLOR, label=f"transfer ({len(transfers)})"))
    elif n_tr:
        handles.append(Line2D([], [], marker="D", lw=0, color=TRANSFER_COLOR,
                              label=f"transfer start ({len(transfers)})"))  # fmt: skip
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    cpu_only = num(placement_json, "cpu_only")
    sub = f"makespan {makespan * scale:.4g} {unit}"
    if cpu_only:
        sub += f", CPU-only {cpu_only * scale:.4g} {unit} ({cpu_only / makespan:.2f}x)"
    if unproven(placement_json):
        sub += f"\n{UNPROVEN_LABEL.replace('gap', gap_text(placement_json))}"
    caption = host_caption([placement_json])  # the document's "host" section, if any
    if caption is not None:
        sub += f"\n{caption[0]}"
    heading = ax.set_title(f"{title or 'CIM placement schedule'}: {sub}")
    if caption is not None and caption[1]:
        heading.set_color(MISMATCH_COLOR)
    return fig


def pim_gantt(
    document: Mapping[str, Any], cores: int | None = None, title: str | None = None
) -> Figure:
    """Gantt chart of one host/PIM placement: nests run one after another, on the host lane
    or the PIM lane (operand copy, hatched, before the PIM compute), with a switch marker
    (T_sw) at every host<->PIM transition.

    ``document``: the JSON of ``solve --target pim --json`` (per-nest T_cpu, the hardware
    and each core count's decisions; ``cores`` picks one, default the first). PIM times are
    the document's per-nest ``t_pim`` at that core count (the analytical model's, or a
    ``--pim-times`` file's), else recomputed with the analytical model (documents written
    before the field); per-nest copy times are Eq. 8's, scaled to the placement's T_copy
    under exact copy accounting. Rectangles' gids are the nest ids.
    """
    timeline = pim_timeline(document, cores)
    placement = placement_part(pim_result(document, cores))
    n_host, n_pim = len(timeline.on("host", "nest")), len(timeline.on("pim", "nest"))
    total = timeline.end
    scale, unit = time_unit(total or 1.0)
    fig = new_figure(11.0, 2.9)
    ax = fig.subplots()
    lane = {"host": 0.0, "pim": 1.0}
    fit = _label_fitter(total, 11.0, 7.0)
    for i in timeline.intervals:
        s, f = i.start, i.finish
        if i.kind == "switch":
            band = Rectangle((s * scale, -0.5), (f - s) * scale, 2.0, facecolor=SWITCH_COLOR,
                             alpha=0.35, edgecolor=SWITCH_COLOR, linewidth=0.8)  # fmt: skip
            band.set_gid(i.name)
            ax.add_patch(band)
            continue
        color = COPY_COLOR if i.kind == "copy" else (
            HOST_COLOR if i.device == "host" else ACCEL_COLOR)  # fmt: skip
        box = Rectangle((s * scale, lane[i.device] - 0.35), (f - s) * scale, 0.7,
                        facecolor=color, edgecolor="white", linewidth=0.6,
                        hatch="///" if i.kind == "copy" else None)  # fmt: skip
        box.set_gid(i.name)
        ax.add_patch(box)
        text = fit(i.name, f - s) if i.kind != "copy" else ""
        if text:
            ax.text((s + f) / 2 * scale, lane[i.device], text, ha="center", va="center",
                    fontsize=7, color="white" if i.device == "host" else "black")  # fmt: skip
    n_switch = len(timeline.on("host", "switch"))
    ax.set_yticks([0.0, 1.0], ["host CPU", f"PIM ({timeline.pim_cores} cores)"])
    ax.set_ylim(1.6, -0.6)
    _time_axis(ax, total * scale * 1.01, unit)
    handles = [
        Patch(color=HOST_COLOR, label=f"host nest ({n_host})"),
        Patch(color=ACCEL_COLOR, label=f"PIM nest ({n_pim})"),
        Patch(facecolor=COPY_COLOR, hatch="///", label="operand copy (Eq. 8)"),
        Patch(color=SWITCH_COLOR, alpha=0.5, label=f"switch T_sw ({n_switch})"),
    ]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    cpu_only = num(document, "cpu_only") or num(placement, "cpu_only")
    sub = f"T_hybrid {total * scale:.4g} {unit}"
    if cpu_only:
        sub += f", CPU-only {cpu_only * scale:.4g} {unit} ({cpu_only / total:.2f}x)"
    if unproven(placement):
        sub += f"\n{UNPROVEN_LABEL.replace('gap', gap_text(placement))}"
    ax.set_title(f"{title or 'PIM placement'}: {sub}")
    return fig


def _time_axis(ax: Any, end: float, unit: str) -> None:
    """The horizontal time axis of a Gantt chart, from 0 to ``end`` (in ``unit``)."""
    ax.set_xlim(0, end or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
