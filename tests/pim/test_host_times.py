"""Host-time sources of the PIM path: ort (apportioned), compiled, jit; the baseline stated
beside ONNX Runtime's CPU-only time in every result; old nest profiles still load."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from onnx import helper
from onnx_builders import model, save, tensor

from placement.errors import PlacementError
from placement.nests import LoopNest, NestOperand
from placement.pim.output import baseline, baseline_lines
from placement.profiling.nest_measure import resolve_cache, resolve_host_times
from placement.profiling.nest_profile import NestProfile
from placement.profiling.ort.apportion import apportion_ort

GOLDEN_PROFILE = Path(__file__).resolve().parents[1] / "golden" / "resnet_tiny.nests.json"


def _nest(i: int, node: str, n_total: int = 100) -> LoopNest:
    op = NestOperand(buffer=f"arg{i}", kind="argument", shape=(n_total,), elem_type="f32",
                     nbytes=4 * n_total, read=True, written=True)  # fmt: skip
    return LoopNest(
        id=f"n{i:03d}", index=i, onnx_node=node, onnx_op_type="Op" if node else "",
        linalg_op="linalg.generic", n_iter=n_total, n_total=n_total, trip_count=1,
        operands=(op,),
    )  # fmt: skip


def _profile(t_cpu, *, host_times="jit", ort=None, kind="onnx", detail=None) -> NestProfile:
    nests = [_nest(i, f"op{i}") for i in range(len(t_cpu))]
    metadata = {"runs": 1}
    if detail is not None:
        metadata["host_times_detail"] = detail
    return NestProfile(
        nests=nests, t_cpu={n.id: t for n, t in zip(nests, t_cpu, strict=True)},
        counters=None, counter_source="unavailable: test", model_sha256="0" * 64,
        model_path="m.onnx", source_kind=kind, metadata=metadata, host_times=host_times,
        ort_cpu_only=ort,
    )  # fmt: skip


# --------------------------------------------------------------------------- apportioning


@pytest.mark.unit
def test_apportioned_times_sum_to_each_operators_onnxruntime_time():
    nests = [_nest(0, "a"), _nest(1, "a"), _nest(2, "a"), _nest(3, "b"), _nest(4, "")]
    compiled = {"n000": 1e-6, "n001": 3e-6, "n002": 0.0, "n003": 5e-6, "n004": 2e-6}
    ort = {"a": 40e-6, "b": 7e-6, "reshape": 1e-6}
    t_cpu, record = apportion_ort(nests, compiled, ort)
    assert list(t_cpu) == [n.id for n in nests]
    assert math.fsum(t_cpu[k] for k in ("n000", "n001", "n002")) == pytest.approx(40e-6)
    assert t_cpu["n000"] == pytest.approx(10e-6) and t_cpu["n001"] == pytest.approx(30e-6)
    assert t_cpu["n002"] == 0.0  # a nest the compiled program does no work for
    assert t_cpu["n003"] == pytest.approx(7e-6)
    # No ONNX operator: the compiled time is kept, and said.
    assert t_cpu["n004"] == 2e-6 and record["nests_kept_compiled"] == ["n004"]
    # An operator with no nest (a view in the lowering) stays on the host, in no T_cpu.
    assert record["operators_without_nests"] == {"reshape": 1e-6}
    assert record["operators_without_nests_seconds"] == pytest.approx(1e-6)


@pytest.mark.unit
def test_operator_whose_nests_all_measured_zero_is_split_by_work():
    nests = [_nest(0, "a", n_total=100), _nest(1, "a", n_total=300)]
    t_cpu, record = apportion_ort(nests, {"n000": 0.0, "n001": 0.0}, {"a": 8e-6})
    assert t_cpu == {"n000": pytest.approx(2e-6), "n001": pytest.approx(6e-6)}
    assert record["shares_by_n_total"] == ["a"]


@pytest.mark.unit
def test_host_time_source_defaults_and_refusals():
    assert resolve_host_times(None, "m.onnx") == "ort"
    assert resolve_host_times(None, "m.mlir") == "compiled"
    assert resolve_host_times("jit", "m.mlir") == "jit"
    with pytest.raises(PlacementError, match="needs an ONNX model"):
        resolve_host_times("ort", "m.mlir")
    with pytest.raises(PlacementError, match="unknown host-time source"):
        resolve_host_times("fast", "m.onnx")
    with pytest.raises(PlacementError, match="'warm' or 'cold'"):
        resolve_cache("hot")


# --------------------------------------------------------------------------- baseline text


@pytest.mark.unit
def test_baseline_slower_than_onnxruntime_says_by_how_much():
    profile = _profile([3e-3, 1e-3], host_times="jit", ort=1e-3, detail={"source": "jit"})
    lines = baseline_lines(profile)
    assert lines[0].startswith("baseline: host times jit: MLIR JIT of the loop nests as lowered")
    assert "4.00x slower than ONNX Runtime" in lines[1]
    doc = baseline(profile)
    assert doc["host_times"] == "jit" and doc["recorded"] is True
    assert doc["ratio_to_ort"] == pytest.approx(4.0) and doc["slower_than_ort"] is True
    assert doc["ort_cpu_only"] == 1e-3 and doc["cpu_only"] == pytest.approx(4e-3)


@pytest.mark.unit
def test_baseline_not_slower_and_mlir_without_onnxruntime():
    fast = _profile([1e-3], host_times="ort", ort=1e-3, detail={"source": "ort"})
    assert "slower" not in " ".join(baseline_lines(fast))
    assert baseline(fast)["slower_than_ort"] is False
    mlir = _profile([1e-3], host_times="compiled", kind="mlir", detail={"source": "compiled"})
    assert "nothing for ONNX Runtime to run (.mlir input)" in baseline_lines(mlir)[1]
    assert baseline(mlir)["ratio_to_ort"] is None


# --------------------------------------------------------------------------- old files


@pytest.mark.unit
def test_old_nest_profile_without_the_new_fields_loads(tmp_path):
    data = json.loads(GOLDEN_PROFILE.read_text())
    for key in ("host_times", "cache", "ort_cpu_only"):
        data.pop(key, None)
    data["metadata"].pop("host_times_detail", None)
    path = tmp_path / "old.nests.json"
    path.write_text(json.dumps(data))
    profile = NestProfile.load(path)
    assert (profile.host_times, profile.cache, profile.ort_cpu_only) == ("jit", "warm", None)
    lines = baseline_lines(profile)
    assert "written before host-time sources were recorded" in lines[0]
    assert "not measured for this profile; re-profile to compare" in lines[1]
    assert baseline(profile)["recorded"] is False
    # Written back, the file says what it holds.
    profile.save(tmp_path / "new.nests.json")
    saved = json.loads((tmp_path / "new.nests.json").read_text())
    assert (saved["host_times"], saved["cache"], saved["ort_cpu_only"]) == ("jit", "warm", None)


@pytest.mark.parametrize(
    "key, value, message",
    [("host_times", "fast", "'host_times' must be one of"), ("cache", "hot", "'cache' must be"),
     ("ort_cpu_only", -1, "'ort_cpu_only' must be")],
)  # fmt: skip
@pytest.mark.unit
def test_bad_new_fields_are_refused(tmp_path, key, value, message):
    data = json.loads(GOLDEN_PROFILE.read_text())
    data[key] = value
    path = tmp_path / "bad.nests.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PlacementError, match=message):
        NestProfile.load(path)


# --------------------------------------------------------------------------- end to end


def add_softmax_model():
    add = helper.make_node("Add", ["A", "B"], ["C"], name="add0")
    sm = helper.make_node("Softmax", ["C"], ["Y"], name="sm", axis=-1)
    return model(
        [add, sm], [tensor("A", [64, 256]), tensor("B", [64, 256])], [tensor("Y", [64, 256])]
    )


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory):
    pytest.importorskip("torch_mlir")
    return save(add_softmax_model(), tmp_path_factory.mktemp("host_times"), "m.onnx")


@pytest.fixture(scope="module")
def profiles(onnx_path):
    from placement.profiling.nest_measure import profile_nests

    return {
        source: profile_nests(onnx_path, runs=2, warmup=1, counters=False, host_times=source,
                              min_seconds=0.3)
        for source in ("ort", "compiled", "jit")
    }


@pytest.mark.integration
def test_the_onnxruntime_profile_spans_min_seconds(profiles):
    ort = profiles["ort"].metadata["onnxruntime"]
    assert ort["min_seconds"] == 0.3
    # 2 runs of this model take far less than 0.3 s: spaced rounds were added
    assert ort["runs"] > 2


@pytest.mark.integration
def test_ort_times_sum_to_the_onnxruntime_operator_totals(profiles):
    profile = profiles["ort"]
    assert profile.host_times == "ort"
    ort = profile.metadata["onnxruntime"]
    by_node: dict[str, float] = {}
    for nest in profile.nests:
        by_node[nest.onnx_node] = by_node.get(nest.onnx_node, 0.0) + profile.t_cpu[nest.id]
    assert set(by_node) == {"add0", "sm"}
    for node, total in by_node.items():
        assert total == pytest.approx(ort["operator_seconds"][node], rel=1e-9)
    assert profile.ort_cpu_only == pytest.approx(ort["cpu_only_seconds"])
    assert profile.cpu_only == pytest.approx(profile.ort_cpu_only, rel=1e-9)
    detail = profile.metadata["host_times_detail"]
    assert detail["source"] == "ort" and detail["apportioning"]["nests_kept_compiled"] == []
    assert set(detail["jit_seconds"]) == set(profile.t_cpu)  # the compiled shares, kept


@pytest.mark.integration
def test_every_source_is_labelled_in_the_nest_profile_json(profiles, tmp_path):
    for source, profile in profiles.items():
        path = tmp_path / f"{source}.nests.json"
        profile.save(path)
        data = json.loads(path.read_text())
        assert data["host_times"] == source and data["cache"] == "warm"
        assert data["ort_cpu_only"] > 0  # measured for .onnx whatever the source
        assert data["metadata"]["host_times_detail"]["source"] == source
        timing = data["metadata"]["timing"]
        assert timing["compiled"] is (source != "jit")
        assert NestProfile.load(path).host_times == source
    assert profiles["jit"].t_cpu.keys() == profiles["compiled"].t_cpu.keys()


@pytest.mark.parametrize("source", ["ort", "compiled", "jit"])
@pytest.mark.integration
def test_every_source_is_labelled_in_the_result_json(profiles, tmp_path, capsys, source):
    from placement.cli import main

    path = tmp_path / f"{source}.nests.json"
    profiles[source].save(path)
    out_json = tmp_path / "result.json"
    model_path = profiles[source].model_path
    code = main(["solve", model_path, "--target", "pim", "--profile", str(path),
                 "--pim-cores", "32", "--json", str(out_json), "-q"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert f"baseline: host times {source}:" in out
    assert "baseline vs ONNX Runtime: CPU-only" in out
    doc = json.loads(out_json.read_text())
    assert doc["baseline"]["host_times"] == source
    assert doc["baseline"]["ort_cpu_only"] == pytest.approx(profiles[source].ort_cpu_only)
    assert doc["baseline"]["cache"] == "warm"
    assert doc["nest_profile"]["metadata"]["host_times_detail"]["source"] == source
    if doc["baseline"]["slower_than_ort"]:
        assert f"{doc['baseline']['ratio_to_ort']:.2f}x slower than ONNX Runtime" in out


@pytest.mark.integration
def test_cli_flags_profile_solve_and_refusals(onnx_path, tmp_path, capsys):
    from placement.cli import main

    out = tmp_path / "cold.nests.json"
    code = main(["profile", str(onnx_path), "--target", "pim", "-o", str(out), "--runs", "1",
                 "--warmup", "0", "--host-times", "compiled", "--cache", "cold",
                 "--counters-source", "none"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "baseline: host times compiled" in err
    data = json.loads(out.read_text())
    assert (data["host_times"], data["cache"]) == ("compiled", "cold")
    assert data["metadata"]["timing"]["cache"] == "cold"
    assert data["metadata"]["onnxruntime"]["cache"] == "cold"
    # A saved profile of another source or cache state is refused, not relabelled.
    for flags, message in ((["--host-times", "ort"], "measured with --host-times compiled"),
                           (["--cache", "warm"], "measured with --cache cold")):  # fmt: skip
        code = main(["solve", str(onnx_path), "--target", "pim", "--profile", str(out), *flags])
        assert code == 1
        assert message in capsys.readouterr().err
    # PIM options with the CIM target.
    for command in (["profile", str(onnx_path), "-o", str(tmp_path / "x.json")],
                    ["solve", str(onnx_path)]):  # fmt: skip
        code = main([*command, "--host-times", "jit"])
        assert code == 1
        assert "--host-times" in capsys.readouterr().err


@pytest.mark.integration
def test_gcc_missing_falls_back_with_a_warning_on_the_cli(onnx_path, tmp_path, capsys, monkeypatch):
    from placement.cli import main

    monkeypatch.setenv("PLACEMENT_MARKER_CC", "placement-no-such-compiler-xyz")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "p.nests.json"
    code = main(["profile", str(onnx_path), "--target", "pim", "-o", str(out), "--runs", "1",
                 "--warmup", "0", "--host-times", "jit", "--counters-source", "none"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "C nest markers unavailable" in line]
    assert len(warnings) == 1
    assert warnings[0].startswith("placement: warning: ")
    assert "Debian package gcc" in warnings[0]
    assert json.loads(out.read_text())["metadata"]["timing"]["markers"] == "python"
    assert shutil.which("placement-no-such-compiler-xyz") is None
