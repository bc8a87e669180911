"""`placement report SWEEP_DIR` and `solve --plot`, end to end through placement.cli.main."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from test_plots import (
    INT8,
    cim_sweep_points,
    pim_profile,
    pim_sweep_points,
    saved_pim_profile,
    write_sweep,
)

from placement.hardware.base import HostSpec
from placement.hardware.hostcheck import host_latency_source
from placement.sweep.report import Sweep, summary_rows

FAST = ["--runs", "3", "--warmup", "1", "--min-seconds", "0", "-q"]


@pytest.fixture(scope="module")
def cim_points():
    rows, docs, _ = cim_sweep_points(crossbars=(2, 25))
    return rows, docs


@pytest.fixture(scope="module")
def pim_points():
    return pim_sweep_points(cores=(32, 128))


def _figures(root: Path) -> set[str]:
    return {p.name for p in (root / "figures").iterdir()}


@pytest.mark.integration
def test_cim_report_html_embeds_every_figure(capsys, tmp_path, cim_points):
    root = write_sweep(tmp_path / "sweep", "cim", *cim_points, ["crossbars", "t_mvm_ns"])
    code, out, err = run(capsys, "report", root)
    assert code == 0, err
    page = root / "report.html"
    text = page.read_text()
    # one network: no per-network figure (CIM Fig. 4 would be one bar per latency)
    stems = [
        "speedup_vs_crossbars_resnet_tiny_int8",
        "device_share_resnet_tiny_int8",
        "gantt_resnet_tiny_int8",
    ]
    for stem in stems:
        for suffix in ("png", "svg"):
            f = root / "figures" / f"{stem}.{suffix}"
            assert f.stat().st_size > 1000, f
            assert f"figures/{stem}.{suffix}" in text  # linked from the page
    assert text.count("data:image/png;base64,") == len(stems)  # self-contained
    assert "Not drawn" not in text and "speedup_per_network" not in text
    assert not list((root / "figures").glob("speedup_per_network*"))
    # both pages by default, from the same content
    md = root / "report.md"
    assert f"wrote {page} (html) and {md} (md), 3 of 3 figures" in out
    assert md.read_text().count("](figures/") == 2 * len(stems)  # image and SVG link
    # tables: summary per model/hardware and every point (ids only in points.csv)
    assert "Summary per model and hardware" in text
    points = text.split("<h2>All points</h2>")[1]
    assert points.count("<tr><td>") == len(cim_points[0])
    assert "p0000" not in points and "points.csv" in points
    summary = text.split("<h2>Summary per model and hardware</h2>")[1].split("<h2>")[0]
    assert summary.count("<td>resnet_tiny_int8</td>") == 2  # one summary row per hardware
    # the host-latency table: one row per model and hardware, before the summary
    hosts = text.split("<h2>Host latencies</h2>")[1].split("<h2>")[0]
    assert hosts.count("<td>resnet_tiny_int8</td>") == 2


@pytest.mark.integration
def test_markdown_report_and_gantt_with_transfers_from_the_model_file(capsys, tmp_path, cim_points):
    root = write_sweep(tmp_path / "sweep", "cim", *cim_points, ["crossbars", "t_mvm_ns"])
    out_md = tmp_path / "r.md"
    code, _, err = run(capsys, "report", root, "-o", out_md, "-q")
    assert code == 0, err
    text = out_md.read_text()
    refs = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    assert len(refs) == 3
    for ref in refs:
        assert (tmp_path / ref).is_file()  # relative to the page
    assert text.startswith("# Sweep report: sweep (CIM)")
    assert "| hardware | crossbars | t_mvm_ns | status | makespan | CPU-only | speed-up |" in text
    assert not (root / "report.html").exists()  # -o: that page only
    svg = (root / "figures" / "gantt_resnet_tiny_int8.svg").read_text()
    assert "transfer:" in svg  # gids of transfer bars: edges came from the model file


@pytest.mark.integration
def test_missing_columns_skip_figures_with_a_reason(capsys, tmp_path, cim_points):
    rows, docs = cim_points
    slim = [{k: v for k, v in r.items() if k not in ("host_busy_s", "accel_busy_s")} for r in rows]
    slim = [dict(r, extra_column="x") for r in slim]
    root = write_sweep(tmp_path / "sweep", "cim", slim, {}, ["crossbars", "t_mvm_ns"], True)
    with (root / "points.csv").open() as fh:
        assert "host_busy_s" in next(csv.reader(fh))  # the column exists, empty
    code, out, err = run(capsys, "report", root, "--format", "md")
    assert code == 0, err
    text = (root / "report.md").read_text()
    assert "Not drawn: resnet_tiny_int8: busy time and operators per device" in text
    assert "host_busy_s" in text.split("Not drawn: resnet_tiny_int8: busy time")[1].split("\n")[0]
    assert "no schedules/p0000.json" not in text  # the fastest point is named instead
    assert re.search(r"Not drawn: .*Gantt.*no schedules/p\d+\.json", text)
    assert "not drawn: device_share_resnet_tiny_int8" in out
    assert "speedup_vs_crossbars_resnet_tiny_int8.png" in _figures(root)


@pytest.mark.integration
def test_pim_report_has_fig3_table4_and_gantts(capsys, tmp_path, pim_points):
    root = write_sweep(tmp_path / "sweep", "pim", *pim_points, ["cores"])
    code, out, err = run(capsys, "report", root, "-o", tmp_path / "pim.html")
    assert code == 0, err
    text = (tmp_path / "pim.html").read_text()
    names = _figures(root)
    for stem in ("pim_speedup_vs_cores", "offloaded_nests", "gantt_softmax_1024"):
        assert f"{stem}.png" in names and f"{stem}.svg" in names
        assert f"sweep/figures/{stem}.png" in text
    assert "Offloaded loop nests per operator (Table 4)" in text
    assert "<th>N=1024</th><th>N=4096</th><th>N=16384</th>" in text
    assert "<td>Softmax</td><td>3</td>" in text
    assert "Not drawn" not in text


@pytest.mark.integration
def test_pim_report_from_bare_placements_explains_what_is_missing(capsys, tmp_path, pim_points):
    rows, docs = pim_points
    bare = {k: d["results"][0]["model"] for k, d in docs.items()}
    root = write_sweep(tmp_path / "sweep", "pim", rows, bare, ["cores"])
    code, _, err = run(capsys, "report", root, "-q")
    assert code == 0, err
    text = (root / "report.html").read_text()
    assert "no per-nest data" in text  # Gantt not drawn, with the reason
    assert "<td>(unknown)</td>" in text  # Table 4 still counts the decisions


@pytest.mark.parametrize(
    ("make", "argv", "fragment"),
    [
        (lambda d: d / "missing", [], "no such sweep directory"),
        (lambda d: d, [], "not a sweep directory"),
        (lambda d: d, ["-o", "r.pdf"], "cannot tell the format"),
        (lambda d: d, ["-o", "r.md", "--format", "html"], "suffix says md"),
    ],
)
@pytest.mark.unit
def test_report_errors_are_one_line_and_write_nothing(capsys, tmp_path, make, argv, fragment):
    target = make(tmp_path)
    if argv and argv[0] == "-o":
        write_sweep(tmp_path, "cim", [], {}, [])  # a manifest only: valid but empty
        argv = ["-o", str(tmp_path / argv[1]), *argv[2:]]
    before = set(tmp_path.rglob("*"))
    code, _, err = run(capsys, "report", target, *argv)
    assert_one_line_error(code, err, fragment)
    assert set(tmp_path.rglob("*")) == before


# --------------------------------------------------------------------------- solve --plot


@pytest.mark.integration
def test_solve_cim_plot_writes_the_gantt(capsys, tmp_path):
    out = tmp_path / "schedule.png"
    code, stdout, err = run(capsys, "solve", INT8, "--crossbars", "10", "--plot", out, *FAST)
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 5000
    assert "speed-up" in stdout
    assert [p.name for p in tmp_path.iterdir()] == ["schedule.png"]


@pytest.mark.parametrize("name", ["s.pdf", "nodir/s.png"])
@pytest.mark.unit
def test_solve_plot_bad_path_fails_before_solving(capsys, tmp_path, name):
    js = tmp_path / "r.json"
    code, _, err = run(capsys, "solve", INT8, "--plot", tmp_path / name, "--json", js, *FAST)
    assert_one_line_error(code, err, "--plot")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.integration
def test_solve_pim_plot_writes_the_gantt_of_the_first_core_count(capsys, tmp_path):
    model, saved = saved_pim_profile(tmp_path)
    plot, js = tmp_path / "g.svg", tmp_path / "r.json"
    argv = ["solve", model, "--target", "pim", "--profile", saved]
    argv += ["--pim-cores", "64,32", "--plot", plot, "--json", js, "-q"]
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    svg = plot.read_text()
    assert "PIM (64 cores)" in svg  # the first core count given
    doc = json.loads(js.read_text())
    for nid in doc["results"][0]["model"]["decisions"]:
        assert f'id="{nid}"' in svg  # one box per nest


@pytest.mark.integration
def test_pim_report_of_sweep_engine_schedules_reads_nests_from_profiles(
    capsys, tmp_path, pim_points
):
    """placement.sweep.run writes PimPlacement.to_json() + rule + model/hardware per point and the
    nest profiles under profiles/: the Gantt and Table 4 take the nests from there."""
    rows, docs = pim_points
    root = tmp_path / "sweep"
    (root / "profiles").mkdir(parents=True)
    engine_docs = {}
    for r in rows:
        full = docs[r["point_id"]]
        name = Path(r["model"]).stem
        sha = f"{abs(hash(name)):012d}"[:12].ljust(64, "0")
        engine_docs[r["point_id"]] = {
            **full["results"][0]["model"],
            "rule": {"on_pim": full["results"][0]["rule"]["on_pim"]},
            "model": {"name": name, "path": r["model"], "sha256": sha},
            "hardware": full["hardware"],
        }
        size = int(name.split("_")[1])
        pim_profile(size).save(root / "profiles" / f"{name}.{sha[:12]}.json")
    write_sweep(root, "pim", rows, engine_docs, ["cores"])
    code, _, err = run(capsys, "report", root, "-q")
    assert code == 0, err
    text = (root / "report.html").read_text()
    assert "Not drawn" not in text
    assert "<td>Softmax</td><td>3</td>" in text
    assert "gantt_softmax_16384.svg" in _figures(root)


@pytest.mark.integration
def test_the_page_rounds_numbers_for_people_and_names_the_hardware(capsys, tmp_path):
    """No raw dict and no float noise on the page (the manifest's t_mvm_ns of arm-a72 is
    50.00000000000001 ns, a solver's gap of an optimum can be 5e-13); the JSON and CSV
    files keep the exact values."""
    profile = Path(__file__).resolve().parents[1] / "golden" / "resnet_tiny_int8.profile.json"
    root = tmp_path / "sweep"
    code, _, err = run(capsys, "sweep", INT8, "--profile", profile, "--hardware", "arm-a72",
                       "--crossbars", "8,50", "--workers", "1", "-q", "-o", root)  # fmt: skip
    assert code == 0, err
    assert json.loads((root / "manifest.json").read_text())["hardware"][0]["cim"]["t_mvm_ns"] != 50
    code, _, err = run(capsys, "report", root, "-o", root / "report.md", "-q")
    assert code == 0, err
    text = (root / "report.md").read_text()
    head = text.split("## Host latencies")[0]
    # the swept values, not the preset's 100 crossbars (never solved)
    assert "- **hardware arm-a72**: crossbars 8 / 50 (swept), crossbar_rows 256," \
           " crossbar_cols 256, t_mvm_ns 50, bus_gbps 10.24" in head  # fmt: skip
    assert "- **grid**: hardware arm-a72; parameters crossbars 8, 50\n" in head
    assert "- **solver**: time_limit 600, rel_gap 0.0001, threads 1," in head
    # 6 significant digits need at most 10 decimals (0.000123457); float noise has more
    assert not re.search(r"[{}\[\]]|\d\.\d{11,}|e-\d\d", head), head
    summary = text.split("## Summary per model and hardware")[1].split("##")[0]
    (row,) = [ln for ln in summary.splitlines() if ln.startswith("| resnet_tiny_int8")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[7] == "crossbars=50" and cells[-1] == "0%", cells  # at, max gap
    assert re.fullmatch(r"[\d.]+ (s|ms|us)", cells[8]), cells  # median solve, with its unit
    table = [[c.strip() for c in ln.strip("|").split("|")]
             for ln in text.split("## All points")[1].splitlines() if ln.startswith("|")]
    gaps = [r[table[0].index("gap")] for r in table[2:]]
    assert gaps == ["0%", "0%"], gaps  # exact in points.csv
    # times with units; no point ids or host details (those are in points.csv)
    assert table[0][:2] == ["crossbars", "status"], table[0]
    for column in ("makespan", "CPU-only", "solve"):
        assert all(re.fullmatch(r"[\d.]+ (s|ms|us|ns)", r[table[0].index(column)])
                   for r in table[2:]), column  # fmt: skip
    assert len(table[0]) <= 12


@pytest.mark.integration
def test_two_networks_get_the_per_network_figure(capsys, tmp_path, cim_points):
    rows, docs = cim_points
    other = [dict(r, model="other_net.onnx", point_id=f"{r['point_id']}b") for r in rows]
    root = write_sweep(tmp_path / "sweep", "cim", rows + other, docs, ["crossbars", "t_mvm_ns"])
    code, out, err = run(capsys, "report", root, "--format", "md", "-q")
    assert code == 0, err
    assert {"speedup_per_network_50ns.png", "speedup_per_network_500ns.png"} <= _figures(root)
    table = (root / "report.md").read_text().split("## All points")[1]
    assert "| model | hardware | crossbars |" in table  # several models: a model column
    assert not (root / "report.html").exists()  # --format: that page only


def _sweep(rows: list[dict]) -> Sweep:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return Sweep(Path("s"), {"target": "cim"}, rows, columns)


@pytest.mark.unit
def test_ties_for_the_best_speed_up_are_named():
    def row(crossbars: int, speedup: float) -> dict:
        return {"model": "m.onnx", "hardware": "hw", "crossbars": crossbars,
                "status": "optimal", "speedup": speedup, "solve_seconds": 8.2e-05}  # fmt: skip

    # 3.0 and 3.0 * (1 + 1e-12) are one value (float noise); 2.999 is not.
    tied = [row(25, 2.999), row(50, 3.0), row(100, 3.0 * (1 + 1e-12)), row(200, 3.0)]
    header, summary = summary_rows(_sweep(tied))
    at, best = summary[header.index("at")], summary[header.index("best speed-up")]
    assert best == "3.00x"
    assert at == "crossbars=50; crossbars=100; crossbars=200 (3 points tie)"
    assert summary[header.index("median solve")] == "82 us"
    five = [row(c, 3.0) for c in (1, 2, 3, 4, 5)]
    _, summary = summary_rows(_sweep(five))
    assert summary[header.index("at")] == (
        "crossbars=1; crossbars=2; crossbars=3; +2 more (5 points tie)")
    _, summary = summary_rows(_sweep([row(25, 2.0), row(50, 3.0)]))
    assert summary[header.index("at")] == "crossbars=50"


@pytest.mark.unit
@pytest.mark.parametrize(("measured", "named", "same"), [
    ("AMD Ryzen 9 3900X 12-Core Processor", "AMD Ryzen 9 3900X (1 core)", True),
    ("AMD EPYC", "AMD Ryzen 9 3900X (1 core)", False),
    ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "Intel Xeon Gold 6248", True),
    ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", "Intel Xeon Gold 6148", False),
])  # fmt: skip
def test_host_match_compares_cpu_models(measured, named, same):
    host = HostSpec(named, "x86_64")
    source = host_latency_source("hw", host, {"machine": "x86_64", "cpu": measured})
    assert source.same_cpu is same and not source.mismatch
    assert host_latency_source("hw", host, {"machine": "x86_64"}).same_cpu is None
