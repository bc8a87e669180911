"""`placement nests` / `profile --target pim` / `solve --target pim`, end to end, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from onnx import helper
from onnx_builders import model, save, tensor

from placement.devices.pim import COPY_DESCRIPTIONS
from placement.profiling.counters import TABLE1_EVENTS

pytest.importorskip("torch_mlir")

from placement.profiling.nest_measure import profile_nests  # noqa: E402

FAST = ["--runs", "2", "--warmup", "1", "--min-seconds", "0"]
LLAMA_EXPORT = Path(__file__).resolve().parents[2] / "examples" / "llama_layer_tiny.onnx"
CORE_ROW = re.compile(r"^\s+(\d+)\s+model\s")  # the model's rows of the per-core table

LINALG_ADD = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<64x64xf32> loc("a"), %b: tensor<64x64xf32> loc("b"))
    -> tensor<64x64xf32> {
  %e = tensor.empty() : tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [#map, #map, #map],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<64x64xf32> loc("add")
  return %s : tensor<64x64xf32>
}
"""


def add_softmax_model():
    add = helper.make_node("Add", ["A", "B"], ["C"], name="add0")
    sm = helper.make_node("Softmax", ["C"], ["Y"], name="sm", axis=-1)
    return model(
        [add, sm], [tensor("A", [256, 256]), tensor("B", [256, 256])], [tensor("Y", [256, 256])]
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The model, its measured profile, and a variant with every T_cpu = 1 ms (deterministic
    stage 1: C1 passes for every nest, so stage 2 decides)."""
    d = tmp_path_factory.mktemp("pim_cli")
    onnx_path = save(add_softmax_model(), d, "m.onnx")
    # No counters: on any machine the rule's "not evaluated" and estimate paths are tested
    # (simulated counters: tests/pim/test_counter_sources.py).
    profile = profile_nests(onnx_path, runs=2, warmup=1, counters="none", min_seconds=0)
    profile.save(d / "m.nests.json")
    slow = dataclasses.replace(profile, t_cpu={k: 1e-3 for k in profile.t_cpu})
    slow.save(d / "slow.nests.json")
    other = save(model([helper.make_node("Relu", ["X"], ["Y"])], [tensor("X", [8, 8])],
                       [tensor("Y", [8, 8])]), d, "other.onnx")  # fmt: skip
    return {
        "dir": d, "onnx": onnx_path, "profile": d / "m.nests.json", "nests": profile.nests,
        "slow": d / "slow.nests.json", "counters_available": profile.counters is not None,
        "other": other,
    }  # fmt: skip


def core_rows(out: str) -> list[int]:
    # the table under the header line (rule reasons may mention N_core too: "N_iter < N_core")
    section = out.split("\nN_core ", 1)[1].split("\n\n", 1)[0]
    return [int(m.group(1)) for line in section.splitlines() if (m := CORE_ROW.match(line))]


def solve_slow_with_file(capsys, env, tmp_path, flag, text, cores="32,64"):
    """``solve`` of the every-T_cpu-1-ms profile with ``flag FILE`` (FILE holding ``text``):
    (the file, stdout, stderr, the JSON document)."""
    path = tmp_path / f"{flag.strip('-')}.csv"
    path.write_text(text)
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                         env["slow"], flag, path, "--pim-cores", cores, "--json",
                         out_file)  # fmt: skip
    assert code == 0, err
    return path, out, err, json.loads(out_file.read_text())


# --------------------------------------------------------------------------- happy paths


@pytest.mark.integration
def test_nests_prints_one_row_per_nest_and_json(capsys, env):
    out_file = env["dir"] / "nests.json"
    code, out, err = run(capsys, "nests", env["onnx"], "--json", out_file)
    assert code == 0, err
    rows = [line for line in out.splitlines() if re.match(r"^n\d{3} ", line)]
    assert len(rows) == len(env["nests"]) > 2
    assert "add0 (Add)" in rows[0] and any("sm (Softmax)" in r for r in rows)
    assert "N_iter" in out and "fetch" in out and "flush" in out
    doc = json.loads(out_file.read_text())
    assert [n["id"] for n in doc["nests"]] == [n.id for n in env["nests"]]
    assert "lowered in" in err


@pytest.mark.integration
def test_profile_command_saves_and_reports_counters_once(capsys, env, tmp_path):
    out_file = tmp_path / "p.nests.json"
    code, out, err = run(capsys, "profile", env["onnx"], "--target", "pim", "-o", out_file,
                         *FAST, "-q")  # fmt: skip
    assert code == 0, err
    data = json.loads(out_file.read_text())
    assert data["format"] == "placement-nest-profile"
    assert set(data["t_cpu"]) == {n.id for n in env["nests"]}
    assert data["metadata"]["torch_mlir_version"] and data["metadata"]["checked_against"]
    if data["counters"] is None:  # this VM: say so once, clearly
        assert data["counter_source"].startswith("unavailable: ")
        assert (out + err).count("hardware counters unavailable") == 1
    assert out == ""


@pytest.mark.integration
def test_solve_with_profile_three_core_counts(capsys, env):
    code, out, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                         env["profile"], "--pim-cores", "32,64,128")  # fmt: skip
    assert code == 0, err
    assert core_rows(out) == [32, 64, 128]
    assert "verification passed" in out
    assert "loaded from" in err  # reused, not re-measured
    if not env["counters_available"]:
        assert (out + err).count("hardware counters: unavailable:") == 1
        # Estimated read bandwidth is labelled in the table and explained in a footnote.
        assert re.search(r"\d\*\s", out) and "* estimated, not measured" in out
    # A reason for every nest, each distinct reason printed once with the nests it decided.
    reasons = out.split("rule decisions", 1)[1].split("\n\n", 1)[0]
    assert sum(map(int, re.findall(r"\((\d+) nests?\)", reasons))) >= len(env["nests"])
    assert reasons.count("counter offcore_requests.all_data_rd missing") == 1


@pytest.mark.integration
def test_solve_json_document_is_complete(capsys, env):
    out_file = env["dir"] / "result.json"
    code, _, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                       env["profile"], "--json", out_file, "--copy", "exact", "-q")  # fmt: skip
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    ids = [n.id for n in env["nests"]]
    assert doc["format"] == "placement-pim-result" and doc["target"] == "pim"
    assert doc["options"] == {
        "copy": "exact", "granularity": "loop", "allow_estimates": False, "cores": [32, 64, 128],
        "memory": "shared", "copy_accounting": COPY_DESCRIPTIONS["exact"],
    }  # fmt: skip
    assert doc["hardware"]["name"] == "pim-icelake"
    assert [n["id"] for n in doc["nests"]] == ids
    for n in doc["nests"]:
        for key in ("onnx_node", "n_iter", "n_total", "fetch_bytes", "flush_bytes", "t_cpu",
                    "read_bandwidth", "store_bound", "counters"):  # fmt: skip
            assert key in n
        assert n["read_bandwidth"]["estimated"] is (n["counters"] is None)
    assert len(doc["results"]) == 3
    for r in doc["results"]:
        assert set(r["rule"]["decisions"]) == set(ids)
        assert set(r["model"]["decisions"]) == set(ids)
        assert r["model"]["verification"]["ok"] is True
        hybrid = r["model"]["hybrid"]
        assert r["model"]["speedup"] == pytest.approx(doc["cpu_only"] / hybrid["total"])
        assert math.isclose(hybrid["total"], hybrid["host"] + hybrid["pim"] + hybrid["copy"]
                            + hybrid["switch"], rel_tol=1e-12)  # fmt: skip
        assert r["rule"]["hybrid"]["total"] >= hybrid["total"] * (1 - 1e-9)  # optimum wins
    assert doc["nest_profile"]["counter_source"]


@pytest.mark.integration
def test_basic_block_granularity_and_the_comparison_of_granularities(capsys, env):
    out_file = env["dir"] / "bb.json"
    code, out, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                         env["profile"], "--pim-cores", "32,128", "--granularity", "basic-block",
                         "--compare-granularities", "--json", out_file)  # fmt: skip
    assert code == 0, err
    assert "basic blocks:" in err and "from lowering" in err
    assert "model granularity: basic-block" in out and "dynamic MLIR op counts" in out
    assert "granularities compared" in out and "crossings (host<->PIM transitions" in out
    doc = json.loads(out_file.read_text())
    ids = [n.id for n in env["nests"]]
    assert doc["options"]["granularity"] == "basic-block"
    assert doc["options"]["compare_granularities"] is True
    assert list(doc["basic_blocks"]) == ids
    for r in doc["results"]:
        model = r["model"]
        assert model["granularity"] == "basic-block" and set(model["decisions"]) == set(ids)
        blocks = {b["id"] for n in ids for b in doc["basic_blocks"][n]["blocks"]}
        assert set(model["block_decisions"]) == blocks
        crossings = model["crossings"]
        assert crossings["between_nests"] + crossings["inside_nests"] == model["hybrid"]["n_region"]
        by = r["granularities"]
        assert list(by) == ["loop", "operator", "basic-block"]
        assert all(p["verification"]["ok"] for p in by.values())
        assert by["loop"]["vs_loop"]["seconds"]["total"] == 0.0
        # finer is never worse: basic-block <= loop <= operator
        totals = [by[g]["hybrid"]["total"] for g in ("basic-block", "loop", "operator")]
        assert totals[0] <= totals[1] * (1 + 1e-9) and totals[1] <= totals[2] * (1 + 1e-9)
        assert by["basic-block"]["hybrid"] == model["hybrid"]


@pytest.mark.integration
def test_basic_blocks_of_another_lowering_are_refused(capsys, env, tmp_path):
    from placement.profiling.nest_profile import NestProfile

    profile = NestProfile.load(env["profile"])
    first = dataclasses.replace(profile.nests[0], n_total=profile.nests[0].n_total + 1)
    changed = tmp_path / "changed.nests.json"
    dataclasses.replace(profile, nests=[first, *profile.nests[1:]]).save(changed)
    out_file = tmp_path / "r.json"
    code, _, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile", changed,
                       "--granularity", "basic-block", "--json", out_file)  # fmt: skip
    assert_one_line_error(code, err, "not those of lowering", "nest 'n000' differs", "re-profile")
    assert not out_file.exists()
    code, _, err = run(capsys, "solve", env["onnx"], "--compare-granularities")
    assert_one_line_error(code, err, "--compare-granularities", "need --target pim")


@pytest.mark.integration
def test_counters_csv_drives_rule_c3_with_measured_bandwidth(capsys, env, tmp_path):
    ids = [n.id for n in env["nests"]]
    high, low = ids[0], ids[-1]
    # T_cpu = 1 ms: 1e6 lines * 64 B / 1 ms = 64 GB/s > theta; 10 lines -> far below.
    text = (
        "nest_id," + ",".join(TABLE1_EVENTS) + "\n"
        f"{high},1000000,0,100,100,100\n{low},10,0,100,100,100\n"
    )
    csv, out, _, doc = solve_slow_with_file(capsys, env, tmp_path, "--counters", text, "32")
    assert f"loaded from {csv} for 2 of {len(ids)} nests" in out
    decisions = doc["results"][0]["rule"]["decisions"]
    assert decisions[high]["place"] == "pim"
    assert decisions[high]["reason"].startswith("C3 passed: BW_read 64 GB/s > theta")
    assert decisions[high]["estimated"] is False
    assert decisions[low]["place"] == "host" and "C3 failed: BW_read" in decisions[low]["reason"]
    assert "C4 failed: StoreBound 0" in decisions[low]["reason"]
    nests = {n["id"]: n for n in doc["nests"]}
    assert nests[high]["read_bandwidth"] == {"value": pytest.approx(64e9), "estimated": False,
                                             "simulated": False}  # fmt: skip
    assert nests[high]["store_bound"] == {"value": 0.0, "estimated": False, "simulated": False}
    nest_row, placed_row = [ln for ln in out.splitlines() if ln.startswith(high + " ")]
    assert re.search(r"\s64\s", nest_row) and "*" not in nest_row  # measured: no '*'
    assert "pim/" in placed_row


@pytest.mark.integration
def test_pim_times_file_replaces_the_model_and_is_labelled(capsys, env, tmp_path):
    ids = [n.id for n in env["nests"]]
    hopeless, free = ids[0], ids[1]
    text = (
        "nest_id,cores,t_pim_s\n"
        f"{hopeless},32,10\n{hopeless},64,9\n{free},32,1e-9\n{free},64,2e-9\n"
    )
    times, out, err, doc = solve_slow_with_file(capsys, env, tmp_path, "--pim-times", text)
    assert f"T_pim: from {times} (measured or simulated) for 2 of {len(ids)} nests" in err
    assert (f"T_pim from {times} (measured or simulated) for the 2 nests marked #, from the"
            " analytical PIM model (not measured)") in out  # fmt: skip
    rows = {line.split()[0]: line for line in out.splitlines() if re.match(r"^n\d{3}", line)}
    assert f"{hopeless}#" in rows and f"{free}#" in rows and ids[2] in rows
    nests = {n["id"]: n for n in doc["nests"]}
    assert nests[hopeless]["t_pim"] == {"32": 10.0, "64": 9.0}
    assert nests[hopeless]["t_pim_source"] == "file"
    assert nests[ids[2]]["t_pim_source"] == "analytical model"
    assert doc["t_pim"]["file"]["file"] == str(times)
    assert doc["t_pim"]["nests_from_file"] == [hopeless, free]
    for r in doc["results"]:
        assert r["model"]["decisions"][hopeless] == "host"  # 10 s on PIM vs 1 ms on the host
        assert r["model"]["verification"]["ok"] is True
    # A file for one core count only, solved for that count (not the preset's 32 cores).
    only = f"nest_id,cores,t_pim_s\n{free},64,2e-9\n"
    _, _, _, doc = solve_slow_with_file(capsys, env, tmp_path, "--pim-times", only, "64")
    assert doc["options"]["cores"] == [64]
    assert {n["id"]: n["t_pim"] for n in doc["nests"]}[free] == {"64": 2e-9}


@pytest.mark.integration
def test_pim_times_file_errors_are_one_line(capsys, env, tmp_path):
    first = env["nests"][0].id
    cases = [
        ("nest_id,cores,t_pim_s\nn999,32,1e-6\nn999,64,1e-6\nn999,128,1e-6\n",
         "unknown nest id(s) n999"),
        (f"nest_id,cores,t_pim_s\n{first},32,1e-6\n",
         f"nest '{first}' has no T_pim for N_core 64, 128 (the file gives 32)"),
        (f"nest_id,cores,t_pim_s\n{first},32,-1\n", "line 2, nest"),
        (f"nest_id,cores,t_pim_s\n{first},32,nan\n", "must be a time in seconds >= 0"),
        ("nest_id,t_pim_s\n", "missing column(s) cores"),
    ]  # fmt: skip
    for i, (text, fragment) in enumerate(cases):
        path = tmp_path / f"t{i}.csv"
        path.write_text(text)
        code, out, err = _solve_bad(capsys, env, tmp_path, "--pim-times", path)
        assert_one_line_error(code, err, str(path), fragment)
        assert out == ""
    code, _, err = run(capsys, "solve", env["onnx"], "--pim-times", tmp_path / "t0.csv")
    assert_one_line_error(code, err, "--pim-times", "need --target pim")
    # Without --profile, unknown nests (in either file) are refused before any timing.
    counters = tmp_path / "c.csv"
    counters.write_text("nest_id," + ",".join(TABLE1_EVENTS) + "\nn999,1,1,1,1,1\n")
    for flag, path in (("--pim-times", tmp_path / "t0.csv"), ("--counters", counters)):
        code, _, err = run(capsys, "solve", env["onnx"], "--target", "pim", flag, path, *FAST)
        assert_one_line_error(code, err, "unknown nest id(s) n999")
        assert "profiled" not in err and "timing" not in err


@pytest.mark.integration
def test_allow_estimates_labels_rule_decisions(capsys, env):
    code, out, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                         env["slow"], "--allow-estimates", "--pim-cores", "64")  # fmt: skip
    assert code == 0, err
    if env["counters_available"]:
        pytest.skip("counters measured here: nothing is estimated")
    assert "(estimated)" in out and "used by rule C3 (--allow-estimates)" in out
    assert re.search(r"\b(pim|host)\*/(pim|host)", out)


@pytest.mark.integration
def test_solve_mlir_without_profile(capsys, tmp_path):
    path = tmp_path / "prog.mlir"
    path.write_text(LINALG_ADD)
    code, out, err = run(capsys, "nests", path)
    assert code == 0, err
    assert "n000" in out
    code, out, err = run(capsys, "solve", path, "--target", "pim", *FAST, "--pim-cores", "32",
                         "--granularity", "operator")  # fmt: skip
    assert code == 0, err
    assert "(mlir)" in out and core_rows(out) == [32]
    assert "ONNX Runtime" not in err  # no ONNX-only steps for .mlir


@pytest.mark.integration
def test_pytorch_llama_export_solves(capsys):
    # A real torch.onnx.export (examples/export_llama_layer.py): its Slice bounds, Reshape
    # targets, positions and mask are computed from sizes, which folding makes constants.
    code, out, err = run(capsys, "solve", LLAMA_EXPORT, "--target", "pim", *FAST,
                         "--pim-cores", "32", "--counters-source", "none")  # fmt: skip
    assert code == 0, err
    # 68: its seven projections' weights reach the program in the batch product's layout,
    # no broadcast copy each (placement/profiling/mlir/weight_layout.py; 75 before)
    assert "68 loop nests" in out and core_rows(out) == [32]
    assert "outputs match ONNX Runtime" in err and "verification passed" in out


@pytest.mark.integration
def test_cim_target_is_unchanged_and_refuses_pim_options(capsys, env):
    code, _, err = run(capsys, "solve", env["onnx"], "--pim-cores", "32")
    assert_one_line_error(code, err, "--pim-cores", "need --target pim")


# --------------------------------------------------------------------------- bad input


def _bad_models(d):
    dyn = save(model([helper.make_node("Relu", ["X"], ["Y"])], [tensor("X", ["batch", 8])],
                     [tensor("Y", ["batch", 8])]), d, "dyn.onnx")  # fmt: skip
    lp = helper.make_node("LpPool", ["X"], ["Y"], kernel_shape=[2, 2], p=3)
    unsup = save(model([lp], [tensor("X", [1, 1, 4, 4])], [tensor("Y", [1, 1, 3, 3])]), d,
                 "lp.onnx")  # fmt: skip
    bad_mlir = d / "bad.mlir"
    bad_mlir.write_text(
        "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = arith.addf %a, %b : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    )
    return dyn, unsup, bad_mlir


@pytest.mark.parametrize("command", ["profile", "solve"])
@pytest.mark.integration
def test_bad_models_give_one_line_and_no_output(capsys, tmp_path, command):
    dyn, unsup, bad_mlir = _bad_models(tmp_path)
    out_file = tmp_path / "out.json"
    flag = ["-o", out_file] if command == "profile" else ["--json", out_file]
    for path, fragment in ((dyn, "dynamic shape"), (unsup, "LpPool"), (bad_mlir, "not valid MLIR"),
                           (tmp_path / "absent.onnx", "no such file")):  # fmt: skip
        code, out, err = run(capsys, command, path, "--target", "pim", *flag, *FAST, "-q")
        assert_one_line_error(code, err, fragment)
        assert not out_file.exists()
        assert not list(tmp_path.glob(".out.json*"))


@pytest.mark.unit
def test_nests_bad_mlir(capsys, tmp_path):
    _, _, bad_mlir = _bad_models(tmp_path)
    code, _, err = run(capsys, "nests", bad_mlir)
    assert_one_line_error(code, err, "not valid MLIR (line 2")


def _solve_bad(capsys, env, tmp_path, *extra):
    out_file = tmp_path / "r.json"
    code, out, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                         env["profile"], "--json", out_file, *extra)  # fmt: skip
    assert not out_file.exists()
    return code, out, err


@pytest.mark.integration
def test_counters_file_with_unknown_ids_or_missing_columns(capsys, env, tmp_path):
    header = "nest_id," + ",".join(TABLE1_EVENTS)
    unknown = tmp_path / "u.csv"
    unknown.write_text(f"{header}\nn999,1,1,1,1,1\n")
    code, out, err = _solve_bad(capsys, env, tmp_path, "--counters", unknown)
    assert_one_line_error(code, err, "unknown nest id(s) n999")
    assert out == ""
    missing = tmp_path / "m.csv"
    missing.write_text("nest_id,offcore_requests.all_data_rd\nn000,1\n")
    code, _, err = _solve_bad(capsys, env, tmp_path, "--counters", missing)
    assert_one_line_error(code, err, "missing column(s) exe_activity.bound_on_stores")


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('base = "pim-icelake"\n[pim]\nt_sw_us = 0\n', "'pim.t_sw_us' must be positive, got 0"),
        ('base = "pim-icelake"\n[pim]\nread_gbps = -4\n', "'pim.read_gbps' must be positive"),
        ('base = "pim-icelake"\n[pim]\ncores = 0\n', "'pim.cores' must be positive"),
    ],
)
@pytest.mark.integration
def test_zero_or_negative_hardware_values(capsys, env, tmp_path, toml, fragment):
    hw = tmp_path / "hw.toml"
    hw.write_text(toml)
    code, _, err = _solve_bad(capsys, env, tmp_path, "--pim-hardware", hw)
    assert_one_line_error(code, err, fragment)


@pytest.mark.parametrize("cores", ["0", "32,0", "-4", "abc", "32,,64"])
@pytest.mark.integration
def test_bad_pim_cores(capsys, env, tmp_path, cores):
    code, _, err = _solve_bad(capsys, env, tmp_path, f"--pim-cores={cores}")
    assert_one_line_error(code, err, "--pim-cores must be a comma-separated list")


@pytest.mark.integration
def test_profile_of_another_model_or_kind_is_refused(capsys, env, tmp_path):
    out_file = tmp_path / "r.json"
    code, _, err = run(capsys, "solve", env["other"], "--target", "pim", "--profile",
                       env["profile"], "--json", out_file)  # fmt: skip
    assert_one_line_error(code, err, "was measured on", "--target pim")
    cim_profile = tmp_path / "cim.json"
    cim_profile.write_text(json.dumps({"format": "placement-host-profile", "version": 1}))
    code, _, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile", cim_profile)
    assert_one_line_error(code, err, "use --target cim")
    assert not out_file.exists()


@pytest.mark.integration
def test_cim_options_with_pim_target_and_missing_output_dir(capsys, env, tmp_path):
    code, _, err = _solve_bad(capsys, env, tmp_path, "--crossbars", "8")
    assert_one_line_error(code, err, "--crossbars", "not used with --target pim")
    code, _, err = run(capsys, "solve", env["onnx"], "--target", "pim", "--profile",
                       env["profile"], "--json", tmp_path / "no" / "r.json")  # fmt: skip
    assert_one_line_error(code, err, "does not exist")
    code, _, err = run(capsys, "profile", env["onnx"], "--target", "pim", "-o",
                       tmp_path / "no" / "p.json")  # fmt: skip
    assert_one_line_error(code, err, "does not exist")
