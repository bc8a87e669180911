"""The ``tile`` step of the host optimization pipeline (mlir/tiling.py).

A tiled GEMM must compute what ONNX Runtime computes (partial tiles included), stay one
nest whose outermost (tile) loop the markers wrap exactly once, record its tile sizes,
and every program without a GEMM whose weight overflows L2 must come out unchanged.
The caches are given (small ones) so that what is tiled does not depend on this host.
No timing thresholds: benchmarks/pim_host_baseline.py --without tile measures the gain.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_builders import const, model, save_all, tensor
from test_host_compile import depthwise_model, layernorm_model, softmax_model

from placement.profiling.cache_geometry import Cache, CacheGeometry
from placement.profiling.mlir.tiling import tile_sizes_for

# 4 KiB L1d, 64 KiB L2: Tj = 4096 / 16 / 4 = 64, Tk = 65536 / 2 / (64 * 4) = 128.
SMALL = CacheGeometry(
    Cache(32 << 10, 8, 64), Cache(4 << 10, 4, 64), Cache(64 << 10, 8, 64), "L2 (test)", "test"
)


def _matmul(rows: int, k: int, n: int, batch: int | None = None):
    lead = [] if batch is None else [batch]
    w = const("W", np.random.default_rng(7).standard_normal(lead + [k, n]) / 8)
    node = helper.make_node("MatMul", ["A", "W"], ["Y"], name="mm")
    return model([node], [tensor("A", lead + [rows, k])], [tensor("Y", lead + [rows, n])], [w])


BUILDERS = {
    # W 200 x 136 (106 KiB > half the L2): k tiles 128 + 72, j tiles 64 + 64 + 8.
    "matmul": lambda: _matmul(96, 200, 136),
    # Per batch W 200 x 80 (62.5 KiB): batch tiled by 1, k tiles 128 + 72, j 64 + 16.
    "batch_matmul": lambda: _matmul(32, 200, 80, batch=3),
    "gemv": lambda: _matmul(1, 200, 136),  # one row: W is used once, nothing to keep
    "small_matmul": lambda: _matmul(64, 64, 64),  # W (16 KiB) fits in half the L2
    "softmax": softmax_model,
    "layernorm": layernorm_model,
    "depthwise": depthwise_model,
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    pytest.importorskip("torch_mlir")
    return save_all(BUILDERS, tmp_path_factory.mktemp("tiling"))


def _compile(path, **kwargs):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import optimize_program

    program = lower_onnx(path)
    return program, optimize_program(program, caches=SMALL, **kwargs)


@pytest.mark.unit
def test_tile_sizes_are_the_largest_powers_of_two_that_fit():
    assert tile_sizes_for(SMALL.d1, SMALL.ll) == (128, 64)
    assert tile_sizes_for(Cache(48 << 10, 12, 64), Cache(1 << 20, 16, 64)) == (256, 512)
    for d1_kib in (16, 32, 48, 64, 80):
        for ll_kib in (256, 512, 1024, 1280, 2048):
            tk, tj = tile_sizes_for(Cache(d1_kib << 10, 8, 64), Cache(ll_kib << 10, 16, 64))
            # brute force: the largest powers of two within the budgets
            assert tj == max(t for t in (1 << e for e in range(20)) if 16 * 4 * t <= d1_kib << 10)
            assert tk == max(t for t in (1 << e for e in range(20))
                             if 2 * 4 * t * tj <= ll_kib << 10)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "op", "sizes"),
    [("matmul", "linalg.matmul", [0, 128, 64]), ("batch_matmul", "linalg.batch_matmul",
                                                 [1, 0, 128, 64])],
)  # fmt: skip
@pytest.mark.integration
def test_tiled_gemm_equals_onnxruntime_and_stays_one_marked_nest(models, name, op, sizes):
    from torch_mlir import ir

    from placement.profiling.mlir.extract import outermost_loops_by_tag
    from placement.profiling.mlir.lower import find_func, new_context
    from placement.profiling.mlir.markers import insert_nest_markers
    from placement.profiling.nest_timing import time_nests

    program, compiled = _compile(models[name])
    [mm] = [n for n in program.nests if n.linalg_op == op]
    record = compiled.metadata["host_optimization"]
    assert "tile" in record["steps"]
    assert record["tiled"] == {
        mm.id: {"tile_sizes": sizes, "weight_operand": 1,
                "weight_block_bytes": 4 * sizes[-1] * sizes[-2], "weight_packed": True,
                "l1d_bytes": 4 << 10, "l2_bytes": 64 << 10},
    }  # fmt: skip
    # The decision units are the lowering's.
    assert compiled.nests == program.nests and compiled.nest_tags == program.nest_tags
    assert record["outermost_loops"] == {mm.id: "scf.for"}
    with new_context():
        module = ir.Module.parse(compiled.module_text)
        func_op = find_func(module, compiled.func_name)
        [outer] = outermost_loops_by_tag(func_op)[compiled.nest_tags[mm.index]]
        # the tile loops (each of several iterations), then the interchanged loops
        text = str(outer)
        assert text.count("scf.for") == 1 + sum(1 for s in sizes if s)
        # the weight block packed into one contiguous buffer per tile (freed by the
        # JIT's buffer-deallocation-pipeline, which refuses explicit deallocs)
        assert text.count("memref.alloc") == 1 and "memref.dealloc" not in text
        assert insert_nest_markers(module, compiled.func_name) == len(program.nests)
        marked = module.operation.get_asm()
    assert marked.count("call @placement_nest_enter") == len(program.nests)
    timing = time_nests(compiled, runs=2, warmup=0, check_against_onnx=models[name])
    assert timing.max_abs_error is not None and timing.max_abs_error < 1e-3
    assert timing.metadata["invocations_per_run"][mm.id] == 1


@pytest.mark.parametrize(
    "name", ["gemv", "small_matmul", "softmax", "layernorm", "depthwise"]
)  # fmt: skip
@pytest.mark.integration
def test_programs_without_a_gemm_overflowing_l2_are_unchanged(models, name):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import DEFAULT_STEPS, optimize_program

    program = lower_onnx(models[name])
    with_tile = optimize_program(program, caches=SMALL)
    without = optimize_program(program, [s for s in DEFAULT_STEPS if s != "tile"], SMALL)
    assert with_tile.metadata["host_optimization"]["tiled"] == {}
    assert "tiled" not in without.metadata["host_optimization"]
    assert with_tile.module_text == without.module_text


@pytest.mark.integration
def test_tiling_without_the_interchange_leaves_named_matmuls(models):
    """The step tiles the generic ops the interchange makes; alone it changes nothing."""
    program, compiled = _compile(models["matmul"], steps=("tile",))
    assert compiled.metadata["host_optimization"]["tiled"] == {}
    _program, loops_only = _compile(models["matmul"], steps=())
    assert compiled.module_text == loops_only.module_text
