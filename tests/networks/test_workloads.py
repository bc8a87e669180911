"""The Torch-PIM benchmark builders: valid ONNX, runnable, deterministic, lowerable."""

import functools
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from placement.networks import workloads as W


def run(model: onnx.ModelProto, seed: int = 0) -> tuple[dict, list[np.ndarray]]:
    onnx.checker.check_model(model, full_check=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(seed)
    feeds = {
        i.name: rng.standard_normal(i.shape).astype(np.float32) for i in session.get_inputs()
    }
    return feeds, session.run(None, feeds)


SMALL = {
    **{name: functools.partial(W.elementwise, name, 64) for name in W.ELEMENTWISE},
    "softmax": lambda: W.softmax(32),
    "layernorm": lambda: W.layernorm(32),
    "rmsnorm": lambda: W.rmsnorm(32),
    "mac": lambda: W.mac(32),
    "gemv": lambda: W.gemv(32),
    "matmul": lambda: W.matmul(16),
    "depthwise_conv": lambda: W.depthwise_conv(8),
    "mlp": lambda: W.mlp_block(32, 128),
    "attention": lambda: W.attention_block(64, 4, seq=1, past=5),
    "attention_prefill": lambda: W.attention_block(64, 4, seq=4, past=3),
    "gpt2_small_dims": lambda: W.decoder_layer(64, 4, 256, kind="gpt2"),
    "llama_small_dims": lambda: W.decoder_layer(64, 4, 172, kind="llama", past=2),
    "stack": lambda: W.decoder_stack(32, 2, 64, layers=3, kind="gpt2", past=1),
}


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.unit
def test_builder_is_valid_and_runs(name):
    model = SMALL[name]()
    assert model.opset_import[0].version == W.OPSET and model.ir_version == W.IR_VERSION
    _, outputs = run(model)
    declared = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert list(outputs[0].shape) == declared
    assert np.all(np.isfinite(outputs[0]))


@pytest.mark.unit
def test_builds_are_deterministic():
    for build in (SMALL["llama_small_dims"], SMALL["attention"], SMALL["depthwise_conv"]):
        assert build().SerializeToString() == build().SerializeToString()


@pytest.mark.unit
def test_registry_defaults_are_valid():
    for name, wl in W.WORKLOADS.items():
        if name in ("llama_layer", "gpt2_stack", "gpt2_layer"):
            continue  # big: parameter-count tests below
        onnx.checker.check_model(wl.build(min(wl.sizes)))
        assert wl.category and wl.size_meaning
    with pytest.raises(KeyError, match="unknown workload"):
        W.build("nope", 1)


@pytest.mark.unit
def test_numerics_against_numpy():
    feeds, (y,) = run(W.elementwise("silu", 64))
    x = feeds["X"]
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    feeds, (y,) = run(W.elementwise("gelu", 64))
    x = feeds["X"].astype(np.float64)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(y, 0.5 * x * (1 + erf(x / math.sqrt(2))), rtol=1e-5, atol=1e-6)
    _, (y,) = run(W.elementwise("zeroing", 64))
    assert not y.any()
    model = W.rmsnorm(32)
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])
    feeds, (y,) = run(model)
    x = feeds["X"]
    want = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    feeds, (y,) = run(W.mac(32))
    np.testing.assert_allclose(y, (feeds["A"] * feeds["B"]).sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.unit
def test_single_token_attention_without_cache_is_value_projection():
    # softmax over one score is 1: the output is out_proj(v_proj(x)).
    model = W.attention_block(64, 4, seq=1, past=0)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    feeds, (y,) = run(model)
    v = feeds["X"] @ inits["w_attn_v"] + inits["w_attn_v_bias"]
    want = v @ inits["w_attn_out"] + inits["w_attn_out_bias"]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@pytest.mark.unit
def test_decoder_parameter_formulas_at_small_dims():
    h, f = 64, 172
    llama = 4 * h * h + 3 * h * f + 2 * h
    assert W.parameter_count(W.decoder_layer(h, 4, f, kind="llama")) == llama
    gpt2 = 3 * h * h + 3 * h + h * h + h + 2 * h * f + f + h + 4 * h
    assert W.parameter_count(W.decoder_layer(h, 4, f, kind="gpt2")) == gpt2
    assert W.parameter_count(W.decoder_stack(h, 4, f, 3, kind="gpt2")) == 3 * gpt2
    with pytest.raises(ValueError, match="kind"):
        W.decoder_layer(h, 4, f, kind="bert")
    with pytest.raises(ValueError, match="multiple of heads"):
        W.decoder_layer(h, 5, f)


@pytest.mark.unit
def test_gpt2_small_layer_parameters():
    model = W.decoder_layer(**W.GPT2, kind="gpt2")
    assert W.parameter_count(model) == 7_087_872  # ~7.1M
    onnx.checker.check_model(model)


@pytest.mark.slow
def test_llama7b_layer_parameters_and_runs():
    model = W.decoder_layer(**W.LLAMA7B, kind="llama")
    assert W.parameter_count(model) == 202_383_360  # ~202M
    _, (y,) = run(model)
    assert y.shape == (1, 4096) and np.all(np.isfinite(y))


@pytest.mark.integration
def test_small_models_lower_and_match_onnxruntime(tmp_path):
    from placement.pim.pipeline import profile_nests
    from placement.profiling.mlir.lower import lower_onnx

    cases = {
        "softmax": (W.softmax(64), 8),
        "gemv": (W.gemv(64), 2),
        "mac": (W.mac(64), 3),
        "attention": (W.attention_block(64, 4, seq=2, past=3), None),
        "gpt2": (W.decoder_layer(64, 4, 256, kind="gpt2", past=2), None),
        "llama": (W.decoder_layer(64, 4, 172, kind="llama"), None),
    }
    for name, (model, expected_nests) in cases.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, str(path))
        program = lower_onnx(path)
        if expected_nests is not None:
            assert len(program.nests) == expected_nests, name
        # Every nest traces back to a node of the model (copies from bufferization aside).
        nodes = {n.name for n in model.graph.node}
        assert {n.onnx_node for n in program.nests} - {""} <= nodes
        if name in ("attention", "gpt2", "llama"):
            # JIT outputs checked against ONNX Runtime inside profile_nests.
            profile = profile_nests(path, runs=1, warmup=0, counters=False, program=program)
            assert profile.metadata["max_abs_error"] < 1e-3
