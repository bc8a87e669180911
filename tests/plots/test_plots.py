"""Figures of placements and sweeps: built from real solves, inspected as objects (not pixels).

The builders below (``cim_sweep_points``, ``pim_sweep_points``, ``write_sweep``) make small
sweeps that follow the sweep directory contract; ``test_report`` reuses them.
"""

from __future__ import annotations

import copy
import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from placement.errors import PlacementError
from placement.nests import LoopNest, NestOperand
from placement.plots.cim import (
    CIM_BUSY_LABEL,
    HOST_BUSY_LABEL,
    device_share,
    speedup_per_network,
    speedup_vs_crossbars,
)
from placement.plots.common import PlotDataError, num, save_figure
from placement.plots.gantt import cim_gantt, pim_gantt
from placement.plots.pim import (
    nest_decisions,
    offloaded_nests_plot,
    offloaded_nests_table,
    pim_speedup_vs_cores,
    split_size,
)

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
HOSTS = ("x86-ryzen", "arm-a72")
CROSSBARS = (2, 10, 25)
T_MVM = (50.0, 500.0)
CORES = (32, 64, 128)
SIZES = (1024, 4096, 16384)
COLUMNS_HEAD = ["point_id", "target", "model", "hardware"]
COLUMNS_TAIL = [
    "status", "objective_s", "cpu_only_s", "speedup", "n_operators", "n_offloaded",
    "crossbars_used", "host_busy_s", "accel_busy_s", "gap", "solve_seconds", "verified",
]  # fmt: skip


# --------------------------------------------------------------------------- fixture builders


def cim_sweep_points(
    model: Path = INT8, hosts=HOSTS, crossbars=CROSSBARS, t_mvm=T_MVM
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], list[tuple[str, str, float]]]:
    """Rows, schedules by point id, and the last instance's edges of a real CIM sweep."""
    from placement.cim.instance import cim_instance
    from placement.cim.pipeline import solve
    from placement.graph import load_graph
    from placement.hardware.cim import load_hardware, with_overrides
    from placement.profiling.ort.measure import profile_model

    graph = load_graph(model)
    latencies = profile_model(graph.path, runs=3, warmup=1, min_seconds=0).latencies
    rows, docs = [], {}
    edges: list[tuple[str, str, float]] = []
    for host in hosts:
        for t in t_mvm:
            for c in crossbars:
                hw = with_overrides(load_hardware(host), crossbars=c, t_mvm_ns=t)
                inst = cim_instance(graph, latencies, hw.cim)
                p = solve(inst, formulation="faithful", solver="highs")
                s = p.schedule
                assert s is not None
                pid = f"p{len(rows):04d}"
                docs[pid] = p.to_json()
                edges = [(e.src, e.dst, e.t_transfer) for e in inst.edges]
                ops = inst.operators
                rows.append({
                    "point_id": pid, "target": "cim", "model": str(model), "hardware": host,
                    "crossbars": c, "t_mvm_ns": t, "status": p.result.status.value,
                    "objective_s": s.makespan, "cpu_only_s": p.cpu_only, "speedup": p.speedup,
                    "n_operators": len(ops),
                    "n_offloaded": sum(1 for h in s.on_host.values() if not h),
                    "crossbars_used": p.crossbars_used,
                    "host_busy_s": sum(o.t_host for o in ops if s.on_host[o.name]),
                    "accel_busy_s": sum(o.t_acc or 0.0 for o in ops if not s.on_host[o.name]),
                    "gap": p.result.gap, "solve_seconds": p.result.solve_seconds,
                    "verified": True,
                })  # fmt: skip
    return rows, docs, edges


