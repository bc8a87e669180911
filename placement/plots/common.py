"""Figures of placements and sweeps (the CIM paper's Figs. 3-5, Torch-PIM's Fig. 3 and
Table 4, and Gantt charts of single schedules).

Every function takes plain data -- sweep rows (dicts with the ``points.csv`` columns,
numbers or numeric strings), placement JSON documents -- and returns a
:class:`matplotlib.figure.Figure` built with the object-oriented API: no pyplot, no
global state, so figures can be built in threads and in tests and inspected as objects.
A figure the data cannot support raises :class:`PlotDataError` naming what is missing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import FuncFormatter

from placement.errors import PlacementError

Row = Mapping[str, Any]

HOST_COLOR = "#1f4e79"  # darker shade: CPU (as in the CIM paper's Fig. 5)
ACCEL_COLOR = "#7fb3e0"  # lighter shade: CIM / PIM
TRANSFER_COLOR = "#e08a1e"
SWITCH_COLOR = "#c0392b"
COPY_COLOR = "#f3c77b"
# Columns of points.csv that are not swept parameters (anything else between
# "hardware" and "status" is one).
_FIXED_COLUMNS = {
    "point_id", "target", "model", "hardware", "status", "objective_s", "cpu_only_s",
    "speedup", "n_operators", "n_offloaded", "crossbars_used", "host_busy_s",
    "accel_busy_s", "gap", "solve_seconds", "verified", "message",
}  # fmt: skip
_UNITS = {"t_mvm_ns": "ns", "bus_gbps": "GB/s", "internal_gbps": "GB/s"}


class PlotDataError(PlacementError):
    """The data given cannot produce this figure (the message says what is missing)."""


# --------------------------------------------------------------------------- row helpers


_MARKERS = ("o", "s", "^", "D", "v", "P")
_DASHES = ("-", "--", "-.", ":")

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


def _require(rows: Sequence[Row], columns: Sequence[str], figure: str) -> None:
    if not rows:
        raise PlotDataError(f"{figure}: no sweep points")
    missing = [c for c in columns if all(num(r, c) is None for r in rows)]
    if missing:
        raise PlotDataError(
            f"{figure}: needs column(s) {', '.join(missing)} with numbers; the sweep has none"
        )


def _fmt_value(key: str, value: float) -> str:
    text = f"{value:g}"
    unit = _UNITS.get(key)
    return f"{text} {unit}" if unit else text


def _others_label(row: Row, others: Sequence[str]) -> str:
    return ", ".join(f"{k}={row.get(k)}" for k in others)


def _varying(rows: Sequence[Row], keys: Iterable[str]) -> list[str]:
    """Those of ``keys`` taking more than one value in ``rows``: they must split series."""
    return [k for k in keys if len({str(r.get(k)) for r in rows}) > 1]


def _speedup_axis(ax: Any) -> None:
    ax.axhline(1.0, color="0.4", lw=0.8, ls="--", zorder=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.grid(True, axis="y", alpha=0.3)


def _new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


# --------------------------------------------------------------------------- CIM Fig. 3


def speedup_vs_crossbars(rows: Sequence[Row], model: str | None = None) -> Figure:
    """CIM Fig. 3: speed-up over CPU-only against the crossbar count, one line per MVM
    latency, one panel per hardware (host). ``model``: which model (by stem or path) when
    the sweep has several; default the first."""
    name = "speed-up vs crossbars (CIM Fig. 3)"
    _require(rows, ["crossbars", "t_mvm_ns", "speedup"], name)
    rows = _one_model(rows, model, name)
    hosts = list(dict.fromkeys(str(r.get("hardware", "?")) for r in rows))
    fig = _new_figure(4.6 * len(hosts) + 0.8, 3.8)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    others = _varying(rows, [p for p in swept_params(rows) if p not in ("crossbars", "t_mvm_ns")])
    for ax, host in zip(axes, hosts, strict=True):
        mine = [r for r in rows if str(r.get("hardware", "?")) == host]
        series: dict[tuple[float, str], list[tuple[float, float]]] = {}
        for r in mine:
            x, t, s = num(r, "crossbars"), num(r, "t_mvm_ns"), num(r, "speedup")
            if x is None or t is None or s is None:
                continue
            series.setdefault((t, _others_label(r, others)), []).append((x, s))
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
        xs = sorted({x for r in mine if (x := num(r, "crossbars")) is not None})
        if xs:
            ax.set_xscale("log")
            ax.set_xticks(xs, [f"{x:g}" for x in xs])
            ax.minorticks_off()
        ax.set_title(host)
        ax.set_xlabel("crossbars available (count)")
        _speedup_axis(ax)
        if series:
            ax.legend(title="MVM latency", fontsize="small")
    axes[0].set_ylabel("speed-up over CPU-only (x)")
    fig.suptitle(f"{model_label(rows[0].get('model'))}: optimal placement speed-up")
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
    _require(rows, ["crossbars", "t_mvm_ns", "speedup"], name)
    rows = [r for r in rows if num(r, "t_mvm_ns") is not None and
            math.isclose(num(r, "t_mvm_ns") or 0.0, t_mvm_ns)]  # fmt: skip
    if not rows:
        raise PlotDataError(f"{name}: no points at t_mvm_ns = {t_mvm_ns:g}")
    others = _varying(rows, [p for p in swept_params(rows) if p not in ("crossbars", "t_mvm_ns")])
    hosts = list(dict.fromkeys(str(r.get("hardware", "?")) for r in rows))
    models = list(dict.fromkeys(str(r.get("model")) for r in rows))
    budgets = sorted({x for r in rows if (x := num(r, "crossbars")) is not None})
    fig = _new_figure(max(5.0, 1.1 * len(models) * len(hosts) + 3.0), 3.9)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    width = 0.8 / max(1, len(budgets))
    colors = [f"C{i}" for i in range(len(budgets))]
    for ax, host in zip(axes, hosts, strict=True):
        for j, c in enumerate(budgets):
            heights = []
            for m in models:
                vals = [
                    s
                    for r in rows
                    if str(r.get("hardware", "?")) == host and str(r.get("model")) == m
                    and num(r, "crossbars") == c and (s := num(r, "speedup")) is not None
                ]  # fmt: skip
                # several values only when another parameter varies: show the best (noted)
                heights.append(max(vals) if vals else float("nan"))
            xs = [i + (j - (len(budgets) - 1) / 2) * width for i in range(len(models))]
            ax.bar(xs, heights, width, label=f"{c:g}", color=colors[j])
        ax.set_xticks(range(len(models)), [model_label(m) for m in models])
        ax.set_title(host)
        ax.set_xlabel("network")
        _speedup_axis(ax)
    axes[0].set_ylabel("speed-up over CPU-only (x)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", title="crossbars", fontsize="small")
    note = f" (best over {', '.join(others)})" if others else ""
    fig.suptitle(f"Optimal placement speed-up at {t_mvm_ns:g} ns MVM latency{note}")
    return fig


# --------------------------------------------------------------------------- CIM Fig. 5


def device_share(items: Sequence[Row], model: str | None = None) -> Figure:
    """CIM Fig. 5: busy time per device (host darker, CIM lighter) for each configuration
    of one model, stacked, with the operator count per device on each segment.

    ``items``: sweep rows (``host_busy_s``, ``accel_busy_s``, ``n_operators``,
    ``n_offloaded``), or dicts with a ``"schedule"`` key holding a CimPlacement JSON (and an
    optional ``"label"``), from which the same numbers are computed. A black tick marks
    each configuration's makespan (the devices overlap, so the stack can exceed it).
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
    top = max(max(b.host_s + b.cim_s, b.makespan or 0.0) for b in bars)
    scale, unit = _time_unit(top)
    per_host = max(sum(1 for b in bars if b.hardware == h) for h in hosts)
    fig = _new_figure(max(5.0, 0.55 * per_host * len(hosts) + 2.5), 4.2)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    for ax, host in zip(axes, hosts, strict=True):
        mine = sorted((b for b in bars if b.hardware == host), key=lambda b: b.sort_key)
        xs = list(range(len(mine)))
        host_h = [b.host_s * scale for b in mine]
        cim_h = [b.cim_s * scale for b in mine]
        hb = ax.bar(xs, host_h, 0.7, color=HOST_COLOR, label="CPU (host)")
        cb = ax.bar(xs, cim_h, 0.7, bottom=host_h, color=ACCEL_COLOR, label="CIM")
        ax.bar_label(hb, [str(b.n_host) for b in mine], label_type="center", color="white",
                     fontsize="small")  # fmt: skip
        ax.bar_label(cb, [str(b.n_cim) if b.n_cim else "" for b in mine], label_type="center",
                     fontsize="small")  # fmt: skip
        spans = [(x, b.makespan * scale) for x, b in zip(xs, mine, strict=True) if b.makespan]
        if spans:
            ax.scatter([s[0] for s in spans], [s[1] for s in spans], marker="_", s=400,
                       color="black", linewidths=2, label="makespan", zorder=3)  # fmt: skip
        ax.set_xticks(xs, [b.label for b in mine], fontsize="small")
        ax.set_title(host)
        ax.set_xlabel("configuration")
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel(f"busy time per device ({unit})")
    handles, labels = axes[0].get_legend_handles_labels()
    # outside the panels: tall bars would hide under a legend drawn inside
    fig.legend(handles, labels, loc="outside right upper", fontsize="small",
               title="bar values:\noperators per device")  # fmt: skip
    fig.suptitle(f"{model_label(want)}: latency per device after optimal placement")
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
            busy(host), busy(cim), len(host), len(cim), num(doc, "makespan"),
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
    )  # fmt: skip


