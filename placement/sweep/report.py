"""A finished sweep directory as an HTML or Markdown page: tables and figures.

Reads the sweep directory contract (``manifest.json``, ``points.json`` or
``points.csv``, ``schedules/<point_id>.json``), renders every figure of
:mod:`placement.plots` that the data allows into ``SWEEP_DIR/figures/`` (PNG and
SVG), and writes one page. A figure the data cannot support is listed on the page
with the reason instead of failing the report; extra columns are carried along.
The HTML page is self-contained (PNG images embedded, SVGs linked); the Markdown
page links the figure files.

The page states where the host latencies came from (:func:`host_rows`): for every model
and hardware, the machine and CPU its profile was measured on (or "modelled", an
estimate) and the hardware's host; a profile measured on another architecture than a
hardware's host, or on another CPU model than the one the hardware names, and every
warning the profile itself recorded (an unstable measurement, a busy machine), are
stated on the page and returned as warnings (:attr:`Report.warnings`).

What a page shows is sized for reading: hardware with the swept values in place of the
preset's, times with their units, ties for the best speed-up named, and a points table
of the swept values and results; every column and exact value stays in ``points.csv``.
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from placement.errors import PlacementError
from placement.graph import load_graph
from placement.hardware.hostcheck import (
    HostLatencySource,
    host_from_json,
    host_latency_source,
)
from placement.io import check_output_file, write_text_atomic
from placement.plots.cim import device_share, speedup_per_network, speedup_vs_crossbars
from placement.plots.common import (
    PlotDataError,
    gap_text,
    model_label,
    num,
    save_figure,
    status_of,
    swept_params,
)
from placement.plots.gantt import cim_gantt, pim_gantt
from placement.plots.pim import (
    OffloadTable,
    nest_decisions,
    offloaded_nests_plot,
    offloaded_nests_table,
    pim_speedup_vs_cores,
    split_size,
)
from placement.sweep.page import FigureOutcome, PageContent, html_page, markdown_page
from placement.units import fmt_gap, fmt_time

FORMATS = ("html", "md")
_SOLVED = ("optimal", "time_limit", "time limit", "feasible")


@dataclass
class Sweep:
    path: Path
    manifest: dict[str, Any]
    rows: list[dict[str, Any]]
    columns: list[str]  # in file order; extra columns included

    @property
    def target(self) -> str:
        t = self.manifest.get("target")
        if t in ("cim", "pim"):
            return str(t)
        targets = {str(r.get("target")) for r in self.rows}
        return "pim" if targets == {"pim"} else "cim"

    def schedule(self, point_id: Any) -> dict[str, Any] | None:
        """The point's schedule document, or None when absent or unreadable."""
        if point_id in (None, ""):
            return None
        path = self.path / "schedules" / f"{point_id}.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def load_sweep(path: str | Path) -> Sweep:
    """Read a sweep directory; a one-line PlacementError when it is not one."""
    root = Path(path)
    if not root.is_dir():
        raise PlacementError(f"{root}: no such sweep directory")
    manifest: dict[str, Any] = {}
    mpath = root / "manifest.json"
    if mpath.exists():
        try:
            manifest = json.loads(mpath.read_text())
        except (OSError, ValueError) as exc:
            raise PlacementError(f"{mpath}: unreadable manifest ({exc})") from None
        if not isinstance(manifest, dict):
            raise PlacementError(f"{mpath}: the manifest must be a JSON object")
    rows, columns = _load_points(root)
    if not manifest and not rows:
        raise PlacementError(f"{root}: not a sweep directory (no manifest.json, no points)")
    return Sweep(root, manifest, rows, columns)


