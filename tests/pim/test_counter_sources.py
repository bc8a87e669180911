"""Counter sources of the PIM pipeline and CLI: auto, perf, simulated, none."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import assert_one_line_error, run

from placement.errors import PlacementError
from placement.profiling import counters as counters_mod
from placement.profiling.counters import SIMULATED_EVENTS, CountersUnavailable

HAVE_SIMULATOR = shutil.which("valgrind") is not None and shutil.which("gcc") is not None
needs_simulator = pytest.mark.skipif(not HAVE_SIMULATOR, reason="valgrind or gcc not installed")
FAST = ["--runs", "2", "--warmup", "1", "--min-seconds", "0"]

ADD = """#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%a: tensor<64x256xf32> loc("a"), %b: tensor<64x256xf32> loc("b"))
    -> tensor<64x256xf32> {
  %e = tensor.empty() : tensor<64x256xf32>
  %s = linalg.generic {indexing_maps = [#map, #map, #map],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<64x256xf32>, tensor<64x256xf32>) outs(%e : tensor<64x256xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<64x256xf32> loc("add")
  return %s : tensor<64x256xf32>
}
"""


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "add.mlir"
    path.write_text(ADD)
    return path


@pytest.fixture
def no_pmu(monkeypatch):
    def unavailable():
        raise CountersUnavailable("no PMU (test)")

    monkeypatch.setattr(counters_mod, "table1_events", unavailable)


def without(monkeypatch, tool):
    real = shutil.which
    monkeypatch.setattr(counters_mod.shutil, "which",
                        lambda name, *a, **k: None if name == tool else real(name, *a, **k))


# --------------------------------------------------------------------------- pipeline


@pytest.mark.unit
def test_explicit_sources_that_cannot_run_fail_before_any_work(model, monkeypatch, no_pmu):
    from placement.profiling import nest_measure

    def never(*a, **k):
        raise AssertionError("lowered although the counter source cannot run")

    monkeypatch.setattr(nest_measure, "lower_model", never)
    without(monkeypatch, "valgrind")
    with pytest.raises(PlacementError, match="--counters-source simulated: the cache"
                       " simulator valgrind is not installed .*`valgrind`"):  # fmt: skip
        nest_measure.profile_nests(model, counters="simulated")
    with pytest.raises(PlacementError, match="--counters-source perf: no PMU"):
        nest_measure.profile_nests(model, counters="perf")
    with pytest.raises(PlacementError, match="unknown counter source 'pmu'"):
        nest_measure.profile_nests(model, counters="pmu")


@pytest.mark.integration
def test_the_lowered_hook_sees_the_nests_before_anything_is_measured(model, monkeypatch):
    pytest.importorskip("torch_mlir")
    from placement.profiling import nest_measure, nest_timing

    seen = []

    def refuse(program, seconds):  # a caller whose nest-keyed file names other nests
        seen.append(([n.id for n in program.nests], seconds))
        raise PlacementError("refused by the caller")

    def never(*a, **k):
        raise AssertionError("measured although the caller refused the nests")

    monkeypatch.setattr(nest_timing, "time_nests", never)
    monkeypatch.setattr(nest_measure, "measure_dram_read", never)
    with pytest.raises(PlacementError, match="refused by the caller"):
        nest_measure.profile_nests(model, counters="none", lowered=refuse)
    program = nest_measure.lower_model(model)
    with pytest.raises(PlacementError, match="refused by the caller"):
        nest_measure.profile_nests(model, counters="none", lowered=refuse, program=program)
    (ids, seconds), (given_ids, given_seconds) = seen
    assert ids == given_ids == [n.id for n in program.nests] and ids
    assert seconds > 0 and given_seconds == 0.0  # a program given is not lowered again


@pytest.mark.integration
def test_auto_without_valgrind_keeps_the_times_and_says_why(model, monkeypatch, no_pmu):
    pytest.importorskip("torch_mlir")
    from placement.profiling.nest_measure import profile_nests

    without(monkeypatch, "valgrind")
    profile = profile_nests(model, runs=1, warmup=0, min_seconds=0)
    assert profile.counters is None and profile.t_cpu
    reason = profile.counters_unavailable_reason
    assert "no PMU (test)" in reason and "`valgrind`" in reason and "\n" not in reason
    assert profile.metadata["counters_requested"] == "auto"


@needs_simulator
@pytest.mark.integration
def test_auto_without_pmu_simulates(model, no_pmu, monkeypatch):
    pytest.importorskip("torch_mlir")
    from placement.profiling import nest_measure
    from placement.profiling.nest_measure import profile_nests

    profile = profile_nests(model, runs=1, warmup=0, min_seconds=0)
    assert profile.counter_source == "simulated" and profile.simulated
    assert set(profile.counters["n000"]) == set(SIMULATED_EVENTS)
    sim = profile.metadata["simulation"]
    assert sim["perf_unavailable"] == "no PMU (test)"
    assert sim["invocations_per_run"] == profile.metadata["timing"]["invocations_per_run"]
    assert {"I1", "D1", "LL", "ll_level", "source"} <= set(sim["caches"])
    assert sim["valgrind_version"][0].isdigit() and sim["simulation_seconds"] > 0
    none = profile_nests(model, runs=1, warmup=0, min_seconds=0, counters="none")
    assert none.counter_source == "unavailable: not requested"
    assert profile_nests(model, runs=1, warmup=0, min_seconds=0, counters=False).counters is None
    # auto skips a simulation expected to exceed its budget; an explicit request does not.
    monkeypatch.setattr(nest_measure, "AUTO_SIMULATION_BUDGET_SECONDS", 0.0)
    skipped = profile_nests(model, runs=1, warmup=0, min_seconds=0)
    assert skipped.counters is None
    assert "simulated counters skipped: the cache simulation would take" in (
        skipped.counters_unavailable_reason
    )
    assert "no PMU (test)" in skipped.counters_unavailable_reason
    assert profile_nests(model, runs=1, warmup=0, min_seconds=0, counters="simulated").simulated


# --------------------------------------------------------------------------- CLI


@needs_simulator
@pytest.mark.integration
def test_profile_with_simulated_counters_then_solve(capsys, model, tmp_path):
    pytest.importorskip("torch_mlir")
    out_file = tmp_path / "p.nests.json"
    code, out, err = run(capsys, "profile", model, "--target", "pim", "-o", out_file,
                         "--counters-source", "simulated", *FAST)  # fmt: skip
    assert code == 0, err
    data = json.loads(out_file.read_text())
    assert data["counter_source"] == "simulated"
    assert "simulated counters: callgrind cache simulation in" in err
    assert "hardware counters unavailable" not in err
    code, out, err = run(capsys, "solve", model, "--target", "pim", "--profile", out_file,
                         "--pim-cores", "32", "-q")  # fmt: skip
    assert code == 0, err
    assert "hardware counters: none; simulated instead (marked ~)" in out
    assert "not evaluated" not in out.split("rule decisions", 1)[1]
    assert "~ simulated, not measured" in out


@pytest.mark.integration
def test_cli_counter_source_errors(capsys, model, tmp_path, monkeypatch, no_pmu):
    out_file = tmp_path / "p.nests.json"
    without(monkeypatch, "valgrind")
    code, _, err = run(capsys, "profile", model, "--target", "pim", "-o", out_file,
                       "--counters-source", "simulated", *FAST)  # fmt: skip
    assert_one_line_error(code, err, "--counters-source simulated", "`valgrind`")
    assert not out_file.exists()
    code, _, err = run(capsys, "profile", model, "-o", out_file, "--counters-source", "perf")
    assert_one_line_error(code, err, "--counters-source", "needs --target pim")
    code, _, err = run(capsys, "solve", model, "--target", "pim", "--profile", out_file,
                       "--counters-source", "none")  # fmt: skip
    assert_one_line_error(code, err, "--counters-source", "with --profile")
    code, _, err = run(capsys, "solve", model, "--counters-source", "none")
    assert_one_line_error(code, err, "--counters-source", "need --target pim")


@pytest.mark.integration
def test_cli_counters_source_none_solves_without_counters(capsys, model):
    pytest.importorskip("torch_mlir")
    code, out, err = run(capsys, "solve", model, "--target", "pim", "--pim-cores", "32",
                         "--counters-source", "none", *FAST, "-q")  # fmt: skip
    assert code == 0, err
    assert "hardware counters: unavailable: not requested" in out
