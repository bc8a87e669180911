"""Every input checked before work starts: one line, exit 1, no traceback, nothing on disk.

Huge declared shapes (the memory estimate, ``--memory-limit``), unusable output locations,
failures that used to leave directories behind, values that used to change silently (a
grid value given twice, a profile with latencies for operators the model lacks) and
non-numeric model inputs, for each command that takes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run
from onnx import TensorProto, helper
from onnx_builders import conv_model, model, save, tensor

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"  # of INT8
HUGE = "input 'x' [1000000, 1000000] float32 needs 4.0 TB, more than the limit of"
needs_proc = pytest.mark.skipif(not Path("/proc/self/mounts").exists(), reason="not Linux")


def listing(directory: Path) -> set[Path]:
    return set(directory.rglob("*"))


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """A working directory whose contents a test compares before and after."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def huge_model(directory: Path) -> Path:
    """Relu of a declared [1000000, 1000000] float32 input: 4 TB per tensor."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    shape = [1_000_000, 1_000_000]
    return save(model([node], [tensor("x", shape)], [tensor("y", shape)]), directory, "huge.onnx")


def refused(capsys, work: Path, *argv, fragments=()) -> None:
    """``placement ARGV`` fails with one line holding ``fragments`` and writes nothing."""
    before = listing(work)
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, *fragments)
    assert listing(work) == before


# --------------------------------------------------------------------------- huge shapes


@pytest.mark.unit
@pytest.mark.parametrize(
    "argv",
    [
        ["solve", "{m}", "--target", "cim", "--json", "r.json"],
        ["profile", "{m}", "-o", "p.json"],
        ["sweep", "{m}", "--target", "cim", "--crossbars", "25", "-o", "sweep"],
        ["bench", "{m}", "--grid", "single", "-o", "bench"],
    ],
    ids=["solve", "profile", "sweep", "bench"],
)
def test_a_huge_declared_shape_is_refused_before_allocation(capsys, work, argv):
    path = huge_model(work)
    argv = [a.replace("{m}", str(path)) for a in argv]
    refused(capsys, work, *argv, fragments=(HUGE, "half the available memory", "--memory-limit"))


@pytest.mark.integration  # lowered with torch-mlir before the estimate of its nests
def test_a_huge_declared_shape_is_refused_for_pim(capsys, work):
    refused(capsys, work, "solve", huge_model(work), "--target", "pim", "--json", "r.json",
            fragments=(HUGE,))  # fmt: skip


@pytest.mark.unit
def test_a_huge_image_names_its_largest_tensor(capsys, work):
    path = save(conv_model(3, 8, [3, 3], [30000, 30000]), work)  # 10.8 GB in, 28.8 GB out
    refused(capsys, work, "solve", path, "--memory-limit", "8", "--json", "r.json",
            fragments=("output 'Y' [1, 8, 30000, 30000] float32 needs 28.8 GB, more than"
                       " the limit of 8.0 GB (--memory-limit 8)",))  # fmt: skip


@pytest.mark.unit
def test_memory_limit_sets_the_limit(capsys, work):
    refused(capsys, work, "profile", INT8, "-o", "p.json", "--memory-limit", "1e-6",
            fragments=("needs", "more than the limit of 1.0 kB (--memory-limit 1e-06)"))
    with pytest.raises(SystemExit) as info:  # a usage error, as argparse reports it
        run(capsys, "profile", INT8, "-o", "p.json", "--memory-limit", "0")
    assert info.value.code == 2 and "--memory-limit: expected a positive" in capsys.readouterr().err


@pytest.mark.unit
@pytest.mark.parametrize(
    "argv",
    [
        ["solve", INT8, "--target", "cim", "--json", "r.json"],
        ["profile", INT8, "-o", "p.json"],
        ["sweep", INT8, "--target", "cim", "--crossbars", "25", "-o", "sweep"],
    ],
    ids=["solve", "profile", "sweep"],
)
def test_a_model_larger_than_the_available_memory_is_refused(capsys, work, monkeypatch, argv):
    import placement.onnxfile

    monkeypatch.setattr(placement.onnxfile, "available_memory_bytes", lambda: 100_000)
    size = INT8.stat().st_size / 1e9
    refused(capsys, work, *argv, fragments=(f"{INT8}: the model takes {size:.3g} GB",
            "more than the 0.0001 GB of memory available (MemAvailable)"))  # fmt: skip


# --------------------------------------------------------------------------- output locations


@needs_proc
@pytest.mark.unit
@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", INT8, "--profile", PROFILE, "--crossbars", "25", "-o", "/proc/sweepdir"],
        ["bench", INT8, "--grid", "single", "-o", "/proc/benchdir"],
        ["profile", INT8, "-o", "/proc/p.json"],
        ["solve", INT8, "--profile", PROFILE, "--json", "/sys/r.json"],
        ["export", INT8, "--profile", PROFILE, "-o", "/proc/m.lp"],
        ["nests", INT8, "--json", "/dev/nests.json"],
    ],
    ids=["sweep", "bench", "profile", "solve", "export", "nests"],
)
def test_an_output_on_a_special_filesystem_is_refused(capsys, work, argv):
    refused(capsys, work, *argv, fragments=("special filesystem",))


@pytest.mark.unit
@pytest.mark.parametrize(
    "argv",
    [
        ["bench", INT8, "--grid", "single", "-o", "some_file/dir"],
        ["sweep", INT8, "--profile", PROFILE, "--crossbars", "25", "-o", "some_file/dir"],
        ["profile", INT8, "-o", "some_file/p.json"],
        ["solve", INT8, "--profile", PROFILE, "--json", "some_file/r.json"],
    ],
    ids=["bench", "sweep", "profile", "solve"],
)
def test_an_output_under_a_file_is_refused(capsys, work, argv):
    (work / "some_file").write_text("not a directory")
    refused(capsys, work, *argv, fragments=("some_file is a file, not a directory",))


# --------------------------------------------------------------------------- no litter


@pytest.mark.unit
@pytest.mark.parametrize(
    "networks, extra, fragment",
    [
        (["nonet"], [], "neither a network name"),
        (["junk.onnx"], [], "not a readable ONNX model"),
        ([str(INT8)], ["--hardware", "nohw"], "hardware 'nohw'"),
        ([str(INT8), "nonet"], [], "nonet: neither"),  # the second one: nothing profiled
    ],
    ids=["unknown-network", "unreadable-model", "unknown-hardware", "second-network"],
)
def test_bench_bad_input_leaves_no_directory(capsys, work, networks, extra, fragment):
    (work / "junk.onnx").write_bytes(b"not a model")
    refused(capsys, work, "bench", *networks, "--grid", "single", *extra, "-o", "out/bench",
            fragments=(fragment,))  # fmt: skip


def relu_int16(directory: Path) -> Path:
    """A valid model ONNX Runtime has no kernel for (Relu on int16): profiling it fails."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    t = TensorProto.INT16
    return save(model([node], [tensor("x", [4], t)], [tensor("y", [4], t)]), directory, "i16.onnx")