# --------------------------------------------------------------------------- Torch-PIM Fig. 3


def pim_speedup_vs_cores(rows: Sequence[Row]) -> Figure:
    """Torch-PIM Fig. 3: speed-up over CPU-only against the PIM core count, one line per
    workload (model), one panel per hardware."""
    name = "PIM speed-up vs cores (Torch-PIM Fig. 3)"
    _require(rows, ["cores", "speedup"], name)
    hosts = list(dict.fromkeys(str(r.get("hardware", "?")) for r in rows))
    others = _varying(rows, [p for p in swept_params(rows) if p != "cores"])
    fig = _new_figure(4.8 * len(hosts) + 1.5, 3.8)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    for ax, host in zip(axes, hosts, strict=True):
        series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in rows:
            if str(r.get("hardware", "?")) != host:
                continue
            x, s = num(r, "cores"), num(r, "speedup")
            if x is not None and s is not None:
                key = (model_label(r.get("model")), _others_label(r, others))
                series.setdefault(key, []).append((x, s))
        for (m, extra), pts in series.items():
            pts.sort()
            label = m + (f" ({extra})" if extra else "")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        xs = sorted({x for r in rows if (x := num(r, "cores")) is not None})
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.minorticks_off()
        ax.set_title(host)
        ax.set_xlabel("PIM cores (count)")
        _speedup_axis(ax)
    axes[0].set_ylabel("speed-up over CPU-only (x)")
    axes[-1].legend(title="workload", fontsize="small", loc="upper left",
                    bbox_to_anchor=(1.02, 1.0))  # fmt: skip
    fig.suptitle("Optimal host/PIM placement speed-up across PIM core counts")
    return fig


