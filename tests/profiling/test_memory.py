"""The memory estimate before profiling (placement.profiling.memory): peaks against a brute
force over the steps, hand-counted bytes of small models and programs, the limit and the
one-line refusal."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from onnx import TensorProto, helper
from onnx_builders import model, save, tensor

from placement.errors import PlacementError
from placement.nests import LoopNest, NestOperand
from placement.onnxfile import read_onnx
from placement.profiling.memory import (
    MemoryLimit,
    Tensor,
    available_memory,
    check_estimate,
    check_model_memory,
    estimate,
    memory_limit,
    onnx_estimate,
    program_estimate,
)
from placement.profiling.mlir.lower import ArgInfo, LoweredProgram

pytestmark = pytest.mark.unit


def brute_force_peak(tensors, steps) -> int:
    """Per step, the bytes of every tensor alive then, from its definition (module docstring)."""
    touched = {
        t.name: [i for i, (_, names) in enumerate(steps) if t.name in names] for t in tensors
    }
    best = 0
    for step in range(len(steps)):
        total = 0
        for t in tensors:
            uses = touched[t.name]
            if t.role == "input":
                alive = True
            elif not uses:
                alive = False
            elif t.role == "output":
                alive = uses[0] <= step
            else:
                alive = uses[0] <= step <= uses[-1]
            total += t.nbytes if alive else 0
        best = max(best, total)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_peak_matches_brute_force_on_random_runs(seed):
    rng = random.Random(seed)
    roles = ("input", "output", "intermediate")
    tensors = [
        Tensor(rng.choice(roles), f"t{i}", (n := rng.randint(1, 50),), "uint8", n)
        for i in range(rng.randint(1, 12))
    ]
    steps = [
        (f"s{k}", rng.sample([t.name for t in tensors], rng.randint(0, len(tensors))))
        for k in range(rng.randint(1, 8))
    ]
    found = estimate(tensors, steps)
    assert found.peak_bytes == brute_force_peak(tensors, steps)
    assert sum(t.nbytes for t in found.alive) == found.peak_bytes


def relu_chain(tmp_path: Path, shape=(1000,)) -> Path:
    """x -> r1 -> a -> r2 -> b -> r3 -> y, float32: every tensor 4 x prod(shape) bytes."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="r1"),
        helper.make_node("Relu", ["a"], ["b"], name="r2"),
        helper.make_node("Relu", ["b"], ["y"], name="r3"),
    ]
    return save(model(nodes, [tensor("x", shape)], [tensor("y", shape)]), tmp_path)


def test_onnx_estimate_of_a_chain_by_hand(tmp_path):
    found = onnx_estimate(read_onnx(relu_chain(tmp_path)))
    # r1: x, a; r2: x, a, b (a is read, b written); r3: x, b, y -> peak 3 x 4000 at r2
    assert found.peak_bytes == 12_000 and found.step == "r2"
    assert {t.name for t in found.alive} == {"x", "a", "b"}
    assert found.largest is not None and found.largest.nbytes == 4000


def test_weights_are_not_counted(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [1000], [0.0] * 1000)
    node = helper.make_node("Add", ["x", "w"], ["y"], name="add")
    path = save(model([node], [tensor("x", [1000])], [tensor("y", [1000])], [w]), tmp_path)
    assert onnx_estimate(read_onnx(path)).peak_bytes == 8000  # x and y, not w


def test_program_estimate_by_hand():
    def operand(buffer, kind, nbytes, read, written):
        return NestOperand(buffer, kind, (nbytes // 4,), "f32", nbytes, read, written)

    def nest(index, *operands):
        return LoopNest(f"n{index:03d}", index, "", "", "linalg.generic", 1, 1, 1, operands)

    program = LoweredProgram(
        module_text="", func_name="main", source=Path("p.mlir"), source_kind="mlir",
        args=(ArgInfo("x", "input", (10,), "float32"), ArgInfo("w", "weight", (1000,), "float32"),
              ArgInfo("y", "output", (10,), "float32")),
        nests=[
            nest(0, operand("arg0", "argument", 40, True, False),
                 operand("alloc0", "alloc", 400, False, True)),
            nest(1, operand("alloc0", "alloc", 400, True, False),
                 operand("alloc1", "alloc", 800, False, True)),
            nest(2, operand("alloc1", "alloc", 800, True, False),
                 operand("arg2", "argument", 40, False, True)),
        ],
    )  # fmt: skip
    found = program_estimate(program)
    # n001: x (whole run) + alloc0 + alloc1; y only from n002; the weight is not counted
    assert found.peak_bytes == 40 + 400 + 800 and found.step == "n001"
    assert [t.name for t in found.alive] == ["alloc1", "alloc0", "x"]


def test_the_limit_and_its_origin():
    assert memory_limit(2) == MemoryLimit(2e9, "--memory-limit 2")
    for bad in (0, -1, float("nan"), float("inf"), "2", True):
        with pytest.raises(PlacementError, match="--memory-limit"):
            memory_limit(bad)
    available = available_memory()
    default = memory_limit()
    if available is None:
        assert default is None
    else:
        assert default is not None and default.bytes == pytest.approx(available[0] / 2)
        assert default.origin.startswith("half the ") and "--memory-limit" in default.origin


def test_a_tensor_over_the_limit_is_named_with_its_size(tmp_path):
    path = relu_chain(tmp_path, (1000, 1000))  # 4 MB per tensor, 12 MB at once
    with pytest.raises(PlacementError) as info:
        check_model_memory(path, read_onnx(path), 0.002)
    assert str(info.value) == (
        f"{path}: input 'x' [1000, 1000] float32 needs 4.0 MB, more than the limit of 2.0 MB"
        " (--memory-limit 0.002)"
    )
    with pytest.raises(PlacementError) as info:
        check_model_memory(path, read_onnx(path), 0.01)  # every tensor fits, all three not
    assert str(info.value) == (
        f"{path}: running the model needs 12.0 MB at once (at node 'r2': 3 tensors alive, the"
        " largest input 'x' [1000, 1000] float32 of 4.0 MB), more than the limit of 10.0 MB"
        " (--memory-limit 0.01)"
    )
    check_model_memory(path, read_onnx(path), 0.012)  # exactly the peak: accepted


def test_no_limit_refuses_nothing():
    found = estimate([Tensor("input", "x", (10**12,), "uint8", 10**12)], [("s", ["x"])])
    check_estimate(found, None, "m.onnx")
