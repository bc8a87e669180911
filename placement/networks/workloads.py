"""ONNX builders for the Torch-PIM benchmark set (Table 3) at a size parameter ``N``.

Every builder returns an unsaved ``onnx.ModelProto`` (opset 17, IR version 8) whose
weights are deterministic (a NumPy generator seeded from the parameter's name), so
two builds of the same workload and size are byte-identical. Parameters are named
``w_*``; other initializers (shapes, scalars, masks) ``c_*`` -- :func:`parameter_count`
counts only the former.

What ``N`` means (Table 4 of the paper gives sizes but not shapes; these are ours):

=========================  ===================================================================
``ew_add`` ``copy``        a 1-D tensor of ``N`` float32 elements (``X + Y``; ``Identity``;
``scale`` ``zeroing``      ``X * 1.7``; ``ConstantOfShape`` zeros shaped like ``X``; ``Relu``;
``relu`` ``silu``          ``X * Sigmoid(X)``; erf GELU (PyTorch ``nn.GELU``); ``Tanh``).
``gelu`` ``tanh``          Table 4's ``N`` for relu/ew_add reads as an element count.
``softmax`` ``layernorm``  64 rows of length ``N``, normalized over the row (``[64, N]``), so
``rmsnorm``                the per-row reductions have 64 parallel iterations.
``mac``                    ``C + A[N, 64] @ B[64, N]``: ``N x N`` accumulators, each adding 64
                           products -- the fill of the result array, the multiply-accumulate
                           loop, the accumulation onto ``C`` (the paper's three mac nests; its
                           fill "fills a result array sequentially ... with non-temporal
                           stores", so the array is large: ``N^2`` elements, not ``N``).
``gemv``                   ``x[1, N] @ W[N, N]`` (a batch-1 linear layer, weight-streaming).
``matmul``                 ``A[N, N] @ W[N, N]`` (square GEMM; naive loops: keep N <= 512).
``depthwise_conv``         ``[1, 32, N, N]`` input, 32 groups, 3x3, pad 1, with bias.
``mlp``                    :func:`mlp_block` with ``hidden = N``, ``ffn = 4N`` at batch 1.
``attention``              :func:`attention_block` with ``hidden = N``, ``N / 64`` heads, one
                           new token attending to 128 cached tokens (decode).
``gpt2_layer``             :func:`decoder_layer` GPT-2 small (768, 12 heads, ffn 3072);
``llama_layer``            LLaMA-7B (4096, 32 heads, ffn 11008);
``gptj_layer``             GPT-J-6B (4096, 16 heads of 256, rotary on 64 of them, ffn 16384).
                           ``N`` is the number of cached tokens (``past``; 0 = the single
                           token attends only to itself).
``gpt2_stack``             ``N`` GPT-2-small decoder layers in sequence (a few hundred nests).
=========================  ===================================================================

Batch 1 is implicit: layers take a 2-D ``[seq, hidden]`` activation, so every linear
layer is a 2-D MatMul (torch-mlir would lower a 3-D x 2-D MatMul to a broadcast copy of
the whole weight first; the lowering folds that for batch-1 activations,
:mod:`placement.profiling.mlir.weight_layout`, but these builders do not need it).

Decoder layers are batch-1 decode steps (``seq = 1``). The KV cache is optional: with
``past = 0`` the token attends only to itself (softmax over one score), which keeps
every nest of the layer but not the cache-length-dependent cost; with ``past > 0``
the cached keys/values are graph inputs ``[heads, past, head_dim]`` concatenated in
front of the new ones, so the one new query attends over ``past + 1`` keys (e.g. the
LLaMA-7B layer at ``past = 511``: scores ``[32, 1, 512]``). Both LLaMA and GPT-J rotate
the new queries and keys by their positions ``past .. past + seq - 1`` (the sin/cos
tables are constants of the build; the cached keys are stored rotated, as in Hugging
Face's cache): LLaMA over the whole head, its two halves rotated (``rotate_half`` of
Hugging Face's ``LlamaAttention``), GPT-J over the first ``rotary_dim`` dims of each
head, pairs of adjacent dims rotated (``rotate_every_two`` of ``GPTJAttention``).
GPT-J's attention and MLP read the same LayerNorm output and are added to the residual
together (``x + attn(ln(x)) + mlp(ln(x))``), the MLP is ``fc_out(gelu_new(fc_in(.)))``
with biases.
Parameter counts: GPT-2 small layer 7,087,872; LLaMA-7B layer 202,383,360; GPT-J-6B
layer 201,355,264 (4 x 4096^2 attention + 2 x 4096 x 16384 + 16384 + 4096 MLP + 2 x 4096
LayerNorm).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
GPTJ_ROTARY_DIM = 64
ROWS = 64  # rows of the row-wise operators (softmax, layernorm, rmsnorm)
DW_CHANNELS = 32  # channels of the depthwise convolution
MAC_DEPTH = 64  # products each of mac's N x N accumulators adds (as many as ROWS)


class _Graph:
    """Accumulates nodes and initializers; names are unique and stable per build."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self._count: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        k = self._count.get(base, 0)
        self._count[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def input(self, name: str, shape: Sequence[int]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def weight(self, name: str, shape: Sequence[int], *, std: float, mean: float = 0.0) -> str:
        # Seeded by the name, not by build order, so sizes/layers stay independent.
        name = self.fresh("w_" + name)
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        value = rng.standard_normal(size=tuple(shape), dtype=np.float32)
        value *= np.float32(std)
        if mean:
            value += np.float32(mean)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def const(self, name: str, value: np.ndarray | float | Sequence[int], dtype=np.float32) -> str:
        name = self.fresh("c_" + name)
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], name: str, **attrs: object) -> str:
        out = self.fresh(name)
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def model(self, outputs: Sequence[tuple[str, Sequence[int]]]) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in outputs]
        graph = helper.make_graph(self.nodes, self.name, self.inputs, outs)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
        )
        # Move the weights in one at a time: make_graph/make_model copy what they are
        # given, which for the LLaMA layer (0.8 GB) would mean several live copies.
        self.inits.reverse()
        while self.inits:
            model.graph.initializer.append(self.inits.pop())
        model.producer_name = "placement.workloads"
        return model


