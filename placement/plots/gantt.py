"""Gantt charts of one placement: a CIM schedule (host lane, CIM sub-lanes, transfers)
and a host/PIM placement (sequential nests, operand copies, switches).

Each function takes a placement JSON document and returns a
:class:`matplotlib.figure.Figure` whose boxes carry the operator or nest ids as gids.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from placement.devices.pim import t_pim
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec, pim_spec_from_table
from placement.nests import LoopNest
from placement.plots.common import (
    ACCEL_COLOR,
    HOST_COLOR,
    MISMATCH_COLOR,
    UNPROVEN_LABEL,
    PlotDataError,
    gap_text,
    host_caption,
    new_figure,
    num,
    time_unit,
    unproven,
)
from placement.plots.pim import pim_result, placement_part

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


def _sub_lanes(intervals: Sequence[tuple[str, float, float]]) -> dict[str, int]:
    """Greedy interval colouring: overlapping intervals get different sub-lanes."""
    lanes: list[float] = []  # end of the last interval in each lane
    out: dict[str, int] = {}
    for name, s, f in sorted(intervals, key=lambda i: (i[1], i[2], i[0])):
        for k, end in enumerate(lanes):
            if s >= end - 1e-15:
                lanes[k] = f
                out[name] = k
                break
        else:
            lanes.append(f)
            out[name] = len(lanes) - 1
    return out


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
    sched = placement_json.get("schedule", placement_json)
    ops = sched.get("operators") if isinstance(sched, Mapping) else None
    if not isinstance(ops, Mapping) or not ops:
        raise PlotDataError("Gantt chart: the placement has no schedule (no solution found?)")
    try:
        times = {
            str(v): (d.get("device") == "host", float(d["start"]), float(d["finish"]))
            for v, d in ops.items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlotDataError(f"Gantt chart: malformed schedule ({exc!r})") from None
    makespan = num(sched, "makespan") or max(f for _, _, f in times.values())
    scale, unit = time_unit(makespan)
    host_ops = [(v, s, f) for v, (h, s, f) in times.items() if h]
    cim_ops = [(v, s, f) for v, (h, s, f) in times.items() if not h]
    cim_lane = _sub_lanes(cim_ops)
    n_cim = max(cim_lane.values(), default=-1) + 1

    if edges is None:
        edges = placement_json.get("edges") or []
    transfers: list[tuple[str, float, float]] = []
    timed = True  # False when an edge came without its transfer time: markers, not bars
    for e in edges:
        e = list(e.values()) if isinstance(e, Mapping) else list(e)
        u, v = str(e[0]), str(e[1])
        if u not in times or v not in times or times[u][0] == times[v][0]:
            continue
        t = float(e[2]) if len(e) > 2 and e[2] is not None else None
        timed &= t is not None
        begin = times[u][2]
        transfers.append((f"{u}->{v}", begin, begin + (t or 0.0)))
    tr_lane = _sub_lanes(transfers)
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
    nests = document.get("nests")
    if not isinstance(nests, list) or not nests or not isinstance(nests[0], Mapping):
        raise PlotDataError(
            "PIM Gantt chart: the document has no per-nest data (needs the full JSON of"
            " `solve --target pim --json`, not a bare placement)"
        )
    result = pim_result(document, cores)
    placement = placement_part(result)
    decisions = placement.get("decisions")
    if not isinstance(decisions, Mapping):
        raise PlotDataError("PIM Gantt chart: the placement has no decisions (no solution?)")
    n_cores = int(num(placement, "n_cores") or num(result, "n_cores") or 0) or None
    spec = _pim_spec(document.get("hardware"))
    try:
        known = {f.name for f in dataclasses.fields(LoopNest)} | {"fetch_bytes", "flush_bytes"}
        loops = [LoopNest.from_json({k: v for k, v in n.items() if k in known}) for n in nests]
        t_cpu = {str(n["id"]): float(n["t_cpu"]) for n in nests}
        key = str(n_cores or spec.cores)
        t_pim_doc = {
            str(n["id"]): float(n["t_pim"][key])
            for n in nests
            if isinstance(n.get("t_pim"), Mapping) and key in n["t_pim"]
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise PlotDataError(f"PIM Gantt chart: malformed nest data ({exc!r})") from None
    hybrid = placement.get("hybrid") if isinstance(placement.get("hybrid"), Mapping) else {}
    on_pim = {k for k, v in decisions.items() if v == "pim"}
    copy_s = {
        n.id: n.fetch_bytes / spec.read_bandwidth + n.flush_bytes / spec.writeback_bandwidth
        for n in loops
        if n.id in on_pim
    }
    total_copy = math.fsum(copy_s.values())
    if num(hybrid, "copy") is not None and total_copy > 0:
        factor = (num(hybrid, "copy") or 0.0) / total_copy  # exact accounting: < 1
        copy_s = {k: v * factor for k, v in copy_s.items()}

    segments: list[tuple[str, str, float, float]] = []  # (kind, id, start, finish)
    t, on = 0.0, False
    for n in loops:
        here = n.id in on_pim
        if here != on:
            segments.append(("switch", f"switch@{n.id}", t, t + spec.t_sw))
            t += spec.t_sw
            on = here
        if here:
            c = copy_s.get(n.id, 0.0)
            segments.append(("copy", f"copy:{n.id}", t, t + c))
            t += c
            d = t_pim_doc[n.id] if n.id in t_pim_doc else t_pim(n, spec, n_cores)
            segments.append(("pim", n.id, t, t + d))
        else:
            d = t_cpu[n.id]
            segments.append(("host", n.id, t, t + d))
        t += d
    if on:  # execution ends on the host
        segments.append(("switch", "switch@end", t, t + spec.t_sw))
        t += spec.t_sw
    total = t
    scale, unit = time_unit(total or 1.0)
    fig = new_figure(11.0, 2.9)
    ax = fig.subplots()
    lane = {"host": 0.0, "pim": 1.0, "copy": 1.0}
    style = {"host": HOST_COLOR, "pim": ACCEL_COLOR, "copy": COPY_COLOR}
    fit = _label_fitter(total, 11.0, 7.0)
    for kind, name, s, f in segments:
        if kind == "switch":
            band = Rectangle((s * scale, -0.5), (f - s) * scale, 2.0, facecolor=SWITCH_COLOR,
                             alpha=0.35, edgecolor=SWITCH_COLOR, linewidth=0.8)  # fmt: skip
            band.set_gid(name)
            ax.add_patch(band)
            continue
        box = Rectangle((s * scale, lane[kind] - 0.35), (f - s) * scale, 0.7,
                        facecolor=style[kind], edgecolor="white", linewidth=0.6,
                        hatch="///" if kind == "copy" else None)  # fmt: skip
        box.set_gid(name)
        ax.add_patch(box)
        text = fit(name, f - s) if kind != "copy" else ""
        if text:
            ax.text((s + f) / 2 * scale, lane[kind], text, ha="center", va="center",
                    fontsize=7, color="white" if kind == "host" else "black")  # fmt: skip
    n_switch = sum(1 for k, *_ in segments if k == "switch")
    ax.set_yticks([0.0, 1.0], ["host CPU", f"PIM ({n_cores or spec.cores} cores)"])
    ax.set_ylim(1.6, -0.6)
    _time_axis(ax, total * scale * 1.01, unit)
    handles = [
        Patch(color=HOST_COLOR, label=f"host nest ({len(loops) - len(on_pim)})"),
        Patch(color=ACCEL_COLOR, label=f"PIM nest ({len(on_pim)})"),
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


def _pim_spec(hardware: Any) -> PimSpec:
    """PimSpec from a document's ``hardware`` (file units), validated as a hardware file's
    ``[pim]`` table is; the preset default without one. A bad table: a PlotDataError."""
    values = hardware.get("pim") if isinstance(hardware, Mapping) else None
    if not isinstance(values, Mapping):
        return PimSpec()
    name = hardware.get("name")
    source = f"hardware {name!r}" if isinstance(name, str) and name else "hardware"
    try:
        return pim_spec_from_table(values, source)
    except PlacementError as exc:
        raise PlotDataError(f"PIM Gantt chart: bad hardware in the document ({exc})") from None


def _time_axis(ax: Any, end: float, unit: str) -> None:
    """The horizontal time axis of a Gantt chart, from 0 to ``end`` (in ``unit``)."""
    ax.set_xlim(0, end or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