# --------------------------------------------------------------------------- Torch-PIM Table 4


@dataclass
class NestDecisions:
    """One PIM placement's per-nest decisions, for Table 4."""

    model: str  # model path or name
    size: float  # problem size N
    op_types: dict[str, str]  # nest id -> ONNX op type ("(unknown)" without nest metadata)
    on_pim: set[str]  # nest ids offloaded


@dataclass
class OffloadTable:
    """Table 4: offloaded nests per operator against problem size."""

    operators: list[str]  # row labels, "family: OpType" when several model families
    sizes: list[float]
    nests: dict[str, int]  # operator -> nests (the largest seen over sizes)
    offloaded: dict[tuple[str, float], int] = field(default_factory=dict)

    def rows(self) -> list[list[str]]:
        """Header plus one row per operator; '-' where that size has no such nests."""
        out = [["operator", "nests", *(f"N={s:g}" for s in self.sizes)]]
        for op in self.operators:
            cells = [str(self.offloaded[op, s]) if (op, s) in self.offloaded else "-"
                     for s in self.sizes]  # fmt: skip
            out.append([op, str(self.nests[op]), *cells])
        return out


_SIZE_RE = re.compile(r"^(.*?)[_\-.]?(\d+)$")


def split_size(model: str) -> tuple[str, float | None]:
    """'softmax_4096' -> ('softmax', 4096.0): family and problem size from a model stem."""
    stem = model_label(model)
    m = _SIZE_RE.match(stem)
    if m is None or not m.group(1):
        return stem, None
    return m.group(1), float(m.group(2))