def _load_points(root: Path) -> tuple[list[dict[str, Any]], list[str]]:
    jpath, cpath = root / "points.json", root / "points.csv"
    columns: list[str] = []
    if cpath.exists():
        try:
            with cpath.open(newline="") as fh:
                reader = csv.DictReader(fh)
                csv_rows = [dict(r) for r in reader]
                columns = list(reader.fieldnames or [])
        except (OSError, csv.Error, UnicodeDecodeError) as exc:
            raise PlacementError(f"{cpath}: unreadable points table ({exc})") from None
    else:
        csv_rows = []
    if jpath.exists():  # typed values: preferred over the CSV's strings
        try:
            data = json.loads(jpath.read_text())
        except (OSError, ValueError) as exc:
            raise PlacementError(f"{jpath}: unreadable points ({exc})") from None
        if isinstance(data, dict):
            data = data.get("points", data.get("rows"))
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise PlacementError(f"{jpath}: expected a list of point objects")
        rows = data
    elif cpath.exists():
        rows = csv_rows
    else:
        return [], []
    for r in rows:
        for k in r:
            if k not in columns:
                columns.append(k)
    return rows, columns


# --------------------------------------------------------------------------- figures


def render_figures(
    sweep: Sweep, out_dir: str | Path | None = None, formats: Sequence[str] = ("png", "svg")
) -> list[FigureOutcome]:
    """Draw every figure the sweep's data allows into ``out_dir`` (default SWEEP/figures)."""
    out = Path(out_dir) if out_dir is not None else sweep.path / "figures"
    out.mkdir(parents=True, exist_ok=True)
    jobs = _cim_jobs(sweep) if sweep.target == "cim" else _pim_jobs(sweep)
    outcomes = []
    for name, title, build in jobs:
        outcome = FigureOutcome(_safe(name), title)
        try:
            fig = build()
        except PlotDataError as exc:
            outcome.skipped = str(exc)
            outcomes.append(outcome)
            continue
        for fmt in formats:
            outcome.files.append(save_figure(fig, out / f"{outcome.name}.{fmt}"))
        outcomes.append(outcome)
    return outcomes


Job = tuple[str, str, Callable[[], Figure]]


def _models(sweep: Sweep) -> list[str]:
    return list(dict.fromkeys(str(r.get("model")) for r in sweep.rows))


def _solved(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if num(r, "speedup") is not None]


def _cim_jobs(sweep: Sweep) -> list[Job]:
    rows = _solved(sweep.rows)
    jobs: list[Job] = []
    for m in _models(sweep):
        label = model_label(m)
        jobs.append((f"speedup_vs_crossbars_{label}",
                     f"{label}: speed-up vs crossbars per MVM latency (CIM Fig. 3)",
                     lambda m=m: speedup_vs_crossbars(rows, model=m)))  # fmt: skip
    latencies = sorted({t for r in rows if (t := num(r, "t_mvm_ns")) is not None})
    if len(_models(sweep)) < 2:
        latencies = []  # one network: Fig. 4 would be one bar, already in Fig. 3
    elif not latencies:
        jobs.append(("speedup_per_network", "speed-up per network (CIM Fig. 4)",
                     lambda: speedup_per_network(rows, math.nan)))  # fmt: skip
    for t in latencies:
        jobs.append((f"speedup_per_network_{t:g}ns",
                     f"speed-up per network at {t:g} ns MVM latency (CIM Fig. 4)",
                     lambda t=t: speedup_per_network(rows, t)))  # fmt: skip
    for m in _models(sweep):
        label = model_label(m)
        jobs.append((f"device_share_{label}",
                     f"{label}: busy time and operators per device, against the makespan"
                     " (CIM Fig. 5)",
                     lambda m=m: device_share(rows, model=m)))  # fmt: skip
        jobs.append((f"gantt_{label}", f"{label}: schedule of the fastest point (Gantt)",
                     lambda m=m: _best_gantt(sweep, m)))  # fmt: skip
    return jobs


def _best_point(sweep: Sweep, model: str) -> Mapping[str, Any]:
    mine = [r for r in _solved(sweep.rows) if str(r.get("model")) == model]
    if not mine:
        raise PlotDataError(f"Gantt chart: no solved point of {model_label(model)}")
    return max(mine, key=lambda r: num(r, "speedup") or 0.0)


