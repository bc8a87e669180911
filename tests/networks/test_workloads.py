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
    "gptj_small_dims": lambda: W.decoder_layer(64, 4, 256, kind="gptj", past=3, rotary_dim=8),
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
        if name in ("llama_layer", "gpt2_stack", "gpt2_layer", "gptj_layer"):
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
    np.testing.assert_allclose(y, feeds["C"] + feeds["A"] @ feeds["B"], rtol=1e-4, atol=1e-4)
    assert y.shape == (32, 32) and feeds["A"].shape == (32, W.MAC_DEPTH)


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
    # GPT-J: q/k/v/out without bias, fc_in/fc_out with bias, one LayerNorm (gamma, beta).
    gptj = 4 * h * h + (h * f + f) + (f * h + h) + 2 * h
    assert W.parameter_count(W.decoder_layer(h, 4, f, kind="gptj", rotary_dim=8)) == gptj
    with pytest.raises(ValueError, match="kind"):
        W.decoder_layer(h, 4, f, kind="bert")
    with pytest.raises(ValueError, match="multiple of heads"):
        W.decoder_layer(h, 5, f)
    with pytest.raises(ValueError, match="rotary_dim 17 must be even"):
        W.decoder_layer(h, 4, f, kind="gptj", rotary_dim=17)
    with pytest.raises(ValueError, match="at most the head dim 16"):
        W.decoder_layer(h, 4, f, kind="gptj")  # GPT-J's 64 does not fit 16-dim heads
    with pytest.raises(ValueError, match="whole head: rotary_dim must be 16"):
        W.decoder_layer(h, 4, f, kind="llama", rotary_dim=8)
    with pytest.raises(ValueError, match="GPT-2 has no rotary"):
        W.decoder_layer(h, 4, f, kind="gpt2", rotary_dim=8)


@pytest.mark.unit
def test_gpt2_small_layer_parameters():
    model = W.decoder_layer(**W.GPT2, kind="gpt2")
    assert W.parameter_count(model) == 7_087_872  # ~7.1M
    onnx.checker.check_model(model)


def gptj_reference(model: onnx.ModelProto, feeds: dict, heads: int, rotary_dim: int,
                   past: int) -> np.ndarray:  # fmt: skip
    """Hugging Face's GPTJBlock in NumPy (float64), in its [seq, heads, head_dim] layout."""
    w = {i.name: onnx.numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    x = feeds["X"].astype(np.float64)
    seq, hidden = x.shape
    d = hidden // heads
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    h = (x - mu) / np.sqrt(var + 1e-5) * w["w_l0_ln1_gamma"] + w["w_l0_ln1_beta"]
    q, k, v = (np.reshape(h @ w[f"w_l0_attn_{p}"], (seq, heads, d)) for p in "qkv")
    # create_sinusoidal_positions, then apply_rotary_pos_emb with rotate_every_two
    inv_freq = 1.0 / (10000 ** (np.arange(0, rotary_dim, 2) / rotary_dim))
    angles = np.einsum("i,j->ij", np.arange(past, past + seq), inv_freq)
    sin = np.repeat(np.sin(angles)[:, None, :], 2, axis=2)
    cos = np.repeat(np.cos(angles)[:, None, :], 2, axis=2)

    def rotate_every_two(t):
        return np.stack((-t[..., 1::2], t[..., ::2]), axis=-1).reshape(t.shape)

    def rotary(t):
        rot, rest = t[..., :rotary_dim], t[..., rotary_dim:]
        return np.concatenate([rot * cos + rotate_every_two(rot) * sin, rest], axis=-1)

    q, k = rotary(q), rotary(k)
    if past:  # the cache is [heads, past, d]
        k = np.concatenate([feeds["l0_attn_past_k"].transpose(1, 0, 2), k])
        v = np.concatenate([feeds["l0_attn_past_v"].transpose(1, 0, 2), v])
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
    scores += np.where(np.arange(past + seq)[None, :] > past + np.arange(seq)[:, None], -1e4, 0)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    attn = np.einsum("hqk,khd->qhd", probs, v).reshape(seq, hidden) @ w["w_l0_attn_out"]
    f = h @ w["w_l0_fc_in"] + w["w_l0_fc_in_bias"]
    f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f**3)))  # gelu_new
    mlp = f @ w["w_l0_fc_out"] + w["w_l0_fc_out_bias"]
    return x + attn + mlp


