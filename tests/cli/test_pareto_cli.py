"""``placement pareto`` and ``placement solve --objective``, end to end on the bundled int8
model with the saved profile: the front's files, resume, bad input, and a solve for
another objective that states its energy and frame rate."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "resnet_tiny_int8.onnx"
PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"
HW = ("--profile", PROFILE, "--hardware", "arm-a72", "--crossbars", "50", "--t-mvm-ns", "100")


@pytest.mark.integration
def test_a_front_is_written_complete_and_resumes(capsys, tmp_path):
    out = tmp_path / "front"
    code, stdout, err = run(capsys, "pareto", MODEL, "--axes", "latency,energy", *HW, "-o", out,
                            "-q")  # fmt: skip
    assert code == 0, err
    assert "complete (no further point exists)" in stdout
    rows = list(csv.DictReader((out / "front.csv").open()))
    assert len(rows) >= 2 and {r["status"] for r in rows} == {"optimal"}
    latency = [float(r["latency_s"]) for r in rows]
    energy = [float(r["energy_j"]) for r in rows]
    assert latency == sorted(latency) and energy == sorted(energy, reverse=True)  # a front
    assert list(rows[0])[:5] == ["point_id", "step", "role", "latency_s", "energy_j"]
    for name in ("front.png", "report.md", "front.json", "manifest.json", "points.jsonl"):
        assert (out / name).is_file(), name
    report = (out / "report.md").read_text()
    assert "complete" in report and "placement pareto" in report and "estimate" in report
    doc = json.loads((out / "schedules" / f"{rows[0]['point_id']}.json").read_text())
    assert doc["verification"]["ok"] and doc["stream"]["ok"] and "recomputed_energy" in \
        doc["verification"]  # fmt: skip
    # the same command again: everything resumed, nothing solved, the same front
    code, again, err = run(capsys, "pareto", MODEL, "--axes", "latency,energy", *HW, "-o", out)
    assert code == 0 and "resuming" in err and "0 now" in err
    assert list(csv.DictReader((out / "front.csv").open())) == rows
    # another front in the same directory is refused, nothing touched
    code, _, err = run(capsys, "pareto", MODEL, "--axes", "latency,throughput", *HW, "-o", out)
    assert_one_line_error(code, err, "holds another sweep")


@pytest.mark.integration
@pytest.mark.parametrize("argv, words", [
    (("--axes", "latency"), "two or three axes"),
    (("--axes", "latency,speed"), "unknown axis"),
    (("--axes", "latency,energy", "--step", "1e-9"), "--step"),
    (("--axes", "latency,energy", "--min-fps", "-3"), "--min-fps"),
])  # fmt: skip
def test_bad_pareto_input_is_one_line_and_writes_nothing(capsys, tmp_path, argv, words):
    out = tmp_path / "front"
    code, _, err = run(capsys, "pareto", MODEL, *argv, *HW, "-o", out)
    assert_one_line_error(code, err, words)
    assert not out.exists()


@pytest.mark.integration
def test_solve_for_energy_under_a_latency_bound_states_what_it_found(capsys, tmp_path):
    code, out, err = run(capsys, "solve", MODEL, *HW, "--objective", "energy",
                         "--max-latency-ms", "0.555", "--json", tmp_path / "r.json")  # fmt: skip
    assert code == 0, err
    assert "objective: minimum energy, latency <= 555 us" in out
    assert "energy per inference:" in out and "  host: estimate" in out
    assert "  CIM: modelled" in out and "pipelined stream:" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["makespan"] <= 0.555e-3 * (1 + 1e-6)
    assert doc["energy"]["source"]["host"] == "estimate"
    assert doc["energy"]["total_j"] == pytest.approx(doc["verification"]["recomputed_energy"])
    code, _, err = run(capsys, "solve", MODEL, *HW, "--objective", "energy", "--max-latency-ms",
                       "0.01", "--json", tmp_path / "none.json")  # fmt: skip
    assert_one_line_error(code, err, "proven infeasible")
    assert not (tmp_path / "none.json").exists()
    code, _, err = run(capsys, "solve", MODEL, *HW, "--objective", "energy", "--method",
                       "decomposition")  # fmt: skip
    assert_one_line_error(code, err, "latency objective only")
