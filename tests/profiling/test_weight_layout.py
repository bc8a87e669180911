"""Weights handed to the lowered program in the layout its products read (weight_layout.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx_builders import const, model, save, tensor

from placement.profiling.mlir import weight_layout
from placement.profiling.mlir.weight_layout import WeightFile

pytest.importorskip("torch_mlir")

from placement.profiling.mlir.lower import lower_onnx  # noqa: E402
from placement.profiling.nest_timing import program_arguments, time_nests  # noqa: E402

K, N, M = 96, 80, 112  # distinct sizes: a transposition mistake changes shapes or values
BIG = 2400  # BIG x M floats: 1.07 MB, more than constant folding evaluates


def _random(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def projections_model(batch: tuple[int, ...] = (1, 3), big: int = BIG):
    """x (batch..., K) -> MatMul W1 -> Gemm(transB=1) W2 -> Transpose(W3) -> MatMul.

    The Transpose's weight (``big_transpose`` squared floats) exceeds what constant folding
    evaluates (1 MB), so it reaches the lowering as a Transpose of a weight."""
    rng = np.random.default_rng(7)
    rows = int(np.prod(batch))
    w1, w2 = _random(rng, K, N), _random(rng, M, N)  # W2 is (out, in): transB=1
    w3 = _random(rng, big, M)  # transposed: (M, big)
    shape2d = const("shape2d", [rows, N], dtype=np.int64)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"], name="proj_matmul"),
        helper.make_node("Reshape", ["h1", "shape2d"], ["h2"], name="flatten"),
        helper.make_node("Gemm", ["h2", "W2", "b2"], ["h3"], name="proj_gemm", transB=1),
        helper.make_node("Transpose", ["W3"], ["W3t"], name="weight_t", perm=[1, 0]),
        helper.make_node("Reshape", ["h3", "shape_out_in"], ["h4"], name="unflatten"),
        helper.make_node("MatMul", ["h4", "W3t"], ["y"], name="proj_transposed"),
    ]
    inits = [
        const("W1", w1), const("W2", w2), const("b2", _random(rng, M)), const("W3", w3),
        shape2d, const("shape_out_in", [*batch, M], dtype=np.int64),
    ]  # fmt: skip
    return model(nodes, [tensor("x", [*batch, K])], [tensor("y", [*batch, big])], inits)


def _weight_copies(program) -> list[str]:
    """Nests that only move a weight argument into a temporary (transpose or broadcast)."""
    weights = {f"arg{i}" for i, a in enumerate(program.args) if a.role == "weight"}
    return [
        n.id
        for n in program.nests
        if n.linalg_op in ("linalg.transpose", "linalg.generic")
        and any(op.buffer in weights and op.read for op in n.operands)
        and not n.body_ops.get("arith.addf")
        and not n.body_ops.get("arith.mulf")
    ]


@pytest.mark.integration
@pytest.mark.parametrize("external", [False, True])
@pytest.mark.parametrize("batch", [(1, 3), (1, 1, 2)])
def test_no_weight_copy_nest_and_outputs_equal_onnxruntime(tmp_path, external, batch):
    path = save(
        projections_model(batch), tmp_path, external_data="model.data" if external else None
    )
    program = lower_onnx(path)
    assert _weight_copies(program) == []
    assert not [n.id for n in program.nests if n.linalg_op == "linalg.transpose"]
    folds = {f["node"]: f for f in program.metadata["weight_layout_folds"]}
    assert set(folds) == {"proj_matmul", "proj_gemm", "weight_t", "proj_transposed"}
    assert all("fold" in f for f in folds.values())
    # Every product still belongs to its ONNX node.
    products = {n.onnx_node for n in program.nests if "matmul" in n.linalg_op}
    assert products == {"proj_matmul", "proj_gemm", "proj_transposed"}
    # The folded weights are where they were: the large one in its file (read when the
    # program runs), the small ones (up to 64 KB, read with the graph) in memory.
    weight_args = {a.name: a for a in program.args if a.role == "weight"}
    for name in ("W1", "W2^T", "W3t"):
        assert program.weights[name].shape == weight_args[name].shape
        assert isinstance(program.weights[name], WeightFile) == (name == "W3t")
    assert weight_args["W2^T"].shape == (N, M) and weight_args["W3t"].shape[-2:] == (M, BIG)
    assert "W3" not in program.weights and "W2" not in program.weights  # no second copy
    timing = time_nests(program, runs=1, warmup=0, check_against_onnx=path)
    assert timing.max_abs_error is not None


@pytest.mark.integration
def test_batch_larger_than_one_is_left_and_says_why(tmp_path):
    path = save(projections_model((2, 3)), tmp_path)
    program = lower_onnx(path)
    folds = {f["node"]: f for f in program.metadata["weight_layout_folds"]}
    assert "batch [2]" in folds["proj_matmul"]["not_folded"]
    assert "fold" in folds["proj_gemm"]  # the 2-D product folds whatever the batch
    assert len(_weight_copies(program)) == 2  # W1 and W3t broadcast by torch-mlir
    time_nests(program, runs=1, warmup=0, check_against_onnx=path)


@pytest.mark.integration
def test_weight_read_by_two_products_keeps_one_layout(tmp_path):
    # W feeds a 3-D MatMul and a Gemm(transB=1): the Gemm gets its own transposed
    # argument, the MatMul keeps W as it is (not widened under another reader).
    rng = np.random.default_rng(3)
    w = _random(rng, K, K)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Reshape", ["h", "s"], ["h2"], name="flat"),
        helper.make_node("Gemm", ["h2", "W"], ["y"], name="gemm", transB=1),
    ]
    proto = model(nodes, [tensor("x", [1, 2, K])], [tensor("y", [2, K])],
                  [const("W", w), const("s", [2, K], dtype=np.int64)])  # fmt: skip
    path = save(proto, tmp_path)
    program = lower_onnx(path)
    folds = {f["node"]: f for f in program.metadata["weight_layout_folds"]}
    assert folds["mm"]["not_folded"] == "the weight has other readers"
    assert "fold" in folds["gemm"]
    assert {a.name for a in program.args if a.role == "weight"} == {"W", "W^T"}
    time_nests(program, runs=1, warmup=0, check_against_onnx=path)


@pytest.mark.unit
@pytest.mark.parametrize("block", [7, 1 << 20])
def test_transposed_weight_file_reads_the_transposed_values(tmp_path, monkeypatch, block):
    monkeypatch.setattr(weight_layout, "READ_BLOCK_BYTES", block)  # several blocks, one
    rng = np.random.default_rng(0)
    array = rng.standard_normal((5, 3, 4)).astype(np.float32)
    path = tmp_path / "w.bin"
    path.write_bytes(b"head" + array.tobytes())
    stored = WeightFile(path, 4, array.shape, "float32")
    for perm in [(1, 0, 2), (2, 1, 0), (0, 2, 1)]:
        moved = stored.transposed(perm)
        assert not moved.in_file_order and moved.stored_shape == array.shape
        np.testing.assert_array_equal(moved.read(), np.transpose(array, perm))
        # Composition: transposing back is the file's order again.
        back = moved.transposed(tuple(int(i) for i in np.argsort(perm)))
        assert back.in_file_order
        widened = moved.transposed((1, 0, 2)).with_unit_axes(2)
        want = np.transpose(np.transpose(array, perm), (1, 0, 2))[None, None]
        got = widened.read()
        assert got.ctypes.data % 64 == 0
        np.testing.assert_array_equal(got, want)
    assert stored.with_unit_axes(1).in_file_order  # same bytes: read as they are


@pytest.mark.integration
def test_simulation_driver_gets_transposed_values(tmp_path):
    # The cache simulation's driver reads in-order weights from the model file itself;
    # a transposed one is written, transposed, beside the inputs.
    from placement.profiling.simulated import write_arguments

    path = save(projections_model(), tmp_path)
    program = lower_onnx(path)
    data, manifest = tmp_path / "args.bin", tmp_path / "args.txt"
    write_arguments(program, 0, data, manifest)
    lines = manifest.read_text().splitlines()
    expected = program_arguments(program, seed=0)
    for arg, line, want in zip(program.args, lines, expected, strict=True):
        offset, nbytes, where = line.split(" ", 2)
        if arg.role != "weight":
            continue
        with open(where, "rb") as fh:
            fh.seek(int(offset))
            got = np.frombuffer(fh.read(int(nbytes)), dtype=arg.dtype).reshape(arg.shape)
        np.testing.assert_array_equal(got, want)
        value = program.weights[arg.name]
        from_model = isinstance(value, WeightFile) and value.in_file_order
        assert (where != str(data.absolute())) == from_model