@pytest.mark.parametrize(("seq", "past", "rotary_dim"), [(1, 3, 8), (2, 3, 8), (3, 0, 16)])
@pytest.mark.unit
def test_gptj_layer_matches_a_numpy_gptj_block(seq, past, rotary_dim):
    model = W.decoder_layer(64, 4, 256, seq=seq, kind="gptj", past=past, rotary_dim=rotary_dim)
    feeds, (y,) = run(model)
    assert y.shape == (seq, 64)
    want = gptj_reference(model, feeds, 4, rotary_dim, past)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.unit
def test_gptj_rotary_is_position_dependent():
    # At past = 0 a single token's rotary embedding is the identity; later it is not: the
    # cache length changes the result through the positions, not only through attention.
    model = W.decoder_layer(64, 4, 256, kind="gptj", past=3, rotary_dim=8)
    feeds, (y,) = run(model)
    unrotated = gptj_reference(model, feeds, 4, 0, 3)
    assert not np.allclose(y, unrotated, rtol=1e-4, atol=1e-4)


def llama_reference(model: onnx.ModelProto, feeds: dict, heads: int, past: int,
                    rotary: bool = True) -> np.ndarray:  # fmt: skip
    """Hugging Face's LlamaDecoderLayer in NumPy (float64): RMSNorm, rotate_half rotary
    embedding at positions past.., attention over the cache, SwiGLU MLP."""
    w = {i.name: onnx.numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    x = feeds["X"].astype(np.float64)
    seq, hidden = x.shape
    d = hidden // heads

    def rmsnorm(t, weight):
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + 1e-6) * weight

    h = rmsnorm(x, w["w_l0_attn_norm_weight"])
    q, k, v = (np.reshape(h @ w[f"w_l0_attn_{p}"], (seq, heads, d)) for p in "qkv")
    inv_freq = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    freqs = np.einsum("i,j->ij", np.arange(past, past + seq), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)[:, None, :]  # [seq, 1, d]

    def rotate_half(t):
        return np.concatenate([-t[..., d // 2 :], t[..., : d // 2]], axis=-1)

    if rotary:
        q = q * np.cos(emb) + rotate_half(q) * np.sin(emb)
        k = k * np.cos(emb) + rotate_half(k) * np.sin(emb)
    if past:
        k = np.concatenate([feeds["l0_attn_past_k"].transpose(1, 0, 2), k])
        v = np.concatenate([feeds["l0_attn_past_v"].transpose(1, 0, 2), v])
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
    scores += np.where(np.arange(past + seq)[None, :] > past + np.arange(seq)[:, None], -1e4, 0)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    x = x + np.einsum("hqk,khd->qhd", probs, v).reshape(seq, hidden) @ w["w_l0_attn_out"]
    h = rmsnorm(x, w["w_l0_ffn_norm_weight"])
    gate = h @ w["w_l0_gate"]
    return x + (gate / (1 + np.exp(-gate)) * (h @ w["w_l0_up"])) @ w["w_l0_down"]


@pytest.mark.parametrize(("seq", "past"), [(1, 5), (2, 3), (3, 0)])
@pytest.mark.unit
def test_llama_layer_matches_a_numpy_llama_block(seq, past):
    model = W.decoder_layer(64, 4, 172, seq=seq, kind="llama", past=past)
    feeds, (y,) = run(model)
    assert y.shape == (seq, 64)
    np.testing.assert_allclose(y, llama_reference(model, feeds, 4, past), rtol=1e-4, atol=1e-4)
    # The rotary embedding matters once a token is not at position 0.
    unrotated = llama_reference(model, feeds, 4, past, rotary=False)
    assert not np.allclose(y, unrotated, rtol=1e-4, atol=1e-4)


@pytest.mark.unit
def test_decode_step_attends_over_the_cache_and_the_new_token():
    # One new token, past cached: the scores of every head span past + 1 keys.
    model = W.decoder_layer(64, 4, 172, kind="llama", past=511)
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in inferred.graph.value_info}  # fmt: skip
    assert shapes["l0_attn_scores"] == [4, 1, 512]
    assert shapes["l0_attn_k_cat"] == [4, 512, 16]


@pytest.mark.slow
def test_gptj6b_layer_shapes_and_parameters():
    # EleutherAI/gpt-j-6b: n_embd 4096, n_head 16 (head dim 256), rotary_dim 64, n_inner 16384.
    model = W.build("gptj_layer", 128)
    assert W.parameter_count(model) == 201_355_264  # 4*4096^2 + 2*4096*16384 + 16384 + 3*4096
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim]
              for i in model.graph.input}  # fmt: skip
    assert shapes == {"X": [1, 4096], "l0_attn_past_k": [16, 128, 256],
                      "l0_attn_past_v": [16, 128, 256]}  # fmt: skip
    inits = {i.name: list(i.dims) for i in model.graph.initializer}
    assert inits["w_l0_attn_q"] == [4096, 4096] and inits["w_l0_fc_in"] == [4096, 16384]
    assert inits["c_rotary_cos"] == [1, 64]  # position 128, rotary on 64 of 256 dims
    assert "w_l0_attn_q_bias" not in inits and inits["w_l0_fc_out_bias"] == [4096]
    _, (y,) = run(model)
    assert y.shape == (1, 4096) and np.all(np.isfinite(y))