# --------------------------------------------------------------------------- building blocks


def _linear(g: _Graph, x: str, d_in: int, d_out: int, name: str, *, bias: bool) -> str:
    w = g.weight(f"{name}", (d_in, d_out), std=1.0 / math.sqrt(d_in))
    y = g.op("MatMul", [x, w], f"{name}_matmul")
    if bias:
        b = g.weight(f"{name}_bias", (d_out,), std=0.02)
        y = g.op("Add", [y, b], f"{name}_add")
    return y


def _gelu_erf(g: _Graph, x: str, name: str) -> str:
    """0.5 x (1 + erf(x / sqrt 2)): PyTorch's nn.GELU (opset 17 has no Gelu op)."""
    t = g.op("Mul", [x, g.const("inv_sqrt2", 1.0 / math.sqrt(2.0))], f"{name}_scale")
    t = g.op("Erf", [t], f"{name}_erf")
    t = g.op("Add", [t, g.const("one", 1.0)], f"{name}_add")
    t = g.op("Mul", [x, t], f"{name}_mul")
    return g.op("Mul", [t, g.const("half", 0.5)], f"{name}_half")


def _gelu_tanh(g: _Graph, x: str, name: str) -> str:
    """GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x3 = g.op("Mul", [g.op("Mul", [x, x], f"{name}_sq"), x], f"{name}_cube")
    t = g.op("Mul", [x3, g.const("gelu_c", 0.044715)], f"{name}_c")
    t = g.op("Add", [x, t], f"{name}_inner")
    t = g.op("Mul", [t, g.const("sqrt_2_pi", math.sqrt(2.0 / math.pi))], f"{name}_k")
    t = g.op("Tanh", [t], f"{name}_tanh")
    t = g.op("Add", [t, g.const("one", 1.0)], f"{name}_add")
    t = g.op("Mul", [x, t], f"{name}_mul")
    return g.op("Mul", [t, g.const("half", 0.5)], f"{name}_half")


def _silu(g: _Graph, x: str, name: str) -> str:
    return g.op("Mul", [x, g.op("Sigmoid", [x], f"{name}_sigmoid")], f"{name}_mul")


def _layernorm(g: _Graph, x: str, dim: int, name: str) -> str:
    scale = g.weight(f"{name}_gamma", (dim,), std=0.02, mean=1.0)
    bias = g.weight(f"{name}_beta", (dim,), std=0.02)
    return g.op("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-5)


def _rmsnorm(g: _Graph, x: str, dim: int, name: str) -> str:
    """x / sqrt(mean(x^2) + eps) * w, as LLaMA writes it (no RMSNorm op in opset 17)."""
    w = g.weight(f"{name}_weight", (dim,), std=0.02, mean=1.0)
    sq = g.op("Mul", [x, x], f"{name}_sq")
    mean = g.op("ReduceMean", [sq], f"{name}_mean", axes=[-1], keepdims=1)
    var = g.op("Add", [mean, g.const("eps", 1e-6)], f"{name}_eps")
    inv = g.op("Reciprocal", [g.op("Sqrt", [var], f"{name}_sqrt")], f"{name}_rsqrt")
    y = g.op("Mul", [x, inv], f"{name}_norm")
    return g.op("Mul", [y, w], f"{name}_scale")


def _rotary(
    g: _Graph, t: str, heads: int, seq: int, d: int, rotary_dim: int, past: int, name: str,
    *, interleaved: bool,
) -> str:  # fmt: skip
    """The rotary embedding of ``t [heads, seq, d]`` on its first ``rotary_dim`` dims.

    ``interleaved`` (GPT-J's ``rotate_every_two``): dims ``(2i, 2i+1)`` become
    ``(-x[2i+1], x[2i])`` and sin/cos repeat each frequency twice (``repeat_interleave``);
    otherwise (LLaMA's ``rotate_half``) the halves ``(x1, x2)`` become ``(-x2, x1)`` and
    sin/cos are the frequencies twice over (``cat(freqs, freqs)``). Base 10000, positions
    from ``past``.
    """
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim))
    angles = np.arange(past, past + seq, dtype=np.float64)[:, None] * inv_freq[None, :]
    if interleaved:
        angles = np.repeat(angles, 2, axis=1)
    else:
        angles = np.concatenate([angles, angles], axis=1)
    cos = g.const("rotary_cos", np.cos(angles))  # [seq, rotary_dim]
    sin = g.const("rotary_sin", np.sin(angles))
    axis = g.const("axis_last", [2], np.int64)
    zero, one = g.const("zero", [0], np.int64), g.const("one_i", [1], np.int64)
    two, rot = g.const("two", [2], np.int64), g.const("rotary_dim", [rotary_dim], np.int64)
    t_rot = t
    if rotary_dim < d:
        t_rot = g.op("Slice", [t, zero, rot, axis], f"{name}_rot")
        t_pass = g.op("Slice", [t, rot, g.const("head_dim", [d], np.int64), axis],
                      f"{name}_pass")  # fmt: skip
    if interleaved:
        even = g.op("Slice", [t_rot, zero, rot, axis, two], f"{name}_even")  # x[..., ::2]
        odd = g.op("Slice", [t_rot, one, rot, axis, two], f"{name}_odd")  # x[..., 1::2]
        last = g.const("axis_new", [-1], np.int64)
        pairs = g.op("Concat", [g.op("Unsqueeze", [g.op("Neg", [odd], f"{name}_neg"), last],
                                     f"{name}_neg_u"),
                                g.op("Unsqueeze", [even, last], f"{name}_even_u")],
                     f"{name}_stack", axis=-1)  # fmt: skip
        shape = g.const("shape_rot", [heads, seq, rotary_dim], np.int64)
        rotated = g.op("Reshape", [pairs, shape], f"{name}_flatten")
    else:
        half = g.const("rotary_half", [rotary_dim // 2], np.int64)
        first = g.op("Slice", [t_rot, zero, half, axis], f"{name}_x1")
        second = g.op("Slice", [t_rot, half, rot, axis], f"{name}_x2")
        rotated = g.op("Concat", [g.op("Neg", [second], f"{name}_neg"), first],
                       f"{name}_rotate_half", axis=-1)  # fmt: skip
    out = g.op("Add", [g.op("Mul", [t_rot, cos], f"{name}_cos"),
                       g.op("Mul", [rotated, sin], f"{name}_sin")], f"{name}_rotated")  # fmt: skip
    if rotary_dim < d:
        out = g.op("Concat", [out, t_pass], f"{name}_cat", axis=-1)
    return out


def _attention(
    g: _Graph, x: str, hidden: int, heads: int, seq: int, past: int, name: str, *,
    bias: bool, fused_qkv: bool, rotary_dim: int = 0, interleaved: bool = True,
) -> str:  # fmt: skip
    """Multi-head self-attention of ``x [seq, hidden]`` (+ ``past`` cached tokens).

    ``rotary_dim > 0``: the new queries and keys get a rotary embedding (:func:`_rotary`;
    the cached keys are stored rotated, as in Hugging Face's cache).
    """
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    d = hidden // heads
    if rotary_dim < 0 or rotary_dim % 2 or rotary_dim > d:
        raise ValueError(f"rotary_dim {rotary_dim} must be even and at most the head dim {d}")
    split = g.const("shape_heads", [seq, heads, d], np.int64)
    if fused_qkv:  # GPT-2's c_attn: one [hidden, 3 hidden] projection, then split
        qkv = _linear(g, x, hidden, 3 * hidden, f"{name}_qkv", bias=bias)
        parts = [f"{name}_q", f"{name}_k", f"{name}_v"]
        sizes = g.const("qkv_split", [hidden] * 3, np.int64)
        split_node = helper.make_node("Split", [qkv, sizes], parts, name=f"{name}_split", axis=-1)
        g.nodes.append(split_node)
        q, k, v = parts
    else:  # LLaMA: separate q/k/v projections
        q, k, v = (_linear(g, x, hidden, hidden, f"{name}_{p}", bias=bias) for p in "qkv")
    q = g.op("Transpose", [g.op("Reshape", [q, split], f"{name}_q_heads")], f"{name}_q_t",
             perm=[1, 0, 2])  # fmt: skip
    k = g.op("Transpose", [g.op("Reshape", [k, split], f"{name}_k_heads")], f"{name}_k_t",
             perm=[1, 0, 2])  # fmt: skip
    v = g.op("Transpose", [g.op("Reshape", [v, split], f"{name}_v_heads")], f"{name}_v_t",
             perm=[1, 0, 2])  # fmt: skip
    if rotary_dim:
        q = _rotary(g, q, heads, seq, d, rotary_dim, past, f"{name}_q_rotary",
                    interleaved=interleaved)  # fmt: skip
        k = _rotary(g, k, heads, seq, d, rotary_dim, past, f"{name}_k_rotary",
                    interleaved=interleaved)  # fmt: skip
    if past:
        pk = g.input(g.fresh(f"{name}_past_k"), (heads, past, d))
        pv = g.input(g.fresh(f"{name}_past_v"), (heads, past, d))
        k = g.op("Concat", [pk, k], f"{name}_k_cat", axis=1)
        v = g.op("Concat", [pv, v], f"{name}_v_cat", axis=1)
    kt = g.op("Transpose", [k], f"{name}_k_tt", perm=[0, 2, 1])
    scores = g.op("MatMul", [q, kt], f"{name}_scores")
    scores = g.op("Mul", [scores, g.const("inv_sqrt_d", 1.0 / math.sqrt(d))], f"{name}_scale")
    if seq > 1:  # causal mask over the new tokens (cached ones are all visible)
        total = past + seq
        mask = np.zeros((seq, total), dtype=np.float32)
        mask[np.triu_indices(seq, k=past + 1, m=total)] = -1e4
        scores = g.op("Add", [scores, g.const("causal_mask", mask)], f"{name}_mask")
    probs = g.op("Softmax", [scores], f"{name}_softmax", axis=-1)
    ctx = g.op("MatMul", [probs, v], f"{name}_context")
    ctx = g.op("Transpose", [ctx], f"{name}_ctx_t", perm=[1, 0, 2])
    ctx = g.op("Reshape", [ctx, g.const("shape_merge", [seq, hidden], np.int64)],
               f"{name}_merge")  # fmt: skip
    return _linear(g, ctx, hidden, hidden, f"{name}_out", bias=bias)


def _decoder(g: _Graph, x: str, hidden: int, heads: int, ffn: int, seq: int, past: int,
             kind: str, name: str, rotary_dim: int) -> str:  # fmt: skip
    if kind == "gptj":  # attention and MLP in parallel on one LayerNorm output
        h = _layernorm(g, x, hidden, f"{name}_ln1")
        a = _attention(g, h, hidden, heads, seq, past, f"{name}_attn", bias=False,
                       fused_qkv=False, rotary_dim=rotary_dim)  # fmt: skip
        m = _linear(g, h, hidden, ffn, f"{name}_fc_in", bias=True)
        m = _gelu_tanh(g, m, f"{name}_gelu")  # gelu_new
        m = _linear(g, m, ffn, hidden, f"{name}_fc_out", bias=True)
        return g.op("Add", [g.op("Add", [a, m], f"{name}_attn_mlp"), x], f"{name}_res")
    if kind == "gpt2":
        h = _layernorm(g, x, hidden, f"{name}_ln1")
        a = _attention(g, h, hidden, heads, seq, past, f"{name}_attn", bias=True, fused_qkv=True)
        x = g.op("Add", [x, a], f"{name}_res1")
        h = _layernorm(g, x, hidden, f"{name}_ln2")
        h = _linear(g, h, hidden, ffn, f"{name}_fc", bias=True)
        h = _gelu_tanh(g, h, f"{name}_gelu")
        h = _linear(g, h, ffn, hidden, f"{name}_proj", bias=True)
        return g.op("Add", [x, h], f"{name}_res2")
    if kind == "llama":
        h = _rmsnorm(g, x, hidden, f"{name}_attn_norm")
        a = _attention(g, h, hidden, heads, seq, past, f"{name}_attn", bias=False,
                       fused_qkv=False, rotary_dim=rotary_dim, interleaved=False)  # fmt: skip
        x = g.op("Add", [x, a], f"{name}_res1")
        h = _rmsnorm(g, x, hidden, f"{name}_ffn_norm")
        gate = _silu(g, _linear(g, h, hidden, ffn, f"{name}_gate", bias=False), f"{name}_silu")
        up = _linear(g, h, hidden, ffn, f"{name}_up", bias=False)
        h = g.op("Mul", [gate, up], f"{name}_swiglu")
        h = _linear(g, h, ffn, hidden, f"{name}_down", bias=False)
        return g.op("Add", [x, h], f"{name}_res2")
    raise ValueError(f"unknown decoder kind {kind!r}; known: {', '.join(DECODER_KINDS)}")


# --------------------------------------------------------------------------- public builders


def _unary(op_name: str, n: int) -> onnx.ModelProto:
    g = _Graph(op_name)
    x = g.input("X", (n,))
    if op_name == "ew_add":
        y = g.op("Add", [x, g.input("Y", (n,))], "add")
    elif op_name == "copy":
        y = g.op("Identity", [x], "copy")
    elif op_name == "scale":
        y = g.op("Mul", [x, g.const("alpha", 1.7)], "scale")
    elif op_name == "zeroing":
        # Shape of a static input folds to a constant: the program is one fill nest.
        shape = g.op("Shape", [x], "shape")
        y = g.op("ConstantOfShape", [shape], "zeros",
                 value=numpy_helper.from_array(np.zeros(1, np.float32)))  # fmt: skip
    elif op_name == "relu":
        y = g.op("Relu", [x], "relu")
    elif op_name == "silu":
        y = _silu(g, x, "silu")
    elif op_name == "gelu":
        y = _gelu_erf(g, x, "gelu")
    elif op_name == "tanh":
        y = g.op("Tanh", [x], "tanh")
    else:  # pragma: no cover - guarded by ELEMENTWISE
        raise ValueError(op_name)
    return g.model([(y, (n,))])


ELEMENTWISE = ("ew_add", "copy", "scale", "zeroing", "relu", "silu", "gelu", "tanh")


def elementwise(op_name: str, n: int) -> onnx.ModelProto:
    """One of :data:`ELEMENTWISE` on ``N`` float32 elements."""
    if op_name not in ELEMENTWISE:
        raise ValueError(f"unknown elementwise operator {op_name!r}; known: {ELEMENTWISE}")
    return _unary(op_name, n)


def softmax(n: int) -> onnx.ModelProto:
    g = _Graph("softmax")
    y = g.op("Softmax", [g.input("X", (ROWS, n))], "softmax", axis=-1)
    return g.model([(y, (ROWS, n))])


def layernorm(n: int) -> onnx.ModelProto:
    g = _Graph("layernorm")
    y = _layernorm(g, g.input("X", (ROWS, n)), n, "layernorm")
    return g.model([(y, (ROWS, n))])


def rmsnorm(n: int) -> onnx.ModelProto:
    g = _Graph("rmsnorm")
    y = _rmsnorm(g, g.input("X", (ROWS, n)), n, "rmsnorm")
    return g.model([(y, (ROWS, n))])


def mac(n: int) -> onnx.ModelProto:
    g = _Graph("mac")
    prod = g.op("MatMul", [g.input("A", (n, MAC_DEPTH)), g.input("B", (MAC_DEPTH, n))], "matmul")
    y = g.op("Add", [g.input("C", (n, n)), prod], "accumulate")
    return g.model([(y, (n, n))])


def gemv(n: int) -> onnx.ModelProto:
    g = _Graph("gemv")
    y = _linear(g, g.input("X", (1, n)), n, n, "gemv", bias=False)
    return g.model([(y, (1, n))])


def matmul(n: int) -> onnx.ModelProto:
    g = _Graph("matmul")
    y = _linear(g, g.input("A", (n, n)), n, n, "matmul", bias=False)
    return g.model([(y, (n, n))])


def depthwise_conv(n: int, channels: int = DW_CHANNELS) -> onnx.ModelProto:
    g = _Graph("depthwise_conv")
    x = g.input("X", (1, channels, n, n))
    w = g.weight("dw", (channels, 1, 3, 3), std=1.0 / 3.0)
    b = g.weight("dw_bias", (channels,), std=0.02)
    y = g.op("Conv", [x, w, b], "dwconv", group=channels, kernel_shape=[3, 3],
             pads=[1, 1, 1, 1])  # fmt: skip
    return g.model([(y, (1, channels, n, n))])


def mlp_block(hidden: int, ffn: int) -> onnx.ModelProto:
    """Batch-1 MLP: ``Linear(hidden, ffn) -> ReLU -> Linear(ffn, hidden)`` with biases."""
    g = _Graph("mlp")
    x = g.input("X", (1, hidden))
    h = g.op("Relu", [_linear(g, x, hidden, ffn, "fc1", bias=True)], "relu")
    y = _linear(g, h, ffn, hidden, "fc2", bias=True)
    return g.model([(y, (1, hidden))])


def attention_block(hidden: int, heads: int, seq: int = 1, past: int = 0) -> onnx.ModelProto:
    """Batch-1 multi-head attention (QKV, scores, softmax, context, output projection).

    ``seq`` new tokens (causally masked when > 1) attend to ``past`` cached tokens
    (graph inputs ``attn_past_k``/``attn_past_v``) and to themselves.
    """
    g = _Graph("attention")
    x = g.input("X", (seq, hidden))
    y = _attention(g, x, hidden, heads, seq, past, "attn", bias=True, fused_qkv=False)
    return g.model([(y, (seq, hidden))])


DECODER_KINDS = ("gpt2", "llama", "gptj")


def decoder_layer(
    hidden: int, heads: int, ffn: int, seq: int = 1, kind: str = "gpt2", past: int = 0,
    rotary_dim: int | None = None,
) -> onnx.ModelProto:  # fmt: skip
    """One pre-norm decoder layer at batch 1 (see the module docstring).

    ``kind="gpt2"``: LayerNorm, fused QKV with biases, attention, projection, residual,
    LayerNorm, GELU (tanh) MLP, residual. ``kind="llama"``: RMSNorm, q/k/v/o without
    biases, rotary embeddings on the whole head (``rotary_dim`` None; 0 leaves them out),
    residual, RMSNorm, SwiGLU ``down(silu(gate(x)) * up(x))``, residual.
    ``kind="gptj"``: LayerNorm, then q/k/v/out without biases with rotary embeddings on
    ``rotary_dim`` dims of each head (default 64, GPT-J-6B's) in parallel with
    ``fc_out(gelu_new(fc_in(.)))`` with biases, one residual.
    """
    return decoder_stack(
        hidden, heads, ffn, 1, seq=seq, kind=kind, past=past, rotary_dim=rotary_dim
    )


def decoder_stack(
    hidden: int, heads: int, ffn: int, layers: int, seq: int = 1, kind: str = "gpt2",
    past: int = 0, rotary_dim: int | None = None,
) -> onnx.ModelProto:  # fmt: skip
    """``layers`` decoder layers in sequence (each with its own weights and KV cache)."""
    if kind not in DECODER_KINDS:
        raise ValueError(f"unknown decoder kind {kind!r}; known: {', '.join(DECODER_KINDS)}")
    head_dim = hidden // heads
    if rotary_dim is None:
        rotary_dim = {"gptj": GPTJ_ROTARY_DIM, "llama": head_dim}.get(kind, 0)
    elif rotary_dim and kind == "gpt2":
        raise ValueError("GPT-2 has no rotary embeddings (learned positions)")
    elif rotary_dim and kind == "llama" and rotary_dim != head_dim:
        raise ValueError(
            f"LLaMA rotates the whole head: rotary_dim must be {head_dim} (or 0 for none),"
            f" got {rotary_dim}"
        )
    g = _Graph(f"{kind}_decoder")
    x = g.input("X", (seq, hidden))
    for i in range(layers):
        x = _decoder(g, x, hidden, heads, ffn, seq, past, kind, f"l{i}", rotary_dim)
    return g.model([(x, (seq, hidden))])


def parameter_count(model: onnx.ModelProto) -> int:
    """Elements of the ``w_*`` initializers (the model's parameters)."""
    return sum(
        math.prod(init.dims) for init in model.graph.initializer if init.name.startswith("w_")
    )


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class Workload:
    name: str
    category: str  # Table 3 category
    build: Callable[[int], onnx.ModelProto]  # size N -> model
    sizes: tuple[int, ...]  # default benchmark sizes (small enough for naive lowered loops)
    size_meaning: str


GPT2 = {"hidden": 768, "heads": 12, "ffn": 3072}
LLAMA7B = {"hidden": 4096, "heads": 32, "ffn": 11008}
# Hugging Face's EleutherAI/gpt-j-6b config: n_embd, n_head, n_inner, rotary_dim.
GPTJ6B = {"hidden": 4096, "heads": 16, "ffn": 16384, "rotary_dim": 64}
#: Cached tokens of the LLM decode workloads of benchmarks/pim_llm_profiling.py: one new
#: token attends over 512 keys.
DECODE_PAST = 511


def llama_at_width(hidden: int) -> dict[str, int]:
    """LLaMA-7B's layer at width ``hidden``: heads of 64, the FFN in LLaMA-7B's ratio
    (11008 / 4096), as benchmarks/cim_transformers.py stacks it (1024: 16 heads, FFN
    2752, 12,650,496 parameters, 50.6 MB fp32 per layer; 32 layers fit this machine,
    where 32 LLaMA-7B layers, 25.9 GB, do not)."""
    return {"hidden": hidden, "heads": hidden // 64,
            "ffn": LLAMA7B["ffn"] * hidden // LLAMA7B["hidden"]}  # fmt: skip


def _ew(name: str) -> Callable[[int], onnx.ModelProto]:
    return lambda n: elementwise(name, n)


_EW_SIZES = (1024, 4096, 65536, 1 << 20)
_ROW_SIZES = (1024, 4096, 16384)

WORKLOADS: dict[str, Workload] = {
    **{
        name: Workload(name, "Elementwise / streaming", _ew(name), _EW_SIZES, "elements")
        for name in ("ew_add", "copy", "scale", "zeroing", "relu")
    },
    **{
        name: Workload(name, "Transcendental", _ew(name), _EW_SIZES, "elements")
        for name in ("silu", "gelu", "tanh")
    },
    "softmax": Workload("softmax", "Reduction / normalization", softmax, _ROW_SIZES,
                        "row length (64 rows)"),
    "layernorm": Workload("layernorm", "Reduction / normalization", layernorm, _ROW_SIZES,
                          "row length (64 rows)"),
    "rmsnorm": Workload("rmsnorm", "Reduction / normalization", rmsnorm, _ROW_SIZES,
                        "row length (64 rows)"),
    "mac": Workload("mac", "GEMM / conv primitive", mac, (256, 1024, 4096),
                    "C + A[N,64] @ B[64,N] (N x N accumulators)"),
    "gemv": Workload("gemv", "GEMM / conv primitive", gemv, (512, 1024, 4096),
                     "x[1,N] @ W[N,N]"),
    "matmul": Workload("matmul", "GEMM / conv primitive", matmul, (64, 128, 256),
                       "A[N,N] @ W[N,N]"),
    "depthwise_conv": Workload("depthwise_conv", "GEMM / conv primitive", depthwise_conv,
                               (32, 64, 128), "spatial side (32 channels, 3x3)"),
    "mlp": Workload("mlp", "Layer of tensor operators", lambda n: mlp_block(n, 4 * n),
                    (256, 1024, 2048), "hidden (ffn = 4N), batch 1"),
    "attention": Workload("attention", "Layer of tensor operators",
                          lambda n: attention_block(n, max(1, n // 64), 1, past=128),
                          (256, 768, 2048), "hidden (N/64 heads), 1 token + 128 cached"),
    "gpt2_layer": Workload("gpt2_layer", "Real LLM decode layer",
                           lambda n: decoder_layer(**GPT2, kind="gpt2", past=n), (0, 128),
                           "cached tokens (GPT-2 small, batch 1, 1 token)"),
    "llama_layer": Workload("llama_layer", "Real LLM decode layer",
                            lambda n: decoder_layer(**LLAMA7B, kind="llama", past=n), (0,),
                            "cached tokens (LLaMA-7B, batch 1, 1 token)"),
    "gptj_layer": Workload("gptj_layer", "Real LLM decode layer",
                           lambda n: decoder_layer(**GPTJ6B, kind="gptj", past=n), (0,),
                           "cached tokens (GPT-J-6B, batch 1, 1 token)"),
    "gpt2_stack": Workload("gpt2_stack", "Real LLM decode layer",
                           lambda n: decoder_stack(**GPT2, layers=n, kind="gpt2"), (6,),
                           "GPT-2 small decoder layers (batch 1, 1 token, no cache)"),
}  # fmt: skip


def build(name: str, n: int) -> onnx.ModelProto:
    """The registered workload ``name`` at size ``n``."""
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name].build(n)
