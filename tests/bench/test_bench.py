"""``placement bench`` end to end, the Table-I summary, and ``placement export`` / write_model."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import highspy
import pyomo.environ as pyo
import pytest
from cli_helpers import run
from oracles import random_instance

from placement import cim, load_graph, load_hardware
from placement.bench.export import write_model
from placement.bench.run import COLUMNS, parse_grid
from placement.bench.summary import format_summary, summarize
from placement.cim.pipeline import build_model, solve
from placement.errors import PlacementError
from placement.models.cim_makespan.build import FORMULATIONS, build_cim_model
from placement.profiling.host_profile import HostProfile

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
GOLDEN_PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"


def _highs_objective(path: Path) -> float:
    """The optimum HiGHS finds for a model file. Reading may warn (kWarning) without harm:
    a coefficient that is float noise, e.g. T_host - T_acc of an operator whose two
    latencies agree to the last bits (both whole microseconds), is below HiGHS's 1e-9
    and dropped, as it should be; only an error means the file is unusable."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(str(path)) in (highspy.HighsStatus.kOk, highspy.HighsStatus.kWarning)
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    return h.getInfo().objective_function_value


@pytest.mark.solver
@pytest.mark.parametrize("suffix", [".mps", ".lp"])
@pytest.mark.parametrize("formulation", list(FORMULATIONS))
def test_exported_model_solves_to_the_same_objective(tmp_path, suffix, formulation):
    inst = random_instance(random.Random(11), 8)
    ref = solve(inst, solver="highs", threads=1).result.objective  # seconds
    model = build_model(inst, formulation)
    path = write_model(model, tmp_path / f"cim{suffix}")
    text = path.read_text()
    assert "host" in text and "makespan" in text  # symbolic names
    # The file is in the model's time unit: objective x time_unit = seconds.
    assert _highs_objective(path) * pyo.value(model.time_unit) == pytest.approx(ref, rel=1e-4)


@pytest.mark.unit
def test_write_model_rejects_unknown_suffix(tmp_path):
    model = build_cim_model(random_instance(random.Random(1), 3))
    with pytest.raises(PlacementError, match="use .mps or .lp"):
        write_model(model, tmp_path / "m.txt")
    assert not list(tmp_path.iterdir())


@pytest.mark.unit
def test_parse_grid():
    assert len(parse_grid("paper")) == 16
    assert parse_grid("single") == ((None, None),)
    assert parse_grid("25,100x50") == ((25, 50.0), (100, 50.0))
    with pytest.raises(PlacementError, match="grid 'nope'"):
        parse_grid("nope")


@pytest.mark.integration
def test_bench_end_to_end_writes_verified_rows(capsys, tmp_path):
    out = tmp_path / "bench"
    code, stdout, err = run(
        capsys, "bench", INT8, "--grid", "50,100x50,1000", "--solvers", "highs",
        "--time-limit", "20", "--solver-threads", "1", "--profile-runs", "3", "-o", out,
    )
    assert code == 0, err
    with (out / "runs.csv").open() as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    assert len(rows) == 4 * 2  # grid points x (faithful, tightened)
    assert all(r["verified"] == "True" and r["status"] == "optimal" for r in rows)
    assert {r["formulation"] for r in rows} == {"faithful", "tightened"}
    assert all(int(r["operators"]) > 0 and int(r["constraints"]) > 0 for r in rows)
    assert len(json.loads((out / "runs.json").read_text())) == 8
    assert "gap%" in stdout and "resnet_tiny_int8 on arm-a72 (17 operators)" in stdout
    assert (out / "summary.txt").exists() and (out / "summary.csv").exists()
    assert "[8/8" in err  # progress lines
    profiles = list((out / "profiles").glob("*.json"))
    assert len(profiles) == 1

    # A rerun reuses the cached profile (same latencies: same instances).
    code, _, err = run(capsys, "bench", INT8, "--grid", "single", "--formulations", "tightened",
                       "--time-limit", "20", "-o", out)
    assert code == 0 and "profile reused" in err


@pytest.mark.integration
def test_bench_auto_is_the_product_default_beside_faithful(capsys, tmp_path):
    """``--solvers auto`` runs what ``placement solve`` runs; both proven optima agree."""
    out = tmp_path / "bench"
    code, _, err = run(
        capsys, "bench", INT8, "--grid", "25,100x50", "--formulations", "faithful",
        "--solvers", "highs,auto", "--time-limit", "20", "--solver-threads", "1",
        "--profile-runs", "3", "-o", out,
    )
    assert code == 0, err
    with (out / "runs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["formulation"], r["solver"]) for r in rows) == [
        ("auto", "auto"), ("auto", "auto"), ("faithful", "highs"), ("faithful", "highs")]
    for crossbars in ("25", "100"):
        pair = {r["solver"]: r for r in rows if r["crossbars"] == crossbars}
        assert all(r["status"] == "optimal" and r["verified"] == "True" for r in pair.values())
        auto, faithful = float(pair["auto"]["objective_s"]), float(pair["highs"]["objective_s"])
        assert auto == pytest.approx(faithful, rel=2e-4)
        assert pair["auto"]["message"].startswith("ran ")  # what auto stood for