def nest_decisions(
    document: Mapping[str, Any],
    model: str,
    size: float,
    cores: int | None = None,
    source: str = "model",
) -> NestDecisions:
    """Decisions of one PIM placement JSON: the full ``solve --target pim --json`` document
    (``nests`` + ``results``; the result for ``cores``, default the first) or a bare
    PimPlacement.to_json() (``decisions`` only: op types unknown). ``source``: "model"
    (optimal) or "rule" (Torch-PIM's threshold rule, full documents only)."""
    nests = document.get("nests")  # a bare placement has only their count here
    op_types = {
        str(n.get("id")): str(n.get("onnx_op_type") or n.get("linalg_op") or "(unknown)")
        for n in (nests if isinstance(nests, list) else [])
        if isinstance(n, Mapping)
    }
    result = _pim_result(document, cores)
    if source == "rule":
        rule = result.get("rule") if isinstance(result.get("rule"), Mapping) else None
        if rule is None or not isinstance(rule.get("on_pim"), list):
            raise PlotDataError("Table 4: the PIM document has no rule decisions")
        on_pim = {str(k) for k in rule["on_pim"]}
        decided = op_types.keys() or on_pim
    else:
        placement = _placement_part(result)
        decisions = placement.get("decisions")
        if not isinstance(decisions, Mapping):
            raise PlotDataError("Table 4: the PIM placement has no per-nest decisions")
        on_pim = {str(k) for k, v in decisions.items() if v == "pim"}
        decided = decisions.keys()
    types = {str(k): op_types.get(str(k), "(unknown)") for k in decided}
    return NestDecisions(model, size, types, on_pim)


def _pim_result(document: Mapping[str, Any], cores: int | None) -> Mapping[str, Any]:
    results = document.get("results")
    if not isinstance(results, list) or not results:
        return document  # a bare placement
    if cores is None:
        return results[0]
    for r in results:
        if isinstance(r, Mapping) and num(r, "n_cores") == cores:
            return r
    raise PlotDataError(f"the PIM document has no result for {cores} cores")


