"""Torch-PIM's figures: speed-up against the PIM core count (Fig. 3), and the loop nests
offloaded per operator against the problem size (Table 4, as a table and as a plot).

Also reads PIM result documents (the JSON of ``solve --target pim --json``, or a sweep's
PimPlacement schedules): the per-core result and its optimal placement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure

from placement.plots.common import (
    PlotDataError,
    Row,
    mark_unproven,
    model_label,
    new_figure,
    num,
    others_label,
    placement_title,
    require_columns,
    speedup_axis,
    swept_params,
    varying,
)

# --------------------------------------------------------------------------- Torch-PIM Fig. 3


def pim_speedup_vs_cores(rows: Sequence[Row]) -> Figure:
    """Torch-PIM Fig. 3: speed-up over CPU-only against the PIM core count, one line per
    workload (model), one panel per hardware."""
    name = "PIM speed-up vs cores (Torch-PIM Fig. 3)"
    require_columns(rows, ["cores", "speedup"], name)
    hosts = list(dict.fromkeys(str(r.get("hardware", "?")) for r in rows))
    others = varying(rows, [p for p in swept_params(rows) if p != "cores"])
    fig = new_figure(4.8 * len(hosts) + 1.5, 3.8)
    axes = fig.subplots(1, len(hosts), squeeze=False, sharey=True)[0]
    for ax, host in zip(axes, hosts, strict=True):
        series: dict[tuple[str, str], list[tuple[float, float]]] = {}
        plotted: list[tuple[float, float, Row]] = []
        for r in rows:
            if str(r.get("hardware", "?")) != host:
                continue
            x, s = num(r, "cores"), num(r, "speedup")
            if x is not None and s is not None:
                key = (model_label(r.get("model")), others_label(r, others))
                series.setdefault(key, []).append((x, s))
                plotted.append((x, s, r))
        for (m, extra), pts in series.items():
            pts.sort()
            label = m + (f" ({extra})" if extra else "")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        mark_unproven(ax, plotted)
        xs = sorted({x for r in rows if (x := num(r, "cores")) is not None})
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.minorticks_off()
        ax.set_title(host)
        ax.set_xlabel("PIM cores (count)")
        speedup_axis(ax)
    axes[0].set_ylabel("speed-up over CPU-only (x)")
    axes[-1].legend(title="workload", fontsize="small", loc="upper left",
                    bbox_to_anchor=(1.02, 1.0))  # fmt: skip
    title = placement_title(rows, "host/PIM placement")
    fig.suptitle(f"{title[0].upper()}{title[1:]}: speed-up across PIM core counts")
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
    result = pim_result(document, cores)
    if source == "rule":
        rule = result.get("rule") if isinstance(result.get("rule"), Mapping) else None
        if rule is None or not isinstance(rule.get("on_pim"), list):
            raise PlotDataError("Table 4: the PIM document has no rule decisions")
        on_pim = {str(k) for k in rule["on_pim"]}
        decided = op_types.keys() or on_pim
    else:
        placement = placement_part(result)
        decisions = placement.get("decisions")
        if not isinstance(decisions, Mapping):
            raise PlotDataError("Table 4: the PIM placement has no per-nest decisions")
        on_pim = {str(k) for k, v in decisions.items() if v == "pim"}
        decided = decisions.keys()
    types = {str(k): op_types.get(str(k), "(unknown)") for k in decided}
    return NestDecisions(model, size, types, on_pim)


def pim_result(document: Mapping[str, Any], cores: int | None) -> Mapping[str, Any]:
    """The result for ``cores`` (default the first) of a full PIM document; a bare
    placement (no ``results`` list) is returned as is."""
    results = document.get("results")
    if not isinstance(results, list) or not results:
        return document  # a bare placement
    if cores is None:
        return results[0]
    for r in results:
        if isinstance(r, Mapping) and num(r, "n_cores") == cores:
            return r
    raise PlotDataError(f"the PIM document has no result for {cores} cores")


def placement_part(result: Mapping[str, Any]) -> Mapping[str, Any]:
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
    fig = new_figure(max(6.0, 1.0 * len(table.sizes) * max(1, len(table.operators)) / 2 + 4), 4.0)
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