@pytest.mark.integration  # the first network is profiled, then the second fails
def test_bench_failing_while_profiling_removes_what_it_created(capsys, work):
    refused(capsys, work, "bench", INT8, relu_int16(work), "--grid", "single",
            "--profile-runs", "1", "-q", "-o", "out/bench",
            fragments=("i16.onnx", "ONNX Runtime cannot load the model"))  # fmt: skip


@pytest.mark.integration
def test_sweep_failing_while_profiling_removes_what_it_created(capsys, work):
    refused(capsys, work, "sweep", INT8, relu_int16(work), "--crossbars", "25", "--runs", "1",
            "--warmup", "0", "-q", "-o", "sweep",
            fragments=("i16.onnx", "ONNX Runtime cannot load the model"))  # fmt: skip


# --------------------------------------------------------------------------- no silent changes


@pytest.mark.unit
def test_sweep_grid_value_given_twice(capsys, work):
    refused(capsys, work, "sweep", INT8, "--profile", PROFILE, "--crossbars", "25,50,25",
            "-o", "sweep", fragments=("grid value 25 for 'crossbars' is given twice",))


@pytest.mark.unit
def test_bench_grid_value_given_twice(capsys, work):
    refused(capsys, work, "bench", INT8, "--grid", "25,25x50,100,50", "-o", "bench",
            fragments=("crossbar count 25 given twice",))
    refused(capsys, work, "bench", INT8, "--grid", "25x50,100,50", "-o", "bench",
            fragments=("MVM latency 50 given twice",))


@pytest.mark.unit
def test_pim_cores_given_twice(capsys, work):
    refused(capsys, work, "solve", INT8, "--target", "pim", "--pim-cores", "32,64,32",
            fragments=("--pim-cores 32,64,32: 32 given twice",))


PIM_MODEL = ROOT / "examples" / "resnet_tiny.onnx"
PIM_PROFILE = ROOT / "tests" / "golden" / "resnet_tiny.nests.json"  # of PIM_MODEL