def _placement_part(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """The optimal placement of a per-core result: its "model" entry in a solve document;
    the result itself in a sweep schedule (where "model" names the model file)."""
    inner = result.get("model")
    return inner if isinstance(inner, Mapping) and "decisions" in inner else result


def offloaded_nests_table(entries: Sequence[NestDecisions]) -> OffloadTable:
    """Table 4 from per-placement decisions: nests offloaded per (family, op type) and size."""
    if not entries:
        raise PlotDataError("Table 4: no PIM placements with per-nest decisions")
    families = {split_size(e.model)[0] for e in entries}
    ops: list[str] = []
    nests: dict[str, int] = {}
    offloaded: dict[tuple[str, float], int] = {}
    for e in sorted(entries, key=lambda e: (str(e.model), e.size)):
        fam = split_size(e.model)[0]
        count: dict[str, list[int]] = {}
        for nid, op in e.op_types.items():
            label = f"{fam}: {op}" if len(families) > 1 else op
            c = count.setdefault(label, [0, 0])
            c[0] += 1
            c[1] += nid in e.on_pim
        for label, (n, k) in count.items():
            if label not in ops:
                ops.append(label)
            nests[label] = max(nests.get(label, 0), n)
            offloaded[label, e.size] = offloaded.get((label, e.size), 0) + k
    sizes = sorted({e.size for e in entries})
    return OffloadTable(sorted(ops), sizes, nests, offloaded)


def offloaded_nests_plot(table: OffloadTable) -> Figure:
    """Table 4 as a plot: loop nests offloaded per operator, bars grouped by problem size
    (grouped bars, not lines: equal counts of different operators would hide each other).
    Each bar is labelled k/n: k of the operator's n nests offloaded."""
    if not table.operators:
        raise PlotDataError("Table 4: no operators")
    fig = _new_figure(max(6.0, 1.0 * len(table.sizes) * max(1, len(table.operators)) / 2 + 4), 4.0)
    ax = fig.subplots()
    width = 0.8 / len(table.operators)
    for j, op in enumerate(table.operators):
        xs, ks = [], []
        for i, s in enumerate(table.sizes):
            if (op, s) in table.offloaded:
                xs.append(i + (j - (len(table.operators) - 1) / 2) * width)
                ks.append(table.offloaded[op, s])
        n = table.nests[op]
        bars = ax.bar(xs, ks, width, label=f"{op} ({n} nest{'s' if n != 1 else ''})")
        ax.bar_label(bars, [f"{k}/{n}" for k in ks], fontsize="small")
    ax.set_xticks(range(len(table.sizes)), [f"{s:g}" for s in table.sizes])
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(0, max(table.nests.values()) + 0.6)
    ax.set_xlabel("problem size N")
    ax.set_ylabel("loop nests offloaded (count)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(title="operator", fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.set_title("Offloaded loop nests per operator vs problem size (Torch-PIM Table 4)")
    return fig


# --------------------------------------------------------------------------- Gantt charts


def _time_unit(seconds: float) -> tuple[float, str]:
    """A scale and unit that keeps axis numbers readable."""
    if seconds >= 1.0:
        return 1.0, "s"
    if seconds >= 1e-3:
        return 1e3, "ms"
    if seconds >= 1e-6:
        return 1e6, "µs"
    return 1e9, "ns"


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
    scale, unit = _time_unit(makespan)
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
    fig = _new_figure(11.0, max(2.8, height_in + 1.0))
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
    ax.set_xlim(0, makespan * scale * 1.02 or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
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
    ax.set_title(f"{title or 'CIM placement schedule'}: {sub}")
    return fig


def pim_gantt(
    document: Mapping[str, Any], cores: int | None = None, title: str | None = None
) -> Figure:
    """Gantt chart of one host/PIM placement: nests run one after another, on the host lane
    or the PIM lane (operand copy, hatched, before the PIM compute), with a switch marker
    (T_sw) at every host<->PIM transition.

    ``document``: the JSON of ``solve --target pim --json`` (per-nest T_cpu, the hardware
    and each core count's decisions; ``cores`` picks one, default the first). PIM times are
    the analytical model's; per-nest copy times are Eq. 8's, scaled to the placement's
    T_copy under exact copy accounting. Rectangles' gids are the nest ids.
    """
    from placement.devices.pim import t_pim
    from placement.nests import LoopNest

    nests = document.get("nests")
    if not isinstance(nests, list) or not nests or not isinstance(nests[0], Mapping):
        raise PlotDataError(
            "PIM Gantt chart: the document has no per-nest data (needs the full JSON of"
            " `solve --target pim --json`, not a bare placement)"
        )
    result = _pim_result(document, cores)
    placement = _placement_part(result)
    decisions = placement.get("decisions")
    if not isinstance(decisions, Mapping):
        raise PlotDataError("PIM Gantt chart: the placement has no decisions (no solution?)")
    n_cores = int(num(placement, "n_cores") or num(result, "n_cores") or 0) or None
    spec = _pim_spec(document.get("hardware"))
    try:
        known = {f.name for f in dataclasses.fields(LoopNest)} | {"fetch_bytes", "flush_bytes"}
        loops = [LoopNest.from_json({k: v for k, v in n.items() if k in known}) for n in nests]
        t_cpu = {str(n["id"]): float(n["t_cpu"]) for n in nests}
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
            d = t_pim(n, spec, n_cores)
            segments.append(("pim", n.id, t, t + d))
        else:
            d = t_cpu[n.id]
            segments.append(("host", n.id, t, t + d))
        t += d
    if on:  # execution ends on the host
        segments.append(("switch", "switch@end", t, t + spec.t_sw))
        t += spec.t_sw
    total = t
    scale, unit = _time_unit(total or 1.0)
    fig = _new_figure(11.0, 2.9)
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
    ax.set_xlim(0, total * scale * 1.01 or 1.0)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(True, axis="x", alpha=0.3)
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
    ax.set_title(f"{title or 'PIM placement'}: {sub}")
    return fig


def _pim_spec(hardware: Any) -> Any:
    """PimSpec from a document's ``hardware`` (file units); the preset default without one."""
    from placement.hardware.pim import PIM_KEYS, PimSpec

    values = hardware.get("pim") if isinstance(hardware, Mapping) else None
    if not isinstance(values, Mapping):
        return PimSpec()
    kwargs = {}
    for key, (fld, factor, integral) in PIM_KEYS.items():
        if key in values:
            kwargs[fld] = int(values[key]) if integral else float(values[key]) * factor
    try:
        return PimSpec(**kwargs)
    except PlacementError as exc:
        raise PlotDataError(f"PIM Gantt chart: bad hardware in the document ({exc})") from None


# --------------------------------------------------------------------------- saving


def check_figure_path(path: str | Path, flag: str = "") -> Path:
    """``path`` as a Path if a figure can be written there (PNG/SVG, existing directory);
    a one-line PlacementError otherwise, so that commands fail before their real work."""
    path = Path(path)
    where = f"{flag} {path}" if flag else str(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise PlacementError(f"{where}: a figure must be written as .png or .svg")
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise PlacementError(f"{where}: is a directory")
    if not parent.is_dir():
        raise PlacementError(f"{where}: directory {parent} does not exist")
    return path


def save_figure(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Write ``fig`` as PNG or SVG (by the suffix), atomically: temp file beside it + rename."""
    path = check_figure_path(path)
    fmt = path.suffix.lower().lstrip(".")
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".{fmt}", dir=parent)
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt, dpi=dpi)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
