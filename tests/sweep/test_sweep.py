"""`placement sweep`: grid expansion, resume, executors giving identical rows, monotonicity
of the optimum in the hardware, the PIM target, and one clear line for every bad input."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from onnx import helper
from onnx_builders import model, save, tensor

from placement.errors import PlacementError
from placement.graph import load_graph
from placement.hardware.cim import load_hardware
from placement.profiling.host_profile import HostProfile
from placement.solvers.registry import BACKENDS
from placement.sweep.grid import Grid, build_grid, parse_setting, parse_values
from placement.sweep.plan import RESULT_COLUMNS, ModelInput, SolverOptions, plan_points
from placement.sweep.run import run_sweep

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
TIMING = {"solve_seconds"}  # the only column allowed to differ between runs


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    """A saved host profile of the bundled example with fixed latencies (deterministic)."""
    graph = load_graph(str(INT8))
    latencies = {name: 1e-5 * (1 + i % 5) for i, name in enumerate(graph.operators)}
    latencies |= dict.fromkeys(graph.folded, 0.0)
    prof = HostProfile(
        latencies=latencies,
        model_sha256=graph.sha256,
        model_path=str(INT8),
        metadata={"machine": "x86_64", "runs": 0, "note": "synthetic test fixture"},
        kernel_total=math.fsum(latencies.values()),
    )
    path = tmp_path_factory.mktemp("sweep") / "int8.profile.json"
    prof.save(path)
    return path


def sweep(profile: Path, out: Path, grid: Grid, **kwargs):
    return run_sweep("cim", [INT8], grid, out, profiles=[profile], **kwargs)


def strip(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


# --------------------------------------------------------------------------- grid


@pytest.mark.unit
def test_grid_expansion_order_ids_and_values():
    grid = build_grid(
        "cim", ["arm-a72", "x86-ryzen"], [("crossbars", "25,50,100"), ("t-mvm-ns", "50,1e3")]
    )
    assert grid.parameters == (("crossbars", (25, 50, 100)), ("t_mvm_ns", (50.0, 1000.0)))
    combos = grid.combinations()
    assert combos[0] == {"crossbars": 25, "t_mvm_ns": 50.0} and len(combos) == 6
    assert grid.size_per_model == 12
    m = ModelInput("net", "net.onnx", "ab" * 32)
    hw = [load_hardware(h) for h in grid.hardware]
    points = plan_points("cim", [m], hw, grid)
    ids = [p.point_id for p, _, _ in points]
    assert len(set(ids)) == 12
    assert ids == [p.point_id for p, _, _ in plan_points("cim", [m], hw, grid)]  # stable
    assert ids[0].startswith("net.arm-a72.crossbars=25.t_mvm_ns=50.")
    first_hw = points[0][2]
    assert first_hw.cim.crossbars == 25 and first_hw.cim.t_mvm == pytest.approx(50e-9)
    # nothing swept: one point per model x hardware
    assert len(Grid("cim", ("arm-a72",)).combinations()) == 1
    square = plan_points(
        "cim", [m], hw[:1], build_grid("cim", ["arm-a72"], [("crossbar_size", "64")])
    )
    assert square[0][2].cim.crossbar_rows == square[0][2].cim.crossbar_cols == 64


@pytest.mark.unit
def test_pim_keys_are_the_pim_preset_keys():
    assert parse_setting("pim", "t_sw_us=1,2.5") == ("t_sw_us", (1.0, 2.5))
    assert parse_values("pim", "cores", "32,64") == (32, 64)
    with pytest.raises(PlacementError, match="known: .*cores.*t_sw_us"):
        parse_values("pim", "crossbars", "25")


@pytest.mark.parametrize(
    "key, text, fragment",
    [
        ("crossbars", "", "empty"),
        ("crossbars", "25,,50", "''"),
        ("crossbars", "25,abc", "'abc'"),
        ("crossbars", "0", "positive"),
        ("crossbars", "-5", "positive"),
        ("crossbars", "12.5", "whole number"),
        ("t_mvm_ns", "nan", "positive numbers"),
        ("t_mvm_ns", "inf", "positive numbers"),
        ("crossbar", "25", "known: crossbars, crossbar_rows"),
        ("crossbars", "25,50,25,50", "grid value 25, 50 for 'crossbars' is given twice"),
        ("t_mvm_ns", "50,5e1", "grid value 50 for 't_mvm_ns' is given twice"),
    ],
)
@pytest.mark.unit
def test_bad_grid_values(key, text, fragment):
    with pytest.raises(PlacementError) as info:
        parse_values("cim", key, text)
    assert fragment in str(info.value)


@pytest.mark.unit
def test_bad_grid_values_on_the_command_line(capsys, profile, tmp_path):
    base = ["sweep", INT8, "--profile", profile, "-o", tmp_path / "s", "-q"]
    code, _, err = run(capsys, *base, "--set", "crossbarz=1,2")
    assert_one_line_error(code, err, "crossbarz", "known:", "t_mvm_ns")
    code, _, err = run(capsys, *base, "--crossbars", "")
    assert_one_line_error(code, err, "empty")
    code, _, err = run(capsys, *base, "--set", "crossbars")
    assert_one_line_error(code, err, "KEY=V1,V2")
    code, _, err = run(capsys, *base, "--crossbars", "25", "--set", "crossbars=50")
    assert_one_line_error(code, err, "swept twice")
    code, _, err = run(capsys, *base, "--pim-cores", "32")
    assert_one_line_error(code, err, "--pim-cores", "--target cim")
    code, _, err = run(capsys, *base, "--hardware", "arm-a72,,x86-ryzen")
    assert_one_line_error(code, err, "empty name")
    assert not (tmp_path / "s").exists()  # nothing written for bad input


# --------------------------------------------------------------------------- runs


@pytest.mark.integration
def test_cli_sweep_layout_and_schema(capsys, profile, tmp_path):
    out = tmp_path / "sweep"
    code, stdout, err = run(
        capsys, "sweep", INT8, "--target", "cim", "--profile", profile,
        "--hardware", "arm-a72,x86-ryzen", "--crossbars", "2,8", "--t-mvm-ns", "50,1000",
        "--set", "crossbar_size=16,256", "--workers", "1", "-o", out,
    )  # fmt: skip
    assert code == 0, err
    assert "sweep: 16/16 points (100%)" in err
    # per hardware a heading, the column names and its 8 points
    lines = stdout.splitlines()
    headings = [ln.split(":")[0] for ln in lines if ln and not ln.startswith(" ")]
    assert headings == ["resnet_tiny_int8 on arm-a72", "resnet_tiny_int8 on x86-ryzen"]
    rows = [ln for ln in lines if ln.startswith("  ") and not ln.split()[0] == "crossbars"]
    assert len(rows) == 16
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("target", "models", "grid", "hardware", "solver", "placement_version", "created"):
        assert key in manifest
    assert manifest["grid"]["parameters"] == {
        "crossbars": [2, 8], "t_mvm_ns": [50.0, 1000.0], "crossbar_size": [16, 256]
    }  # fmt: skip
    assert manifest["solver"] == {"time_limit": 600.0, "rel_gap": 1e-4, "threads": 1,
                                  "formulation": "auto", "solver": "auto"}
    (m,) = manifest["models"]
    assert m["sha256"] == load_graph(str(INT8)).sha256
    assert (out / m["profile"]).is_file() and m[
        "profile"
    ] == f"profiles/resnet_tiny_int8.{m['sha256'][:12]}.json"
    with (out / "points.csv").open() as fh:
        table = list(csv.reader(fh))
    columns = ["point_id", "target", "model", "hardware", "crossbars", "t_mvm_ns",
               "crossbar_size", *RESULT_COLUMNS]  # fmt: skip
    assert table[0] == columns and len(table) == 17
    rows = json.loads((out / "points.json").read_text())
    assert [list(r) for r in rows] == [columns] * 16
    assert [r["point_id"] for r in rows] == sorted(r["point_id"] for r in rows)
    assert [r[0] for r in table[1:]] == [r["point_id"] for r in rows]
    ok = [r for r in rows if r["status"] == "optimal"]
    failed = [r for r in rows if r["status"] == "error"]
    # 16x16 crossbars: 2 are too few for any operator -> error rows, and a warning
    assert failed and all(r["crossbars"] == 2 and r["crossbar_size"] == 16 for r in failed)
    assert all("fits no operator" in r["message"] for r in failed)
    assert "warning: " in err and "failed" in err
    for r in ok:
        assert r["verified"] is True and r["message"] is None
        assert r["speedup"] == pytest.approx(r["cpu_only_s"] / r["objective_s"])
        assert 0 <= r["crossbars_used"] <= r["crossbars"]
        assert r["n_operators"] == 17 and r["host_busy_s"] >= 0 and r["accel_busy_s"] >= 0
        doc = json.loads((out / "schedules" / f"{r['point_id']}.json").read_text())
        assert doc["makespan"] == r["objective_s"] and doc["verification"]["ok"]
        assert doc["point"]["params"]["crossbars"] == r["crossbars"]
        assert doc["hardware"]["cim"]["crossbars"] == r["crossbars"]
        assert len(doc["schedule"]["operators"]) == 17
    csv_rows = [dict(zip(columns, line, strict=True)) for line in table[1:]]
    assert {r["verified"] for r in csv_rows} == {"true", ""}  # empty: failed points
    assert {r["crossbars_used"] == "" for r in csv_rows if r["status"] == "error"} == {True}


@pytest.mark.integration
def test_resume_after_interrupt_skips_done_points(profile, tmp_path):
    grid = build_grid("cim", ["x86-ryzen"], [("crossbars", "1,4"), ("t_mvm_ns", "50,500")])
    full = sweep(profile, tmp_path / "full", grid)
    out = tmp_path / "s"
    seen = []

    def stop_after_two(done, total, resumed):
        seen.append(done)
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(profile, out, grid, progress=stop_after_two)
    assert len((out / "points.jsonl").read_text().splitlines()) == 2
    assert not (out / "points.csv").exists()
    # a crash mid-line leaves a torn record: it is dropped, the point solved again
    with (out / "points.jsonl").open("a") as fh:
        fh.write('{"point_id": "resnet')
    result = sweep(profile, out, grid)
    assert (result.resumed, result.solved) == (2, 2)
    assert strip(result.rows) == strip(full.rows)
    assert strip(json.loads((out / "points.json").read_text())) == strip(full.rows)
    # again: everything is done, nothing solved
    again = sweep(profile, out, grid)
    assert (again.resumed, again.solved) == (4, 0)


@pytest.mark.integration
def test_directory_of_another_sweep_is_refused_and_kept(capsys, profile, tmp_path):
    out = tmp_path / "s"
    base = ["sweep", INT8, "--profile", profile, "--hardware", "x86-ryzen", "-o", out, "-q"]
    code, _, err = run(capsys, *base, "--crossbars", "4")
    assert code == 0, err
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    other = save(
        model([helper.make_node("Relu", ["X"], ["Y"])], [tensor("X", [4, 4])],
              [tensor("Y", [4, 4])]), tmp_path, "other.onnx",
    )  # fmt: skip
    code, _, err = run(capsys, "sweep", other, "-o", out, "-q", "--hardware", "x86-ryzen")
    assert_one_line_error(code, err, "holds another sweep", "resnet_tiny_int8", "--force")
    code, _, err = run(capsys, *base, "--crossbars", "4,8")
    assert_one_line_error(code, err, "another grid", "--force")
    code, _, err = run(capsys, *base, "--crossbars", "4", "--gap", "0.01")
    assert_one_line_error(code, err, "solver options")
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # nothing lost
    code, _, err = run(capsys, *base, "--crossbars", "4,8", "--force")
    assert code == 0, err
    assert len(json.loads((out / "points.json").read_text())) == 2
    # a directory that is not a sweep
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine")
    code, _, err = run(capsys, *base[:-3], "-o", junk, "-q")
    assert_one_line_error(code, err, "not a sweep directory")
    assert (junk / "notes.txt").read_text() == "mine"


@pytest.mark.integration
def test_unreachable_scheduler_is_one_line_and_leaves_nothing(capsys, profile, tmp_path):
    # (how long it takes is measured, not asserted: the machines are shared and noisy)
    code, _, err = run(
        capsys, "sweep", INT8, "--profile", profile, "-o", tmp_path / "s", "-q",
        "--scheduler", "tcp://127.0.0.1:1", "--scheduler-timeout", "1",
    )  # fmt: skip
    assert_one_line_error(code, err, "cannot connect to the Dask scheduler", "127.0.0.1:1")
    assert not (tmp_path / "s").exists()


@pytest.mark.integration
def test_identical_rows_with_1_and_2_workers_and_dask(profile, tmp_path):
    distributed = pytest.importorskip("distributed")
    grid = build_grid(
        "cim", ["arm-a72", "x86-ryzen"], [("crossbars", "2,8"), ("t_mvm_ns", "50,500")]
    )
    one = sweep(profile, tmp_path / "w1", grid, workers=1)
    two = sweep(profile, tmp_path / "w2", grid, workers=2)
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        dask = sweep(profile, tmp_path / "dask", grid, scheduler=cluster.scheduler_address)
    assert len(one.rows) == 8 and all(r["status"] == "optimal" for r in one.rows)
    assert strip(one.rows) == strip(two.rows) == strip(dask.rows)
    for r in one.rows:  # the assignments too (HiGHS on one thread is deterministic)
        docs = [
            json.loads((tmp_path / d / "schedules" / f"{r['point_id']}.json").read_text())
            for d in ("w1", "w2", "dask")
        ]
        assert docs[0]["schedule"] == docs[1]["schedule"] == docs[2]["schedule"]


@pytest.mark.integration
def test_monotone_in_crossbars_and_mvm_latency(profile, tmp_path):
    """More crossbars never increase the optimal makespan; a slower MVM never decreases it."""
    grid = build_grid(
        "cim", ["x86-ryzen"], [("crossbars", "1,2,4,8,32"), ("t_mvm_ns", "20,50,200,1000")]
    )
    result = sweep(profile, tmp_path / "s", grid, options=SolverOptions(rel_gap=1e-6))
    obj = {(r["crossbars"], r["t_mvm_ns"]): r["objective_s"] for r in result.rows}
    assert all(r["status"] == "optimal" for r in result.rows)
    tol = 1e-6
    cs, ts = [1, 2, 4, 8, 32], [20.0, 50.0, 200.0, 1000.0]
    for t in ts:
        for a, b in zip(cs, cs[1:], strict=False):
            assert obj[b, t] <= obj[a, t] * (1 + tol), (a, b, t)
    for c in cs:
        for a, b in zip(ts, ts[1:], strict=False):
            assert obj[c, b] >= obj[c, a] * (1 - tol), (c, a, b)
    # the grid is not degenerate: the budget and the MVM latency both matter
    assert obj[1, 20.0] > obj[32, 20.0] and obj[32, 1000.0] > obj[32, 20.0]


@pytest.mark.slow
def test_monotone_rows_on_yolov5n_at_a_short_time_limit(tmp_path):
    """The YOLOv5n int8 graph (244 operators, ~1,900 parallel pairs): at 2 s per point most
    points are not proven optimal, yet every run reports makespans monotone in crossbars
    and MVM latency and never above CPU-only, with 1 and 2 workers and on Dask. Time-limited
    points may differ between runs (the time limit is wall clock), proven ones may not."""
    distributed = pytest.importorskip("distributed")
    from placement.networks.zoo import network_path

    path = network_path("yolov5n", int8=True)
    graph = load_graph(str(path))
    latencies = {name: 1e-9 * max(op.n_out, 1) for name, op in graph.operators.items()}
    latencies |= dict.fromkeys(graph.folded, 0.0)
    prof = HostProfile(latencies=latencies, model_sha256=graph.sha256, model_path=str(path),
                       metadata={"machine": "aarch64", "runs": 0, "note": "synthetic"},
                       kernel_total=math.fsum(latencies.values()))  # fmt: skip
    prof.save(tmp_path / "yolo.profile.json")
    grid = build_grid("cim", ["arm-a72"], [("crossbars", "25,50,100"), ("t_mvm_ns", "50,500")])
    options = SolverOptions(time_limit=2.0)

    def run_yolo(out: str, **kwargs):
        return run_sweep("cim", [path], grid, tmp_path / out, options=options,
                         profiles=[tmp_path / "yolo.profile.json"], **kwargs).rows  # fmt: skip

    runs = [run_yolo("w1", workers=1), run_yolo("w2", workers=2)]
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        runs.append(run_yolo("dask", scheduler=cluster.scheduler_address))
    cs, ts = [25, 50, 100], [50.0, 500.0]
    for rows in runs:
        assert all(r["verified"] for r in rows)
        obj = {(r["crossbars"], r["t_mvm_ns"]): r["objective_s"] for r in rows}
        assert all(r["objective_s"] <= r["cpu_only_s"] * (1 + 1e-12) for r in rows)
        for t in ts:
            for a, b in zip(cs, cs[1:], strict=False):
                assert obj[b, t] <= obj[a, t] * (1 + 1e-12), (a, b, t)
        for c in cs:
            assert obj[c, 500.0] >= obj[c, 50.0] * (1 - 1e-12), c
    proven = [{r["point_id"]: r["objective_s"] for r in rows if r["status"] == "optimal"}
              for rows in runs]  # fmt: skip
    for pid in set(proven[0]) & set(proven[1]) & set(proven[2]):
        values = [p[pid] for p in proven]
        assert max(values) <= min(values) * (1 + 1e-4), pid  # equal within the gap


# --------------------------------------------------------------------------- PIM


@pytest.mark.integration
def test_pim_sweep_on_an_elementwise_add(capsys, tmp_path):
    pytest.importorskip("torch_mlir")
    from placement.profiling.nest_measure import profile_nests

    add = helper.make_node("Add", ["A", "B"], ["C"], name="add0")
    onnx_path = save(
        model([add], [tensor("A", [128, 128]), tensor("B", [128, 128])], [tensor("C", [128, 128])]),
        tmp_path, "add.onnx",
    )  # fmt: skip
    prof = profile_nests(onnx_path, runs=2, warmup=1, counters=False, min_seconds=0)
    prof.save(tmp_path / "add.nests.json")
    out = tmp_path / "pim"
    code, stdout, err = run(
        capsys, "sweep", onnx_path, "--target", "pim", "--profile", tmp_path / "add.nests.json",
        "--pim-cores", "32,128", "--set", "t_sw_us=0.5,50", "-o", out, "-q", "--workers", "1",
    )  # fmt: skip
    assert code == 0, err
    rows = json.loads((out / "points.json").read_text())
    assert len(rows) == 4 and list(rows[0])[4:6] == ["cores", "t_sw_us"]
    for r in rows:
        assert r["target"] == "pim" and r["status"] == "optimal" and r["verified"] is True
        assert r["crossbars_used"] is None and r["n_nests"] == len(prof.nests)
        assert r["n_operators"] == 1  # the ONNX nodes (one Add), not its nests
        doc = json.loads((out / "schedules" / f"{r['point_id']}.json").read_text())
        assert doc["hybrid"]["total"] == r["objective_s"] and "rule" in doc
        assert doc["n_cores"] == r["cores"]
    by = {(r["cores"], r["t_sw_us"]): r["objective_s"] for r in rows}
    for c in (32, 128):  # a costlier switch never makes the optimum faster
        assert by[c, 50.0] >= by[c, 0.5] * (1 - 1e-9)
    code, _, err = run(capsys, "sweep", onnx_path, "--target", "pim", "-o", tmp_path / "x",
                       "--set", "crossbars=4")  # fmt: skip
    assert_one_line_error(code, err, "unknown PIM spec field 'crossbars'", "cores")
    # --solver reaches a PIM sweep's MIP (SCIP where installed), a CIM-only solver does not
    code, _, err = run(capsys, "sweep", onnx_path, "--target", "pim", "-o", tmp_path / "y",
                       "--profile", tmp_path / "add.nests.json", "--solver", "cpsat")  # fmt: skip
    assert_one_line_error(code, err, "--solver cpsat: a CIM solver", "highs")
    if BACKENDS["scip"].unavailable_reason() is None:
        scip = tmp_path / "scip"
        code, _, err = run(
            capsys, "sweep", onnx_path, "--target", "pim", "--profile", tmp_path / "add.nests.json",
            "--pim-cores", "32,128", "-o", scip, "-q", "--workers", "1", "--solver", "scip",
        )  # fmt: skip
        assert code == 0, err
        doc = next((scip / "schedules").glob("*.json"))
        assert json.loads(doc.read_text())["result"]["solver"].startswith("scip")