def _best_gantt(sweep: Sweep, model: str) -> Figure:
    best = _best_point(sweep, model)
    doc = sweep.schedule(best.get("point_id"))
    if doc is None:
        raise PlotDataError(
            f"Gantt chart: no schedules/{best.get('point_id')}.json for the fastest point"
        )
    where = ", ".join(
        f"{k}={best.get(k)}" for k in ("hardware", *swept_params([best])) if k in best
    )
    title = f"{model_label(model)} ({where})"
    if sweep.target == "pim":
        doc = with_nest_data(sweep, doc)
        return pim_gantt(doc, cores=_int(num(best, "cores")), title=title)
    return cim_gantt(doc, edges=_graph_edges(sweep, model, doc), title=title)


def with_nest_data(sweep: Sweep, doc: dict[str, Any]) -> dict[str, Any]:
    """A sweep's PIM schedule (PimPlacement.to_json(), nests counted only) with the per-nest
    data (LoopNest fields + T_cpu) of the nest profile the sweep saved under profiles/."""
    if isinstance(doc.get("nests"), list):
        return doc
    info = doc.get("model") if isinstance(doc.get("model"), Mapping) else {}
    name, sha = info.get("name"), str(info.get("sha256") or "")
    path = sweep.path / "profiles" / f"{name}.{sha[:12]}.json"
    try:
        profile = json.loads(path.read_text())
        t_cpu = profile["t_cpu"]
        nests = [dict(n, t_cpu=t_cpu[n["id"]]) for n in profile["nests"]]
    except (OSError, ValueError, KeyError, TypeError):
        return doc  # the figure then says what is missing
    return {**doc, "nests": nests}


def _graph_edges(sweep: Sweep, model: str, doc: Mapping[str, Any]) -> list[Any] | None:
    """Data edges for transfer markers: the document's own, else the model file's graph."""
    if doc.get("edges"):
        return None  # cim_gantt reads them from the document
    info = doc.get("model") if isinstance(doc.get("model"), Mapping) else {}
    paths = [str(info["path"])] if info.get("path") else []
    paths += [
        str(m.get("path"))
        for m in sweep.manifest.get("models", []) or []
        if isinstance(m, Mapping) and model_label(m.get("path")) == model_label(model)
    ]
    paths.append(model)
    candidates = [c for p in paths for c in (Path(p), sweep.path / p, sweep.path.parent / p)]
    for candidate in candidates:
        if candidate.is_file():
            try:
                return [(u, v) for u, v, _ in load_graph(candidate).edges]
            except PlacementError:
                return None
    return None


def _pim_jobs(sweep: Sweep) -> list[Job]:
    rows = _solved(sweep.rows)
    jobs: list[Job] = [
        ("pim_speedup_vs_cores", "speed-up vs PIM cores per workload (Torch-PIM Fig. 3)",
         lambda: pim_speedup_vs_cores(rows)),
        ("offloaded_nests", "offloaded loop nests per operator vs problem size (Table 4)",
         lambda: offloaded_nests_plot(offload_table(sweep))),
    ]  # fmt: skip
    for m in _models(sweep):
        label = model_label(m)
        jobs.append((f"gantt_{label}", f"{label}: host/PIM schedule of the fastest point",
                     lambda m=m: _best_gantt(sweep, m)))  # fmt: skip
    return jobs


def offload_table(sweep: Sweep) -> OffloadTable:
    """Table 4 from the sweep's PIM schedules at its largest core count (first hardware)."""
    rows = _solved(sweep.rows)
    cores = [c for r in rows if (c := num(r, "cores")) is not None]
    if not cores:
        raise PlotDataError("Table 4: no solved PIM points with a cores column")
    top = max(cores)
    hosts = list(dict.fromkeys(str(r.get("hardware")) for r in rows))
    sizes = _manifest_sizes(sweep)
    entries, missing = [], []
    for r in rows:
        if num(r, "cores") != top or str(r.get("hardware")) != hosts[0]:
            continue
        model = str(r.get("model"))
        size = num(r, "size") or num(r, "problem_size") or sizes.get(model)
        if size is None:
            size = split_size(model)[1]
        doc = sweep.schedule(r.get("point_id"))
        if size is None or doc is None:
            missing.append(model_label(model))
            continue
        entries.append(nest_decisions(with_nest_data(sweep, doc), model, size, _int(top)))
    if missing and not entries:
        raise PlotDataError(
            "Table 4: needs a schedule and a problem size per model (a size column, a 'size'"
            " in the manifest's models, or a name ending in the size such as softmax_4096);"
            f" missing for {', '.join(sorted(set(missing)))}"
        )
    return offloaded_nests_table(entries)


