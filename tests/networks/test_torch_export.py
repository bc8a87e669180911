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
    # The 202,383,360 parameters, and the folded rotary cos/sin tables of 8 positions; the
    # projections' weights in the layout of the batch product that reads them
    # (placement/profiling/mlir/weight_layout.py: a leading unit axis, no broadcast copy).
    shapes = sorted(a.shape for a in program.weight_args)
    assert shapes == sorted(
        [(1, 4096, 4096)] * 4 + [(1, 4096, 11008)] * 2 + [(1, 11008, 4096)] + [(4096,)] * 2
        + [(1, 1, 8, 128)] * 2
    )  # fmt: skip
    down = [n for n in program.nests if n.onnx_node == "/mlp/down_proj/MatMul"]
    assert max(n.n_total for n in down) == 8 * 11008 * 4096


def load_script(name: str):
    """An example script as a module (its classes build the same weights as its export)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_onnx(path: Path, feeds: dict) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() for k, v in feeds.items()})[0]


@pytest.mark.slow
def test_llama_decode_export_is_the_prefill_one_token_later(tmp_path):
    # The decode step (one token at position 5, the KV cache of tokens 0-4) must give what
    # the same layer gives the sixth token of a causal prefill of six.
    torch = pytest.importorskip("torch", reason="needs torch: pip install -e '.[export]'")
    path = export(tmp_path, "--seq", "1", "--past", "5")
    script = load_script("export_llama_layer")
    torch.manual_seed(script.SEED)  # as export(): the layer's weights are drawn first
    layer = script.LlamaDecoderLayer(**script.SIZES["tiny"]).eval()
    x = torch.randn(1, 6, 64)
    attn = layer.self_attn
    with torch.no_grad():
        want = layer(x)[:, -1:]
        h = layer.input_layernorm(x[:, :5])
        k = attn.k_proj(h).view(1, 5, attn.heads, attn.head_dim).transpose(1, 2)
        v = attn.v_proj(h).view(1, 5, attn.heads, attn.head_dim).transpose(1, 2)
        cos, sin = attn.rotary_emb(v, torch.arange(5).unsqueeze(0))
        k = k * cos.unsqueeze(1) + script.rotate_half(k) * sin.unsqueeze(1)
    got = run_onnx(path, {"hidden_states": x[:, 5:], "past_key_0": k, "past_value_0": v})
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_hf_gpt2_decode_export_is_the_prefill_one_token_later(tmp_path):
    torch = pytest.importorskip("torch", reason="needs torch: pip install -e '.[export]'")
    pytest.importorskip("transformers")
    out = tmp_path / "gpt2.onnx"
    subprocess.run([sys.executable, str(ROOT / "examples" / "export_hf_decoder.py"), "gpt2",
                    "--size", "tiny", "--layers", "2", "--past", "5", "-o", str(out)],
                   check=True, capture_output=True)  # fmt: skip
    script = load_script("export_hf_decoder")
    from transformers import GPT2Config

    torch.manual_seed(script.SEED)
    config = GPT2Config(**script.SIZES["gpt2"]["tiny"], n_layer=2, attn_implementation="eager")
    model = script.GPT2Step(config).model.eval()
    ids = torch.randint(0, config.vocab_size, (1, 6))
    with torch.no_grad():
        want = model(input_ids=ids).logits[:, -1:]  # transformers' own causal prefill
        cache = model(input_ids=ids[:, :5], use_cache=True).cache
    feeds = {"input_ids": ids[:, 5:]}
    for i in range(2):
        feeds[f"past_key_{i}"] = cache.layers[i].keys
        feeds[f"past_value_{i}"] = cache.layers[i].values
    np.testing.assert_allclose(run_onnx(out, feeds), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_hf_gptj_decode_export_is_the_prefill_one_token_later(tmp_path):
    torch = pytest.importorskip("torch", reason="needs torch: pip install -e '.[export]'")
    pytest.importorskip("transformers")
    out = tmp_path / "gptj.onnx"
    subprocess.run([sys.executable, str(ROOT / "examples" / "export_hf_decoder.py"), "gptj",
                    "--size", "tiny", "--past", "5", "-o", str(out)],
                   check=True, capture_output=True)  # fmt: skip
    script = load_script("export_hf_decoder")
    from transformers import GPTJConfig, GPTJModel

    torch.manual_seed(script.SEED)
    config = GPTJConfig(**script.SIZES["gptj"]["tiny"], n_layer=1, attn_implementation="eager")
    step = script.GPTJDecodeStep(config, 1).eval()
    # transformers' whole model, with the same block and no final LayerNorm: its prefill.
    reference = GPTJModel(config).eval()
    reference.h[0].load_state_dict(step.blocks[0].state_dict())
    reference.ln_f = torch.nn.Identity()
    x = torch.randn(1, 6, config.n_embd)
    with torch.no_grad():
        want = reference(inputs_embeds=x).last_hidden_state[:, -1:]
        cache = reference(inputs_embeds=x[:, :5], use_cache=True).cache
    feeds = {"hidden_states": x[:, 5:], "past_key": cache.layers[0].keys,
             "past_value": cache.layers[0].values}  # fmt: skip
    np.testing.assert_allclose(run_onnx(out, feeds), want.numpy(), rtol=1e-4, atol=1e-4)
