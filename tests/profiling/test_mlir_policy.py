"""The .mlir input policy: what torch-mlir's lowering makes is accepted, nothing that
reaches outside the file is (placement/profiling/mlir/policy.py)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from hostile_inputs import HOSTILE_MLIR, OWN_HELPER, program

from placement.errors import PlacementError
from placement.onnxfile import node_names

pytest.importorskip("torch_mlir")

from torch_mlir import ir  # noqa: E402
from torch_mlir.extras import onnx_importer  # noqa: E402
from torch_mlir.passmanager import PassManager  # noqa: E402

from placement.profiling.mlir.lower import (  # noqa: E402
    ONNX_TO_LINALG,
    lower_mlir,
    lower_onnx,
    new_context,
)
from placement.profiling.mlir.policy import check_user_module  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet_tiny.onnx"


@pytest.mark.unit
@pytest.mark.parametrize("name", list(HOSTILE_MLIR))
def test_a_program_reaching_outside_itself_is_refused_in_one_line(tmp_path, name):
    text, fragment = HOSTILE_MLIR[name]
    path = tmp_path / "hostile.mlir"
    path.write_text(text)
    with pytest.raises(PlacementError) as info:
        lower_mlir(path)
    message = str(info.value)
    assert message.startswith(f"{path}: line ") and fragment in message, message
    assert "\n" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.mlir"]


@pytest.mark.unit
def test_the_hostile_programs_are_the_accepted_program_plus_their_hostile_part(tmp_path):
    # The same program without the additions lowers: each refusal is the addition's.
    path = tmp_path / "plain.mlir"
    path.write_text(program())
    assert len(lower_mlir(path).nests) == 1
    path.write_text(OWN_HELPER)  # a private function with a body, called: the file's own code
    assert lower_mlir(path).func_name == "main"


@pytest.mark.unit
def test_a_tensor_larger_than_the_memory_given_is_refused():
    text = program(body="  %t = tensor.empty() : tensor<1024x1024xf32>\n")  # 4 MiB
    with new_context():
        module = ir.Module.parse(text)
        check_user_module(module, "m.mlir", memory_bytes=4 << 20)
        big = r"tensor.empty makes a tensor<1024x1024xf32> of 4\.19 MB"
        with pytest.raises(PlacementError, match=big):
            check_user_module(module, "m.mlir", memory_bytes=(4 << 20) - 1)


def torch_mlir_linalg(onnx_path: Path) -> str:
    """The linalg-on-tensors module torch-mlir makes of an ONNX model, with locations."""
    model = onnx.load(str(onnx_path))
    for node, name in zip(model.graph.node, node_names(model.graph), strict=True):
        node.name = name
    model.graph.name = "forward"
    model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    with new_context() as ctx:
        info = onnx_importer.ModelInfo(model)
        module = info.create_module(context=ctx)
        onnx_importer.NodeImporter.define_function(info.main_graph, module.operation).import_all()
        PassManager.parse(ONNX_TO_LINALG).run(module.operation)
        return module.operation.get_asm(enable_debug_info=True)


@pytest.mark.integration
def test_torch_mlirs_own_linalg_output_is_accepted_and_gives_the_onnx_paths_nests(tmp_path):
    # The policy admits what the lowering produces: the example CNN exported at
    # linalg-on-tensors level (weights as constants) lowers to the nests of the ONNX path,
    # except the transpose of the classifier's weight (Gemm transB=1), which the ONNX path
    # does at load (weight_layout.py) and a .mlir file keeps as it is written.
    path = tmp_path / "resnet_tiny.mlir"
    path.write_text(torch_mlir_linalg(EXAMPLE))
    from_mlir = lower_mlir(path)
    from_onnx = lower_onnx(EXAMPLE)
    transposes = [n for n in from_mlir.nests if n.linalg_op == "linalg.transpose"]
    assert [(n.onnx_node, [op.kind for op in n.operands if op.read]) for n in transposes] == [
        ("fc", ["global"])
    ]
    assert [(n.onnx_node, n.n_iter, n.n_total) for n in from_mlir.nests if n not in transposes] == [
        (n.onnx_node, n.n_iter, n.n_total) for n in from_onnx.nests
    ]