def _manifest_sizes(sweep: Sweep) -> dict[str, float]:
    out = {}
    for m in sweep.manifest.get("models", []) or []:
        if isinstance(m, Mapping) and num(m, "size") is not None:
            out[str(m.get("path"))] = num(m, "size") or 0.0
    return out


def _int(x: float | None) -> int | None:
    return None if x is None else int(x)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "figure"


# --------------------------------------------------------------------------- tables


#: The labels of the page's warnings, in the order they are listed.
HOST_MISMATCH, OTHER_CPU, PROFILE = "Host mismatch", "Other CPU", "Profile"
Warning_ = tuple[str, str]  # (label, sentence)


def _match(source: HostLatencySource) -> str:
    if source.estimate:
        return "estimate"
    if source.mismatch:
        return "MISMATCH: other architecture"
    same = source.same_cpu
    return "?" if same is None else ("same CPU" if same else "other CPU, same architecture")


def host_rows(sweep: Sweep) -> tuple[list[list[str]], list[Warning_]]:
    """Per model and hardware: where the host latencies came from, the hardware's host and
    whether they match (architecture, then CPU model); and a warning per mismatch, per
    other CPU and per warning a model's profile recorded.

    From the manifest (each model's saved profile and its metadata, each hardware's
    ``host`` table); for a directory without them, from the rows' ``host_latencies`` and
    ``host_mismatch`` columns.
    """
    header = ["model", "profile measured on", "hardware", "hardware host", "host latencies",
              "match"]  # fmt: skip
    out: list[list[str]] = [header]
    warnings: list[Warning_] = []
    models = [m for m in sweep.manifest.get("models", []) or [] if isinstance(m, Mapping)]
    hardware = [h for h in sweep.manifest.get("hardware", []) or [] if isinstance(h, Mapping)]
    hosts = [(str(h.get("name", "?")), host_from_json(h.get("host"))) for h in hardware]
    if models and hosts and all(host is not None for _, host in hosts):
        for m in models:
            meta = _profile_metadata(sweep, m.get("profile"))
            label = model_label(m.get("name") or m.get("path"))
            for text in (meta or {}).get("warnings") or []:
                warnings.append((PROFILE, f"{label} ({m.get('profile')}): {text}"))
            measured = (
                "not profiled" if not m.get("profile")
                else f"{meta.get('machine', '?')} ({meta.get('cpu', '?')})" if meta
                else "? (profile missing)"
            )  # fmt: skip
            for hw_name, host in hosts:
                assert host is not None
                source = host_latency_source(hw_name, host, meta)
                out.append([label, measured, hw_name, f"{host.name} ({host.arch})",
                            source.detail, _match(source)])  # fmt: skip
                if source.warning:
                    warnings.append((HOST_MISMATCH, f"{label} on {hw_name}: {source.warning}"))
                elif source.same_cpu is False:
                    warnings.append((OTHER_CPU, (
                        f"{label} on {hw_name}: host latencies were measured on"
                        f" {source.measured_cpu}, but hardware '{hw_name}' names"
                        f" {host.name}; the speed-ups are those of the measuring CPU"
                    )))  # fmt: skip
        return out, warnings
    seen: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in sweep.rows:
        seen.setdefault((str(r.get("model")), str(r.get("hardware"))), r)
    for (model, hw_name), r in seen.items():
        detail = str(r.get("host_latencies") or "unknown (sweep written before this was recorded)")
        mismatch = str(r.get("host_mismatch")).lower() in ("true", "1")
        out.append([model_label(model), "?", hw_name, "?", detail,
                    "MISMATCH: other architecture" if mismatch else "?"])  # fmt: skip
        if mismatch:
            warnings.append(
                (HOST_MISMATCH, f"{model_label(model)} on {hw_name}: host latencies {detail}")
            )
    return out, warnings