@pytest.mark.slow
def test_llama7b_layer_parameters_and_runs():
    model = W.decoder_layer(**W.LLAMA7B, kind="llama")
    assert W.parameter_count(model) == 202_383_360  # ~202M
    _, (y,) = run(model)
    assert y.shape == (1, 4096) and np.all(np.isfinite(y))


@pytest.mark.integration
def test_small_models_lower_and_match_onnxruntime(tmp_path):
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.nest_measure import profile_nests

    cases = {
        "softmax": (W.softmax(64), 8),
        "gemv": (W.gemv(64), 2),
        "mac": (W.mac(64), 3),
        "attention": (W.attention_block(64, 4, seq=2, past=3), None),
        "gpt2": (W.decoder_layer(64, 4, 256, kind="gpt2", past=2), None),
        "llama": (W.decoder_layer(64, 4, 172, kind="llama"), None),
        "gptj": (W.decoder_layer(64, 4, 256, kind="gptj", past=3, rotary_dim=8), None),
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
        if name in ("attention", "gpt2", "llama", "gptj"):
            # JIT outputs checked against ONNX Runtime inside profile_nests.
            profile = profile_nests(path, runs=1, warmup=0, counters=False, program=program,
                                    min_seconds=0)
            assert profile.metadata["max_abs_error"] < 1e-3


@pytest.mark.integration
def test_mac_fills_its_whole_result_array_before_the_multiply_accumulate(tmp_path):
    # The paper's mac: the nest before the multiply-accumulate loop fills a result array
    # large enough for non-temporal stores -- here all N x N accumulators.
    from placement.profiling.mlir.lower import lower_onnx

    path = tmp_path / "mac.onnx"
    onnx.save(W.mac(64), str(path))
    nests = lower_onnx(path).nests
    assert [x.linalg_op for x in nests] == ["linalg.fill", "linalg.matmul", "linalg.generic"]
    assert nests[0].n_total == 64 * 64
    assert nests[1].n_total == 64 * 64 * W.MAC_DEPTH