@pytest.mark.unit
@pytest.mark.parametrize(
    ("memory_lines", "fragment"),
    [
        ('memory = "hbm"', "'pim.memory' must be one of shared, partitioned"),
        ('memory = "shared"', "needs 'pim.host_cache_mib'"),
        ('memory = "partitioned"', "needs 'pim.link_to_pim_gbps'"),
    ],
    ids=["unknown", "shared-without-cache", "partitioned-without-link"],
)
def test_a_pim_hardware_file_with_a_bad_memory_architecture(capsys, work, memory_lines, fragment):
    from placement.hardware.pim import load_pim_hardware

    table = load_pim_hardware("pim-icelake").pim.to_file_units()
    lines = [f"{k} = {v!r}".replace("'", '"') for k, v in table.items()
             if k not in ("memory", "host_cache_mib")]  # fmt: skip
    hw = work / "hw.toml"
    hw.write_text('name = "mine"\n[host]\nname = "x"\narch = "x86_64"\n[pim]\n'
                  + "\n".join([*lines, memory_lines]) + "\n")  # fmt: skip
    refused(capsys, work, "solve", PIM_MODEL, "--target", "pim", "--profile", PIM_PROFILE,
            "--pim-hardware", hw, "--json", "r.json", fragments=("hw.toml", fragment))


@pytest.mark.unit
def test_a_copy_accounting_the_pim_hardware_cannot_price(capsys, work):
    refused(capsys, work, "solve", PIM_MODEL, "--target", "pim", "--profile", PIM_PROFILE,
            "--copy", "partitioned", "--json", "r.json",
            fragments=("--copy partitioned needs the host-PIM link bandwidths",))


def edited_profile(directory: Path, *, extra: bool, missing: bool) -> Path:
    data = json.loads(PROFILE.read_text())
    if extra:
        data["latencies"]["ghost_op"] = 1e-5
    if missing:
        del data["latencies"][next(iter(data["latencies"]))]
    path = directory / "edited.profile.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.unit
@pytest.mark.parametrize(
    "extra, missing, fragments",
    [
        (True, False, ["a latency for 'ghost_op', which the model does not have (1 extra)"]),
        (False, True, ["no latency for operator 'input_QuantizeLinear' (1 missing)"]),
        (True, True, ["'input_QuantizeLinear' (1 missing)", "'ghost_op', which the model"]),
    ],
    ids=["extra", "missing", "both"],
)
def test_a_profile_of_other_operators_is_refused(capsys, work, extra, missing, fragments):
    profile = edited_profile(work, extra=extra, missing=missing)
    for argv in (["solve", INT8, "--json", "r.json"], ["export", INT8, "-o", "m.lp"],
                 ["sweep", INT8, "--crossbars", "25", "-o", "sweep"]):  # fmt: skip
        refused(capsys, work, *argv, "--profile", profile, fragments=("edited.profile.json",
                                                                     *fragments))


@pytest.mark.unit
def test_an_old_profile_without_folded_nodes_still_works(capsys, work):
    """Folded constant nodes may be absent from a profile (their time is zero)."""
    from placement.cim.instance import check_latencies
    from placement.graph import load_graph

    graph = load_graph(INT8)
    latencies = json.loads(PROFILE.read_text())["latencies"]
    check_latencies(graph, {k: v for k, v in latencies.items() if k not in graph.folded})
    check_latencies(graph, latencies)


# --------------------------------------------------------------------------- non-numeric inputs


def map_input_model(directory: Path) -> Path:
    value = helper.make_tensor_type_proto(TensorProto.FLOAT, [])
    m = helper.make_value_info("m", helper.make_map_type_proto(TensorProto.INT64, value))
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    return save(model([node], [m, tensor("x", [4])], [tensor("y", [4])]), directory, "map.onnx")


def string_input_model(directory: Path) -> Path:
    node = helper.make_node("Identity", ["s"], ["y"], name="id")
    t = TensorProto.STRING
    return save(model([node], [tensor("s", [1], t)], [tensor("y", [1], t)]), directory, "s.onnx")


@pytest.mark.unit
@pytest.mark.parametrize("make, what", [(map_input_model, "is a map, not a tensor"),
                                        (string_input_model, "has element type STRING")])
def test_a_map_or_string_input_gets_a_hint_that_applies(capsys, work, make, what):
    before = listing(work)
    code, _, err = run(capsys, "solve", make(work), "--json", "r.json")
    assert_one_line_error(code, err, what, "onnx.utils.extract_model")
    assert "fixed input shape" not in err and "make_dynamic_shape_fixed" not in err
    assert not (work / "r.json").exists() and len(listing(work) - before) == 1  # the model


@pytest.mark.integration  # the PIM lowering's own check (torch-mlir)
@pytest.mark.parametrize("make, what", [(map_input_model, "is a map, not a tensor"),
                                        (string_input_model, "is a string tensor")])
def test_a_map_or_string_input_gets_the_hint_for_pim(capsys, work, make, what):
    code, _, err = run(capsys, "solve", make(work), "--target", "pim")
    assert_one_line_error(code, err, what, "onnx.utils.extract_model")



@pytest.mark.unit
@pytest.mark.parametrize("value", ["0", "-2", "1.5", "all", ""])
def test_workers_must_be_a_positive_integer_or_auto(capsys, work, value):
    refused(capsys, work, "solve", str(INT8), "--target", "cim", "--workers", value,
            fragments=(f"--workers must be a positive integer or 'auto', got {value!r}",))