def _profile_metadata(sweep: Sweep, relative: Any) -> dict[str, Any] | None:
    if not relative:
        return None
    try:
        data = json.loads((sweep.path / str(relative)).read_text())
    except (OSError, ValueError):
        return None
    meta = data.get("metadata") if isinstance(data, dict) else None
    return meta if isinstance(meta, dict) else None


#: Speed-ups this close (relative) are one value: a tie, every point of which is named.
TIE_TOLERANCE = 1e-9
_TIES_SHOWN = 3  # points of a tie named on the page; the rest are counted


def best_points(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The solved rows of the highest speed-up, all of them when several tie."""
    solved = _solved(rows)
    if not solved:
        return []
    top = max(num(r, "speedup") or 0.0 for r in solved)
    return [r for r in solved
            if math.isclose(num(r, "speedup") or 0.0, top, rel_tol=TIE_TOLERANCE)]  # fmt: skip


def _where(rows: Sequence[Mapping[str, Any]], params: Sequence[str]) -> str:
    """The swept values of ``rows`` ("crossbars=20, t_mvm_ns=50"), ties separated by ";"."""
    if not rows:
        return "-"
    places = [", ".join(f"{p}={_cell(r.get(p))}" for p in params) or "-" for r in rows]
    shown = "; ".join(places[:_TIES_SHOWN])
    if len(rows) > _TIES_SHOWN:
        shown += f"; +{len(rows) - _TIES_SHOWN} more"
    return f"{shown} ({len(rows)} points tie)" if len(rows) > 1 else shown


def summary_rows(sweep: Sweep) -> list[list[str]]:
    """Per model and hardware: points, solved, verified, best speed-up and where (every
    point of a tie), solve times."""
    params = swept_params(sweep.rows)
    out = [["model", "hardware", "points", "solved", "proven optimal", "verified",
            "best speed-up", "at", "median solve", "max gap"]]  # fmt: skip
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in sweep.rows:
        groups.setdefault((str(r.get("model")), str(r.get("hardware"))), []).append(r)
    for (m, hw), rs in groups.items():
        solved = _solved(rs)
        verified = sum(1 for r in rs if str(r.get("verified")).lower() in ("true", "1", "yes"))
        best = best_points(rs)
        times = [t for r in rs if (t := num(r, "solve_seconds")) is not None]
        gaps = [g for r in rs if (g := num(r, "gap")) is not None]
        out.append([
            model_label(m), hw, str(len(rs)), str(len(solved)),
            str(sum(1 for r in rs if status_of(r) == "optimal")), str(verified),
            f"{num(best[0], 'speedup'):.2f}x" if best else "-",
            _where(best, params),
            fmt_time(statistics.median(times)) if times else "-",
            fmt_gap(max(gaps)) if gaps else "-",
        ])  # fmt: skip
    return out


def unproven_rows(sweep: Sweep) -> list[list[str]]:
    """The points whose placement is the best found, not a proven optimum (header only
    when there is none): every figure marks them; here they are by name."""
    params = swept_params(sweep.rows)
    out = [["model", "hardware", *params, "status", "speed-up", "gap", "message"]]
    for r in sweep.rows:
        if status_of(r) not in (None, "optimal"):
            speedup = num(r, "speedup")
            out.append([
                model_label(r.get("model")), str(r.get("hardware")),
                *(_cell(r.get(k)) for k in params), str(r.get("status")),
                f"{speedup:.2f}x" if speedup is not None else "-",
                gap_text(r).removeprefix("gap "), str(r.get("message") or ""),
            ])  # fmt: skip
    return out


def points_rows(sweep: Sweep) -> list[list[str]]:
    """Every point, sized for reading: the model and hardware where there are several, the
    swept values, then the result with units (times in s/ms/us/ns, the gap in %: a float
    noise gap of 5e-13 reads 0%); point ids, host details and exact values are in
    points.csv (the page says so)."""
    rows = sweep.rows

    def varies(column: str) -> bool:
        return len({str(r.get(column)) for r in rows}) > 1

    def time_of(column: str) -> Callable[[Mapping[str, Any]], str]:
        return lambda r: "" if (t := num(r, column)) is None else fmt_time(t)

    def offloaded(r: Mapping[str, Any]) -> str:
        done, of = num(r, "n_offloaded"), num(r, "n_operators")
        if done is None:
            return ""
        return f"{done:g}/{of:g}" if of is not None else f"{done:g}"

    pim = sweep.target == "pim"
    columns: list[tuple[str, str, Callable[[Mapping[str, Any]], str]]] = []
    if varies("model"):
        columns.append(("model", "model", lambda r: model_label(r.get("model"))))
    if varies("hardware"):
        columns.append(("hardware", "hardware", lambda r: str(r.get("hardware"))))
    columns += [(p, p, lambda r, p=p: _cell(r.get(p))) for p in swept_params(rows)]
    columns += [
        ("status", "status", lambda r: str(r.get("status") or "")),
        ("objective_s", "T_hybrid" if pim else "makespan", time_of("objective_s")),
        ("cpu_only_s", "CPU-only", time_of("cpu_only_s")),
        ("speedup", "speed-up",
         lambda r: "" if (x := num(r, "speedup")) is None else f"{x:.2f}x"),
        ("n_offloaded", "nests on PIM" if pim else "operators on CIM", offloaded),
        ("crossbars_used", "crossbars used", lambda r: _cell(r.get("crossbars_used"))),
        ("gap", "gap", lambda r: "" if (g := num(r, "gap")) is None else fmt_gap(g)),
        ("solve_seconds", "solve", time_of("solve_seconds")),
        ("verified", "verified", lambda r: _cell(r.get("verified"))),
        ("message", "message", lambda r: str(r.get("message") or "")),
    ]  # fmt: skip
    shown = [(h, f) for c, h, f in columns
             if c in sweep.columns and any(f(r) for r in rows)]  # fmt: skip
    return [[h for h, _ in shown]] + [[f(r) for _, f in shown] for r in rows]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, str):
        try:
            f = float(value)
        except ValueError:
            return value
        return value if f.is_integer() or not math.isfinite(f) else f"{f:.4g}"
    return str(value)


# --------------------------------------------------------------------------- pages


@dataclass
class Report:
    pages: list[tuple[Path, str]]  # (file, format) of every page written
    figures: list[FigureOutcome]
    warnings: list[str] = field(default_factory=list)  # sentences, also on the page


def write_report(
    sweep_dir: str | Path, output: str | Path | None = None, fmt: str | None = None
) -> Report:
    """Render the figures and write the page: both SWEEP/report.html and SWEEP/report.md
    by default, else one page (format from ``fmt`` or the output's suffix)."""
    sweep = load_sweep(sweep_dir)
    outputs = _outputs(sweep, output, fmt)
    figures = render_figures(sweep)
    table4: list[list[str]] | None = None
    table4_note = None
    if sweep.target == "pim":
        try:
            table4 = offload_table(sweep).rows()
        except PlotDataError as exc:
            table4_note = str(exc)
    hosts, warnings = host_rows(sweep)
    content = PageContent(
        title=f"Sweep report: {sweep.path.name} ({sweep.target.upper()})",
        manifest=_manifest_lines(sweep),
        hosts=hosts,
        warnings=warnings,
        summary=summary_rows(sweep),
        unproven=unproven_rows(sweep),
        figures=figures,
        points=points_rows(sweep),
        table4=table4,
        table4_note=table4_note,
        pim=sweep.target == "pim",
    )
    for out, page_format in outputs:
        text = (html_page if page_format == "html" else markdown_page)(content, out)
        write_text_atomic(out, text, "the report")
    return Report(outputs, figures, [text for _, text in warnings])


def _outputs(
    sweep: Sweep, output: str | Path | None, fmt: str | None
) -> list[tuple[Path, str]]:
    if fmt is not None and fmt not in FORMATS:
        raise PlacementError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if output is None:
        return [(sweep.path / f"report.{f}", f) for f in ([fmt] if fmt else FORMATS)]
    out = Path(output)
    by_suffix = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}
    guessed = by_suffix.get(out.suffix.lower())
    if fmt is None:
        if guessed is None:
            raise PlacementError(f"{out}: cannot tell the format from the suffix; use --format")
        fmt = guessed
    elif guessed is not None and guessed != fmt:
        raise PlacementError(f"{out}: suffix says {guessed}, --format says {fmt}")
    return [(check_output_file(out), fmt)]


def _manifest_lines(sweep: Sweep) -> list[tuple[str, str]]:
    """The manifest for people: names and rounded numbers (the exact values are in
    ``manifest.json``)."""
    m = sweep.manifest
    models = [model_label(x.get("path") if isinstance(x, Mapping) else x)
              for x in m.get("models", []) or []]  # fmt: skip
    items = [
        ("target", sweep.target),
        ("models", ", ".join(models) or ", ".join(model_label(x) for x in _models(sweep))),
        *((f"hardware {h.get('name', '?')}" if isinstance(h, Mapping) else "hardware",
           _hardware_text(h, _swept_values(m))) for h in m.get("hardware", []) or []),
        ("grid", plain(m.get("grid"))),
        ("solver", plain(m.get("solver"))),
        ("created", str(m.get("created", ""))),
        ("points", str(len(sweep.rows))),
    ]  # fmt: skip
    return [(k, v) for k, v in items if v]


def _swept_values(manifest: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The spec keys the grid sweeps, with their values (``crossbar_size`` sweeps both
    ``crossbar_rows`` and ``crossbar_cols``)."""
    grid = manifest.get("grid") if isinstance(manifest.get("grid"), Mapping) else {}
    params = grid.get("parameters") if isinstance(grid.get("parameters"), Mapping) else {}
    swept = {str(k): list(v) for k, v in params.items() if isinstance(v, (list, tuple))}
    if "crossbar_size" in swept:
        for key in ("crossbar_rows", "crossbar_cols"):
            swept.setdefault(key, swept["crossbar_size"])
    return swept


def _hardware_text(h: Any, swept: Mapping[str, list[Any]]) -> str:
    """A hardware entry of the manifest: its spec in file units, each swept key with the
    values the sweep took (the preset's value is never solved), and its host."""
    if not isinstance(h, Mapping):
        return plain(h)
    spec = h.get("cim") if isinstance(h.get("cim"), Mapping) else h.get("pim")
    host = h.get("host") if isinstance(h.get("host"), Mapping) else {}
    if isinstance(spec, Mapping):
        spec = {
            k: (" / ".join(plain(x) for x in swept[k]) + " (swept)" if k in swept else v)
            for k, v in spec.items()
        }
    parts = [plain(spec)] if spec else []
    if host:
        how = "modelled (estimate)" if host.get("latency") == "model" else "measured"
        parts.append(f"host {host.get('name', '?')}, {host.get('arch', '?')}, latencies {how}")
    if h.get("source") and h.get("source") != h.get("name"):
        parts.append(f"from {h['source']}")
    return "; ".join(parts)


def plain(value: Any) -> str:
    """A manifest value as text: numbers to 6 significant digits (50.00000000000001 is
    50), mappings as "key value, ...", lists comma-separated."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value).lower()
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, Mapping):
        inner = "; " if any(isinstance(v, (Mapping, list)) for v in value.values()) else ", "
        return inner.join(f"{k} {plain(v)}".strip() for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value)
    return str(value)