@pytest.mark.unit
def test_bench_unknown_solver_is_one_clear_line(capsys, tmp_path):
    code, _, err = run(capsys, "bench", INT8, "--solvers", "highs,nosuch", "-o", tmp_path)
    assert code == 1
    assert "placement: error: unknown solver 'nosuch'" in err
    assert "Traceback" not in err


@pytest.mark.unit
def test_bench_unavailable_solver_is_one_clear_line(capsys, tmp_path, monkeypatch):
    from placement.solvers.registry import BACKENDS

    for name, backend in BACKENDS.items():
        if name != "highs":
            monkeypatch.setattr(backend, "unavailable_reason",
                                lambda n=name: f"{n} is not available: pip install")
    code, _, err = run(capsys, "bench", INT8, "--solvers", "highs,scip", "-o", tmp_path)
    assert code == 1
    assert "solver scip is unavailable: scip is not available: pip install" in err
    assert "--skip-unavailable" in err
    assert not (tmp_path / "runs.csv").exists()  # nothing ran


@pytest.mark.unit
def test_summary_is_table_one_shaped():
    rows = []
    for i, (status, gap) in enumerate([("optimal", 0.0), ("time_limit", 0.02)]):
        row = dict.fromkeys(COLUMNS)
        row.update(network="net", hardware="hw", formulation="faithful", solver="highs",
                   operators=10, variables=30, binaries=20, constraints=50, status=status,
                   gap=gap, verified=True, total_s=1.0 + i, solve_s=0.5, build_share=0.1)
        rows.append(row)
    (s,) = summarize(rows)
    assert s["optimal"] == 1 and s["runs"] == 2 and s["verified"] == 2
    assert s["mean_gap"] == pytest.approx(0.01) and s["max_gap"] == pytest.approx(0.02)
    assert s["mean_total_s"] == pytest.approx(1.5)
    text = "\n".join(format_summary([s]))
    assert "1/2" in text and "1.000" in text


@pytest.mark.integration
def test_export_cli_writes_a_solvable_file_and_sidecar(capsys, tmp_path):
    # A saved profile, so that the file's optimum can be compared with solve's on the same
    # latencies (a fresh measurement differs from run to run).
    out = tmp_path / "tiny.mps"
    code, stdout, err = run(capsys, "export", INT8, "-o", out, "--hardware", "arm-a72",
                            "--profile", GOLDEN_PROFILE, "-q")
    assert code == 0, err
    meta = json.loads((tmp_path / "tiny.mps.json").read_text())
    # the default, auto, stands for bounded on this near-chain graph (as in `solve`)
    assert meta["formulation"] == "bounded" and meta["time_unit_seconds"] > 0
    assert "objective x" in stdout
    graph = load_graph(INT8)
    instance = cim.build_instance(graph, HostProfile.load(GOLDEN_PROFILE),
                                  load_hardware("arm-a72"))
    optimum = solve(instance, solver="highs", rel_gap=0.0, threads=1).result.objective
    exported = _highs_objective(out) * meta["time_unit_seconds"]
    assert exported == pytest.approx(optimum, rel=1e-6)


@pytest.mark.unit
def test_export_cli_rejects_bad_suffix(capsys, tmp_path):
    code, _, err = run(capsys, "export", INT8, "-o", tmp_path / "x.txt")
    assert code == 1 and "must end in .mps or .lp" in err


@pytest.mark.slow
def test_bench_cpsat_modes_and_other_solvers(capsys, tmp_path):
    from placement.bench.run import check_solvers

    wanted = [s for s, why in check_solvers(["scip", "cbc", "cpsat", "cpsat+highs"]).items()
              if why is None]
    if not wanted:
        pytest.skip("no second solver installed")
    code, _, err = run(capsys, "bench", INT8, "--grid", "25x50,1000", "--solvers",
                       ",".join(wanted), "--time-limit", "20", "-o", tmp_path)
    assert code == 0, err
    rows = json.loads((tmp_path / "runs.json").read_text())
    assert rows and all(r["verified"] for r in rows)
    by_point: dict[tuple, set] = {}
    for r in rows:
        by_point.setdefault((r["crossbars"], r["t_mvm_ns"]), set()).add(round(r["objective_s"], 9))
    for objs in by_point.values():  # every solver finds the same optimum
        assert max(objs) - min(objs) <= 1e-4 * max(objs)


@pytest.mark.unit
def test_bench_threads_is_a_deprecated_spelling_of_solver_threads(capsys):
    from placement.cli import build_parser
    from placement.cli.bench import solver_threads

    def threads(*flags: str) -> int:
        return solver_threads(build_parser().parse_args(["bench", "resnet18", *flags]))

    assert threads() == 2 and threads("--solver-threads", "3") == 3
    assert capsys.readouterr().err == ""
    assert threads("--threads", "1") == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("placement: warning: bench --threads is deprecated: use --solver-thr")
    with pytest.raises(PlacementError, match="give only --solver-threads"):
        threads("--threads", "1", "--solver-threads", "2")
    with pytest.raises(PlacementError, match="--solver-threads must be at least 1, got 0"):
        threads("--solver-threads", "0")
