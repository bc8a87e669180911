"""The host optimization pipeline (mlir/optimize.py), C nest markers and cache flushing.

The compiled program must compute what ONNX Runtime computes (the timer's own check),
keep every nest a decision unit (same ids, operands, iteration counts), and its markers
must wrap each nest's outermost loop of any kind -- an scf.for after the GEMV
interchange. No test here times anything against a threshold: speed is measured by
benchmarks/pim_host_baseline.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_builders import const, model, save_all, tensor

from placement.errors import PlacementError
from placement.profiling.cache_flush import (
    MIN_FLUSH_BYTES,
    CacheFlusher,
    check_cache,
    flush_bytes,
    llc_bytes,
)
from placement.profiling.nest_markers import MarkersUnavailable, library_path, load_c_markers

MISSING_CC = "placement-no-such-compiler-xyz"


# --------------------------------------------------------------------------- models


def gemv_model(k: int = 256, n: int = 512):
    w = const("W", np.random.default_rng(1).standard_normal((k, n)) / 16)
    node = helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")
    return model([node], [tensor("X", [1, k])], [tensor("Y", [1, n])], [w])


def matmul_model(n: int = 64):
    w = const("W", np.random.default_rng(2).standard_normal((n, n)) / 8)
    node = helper.make_node("MatMul", ["A", "W"], ["Y"], name="mm")
    return model([node], [tensor("A", [n, n])], [tensor("Y", [n, n])], [w])


def softmax_model(rows: int = 16, cols: int = 256):
    node = helper.make_node("Softmax", ["X"], ["Y"], name="sm", axis=-1)
    return model([node], [tensor("X", [rows, cols])], [tensor("Y", [rows, cols])])


def layernorm_model(rows: int = 8, hidden: int = 128):
    scale = const("scale", np.random.default_rng(2).standard_normal(hidden))
    bias = const("bias", np.random.default_rng(3).standard_normal(hidden))
    node = helper.make_node("LayerNormalization", ["X", "scale", "bias"], ["Y"], name="ln")
    return model(
        [node], [tensor("X", [rows, hidden])], [tensor("Y", [rows, hidden])], [scale, bias]
    )


def transcendental_model(n: int = 4096):
    """tanh, erf and sigmoid (exp): every math rewrite of the pipeline."""
    nodes = [
        helper.make_node("Tanh", ["X"], ["t"], name="tanh"),
        helper.make_node("Erf", ["t"], ["e"], name="erf"),
        helper.make_node("Sigmoid", ["e"], ["Y"], name="sigmoid"),
    ]
    return model(nodes, [tensor("X", [n])], [tensor("Y", [n])])


def depthwise_model(side: int = 16, channels: int = 8):
    w = const("w", np.random.default_rng(4).standard_normal((channels, 1, 3, 3)) / 3)
    b = const("b", np.random.default_rng(5).standard_normal(channels) / 10)
    node = helper.make_node("Conv", ["X", "w", "b"], ["Y"], name="dw", group=channels,
                            kernel_shape=[3, 3], pads=[1, 1, 1, 1])  # fmt: skip
    shape = [1, channels, side, side]
    return model([node], [tensor("X", shape)], [tensor("Y", shape)], [w, b])


BUILDERS = {
    "gemv": gemv_model,
    "matmul": matmul_model,
    "softmax": softmax_model,
    "layernorm": layernorm_model,
    "transcendental": transcendental_model,
    "depthwise": depthwise_model,
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("torch_mlir")
    return save_all(BUILDERS, tmp_path_factory.mktemp("host_compile"))


def _lower(path):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import optimize_program

    program = lower_onnx(path)
    return program, optimize_program(program)


# --------------------------------------------------------------------------- compiled program


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.integration
def test_compiled_outputs_equal_onnxruntime_and_nests_are_kept(models, name):
    from placement.profiling.nest_timing import time_nests

    program, compiled = _lower(models[name])
    # The decision units are those of the lowering: same ids, operands, iteration counts.
    assert compiled.nests == program.nests
    assert compiled.nest_tags == program.nest_tags
    assert compiled.markers_at == "tagged-loop" and program.markers_at == "parallel"
    assert compiled.module_text != program.module_text
    timing = time_nests(compiled, runs=2, warmup=1, check_against_onnx=models[name])
    assert timing.max_abs_error is not None and timing.max_abs_error < 1e-3
    assert set(timing.t_cpu) == {n.id for n in program.nests}
    assert timing.metadata["compiled"] is True
    assert timing.metadata["markers_at"] == "tagged-loop"


@pytest.mark.integration
def test_pipeline_records_what_it_did(models):
    _program, compiled = _lower(models["transcendental"])
    record = compiled.metadata["host_optimization"]
    assert record["steps"] == [
        "interchange", "tile", "math", "dead-stores", "fastmath", "vector-width",
        "aligned-alloc",
    ]  # fmt: skip
    assert record["math_rewritten"] == {"math.tanh": 1, "math.erf": 1, "math.exp": 2}
    assert "math.exp" not in compiled.module_text and "math.erf" not in compiled.module_text
    _program, sm = _lower(models["softmax"])
    # The argmax Softmax's max-reduction carries along is never read: its stores go.
    assert sm.metadata["host_optimization"]["dead_stores_erased"] >= 2


@pytest.mark.integration
def test_steps_can_be_switched_off(models):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import optimize_program

    program = lower_onnx(models["gemv"])
    only_math = optimize_program(program, steps=("math",))
    assert only_math.metadata["host_optimization"]["steps"] == ["math"]
    assert "interchanged" not in only_math.metadata["host_optimization"]
    with pytest.raises(PlacementError, match="unknown optimization step"):
        optimize_program(program, steps=("tiling",))


@pytest.mark.integration
def test_matmul_interchange_is_recorded_with_its_loop_order(models):
    program, compiled = _lower(models["matmul"])
    [mm] = [n for n in program.nests if n.linalg_op == "linalg.matmul"]
    plan = compiled.metadata["host_optimization"]["interchanged"][mm.id]
    assert plan["permutation"] == [0, 2, 1]
    assert plan["loops"] == "parallel(d0) for(d2) parallel(d1)"
    # Same iteration space: N_iter = I*J, N_total = I*J*K as extracted before.
    assert (mm.n_iter, mm.n_total) == (64 * 64, 64 * 64 * 64)


@pytest.mark.integration
def test_markers_wrap_the_outermost_scf_for_of_an_interchanged_gemv(models):
    """After (i, k, j) the unit i loop is dropped: the GEMV nest's outermost loop is an
    scf.for over k, and the markers must be around it (not around the inner scf.parallel,
    which would time the nest once per k)."""
    from torch_mlir import ir

    from placement.profiling.mlir.extract import outermost_loops_by_tag
    from placement.profiling.mlir.lower import find_func, new_context
    from placement.profiling.mlir.markers import insert_nest_markers
    from placement.profiling.nest_timing import time_nests

    program, compiled = _lower(models["gemv"])
    [mm] = [n for n in program.nests if n.linalg_op == "linalg.matmul"]
    assert compiled.metadata["host_optimization"]["outermost_loops"] == {mm.id: "scf.for"}
    with new_context():
        module = ir.Module.parse(compiled.module_text)
        # Without explicit tags: the module's placement.nest_tags attribute is used.
        assert insert_nest_markers(module, compiled.func_name) == len(program.nests)
        func_op = find_func(module, compiled.func_name)
        [loop] = outermost_loops_by_tag(func_op)[compiled.nest_tags[mm.index]]
        assert loop.name == "scf.for"
        ops = [op.operation for op in func_op.regions[0].blocks[0].operations]
        at = next(i for i, op in enumerate(ops) if op == loop)
        enter, exit_ = ops[at - 1], ops[at + 1]
        assert enter.name == exit_.name == "func.call"
        assert "placement_nest_enter" in str(enter) and "placement_nest_exit" in str(exit_)
        assert str(ops[at - 2].attributes["value"]).startswith(f"{mm.index} ")
    timing = time_nests(compiled, runs=2, warmup=0, check_against_onnx=models["gemv"])
    assert timing.metadata["invocations_per_run"][mm.id] == 1  # once per run, not per k


@pytest.mark.integration
def test_jit_source_keeps_the_lowered_loops_and_parallel_markers(models):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.nest_timing import time_nests

    program = lower_onnx(models["gemv"])
    timing = time_nests(program, runs=1, warmup=0)
    assert timing.metadata["markers_at"] == "parallel"
    assert timing.metadata["compiled"] is False
    # The unoptimized GEMV keeps parallel(j){for k}: one invocation of its scf.parallel.
    assert set(timing.metadata["invocations_per_run"].values()) == {1}


@pytest.mark.integration
def test_program_without_linalg_text_is_refused(models):
    from dataclasses import replace

    from placement.profiling.mlir.optimize import optimize_program

    program, _compiled = _lower(models["softmax"])
    with pytest.raises(PlacementError, match="no tagged linalg text"):
        optimize_program(replace(program, linalg_text=""))


# --------------------------------------------------------------------------- C markers


@pytest.mark.unit
def test_missing_compiler_gives_one_line_naming_the_debian_package(tmp_path):
    with pytest.raises(MarkersUnavailable) as info:
        load_c_markers(MISSING_CC, directory=tmp_path)
    reason = info.value.reason
    assert "\n" not in reason
    assert MISSING_CC in reason and "Debian package gcc" in reason
    assert not list(tmp_path.iterdir())  # nothing half-built left behind


@pytest.mark.unit
def test_compiler_name_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_MARKER_CC", MISSING_CC)
    with pytest.raises(MarkersUnavailable, match=MISSING_CC):
        load_c_markers(directory=tmp_path)


@pytest.mark.unit
def test_library_is_cached_by_source_hash(tmp_path):
    a = library_path("gcc", tmp_path)
    assert a == library_path("gcc", tmp_path)
    assert a != library_path("clang", tmp_path)
    assert a.parent == tmp_path and a.suffix == ".so"


@pytest.mark.integration
def test_c_markers_build_once_and_count(tmp_path):
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    lib = load_c_markers("gcc", directory=tmp_path)
    assert lib.path.exists() and lib.path.parent == tmp_path
    assert load_c_markers("gcc", directory=tmp_path) is lib  # loaded once per process
    lib.zero(3)
    lib.enter(2)
    lib.exit(2)
    assert lib.calls[2] == 1 and lib.acc[2] >= 0
    lib.zero(3)
    assert lib.calls[2] == 0


@pytest.mark.integration
def test_timer_falls_back_to_python_markers_with_a_warning(models):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.nest_timing import time_nests

    program = lower_onnx(models["softmax"])
    timing = time_nests(program, runs=1, warmup=0, compiler=MISSING_CC)
    assert timing.metadata["markers"] == "python"
    [warning] = timing.metadata["warnings"]
    assert "Debian package gcc" in warning and "Python callback markers" in warning
    with pytest.raises(PlacementError, match="C nest markers unavailable.*Debian package gcc"):
        time_nests(program, runs=1, warmup=0, compiler=MISSING_CC, markers="c")


@pytest.mark.integration
def test_c_markers_are_the_default_where_gcc_exists(models):
    import shutil

    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.nest_timing import time_nests

    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    timing = time_nests(lower_onnx(models["softmax"]), runs=1, warmup=0)
    assert timing.metadata["markers"] == "c" and timing.metadata["warnings"] == []


# --------------------------------------------------------------------------- cache state


@pytest.mark.unit
def test_llc_size_from_sysfs(tmp_path):
    for index, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
         (3, "Unified", "30M")]
    ):  # fmt: skip
        entry = tmp_path / f"index{index}"
        entry.mkdir()
        (entry / "level").write_text(f"{level}\n")
        (entry / "type").write_text(f"{kind}\n")
        (entry / "size").write_text(f"{size}\n")
    assert llc_bytes(tmp_path) == 30 << 20
    assert llc_bytes(tmp_path / "missing") is None
    assert flush_bytes(30 << 20) == 64 << 20  # at least 64 MiB
    assert flush_bytes(300 << 20) == 600 << 20  # else twice the LLC
    assert flush_bytes(0) == max(MIN_FLUSH_BYTES, 64 << 20)


@pytest.mark.unit
def test_flusher_touches_its_buffer():
    flusher = CacheFlusher(nbytes=1 << 20)
    flusher.flush()
    flusher.flush()
    meta = flusher.metadata()
    assert meta["cache"] == "cold" and meta["cache_flush_bytes"] == 1 << 20
    assert flusher.flushes == 2 and meta["cache_flush_mean_seconds"] >= 0
    with pytest.raises(PlacementError, match="'warm' or 'cold'"):
        check_cache("lukewarm")


@pytest.mark.integration
def test_cold_cache_is_recorded_by_the_timer(models):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.nest_timing import time_nests

    timing = time_nests(lower_onnx(models["softmax"]), runs=1, warmup=0, cache="cold")
    assert timing.metadata["cache"] == "cold"
    assert timing.metadata["cache_flush_bytes"] >= MIN_FLUSH_BYTES
    warm = time_nests(lower_onnx(models["softmax"]), runs=1, warmup=0)
    assert warm.metadata["cache"] == "warm" and "cache_flush_bytes" not in warm.metadata


@pytest.mark.integration
def test_cold_cache_in_the_onnxruntime_profiler(models):
    from placement.profiling.ort.measure import profile_model

    cold = profile_model(models["softmax"], runs=1, warmup=0, min_seconds=0, cache="cold",
                         round_pause=0)
    assert cold.metadata["cache"] == "cold" and cold.metadata["cache_flush_bytes"] > 0
    warm = profile_model(models["softmax"], runs=1, warmup=0, min_seconds=0, round_pause=0)
    assert warm.metadata["cache"] == "warm" and warm.metadata["cache_flush_bytes"] is None
