"""`placement calibrate --target pim` end to end on a tiny GEMV, and its bad inputs.

The GEMV (x[1,1024] @ W[1024,1024], 4 MiB of weights) has two nests: a fill of the
output (too small for stage 1, never pays) and the product. With ``--pim-times`` giving
the product T_pim = 0 it pays whatever this machine's timings (its host time reads 4 MiB;
on the shared-memory preset the weights never move and x, y are 4 KiB each), so the
calibration's outcome is known: 2/2 agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from onnx_builders import save

from placement.networks.workloads import gemv

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest.importorskip("torch_mlir")

from placement.profiling.nest_measure import lower_model, profile_nests  # noqa: E402

pytestmark = pytest.mark.integration

NO_COUNTERS = ["--counters-source", "none", "--allow-estimates", "--runs", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("calibrate")
    model = save(gemv(1024), d, "gemv.onnx")
    nests = lower_model(model).nests
    product = max(nests, key=lambda n: n.n_total).id
    fast = d / "fast.json"
    fast.write_text(json.dumps({"source": "test: free PIM", "pim_times": {product: {"32": 0.0}}}))
    slow = d / "slow.json"
    slow.write_text(json.dumps({product: {"32": 1.0}}))
    other = d / "partitioned.json"
    other.write_text(json.dumps({"memory": "partitioned", "pim_times": {product: {"32": 0.0}}}))
    profile = profile_nests(model, runs=2, warmup=1, counters="none", min_seconds=0)
    saved = d / "gemv.nests.json"
    profile.save(saved)
    return {"dir": d, "model": model, "fast": fast, "slow": slow, "other": other,
            "profile": saved, "product": product, "nests": len(nests)}  # fmt: skip


def test_calibrate_profiles_writes_a_file_solve_accepts(env, capsys, tmp_path):
    out, record = tmp_path / "hw.toml", tmp_path / "cal.json"
    code, stdout, err = run(
        capsys, "calibrate", "--target", "pim", env["model"], "--pim-times", env["fast"],
        "-o", out, "--json", record, *NO_COUNTERS,
    )  # fmt: skip
    assert code == 0, err
    assert "calibration (Torch-PIM Section 4.4) over 2 loop nests of 1 model at N_core 32" in stdout
    assert "2/2 = 1.000 (TP 1, FP 0, TN 1, FN 0); the paper: 37/44 = 0.841" in stdout
    assert "B_cpu" in stdout and "1-thread NumPy sum" in stdout  # measured while profiling
    assert "timing loop nests" in err  # progress
    doc = json.loads(record.read_text())
    cal = doc["calibration"]
    assert doc["format"] == "placement-pim-calibration" and cal["counts"]["agree"] == 2
    assert [n["pays"] for n in cal["nests"]].count(True) == 1
    # the file: the preset's keys, the calibrated ones, provenance in comments
    text = out.read_text()
    table = tomllib.loads(text)
    assert table["pim"]["theta_ratio"] == pytest.approx(cal["theta_ratio"])
    assert table["pim"]["sigma"] == pytest.approx(cal["sigma"])
    assert table["pim"]["host_dram_gbps"] == pytest.approx(cal["b_cpu"] / 1e9)
    assert table["pim"]["memory"] == "shared" and table["pim"]["cores"] == 32
    assert "# models: gemv.onnx" in text and "pays if offloading it alone" in text
    # solve --pim-hardware accepts it and says which B_cpu and theta its rule used
    code, stdout, err = run(
        capsys, "solve", env["model"], "--target", "pim", "--profile", env["profile"],
        "--pim-hardware", out, "--pim-cores", "32", "--allow-estimates",
    )  # fmt: skip
    assert code == 0, err
    line = next(x for x in stdout.splitlines() if x.startswith("rule thresholds:"))
    assert f"theta = {table['pim']['theta_ratio']:g} x B_cpu" in line
    assert "measured on the profiling host" in line


def test_calibrate_with_saved_profiles_prints_the_sweeps(env, capsys, tmp_path):
    out = tmp_path / "hw.toml"
    code, stdout, err = run(
        capsys, "calibrate", "--target", "pim", env["model"], "--profile", env["profile"],
        "--pim-times", env["fast"], "-o", out, "--allow-estimates", "--details",
    )  # fmt: skip
    assert code == 0, err
    assert "nest profile: loaded from" in err
    assert "theta on C3, over the 1 nest passing stage 1" in stdout
    assert "sigma on C4" in stdout and "2/2 = 1.000" in stdout
    assert env["product"] in stdout  # --details: the evidence table
    assert out.exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--theta-range=-1,2"], "--theta-range -1,2: must not be negative"),
    (["--theta-range", "2,1"], "--theta-range 2,1 is empty: need LO < HI"),
    (["--theta-range", "1"], "--theta-range 1: expected LO,HI"),
    (["--sigma-range", "0,1.5"], "--sigma-range 0,1.5: at most 1"),
    (["--sigma-range", "0.5,0.5"], "is empty"),
    (["--pim-cores", "32,64"], "give one core count"),
    (["--profile", "{profile}", "--profile", "{profile}"], "--profile: given 2 times for 1"),
    (["--profile", "{profile}", "--host-times", "ort"], "--host-times: apply when profiling"),
    (["--pim-times", "{other}"], "partitioned"),
    (["--profile", "{profile}", "--pim-times", "{slow}"],
     "offloading pays for none of the 2 nests"),
])  # fmt: skip
def test_bad_input_is_one_line_and_writes_nothing(env, capsys, tmp_path, extra, message):
    out = tmp_path / "hw.toml"
    extra = [e.format(**{k: str(v) for k, v in env.items()}) for e in extra]
    code, _, err = run(capsys, "calibrate", "--target", "pim", env["model"], "-o", out,
                       "--allow-estimates", *extra)  # fmt: skip
    assert_one_line_error(code, err, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("output", "message"), [
    (None, "-o FILE.toml is required"),
    ("hw.json", "must end in .toml"),
    ("missing/dir/hw.toml", "missing/dir"),
])  # fmt: skip
def test_a_missing_or_unwritable_output_is_one_line(env, capsys, tmp_path, output, message):
    args = [] if output is None else ["-o", str(tmp_path / output)]
    code, _, err = run(capsys, "calibrate", "--target", "pim", env["model"], *args)
    assert_one_line_error(code, err, message)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_model_is_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "calibrate", "--target", "pim", tmp_path / "no.onnx",
                       "-o", tmp_path / "hw.toml")  # fmt: skip
    assert_one_line_error(code, err, "no such file")
    assert not Path(tmp_path / "hw.toml").exists()
