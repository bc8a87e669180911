"""Real torch.onnx.export output (examples/export_llama_layer.py): the bundled file and 7B.

Slow, and they need torch (the ``export`` extra; CI installs it before ``pytest -m slow``).
The fast tests use the bundled ``examples/llama_layer_tiny.onnx`` and need no torch.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "export_llama_layer.py"
BUNDLED = ROOT / "examples" / "llama_layer_tiny.onnx"


def export(tmp_path: Path, *args: str) -> Path:
    pytest.importorskip("torch", reason="needs torch: pip install -e '.[export]'")
    out = tmp_path / "layer.onnx"
    subprocess.run(
        [sys.executable, str(SCRIPT), *args, "-o", str(out)], check=True, capture_output=True
    )
    return out


def structure(model: onnx.ModelProto) -> list[tuple]:
    return [(n.name, n.op_type, list(n.input), list(n.output)) for n in model.graph.node]


@pytest.mark.slow
def test_bundled_export_is_what_the_script_makes(tmp_path):
    made = onnx.load(str(export(tmp_path)))
    bundled = onnx.load(str(BUNDLED))
    assert structure(made) == structure(bundled)
    assert made.graph.input == bundled.graph.input and made.graph.output == bundled.graph.output
    ops = {n.op_type for n in made.graph.node}
    assert {"Shape", "Gather", "Div", "Range", "ConstantOfShape", "Where"} <= ops
    want = {i.name: numpy_helper.to_array(i) for i in bundled.graph.initializer}
    got = {i.name: numpy_helper.to_array(i) for i in made.graph.initializer}
    assert got.keys() == want.keys()
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, err_msg=name)


@pytest.mark.slow
def test_llama7b_export_loads_and_lowers(tmp_path):
    from placement.profiling.mlir.lower import lower_onnx

    path = export(tmp_path, "--size", "7b", "--seq", "8")
    program = lower_onnx(path)
    names = {n.name for n in onnx.load(str(path), load_external_data=False).graph.node}
    assert {n.onnx_node for n in program.nests} - {""} <= names
    # The 202,383,360 parameters, and the folded rotary cos/sin tables of 8 positions.
    shapes = sorted(a.shape for a in program.weight_args)
    assert shapes == sorted(
        [(4096, 4096)] * 4 + [(4096, 11008)] * 2 + [(11008, 4096)] + [(4096,)] * 2
        + [(1, 1, 8, 128)] * 2
    )  # fmt: skip
    down = [n for n in program.nests if n.onnx_node == "/mlp/down_proj/MatMul"]
    assert max(n.n_total for n in down) == 8 * 11008 * 4096
