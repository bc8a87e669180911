"""The CIM paper's sweep figures: speed-up against the crossbar count (Fig. 3), speed-up
per network (Fig. 4) and busy time per device (Fig. 5).

Each function takes sweep rows (dicts with the ``points.csv`` columns, numbers or numeric
strings) and returns a :class:`matplotlib.figure.Figure`; data that cannot support the
figure raises :class:`~placement.plots.common.PlotDataError` naming what is missing.
Every panel (one per hardware) carries a caption saying where its host latencies came
from (the ``host_latencies``/``host_mismatch`` columns): "host latencies measured on
<machine>", "... modelled for <host> (estimate)", or, in red, "... measured on x86_64
but the hardware describes aarch64: mismatch".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from placement.plots.common import (
    ACCEL_COLOR,
    CAPTION_PANEL_WIDTH,
    HOST_COLOR,
    UNPROVEN_LABEL,
    PlotDataError,
    Row,
    caption_panel,
    host_caption,
    mark_unproven,
    model_label,
    new_figure,
    num,
    others_label,
    placement_title,
    require_columns,
    speedup_axis,
    swept_params,
    time_unit,
    unproven,
    varying,
)

_UNITS = {"t_mvm_ns": "ns", "bus_gbps": "GB/s", "internal_gbps": "GB/s"}
_MARKERS = ("o", "s", "^", "D", "v", "P")
_DASHES = ("-", "--", "-.", ":")


def _fmt_value(key: str, value: float) -> str:
    text = f"{value:g}"
    unit = _UNITS.get(key)
    return f"{text} {unit}" if unit else text


# --------------------------------------------------------------------------- CIM Fig. 3


def speedup_vs_crossbars(rows: Sequence[Row], model: str | None = None) -> Figure:
    """CIM Fig. 3: speed-up over CPU-only against the crossbar count, one line per MVM
    latency, one panel per hardware (host). ``model``: which model (by stem or path) when
    the sweep has several; default the first."""
    name = "speed-up vs crossbars (CIM Fig. 3)"
    require_columns(rows, ["crossbars", "t_mvm_ns", "speedup"], name)
    rows = _one_model(rows, model, name)
    hosts = list(dict.fromkeys(str(r.get("hardware", "?")) for r in rows))
    fig = new_figure(4.6 * len(hosts) + 0.8, 3.8)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    others = varying(rows, [p for p in swept_params(rows) if p not in ("crossbars", "t_mvm_ns")])
    for ax, host in zip(axes, hosts, strict=True):
        mine = [r for r in rows if str(r.get("hardware", "?")) == host]
        series: dict[tuple[float, str], list[tuple[float, float]]] = {}
        plotted: list[tuple[float, float, Row]] = []
        for r in mine:
            x, t, s = num(r, "crossbars"), num(r, "t_mvm_ns"), num(r, "speedup")
            if x is None or t is None or s is None:
                continue
            series.setdefault((t, others_label(r, others)), []).append((x, s))
            plotted.append((x, s, r))
        for k, ((t, extra), pts) in enumerate(sorted(series.items())):
            pts.sort()
            label = f"MVM {_fmt_value('t_mvm_ns', t)}" + (f" ({extra})" if extra else "")
            # Distinct markers and dashes: lines with equal values (saturated speed-ups)
            # stay visible on top of each other.
            ax.plot(
                [p[0] for p in pts], [p[1] for p in pts], label=label,
                marker=_MARKERS[k % len(_MARKERS)], linestyle=_DASHES[k % len(_DASHES)],
                markersize=7 - (k % 3), markerfacecolor="none" if k % 2 else None,
            )  # fmt: skip
        mark_unproven(ax, plotted)
        xs = sorted({x for r in mine if (x := num(r, "crossbars")) is not None})
        if xs:
            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
        caption_panel(ax, host, mine)
        ax.set_xlabel("crossbars available (count)")
        speedup_axis(ax)
        if series:
            ax.legend(title="MVM latency", fontsize="small")
    axes[0].set_ylabel("speed-up over CPU-only (x)")
    fig.suptitle(f"{model_label(rows[0].get('model'))}: {placement_title(rows)} speed-up")
    return fig


def _one_model(rows: Sequence[Row], model: str | None, figure: str) -> list[Row]:
    models = list(dict.fromkeys(str(r.get("model")) for r in rows))
    want = models[0] if model is None else model
    out = [r for r in rows if str(r.get("model")) == want or model_label(r.get("model")) == want]
    if not out:
        raise PlotDataError(f"{figure}: no points of model {want!r}")
    return out


# --------------------------------------------------------------------------- CIM Fig. 4


def speedup_per_network(rows: Sequence[Row], t_mvm_ns: float) -> Figure:
    """CIM Fig. 4: speed-up per network at one MVM latency, bars grouped by network, one
    bar per crossbar count, one panel per hardware."""
    name = f"speed-up per network at {t_mvm_ns:g} ns (CIM Fig. 4)"
    require_columns(rows, ["crossbars", "t_mvm_ns", "speedup"], name)
    rows = [r for r in rows if num(r, "t_mvm_ns") is not None and
            math.isclose(num(r, "t_mvm_ns") or 0.0, t_mvm_ns)]  # fmt: skip
    if not rows:
        raise PlotDataError(f"{name}: no points at t_mvm_ns = {t_mvm_ns:g}")
    others = varying(rows, [p for p in swept_params(rows) if p not in ("crossbars", "t_mvm_ns")])
    hosts = list(dict.fromkeys(str(r.get("hardware", "?")) for r in rows))
    models = list(dict.fromkeys(str(r.get("model")) for r in rows))
    budgets = sorted({x for r in rows if (x := num(r, "crossbars")) is not None})
    panel = max(1.1 * len(models), CAPTION_PANEL_WIDTH if host_caption(rows) else 0.0)
    fig = new_figure(max(5.0, panel * len(hosts) + 3.0), 3.9)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    width = 0.8 / max(1, len(budgets))
    colors = [f"C{i}" for i in range(len(budgets))]
    for ax, host in zip(axes, hosts, strict=True):
        for j, c in enumerate(budgets):
            heights, open_ = [], []
            for m in models:
                vals = [
                    (s, r)
                    for r in rows
                    if str(r.get("hardware", "?")) == host and str(r.get("model")) == m
                    and num(r, "crossbars") == c and (s := num(r, "speedup")) is not None
                ]  # fmt: skip
                # several values only when another parameter varies: show the best (noted)
                best = max(vals, key=lambda v: v[0]) if vals else None
                heights.append(best[0] if best else float("nan"))
                open_.append(best is not None and unproven(best[1]))
            xs = [i + (j - (len(budgets) - 1) / 2) * width for i in range(len(models))]
            bars = ax.bar(xs, heights, width, label=f"{c:g}", color=colors[j])
            for bar, is_open in zip(bars, open_, strict=True):
                if is_open:  # not proven optimal: hatched
                    bar.set_hatch("//")
                    bar.set_edgecolor("red")
        ax.set_xticks(range(len(models)), [model_label(m) for m in models])
        caption_panel(ax, host, [r for r in rows if str(r.get("hardware", "?")) == host])
        ax.set_xlabel("network")
        speedup_axis(ax)
    axes[0].set_ylabel("speed-up over CPU-only (x)")
    handles, labels = axes[0].get_legend_handles_labels()
    if any(unproven(r) for r in rows):
        handles.append(Patch(facecolor="white", edgecolor="red", hatch="//"))
        labels.append(UNPROVEN_LABEL.replace(", gap", ""))
    fig.legend(handles, labels, loc="outside right upper", title="crossbars", fontsize="small")
    note = f" (best over {', '.join(others)})" if others else ""
    title = placement_title(rows)
    fig.suptitle(f"{title[0].upper()}{title[1:]} speed-up at {t_mvm_ns:g} ns MVM latency{note}")
    return fig


# --------------------------------------------------------------------------- CIM Fig. 5


#: Legend words of Fig. 5's bars: what each one measures.
HOST_BUSY_LABEL = "CPU (host): busy time"
CIM_BUSY_LABEL = (
    "CIM: busy time, summed over\noperators (they may run at\nonce on their own crossbars)"
)


def device_share(items: Sequence[Row], model: str | None = None) -> Figure:
    """CIM Fig. 5: busy time per device for each configuration of one model, the host's
    bar (darker) beside the CIM's (lighter), with the operator count per device on each
    bar and the configuration's makespan as a line across both.

    ``items``: sweep rows (``host_busy_s``, ``accel_busy_s``, ``n_operators``,
    ``n_offloaded``), or dicts with a ``"schedule"`` key holding a CimPlacement JSON (and an
    optional ``"label"``), from which the same numbers are computed. The host runs one
    operator at a time, so its bar never passes the makespan; the CIM bar sums its
    operators' times, which can pass it when operators on separate crossbars overlap (the
    legend says so). Bars are not stacked: the devices run at the same time.
    """
    name = "device share (CIM Fig. 5)"
    if not items:
        raise PlotDataError(f"{name}: no sweep points")
    bars = [b for b in (_share(it) for it in items) if b is not None]
    if not bars:
        raise PlotDataError(
            f"{name}: needs host_busy_s, accel_busy_s, n_operators and n_offloaded per point"
            " (or CIM schedules); none of the points has them"
        )
    models = list(dict.fromkeys(b.model for b in bars))
    want = models[0] if model is None else model
    bars = [b for b in bars if b.model == want or model_label(b.model) == want]
    if not bars:
        raise PlotDataError(f"{name}: no points of model {want!r}")
    hosts = list(dict.fromkeys(b.hardware for b in bars))
    top = max(max(b.host_s, b.cim_s, b.makespan or 0.0) for b in bars)
    scale, unit = time_unit(top)
    per_host = max(sum(1 for b in bars if b.hardware == h) for h in hosts)
    panel = max(0.8 * per_host, CAPTION_PANEL_WIDTH if host_caption([b.row for b in bars]) else 0)
    fig = new_figure(max(5.0, panel * len(hosts) + 3.0), 4.2)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    half = 0.38  # each device's bar; the pair spans 0.76 of a configuration's slot
    for ax, host in zip(axes, hosts, strict=True):
        mine = sorted((b for b in bars if b.hardware == host), key=lambda b: b.sort_key)
        xs = list(range(len(mine)))
        hb = ax.bar([x - half / 2 for x in xs], [b.host_s * scale for b in mine], half,
                    color=HOST_COLOR, label=HOST_BUSY_LABEL)  # fmt: skip
        cb = ax.bar([x + half / 2 for x in xs], [b.cim_s * scale for b in mine], half,
                    color=ACCEL_COLOR, label=CIM_BUSY_LABEL)  # fmt: skip
        for patch_h, patch_c, b in zip(hb, cb, mine, strict=True):
            if b.unproven:  # not proven optimal: hatched
                for patch in (patch_h, patch_c):
                    patch.set_hatch("//")
                    patch.set_edgecolor("red")
        ax.bar_label(hb, [str(b.n_host) for b in mine], label_type="center", color="white",
                     fontsize="small")  # fmt: skip
        ax.bar_label(cb, [str(b.n_cim) if b.n_cim else "" for b in mine], label_type="center",
                     fontsize="small")  # fmt: skip
        spans = [(x, b.makespan * scale) for x, b in zip(xs, mine, strict=True) if b.makespan]
        if spans:
            ax.hlines([s[1] for s in spans], [s[0] - half - 0.04 for s in spans],
                      [s[0] + half + 0.04 for s in spans], color="black", linewidths=2,
                      label="makespan", zorder=3)  # fmt: skip
        ax.set_xticks(xs, [b.label for b in mine], fontsize="small")
        caption_panel(ax, host, [b.row for b in mine])
        ax.set_xlabel("configuration")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel(f"busy time per device ({unit})")
    handles, labels = axes[0].get_legend_handles_labels()
    # outside the panels: tall bars would hide under a legend drawn inside
    if any(b.unproven for b in bars):
        handles.append(Patch(facecolor="white", edgecolor="red", hatch="//"))
        labels.append(UNPROVEN_LABEL.replace(", gap", ""))
    # centred on the right, below the figure's title
    fig.legend(handles, labels, loc="outside right", fontsize="small",
               title="bar values:\noperators per device")  # fmt: skip
    title = placement_title([b.row for b in bars])
    fig.suptitle(f"{model_label(want)}: busy time per device ({title})")
    return fig


@dataclass
class _ShareBar:
    model: str
    hardware: str
    label: str
    sort_key: tuple[Any, ...]
    host_s: float
    cim_s: float
    n_host: int
    n_cim: int
    makespan: float | None
    row: Row  # the sweep row or document: its status

    @property
    def unproven(self) -> bool:
        return unproven(self.row)


def _share(item: Row) -> _ShareBar | None:
    if isinstance(item.get("schedule"), Mapping):
        doc = item["schedule"]
        sched = doc.get("schedule") if isinstance(doc.get("schedule"), Mapping) else doc
        ops = sched.get("operators") if isinstance(sched, Mapping) else None
        if not isinstance(ops, Mapping) or not ops:
            return None
        host = [o for o in ops.values() if o.get("device") == "host"]
        cim = [o for o in ops.values() if o.get("device") != "host"]

        def busy(group: list[Any]) -> float:
            return math.fsum(float(o["finish"]) - float(o["start"]) for o in group)

        label = str(item.get("label") or doc.get("instance", {}).get("crossbar_budget", "?"))
        return _ShareBar(
            str(item.get("model", "")), str(item.get("hardware", "")), label, (label,),
            busy(host), busy(cim), len(host), len(cim), num(doc, "makespan"), doc,
        )  # fmt: skip
    h, a = num(item, "host_busy_s"), num(item, "accel_busy_s")
    n, k = num(item, "n_operators"), num(item, "n_offloaded")
    if h is None or a is None or n is None or k is None:
        return None
    c, t = num(item, "crossbars"), num(item, "t_mvm_ns")
    parts = [f"C={c:g}" if c is not None else "", f"{t:g} ns" if t is not None else ""]
    label = item.get("label") or "\n".join(p for p in parts if p) or str(item.get("point_id"))
    return _ShareBar(
        str(item.get("model")), str(item.get("hardware", "?")), str(label),
        (t or 0.0, c or 0.0, str(label)), h, a, int(n - k), int(k), num(item, "objective_s"),
        item,
    )  # fmt: skip
