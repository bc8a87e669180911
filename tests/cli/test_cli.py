"""The `placement` command: the README flows, and one clear line for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from onnx import helper
from onnx_builders import const, gemm_model, model, result, save, tensor

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
FP32 = ROOT / "examples" / "resnet_tiny.onnx"
FAST = ["--runs", "3", "--warmup", "1", "--min-seconds", "0", "-q"]


@pytest.mark.integration
def test_solve_example_writes_verified_json(capsys, tmp_path):
    out_file = tmp_path / "result.json"
    code, out, _ = run(capsys, "solve", INT8, "--target", "cim", *FAST, "--json", out_file)
    assert code == 0
    assert "verification: passed" in out
    assert "CPU-only latency" in out and "speed-up" in out
    doc = json.loads(out_file.read_text())
    assert doc["result"]["status"] == "optimal"
    assert doc["verification"]["ok"] is True
    assert doc["speedup"] == pytest.approx(doc["cpu_only"] / doc["makespan"])
    assert doc["hardware"]["name"] in ("x86-ryzen", "arm-a72")
    ops = doc["schedule"]["operators"]
    assert len(ops) == doc["model"]["operators"] == doc["instance"]["operators"]


@pytest.mark.integration
def test_profile_then_solve_with_the_saved_profile(capsys, tmp_path):
    profile = tmp_path / "m.profile.json"
    code, _, err = run(capsys, "profile", FP32, "-o", profile, *FAST)
    assert code == 0, err
    saved = json.loads(profile.read_text())
    out_file = tmp_path / "r.json"
    code, out, err = run(
        capsys,
        "solve",
        FP32,
        "--profile",
        profile,
        "--hardware",
        "arm-a72",
        "--crossbars",
        "25",
        "--t-mvm-ns",
        "1000",
        "--json",
        out_file,
    )
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    assert doc["hardware"]["cim"]["crossbars"] == 25
    assert doc["hardware"]["cim"]["t_mvm_ns"] == pytest.approx(1000)
    assert doc["host_profile"]["date"] == saved["metadata"]["date"]  # reused, not re-measured
    assert doc["crossbars_used"] <= 25
    assert "warning: host latencies were measured on" in err  # x86 profile, ARM preset


@pytest.mark.integration
def test_details_lists_every_operator(capsys):
    code, out, _ = run(capsys, "solve", INT8, *FAST, "--details")
    assert code == 0
    assert "stem_conv" in out and "b3_concat" in out


@pytest.mark.unit
def test_presets_listed(capsys):
    code, out, _ = run(capsys, "presets")
    assert code == 0
    assert "arm-a72" in out and "x86-ryzen" in out


def dynamic_model(tmp_path: Path) -> Path:
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    return save(model([node], [tensor("x", ["N", 4])], [result("y", 2)]), tmp_path)


def empty_model(tmp_path: Path) -> Path:
    node = helper.make_node("Identity", ["c"], ["y"], name="id")  # constant-only: folded away
    return save(model([node], [], [result("y", 1)], [const("c", [1.0, 2.0])]), tmp_path)


def unknown_domain_model(tmp_path: Path) -> Path:
    node = helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")
    proto = model([node], [tensor("x", [1, 4])], [result("y", 2)], opsets={"com.example": 1})
    return save(proto, tmp_path)


def big_gemm_model(tmp_path: Path) -> Path:
    return save(gemm_model([1, 512], [512, 512]), tmp_path)  # 2 x 2 = 4 crossbars


# The budget is checked after the model is profiled (ONNX Runtime): those cases are
# integration tests; the others, the hardware flags among them, stop before any profiling.
PROFILED = pytest.mark.integration
BEFORE_PROFILING = pytest.mark.unit


@pytest.mark.parametrize(
    ("make", "extra", "fragments"),
    [
        pytest.param(lambda p: p / "missing.onnx", [], ["missing.onnx", "no such file"],
                     marks=BEFORE_PROFILING),
        pytest.param(lambda p: _write(p / "junk.onnx", b"not a model"), [],
                     ["not a readable ONNX model"], marks=BEFORE_PROFILING),
        pytest.param(dynamic_model, [], ["'x'", "dynamic", "fixed"], marks=BEFORE_PROFILING),
        pytest.param(empty_model, [], ["no operators"], marks=BEFORE_PROFILING),
        pytest.param(unknown_domain_model, [], ["com.example", "frob"], marks=BEFORE_PROFILING),
        pytest.param(big_gemm_model, ["--crossbars", "2"], ["fits no operator", "needs 4"],
                     marks=PROFILED),
        pytest.param(lambda p: FP32, ["--crossbars", "0"], ["--crossbars must be positive"],
                     marks=BEFORE_PROFILING),
        pytest.param(lambda p: FP32, ["--hardware", "nowhere"], ["neither a preset"],
                     marks=BEFORE_PROFILING),
        pytest.param(lambda p: FP32, ["--time-limit", "-1"], ["--time-limit"],
                     marks=BEFORE_PROFILING),
        pytest.param(
            lambda p: FP32,
            ["--profile", str(INT8.with_suffix(".nope.json"))],
            ["no such profile file"],
            marks=BEFORE_PROFILING,
        ),
    ],
)  # fmt: skip
def test_bad_input_gives_one_line_and_no_output_file(capsys, tmp_path, make, extra, fragments):
    out_file = tmp_path / "out.json"
    code, _, err = run(capsys, "solve", make(tmp_path), *FAST, *extra, "--json", out_file)
    assert_one_line_error(code, err, *fragments)
    assert not out_file.exists()


@pytest.mark.integration
def test_profile_of_another_model_is_rejected(capsys, tmp_path):
    profile = tmp_path / "p.json"
    assert run(capsys, "profile", FP32, "-o", profile, *FAST)[0] == 0
    code, _, err = run(capsys, "solve", INT8, "--profile", profile, "-q")
    assert_one_line_error(code, err, "measured on", "resnet_tiny.onnx", "re-run")


@pytest.mark.unit
def test_unreadable_profile(capsys, tmp_path):
    profile = _write(tmp_path / "p.json", b"{ not json")
    code, _, err = run(capsys, "solve", FP32, "--profile", profile, "-q")
    assert_one_line_error(code, err, "p.json")


@pytest.mark.unit  # the hardware file is read before the model is profiled
def test_bad_hardware_file(capsys, tmp_path):
    hw = tmp_path / "hw.toml"
    hw.write_text('base = "x86-ryzen"\n[cim]\nbus_gbps = -1\n')
    code, _, err = run(capsys, "solve", FP32, "--hardware", hw, *FAST)
    assert_one_line_error(code, err, "hw.toml", "cim.bus_gbps", "positive")


@pytest.mark.unit
def test_profile_refuses_runs_zero_and_writes_nothing(capsys, tmp_path):
    out = tmp_path / "p.json"
    code, _, err = run(capsys, "profile", FP32, "-o", out, "--runs", "0", "-q")
    assert_one_line_error(code, err, "runs")
    assert not out.exists()


@pytest.mark.integration
def test_console_script_without_highs_says_so(tmp_path):
    """A real interpreter in which `import highspy` fails: one line, exit 1, no traceback."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "highspy.py").write_text("raise ImportError('highspy blocked for this test')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(ROOT)]))
    proc = subprocess.run(
        [sys.executable, "-m", "placement.cli", "solve", str(INT8), *FAST],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "HiGHS is not available" in proc.stderr


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.unit
def test_dynamic_shape_message_names_the_tensor_and_the_fix(capsys, tmp_path):
    code, _, err = run(capsys, "solve", dynamic_model(tmp_path), *FAST)
    assert_one_line_error(code, err, "'x'", "make_dynamic_shape_fixed")


@pytest.mark.integration
def test_solve_with_cpsat_then_highs_matches_highs(capsys, tmp_path):
    pytest.importorskip("ortools", reason="ortools (the [test] extra) not installed")
    profile = tmp_path / "p.json"
    assert run(capsys, "profile", INT8, "-o", profile, *FAST)[0] == 0
    docs = {}
    for solver in ("highs", "cpsat+highs"):
        out_file = tmp_path / f"{solver}.json"
        code, _, err = run(
            capsys, "solve", INT8, "--profile", profile, "--solver", solver, "--gap", "0",
            "--json", out_file, "-q",
        )  # fmt: skip
        assert code == 0, err
        docs[solver] = json.loads(out_file.read_text())
    assert docs["cpsat+highs"]["result"]["solver"] == "cpsat+highs"
    assert docs["cpsat+highs"]["verification"]["ok"] is True
    assert docs["cpsat+highs"]["makespan"] == pytest.approx(docs["highs"]["makespan"], rel=1e-6)


@pytest.mark.integration
def test_solve_by_decomposition_matches_the_whole_model(capsys, tmp_path):
    profile = tmp_path / "p.json"
    assert run(capsys, "profile", INT8, "-o", profile, *FAST)[0] == 0
    docs, outs = {}, {}
    for method in ("monolithic", "decomposition"):
        out_file = tmp_path / f"{method}.json"
        code, outs[method], err = run(
            capsys, "solve", INT8, "--profile", profile, "--method", method, "--gap", "0",
            "--solver", "highs", "--json", out_file,
        )  # fmt: skip
        assert code == 0, err
        docs[method] = json.loads(out_file.read_text())
    parts = docs["decomposition"]
    assert parts["result"]["options"]["method"] == "decomposition"
    assert docs["monolithic"]["result"]["options"]["method"] == "monolithic"
    assert parts["verification"]["ok"] is True
    assert parts["makespan"] == pytest.approx(docs["monolithic"]["makespan"], rel=1e-6)
    assert "solver: decomposition into" in outs["decomposition"]
    assert "certified gap" in outs["decomposition"]
    # --workers auto: this host's usable CPUs; the summary says where the blocks ran
    workers = parts["result"]["options"]["workers"]
    in_workers = parts["result"]["options"]["block_solves_in_workers"]
    assert (f"{in_workers} of them in {workers} worker processes" in outs["decomposition"]) == (
        workers > 1)


@pytest.mark.unit
def test_auto_solver_uses_cpsat_then_highs_only_on_branched_graphs():
    import random

    from oracles import random_instance

    from placement.cim.pipeline import resolve_formulation, resolve_solver

    pytest.importorskip("ortools", reason="ortools (the [test] extra) not installed")
    branched = random_instance(random.Random(5), 40, edge_prob=0.08)  # 546 parallel pairs
    chain = random_instance(random.Random(5), 40, edge_prob=1.0)  # a total order: no pairs

    def auto(instance, solver="auto", warm_start=None):
        return resolve_solver(resolve_formulation(instance, "auto"), solver, warm_start)

    assert auto(branched) == "cpsat+highs"
    assert auto(chain) == "highs"
    assert auto(branched, warm_start=False) == "highs"
    assert auto(branched, solver="scip") == "scip"


@pytest.mark.unit
def test_the_parser_loads_no_solver_onnx_runtime_or_pyomo():
    """``placement --help`` and every usage error stay fast: building the parser imports
    none of the heavy libraries (a fresh interpreter, so other tests cannot hide one)."""
    code = ("import sys; from placement.cli import build_parser; build_parser();"
            " print(sorted(m for m in ('onnx', 'onnxruntime', 'pyomo', 'highspy', 'torch_mlir',"
            " 'networkx', 'ortools') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.strip() == "[]"


@pytest.mark.unit
def test_bench_modes_name_every_mip_backend():
    from placement.bench.choices import MIP_MODES
    from placement.solvers.registry import MIP_BACKENDS

    assert MIP_MODES == MIP_BACKENDS