def _operand(buf: str, nbytes: int, read: bool, written: bool, kind: str = "alloc"):
    return NestOperand(buf, kind, (nbytes // 4,), "f32", nbytes, read, written)


def pim_profile(size: int, name: str = "softmax"):
    """A hand-made nest profile: an elementwise Add then a 3-nest Softmax over ``size`` rows of
    256 floats. Host times grow with the size, so larger sizes offload more."""
    from placement.profiling.nest_profile import NestProfile

    b = size * 256 * 4
    specs = [
        ("Add", [("arg0", True, False, "argument"), ("arg1", True, False, "argument"),
                 ("a0", False, True, "alloc")], 4.0),
        ("Softmax", [("a0", True, False, "alloc"), ("a1", False, True, "alloc")], 0.3),
        ("Softmax", [("a0", True, False, "alloc"), ("a1", True, True, "alloc"),
                     ("a2", False, True, "alloc")], 1.5),
        ("Softmax", [("a2", True, False, "alloc"), ("arg2", False, True, "argument")], 2.5),
    ]  # fmt: skip
    nests, t_cpu = [], {}
    for i, (op, ops, weight) in enumerate(specs):
        nid = f"n{i:03d}"
        nests.append(LoopNest(
            id=nid, index=i, onnx_node=f"{op.lower()}{i}", onnx_op_type=op,
            linalg_op="linalg.generic", n_iter=size * 256, n_total=size * 256, trip_count=1,
            operands=tuple(_operand(buf, b, r, w, k) for buf, r, w, k in ops),
        ))  # fmt: skip
        t_cpu[nid] = weight * b / 8e9 * (size / 4096) ** 0.5  # superlinear: bigger -> offload
    return NestProfile(
        nests=nests, t_cpu=t_cpu, counters=None, counter_source="unavailable: test",
        model_sha256="0" * 64, model_path=f"{name}_{size}.onnx", source_kind="onnx",
        metadata={"runs": 1},
    )  # fmt: skip


def saved_pim_profile(tmp_path: Path, size: int = 4096) -> tuple[Path, Path]:
    """A stand-in model file (never parsed) and :func:`pim_profile` saved for it: what
    ``solve --target pim --profile`` needs, without lowering anything."""
    import dataclasses

    from placement.io import file_sha256

    model = tmp_path / f"softmax_{size}.onnx"
    model.write_bytes(b"not parsed: the saved profile carries the times")
    profile = dataclasses.replace(
        pim_profile(size), model_sha256=file_sha256(model), model_path=str(model)
    )
    profile.save(tmp_path / "p.json")
    return model, tmp_path / "p.json"


def pim_sweep_points(
    sizes=SIZES, cores=CORES, name: str = "softmax"
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Rows and full per-point PIM documents (one core count each) of a PIM sweep."""
    from placement.hardware.pim import load_pim_hardware
    from placement.pim.instance import build_instance as instance
    from placement.pim.output import pim_document
    from placement.pim.pipeline import solve_for_cores

    hw = load_pim_hardware("pim-icelake")
    rows, docs = [], {}
    for size in sizes:
        profile = pim_profile(size, name)
        # Eq. 8's copies keep some nests on the host: the figures need both devices.
        for r in solve_for_cores(instance(profile, hw.pim), list(cores), copy="upper_bound"):
            p = r.placement
            assert p.hybrid is not None and p.on_pim is not None
            pid = f"q{len(rows):04d}"
            docs[pid] = pim_document(profile, hw, [r], copy="upper_bound", granularity="loop",
                                     allow_estimates=False)  # fmt: skip
            rows.append({
                "point_id": pid, "target": "pim", "model": profile.model_path,
                "hardware": hw.name, "cores": r.cores, "status": p.result.status.value,
                "objective_s": p.hybrid.total, "cpu_only_s": p.cpu_only, "speedup": p.speedup,
                "n_operators": len(profile.nests), "n_offloaded": sum(p.on_pim.values()),
                "crossbars_used": "", "host_busy_s": p.hybrid.host, "accel_busy_s": p.hybrid.pim,
                "gap": p.result.gap, "solve_seconds": p.result.solve_seconds, "verified": True,
            })  # fmt: skip
    return rows, docs


def write_sweep(
    root: Path, target: str, rows: list[dict[str, Any]], docs: dict[str, dict[str, Any]],
    params: list[str], csv_only: bool = False,
) -> Path:  # fmt: skip
    """A sweep directory following the contract (manifest, points.csv/json, schedules/)."""
    root.mkdir(parents=True, exist_ok=True)
    models = list(dict.fromkeys(r["model"] for r in rows))
    grid = {p: sorted({r[p] for r in rows}) for p in params}
    manifest = {
        "target": target, "models": [{"path": m, "sha256": "0" * 64} for m in models],
        "grid": grid, "hardware": sorted({r["hardware"] for r in rows}),
        "solver": {"time_limit": 60, "gap": 1e-4}, "created": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip
    (root / "manifest.json").write_text(json.dumps(manifest))
    columns = COLUMNS_HEAD + params + COLUMNS_TAIL
    with (root / "points.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    if not csv_only:
        (root / "points.json").write_text(json.dumps([{k: r.get(k) for k in columns}
                                                      for r in rows]))  # fmt: skip
    (root / "schedules").mkdir(exist_ok=True)
    for pid, doc in docs.items():
        (root / "schedules" / f"{pid}.json").write_text(json.dumps(doc))
    return root


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def cim() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], list[Any]]:
    return cim_sweep_points()


@pytest.fixture(scope="module")
def pim() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    return pim_sweep_points()


def _lines(ax) -> dict[str, list[tuple[float, float]]]:
    return {
        line.get_label(): list(zip(line.get_xdata(), line.get_ydata(), strict=True))
        for line in ax.get_lines()
        if not line.get_label().startswith("_")
    }


def _legend_texts(legend) -> list[str]:
    return [t.get_text() for t in legend.get_texts()]


# --------------------------------------------------------------------------- CIM Figs. 3-5


@pytest.mark.integration
def test_speedup_vs_crossbars_has_a_panel_per_host_and_a_line_per_latency(cim):
    rows, _, _ = cim
    fig = speedup_vs_crossbars(rows)
    assert isinstance(fig, Figure)
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == list(HOSTS)
    for ax, host in zip(axes, HOSTS, strict=True):
        lines = _lines(ax)
        assert sorted(lines) == ["MVM 50 ns", "MVM 500 ns"]
        assert _legend_texts(ax.get_legend()) == ["MVM 50 ns", "MVM 500 ns"]
        for t in T_MVM:
            pts = lines[f"MVM {t:g} ns"]
            want = sorted(
                (r["crossbars"], r["speedup"]) for r in rows
                if r["hardware"] == host and r["t_mvm_ns"] == t
            )  # fmt: skip
            assert _flat(pts) == pytest.approx(_flat(want))
        assert "crossbars" in ax.get_xlabel()
    assert "speed-up" in axes[0].get_ylabel()
    assert "resnet_tiny_int8" in fig.get_suptitle()


@pytest.mark.integration
def test_speedup_vs_crossbars_splits_lines_by_another_swept_parameter(cim):
    rows, _, _ = cim
    more = [dict(r, bus_gbps=10) for r in rows] + [dict(r, bus_gbps=20) for r in rows]
    labels = sorted(_lines(speedup_vs_crossbars(more).get_axes()[0]))
    assert labels == sorted(f"MVM {t:g} ns (bus_gbps={b})" for t in T_MVM for b in (10, 20))


@pytest.mark.integration
def test_speedup_per_network_bars_per_crossbar_count(cim):
    rows, _, _ = cim
    other = [dict(r, model="other_net.onnx", speedup=r["speedup"] * 0.5) for r in rows]
    fig = speedup_per_network(rows + other, 50)
    axes = fig.get_axes()
    assert len(axes) == len(HOSTS)
    for ax, host in zip(axes, HOSTS, strict=True):
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        assert len(bars) == 2 * len(CROSSBARS)  # networks x crossbar counts
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks == ["resnet_tiny_int8", "other_net"]
        heights = sorted(b.get_height() for b in bars[: len(CROSSBARS) * 2])
        want = sorted(
            r["speedup"] for r in rows + other if r["hardware"] == host and r["t_mvm_ns"] == 50
        )
        assert heights == pytest.approx(want)
    assert _legend_texts(fig.legends[0]) == [f"{c:g}" for c in CROSSBARS]
    assert "50 ns" in fig.get_suptitle()
    with pytest.raises(PlotDataError, match="no points at t_mvm_ns = 77"):
        speedup_per_network(rows, 77)


@pytest.mark.integration
def test_device_share_draws_busy_time_per_device_against_the_makespan(cim):
    rows, docs, _ = cim
    fig = device_share(rows)
    axes = fig.get_axes()
    assert len(axes) == len(HOSTS)
    ax = axes[0]
    mine = [r for r in rows if r["hardware"] == HOSTS[0]]
    containers = ax.containers
    assert len(containers) == 2  # the host's bars and the CIM's, side by side
    assert len(containers[0]) == len(containers[1]) == len(mine)
    # not stacked: every bar starts at 0, the CIM bar right of the host bar
    for h, c in zip(containers[0], containers[1], strict=True):
        assert h.get_y() == 0 and c.get_y() == 0 and c.get_x() > h.get_x()
    # the host runs one operator at a time: its bar never passes its makespan line, and
    # bar and line are the row's host busy time and makespan
    (line,) = [c for c in ax.collections if c.get_label() == "makespan"]
    segments = line.get_segments()
    ratios = sorted(r["host_busy_s"] / r["objective_s"] for r in mine)
    drawn = []
    for bar in containers[0]:
        centre = bar.get_x() + bar.get_width() / 2
        (top,) = [seg[0][1] for seg in segments if seg[0][0] <= centre <= seg[1][0]]
        assert bar.get_height() <= top * (1 + 1e-9)
        drawn.append(bar.get_height() / top)
    assert sorted(drawn) == pytest.approx(ratios)
    texts = [t.get_text() for t in ax.texts]
    for r in mine:
        assert str(r["n_operators"] - r["n_offloaded"]) in texts
    assert sum(r["n_offloaded"] for r in mine) == sum(int(t) for t in texts if t) - sum(
        r["n_operators"] - r["n_offloaded"] for r in mine
    )
    # the unit follows the measured busy times (µs on an idle machine, ms on a loaded one)
    assert "busy time" in ax.get_ylabel() and ax.get_ylabel().endswith(("(µs)", "(ms)"))
    assert _legend_texts(fig.legends[0]) == ["makespan", HOST_BUSY_LABEL, CIM_BUSY_LABEL]
    # the same figure from schedules alone
    items = [{"schedule": docs[r["point_id"]], "model": r["model"], "hardware": r["hardware"],
              "label": f"C={r['crossbars']}"} for r in mine]  # fmt: skip
    fig2 = device_share(items)
    assert len(fig2.get_axes()[0].containers[0]) == len(mine)


@pytest.mark.integration
def test_missing_columns_are_named_not_crashed_on(cim):
    rows, _, _ = cim
    bare = [{k: v for k, v in r.items() if k not in ("t_mvm_ns", "host_busy_s")} for r in rows]
    with pytest.raises(PlotDataError, match="t_mvm_ns"):
        speedup_vs_crossbars(bare)
    with pytest.raises(PlotDataError, match="host_busy_s"):
        device_share(bare)
    with pytest.raises(PlotDataError, match="no sweep points"):
        pim_speedup_vs_cores([])
    csv_like = [{k: ("" if v is None else str(v)) for k, v in r.items()} for r in rows]
    assert len(speedup_vs_crossbars(csv_like).get_axes()) == len(HOSTS)  # strings parse


# --------------------------------------------------------------------------- Gantt charts


@pytest.mark.integration
def test_cim_gantt_one_box_per_operator_cim_sub_lanes_and_transfers(cim):
    rows, docs, edges = cim
    best = max(rows, key=lambda r: r["speedup"])
    doc = docs[best["point_id"]]
    fig = cim_gantt(doc, edges)
    ax = fig.get_axes()[0]
    ops = doc["schedule"]["operators"]
    boxes = {p.get_gid(): p for p in ax.patches if p.get_gid() in ops}
    assert set(boxes) == set(ops)  # one rectangle per operator
    for name, d in ops.items():
        assert boxes[name].get_x() == pytest.approx(d["start"] * 1e6)  # µs axis
        assert boxes[name].get_width() == pytest.approx((d["finish"] - d["start"]) * 1e6)
    host_y = {boxes[v].get_y() for v, d in ops.items() if d["device"] == "host"}
    assert len(host_y) == 1  # one host lane
    cim_ops = [v for v, d in ops.items() if d["device"] == "cim"]
    # overlapping CIM operators never share a sub-lane
    for i, u in enumerate(cim_ops):
        for v in cim_ops[i + 1 :]:
            overlap = min(ops[u]["finish"], ops[v]["finish"]) - max(
                ops[u]["start"], ops[v]["start"]
            )
            if overlap > 1e-12:
                assert boxes[u].get_y() != boxes[v].get_y()
    crossing = [(u, v) for u, v, _ in edges if ops[u]["device"] != ops[v]["device"]]
    transfers = [p for p in ax.patches if str(p.get_gid()).startswith("transfer:")]
    assert len(transfers) == len(crossing) > 0
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "host CPU" and labels[-1] == "transfers"
    assert any(lab.startswith("CIM") for lab in labels)
    assert ax.get_xlabel() == "time (µs)"
    assert "makespan" in ax.get_title() and "CPU-only" in ax.get_title()
    assert len(cim_gantt(doc).get_axes()[0].patches) == len(ops)  # no edges: no transfers


@pytest.mark.unit
def test_cim_gantt_needs_a_schedule():
    with pytest.raises(PlotDataError, match="no schedule"):
        cim_gantt({"schedule": None, "makespan": None})


@pytest.mark.solver
def test_pim_gantt_sequential_nests_switches_and_total(pim):
    rows, docs = pim
    row = max(rows, key=lambda r: r["n_offloaded"] * 1000 + r["cores"])
    doc = docs[row["point_id"]]
    decisions = doc["results"][0]["model"]["decisions"]
    assert "pim" in decisions.values() and "host" in decisions.values()
    fig = pim_gantt(doc)
    ax = fig.get_axes()[0]
    boxes = {p.get_gid(): p for p in ax.patches if p.get_gid() in decisions}
    assert set(boxes) == set(decisions)
    order = sorted(decisions)
    for a, b in zip(order, order[1:], strict=False):  # sequential: never overlapping
        assert boxes[a].get_x() + boxes[a].get_width() <= boxes[b].get_x() + 1e-9
    lanes = {decisions[k]: set() for k in decisions}
    for k, p in boxes.items():
        lanes[decisions[k]].add(p.get_y())
    assert len(lanes["host"]) == len(lanes["pim"]) == 1 and lanes["host"] != lanes["pim"]
    switches = [p for p in ax.patches if str(p.get_gid()).startswith("switch@")]
    hybrid = doc["results"][0]["model"]["hybrid"]
    assert len(switches) == hybrid["n_region"]
    copies = [p for p in ax.patches if str(p.get_gid()).startswith("copy:")]
    assert len(copies) == list(decisions.values()).count("pim")
    scale = 1e6 if "µs" in ax.get_xlabel() else 1e3 if "ms" in ax.get_xlabel() else 1.0
    end = max(p.get_x() + p.get_width() for p in ax.patches) / scale
    assert end == pytest.approx(hybrid["total"], rel=1e-6)  # the layout adds up to Eq. 9
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "host CPU",
        f"PIM ({row['cores']} cores)",
    ]


@pytest.mark.solver
def test_pim_gantt_draws_the_documents_t_pim(pim):
    # A --pim-times file's times reach the chart through the document's per-nest t_pim.
    rows, docs = pim
    row = max(rows, key=lambda r: r["n_offloaded"] * 1000 + r["cores"])
    doc = copy.deepcopy(docs[row["point_id"]])
    decisions = doc["results"][0]["model"]["decisions"]
    nid = next(k for k, v in decisions.items() if v == "pim")
    key = str(doc["results"][0]["n_cores"])
    nest = next(n for n in doc["nests"] if n["id"] == nid)
    assert nest["t_pim"][key] > 0  # written by solve --json
    nest["t_pim"][key] = 0.5  # seconds: dwarfs everything else
    ax = pim_gantt(doc).get_axes()[0]
    box = next(p for p in ax.patches if p.get_gid() == nid)
    scale = {"s": 1.0, "ms": 1e3, "µs": 1e6}[ax.get_xlabel().split("(")[1].rstrip(")")]
    assert box.get_width() / scale == pytest.approx(0.5)


@pytest.mark.solver
def test_pim_gantt_of_a_bare_placement_says_why(pim):
    rows, docs = pim
    bare = docs[rows[0]["point_id"]]["results"][0]["model"]
    with pytest.raises(PlotDataError, match="no per-nest data"):
        pim_gantt(bare)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"cores": "many"}, "'pim.cores' must be a number, got 'many'"),
        ({"sigma": 2.0}, "'pim.sigma' is a fraction"),
        ({"t_sw_us": -1.0}, "'pim.t_sw_us' must be positive"),
        ({"cores": 32.5}, "'pim.cores' must be a whole number"),
        ({"t_sw_ms": 2.0}, "unknown key 'pim.t_sw_ms'"),
        ({"clock_ghz": None}, "missing key 'pim.clock_ghz'"),
    ],
)
@pytest.mark.solver
def test_pim_gantt_rejects_an_invalid_hardware_table_in_one_line(pim, change, fragment):
    rows, docs = pim
    doc = json.loads(json.dumps(docs[rows[0]["point_id"]]))  # a deep copy
    table = doc["hardware"]["pim"]
    for key, value in change.items():
        if value is None:
            del table[key]
        else:
            table[key] = value
    with pytest.raises(PlacementError) as info:
        pim_gantt(doc)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("PIM Gantt chart: bad hardware in the document")
    assert f"hardware {doc['hardware']['name']!r}: {fragment}" in message, message


# --------------------------------------------------------------------------- PIM Fig. 3, Table 4


@pytest.mark.solver
def test_pim_speedup_vs_cores_one_line_per_workload(pim):
    rows, _ = pim
    fig = pim_speedup_vs_cores(rows)
    ax = fig.get_axes()[0]
    lines = _lines(ax)
    assert sorted(lines) == sorted(f"softmax_{s}" for s in SIZES)
    for s in SIZES:
        want = sorted((r["cores"], r["speedup"]) for r in rows if r["model"] == f"softmax_{s}.onnx")
        assert _flat(lines[f"softmax_{s}"]) == pytest.approx(_flat(want))
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(c) for c in CORES]
    assert "cores" in ax.get_xlabel() and "speed-up" in ax.get_ylabel()


@pytest.mark.solver
def test_offloaded_nests_table_and_plot(pim):
    rows, docs = pim
    top = [r for r in rows if r["cores"] == max(CORES)]
    entries = [
        nest_decisions(docs[r["point_id"]], r["model"], split_size(r["model"])[1])
        for r in top
    ]
    table = offloaded_nests_table(entries)
    assert table.operators == ["Add", "Softmax"]
    assert table.sizes == [float(s) for s in SIZES]
    assert table.nests == {"Add": 1, "Softmax": 3}
    for r in top:
        decisions = docs[r["point_id"]]["results"][0]["model"]["decisions"]
        size = float(split_size(r["model"])[1])
        softmax = sum(decisions[n] == "pim" for n in ("n001", "n002", "n003"))
        assert table.offloaded["Softmax", size] == softmax
        assert table.offloaded["Add", size] == (decisions["n000"] == "pim")
    assert table.rows()[0] == ["operator", "nests", "N=1024", "N=4096", "N=16384"]
    assert sum(table.offloaded.values()) > 0
    fig = offloaded_nests_plot(table)
    ax = fig.get_axes()[0]
    assert _legend_texts(ax.get_legend()) == ["Add (1 nest)", "Softmax (3 nests)"]
    assert len(ax.containers) == 2 and all(len(c) == len(SIZES) for c in ax.containers)
    heights = [b.get_height() for b in ax.containers[1]]
    assert heights == [table.offloaded["Softmax", float(s)] for s in SIZES]
    assert [t.get_text() for t in ax.texts][len(SIZES) :] == [f"{int(h)}/3" for h in heights]
    # the rule's decisions and bare placements (no nest metadata) also work
    rule = nest_decisions(docs[top[0]["point_id"]], top[0]["model"], 1024, source="rule")
    assert set(rule.op_types.values()) == {"Add", "Softmax"}
    bare = nest_decisions(docs[top[0]["point_id"]]["results"][0]["model"], "m", 1.0)
    assert set(bare.op_types.values()) == {"(unknown)"}


@pytest.mark.unit
def test_split_size():
    assert split_size("dir/softmax_4096.onnx") == ("softmax", 4096.0)
    assert split_size("resnet18.onnx") == ("resnet", 18.0)
    assert split_size("model.onnx") == ("model", None)


# --------------------------------------------------------------------------- saving


@pytest.mark.parametrize("suffix", ["png", "svg"])
@pytest.mark.integration
def test_save_figure_writes_atomically(tmp_path, cim, suffix):
    rows, _, _ = cim
    out = save_figure(speedup_vs_crossbars(rows), tmp_path / f"f.{suffix}")
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG" if suffix == "png" else b"<?xml")
    assert [p.name for p in tmp_path.iterdir()] == [f"f.{suffix}"]  # no temp file left


@pytest.mark.unit
def test_save_figure_refuses_bad_paths(tmp_path):
    fig = Figure()
    with pytest.raises(PlacementError, match=r"\.png or \.svg"):
        save_figure(fig, tmp_path / "f.pdf")
    with pytest.raises(PlacementError, match="does not exist"):
        save_figure(fig, tmp_path / "nope" / "f.png")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_numbers_from_rows():
    assert num({"a": "1.5"}, "a") == 1.5
    assert num({"a": ""}, "a") is None
    assert num({"a": "nan"}, "a") is None
    assert num({}, "a") is None
    assert math.isclose(num({"a": 2}, "a") or 0, 2.0)


def _flat(points: list[tuple[float, float]]) -> list[float]:
    """(x, y) pairs as one flat list: pytest.approx does not take nested sequences."""
    return [value for point in points for value in point]
