"""Export a LLaMA-style decoder layer from plain PyTorch to ONNX, as a user's model would be.

Unlike the ``placement.networks.workloads`` builders (written with ``onnx.helper``), this
file goes through ``torch.onnx.export``, the way Hugging Face / Optimum export decoders:
the TorchScript exporter (``dynamo=False``) with dynamic batch and sequence axes. The
graph then has what real exports have: sizes read at run time from tensors
(``x.size()``, ``x.shape[-1] // 2`` in ``rotate_half``) become ``Shape -> Gather -> Div
-> Cast -> Unsqueeze -> Slice`` / ``... -> Concat -> Reshape`` chains, the position ids
and the causal mask ``Range``/``ConstantOfShape``/``Less``/``Where``/``Expand`` on those
sizes. The input shape is then pinned to batch 1 and ``--seq`` tokens with ONNX
Runtime's ``make_dim_param_fixed`` (what ``python -m
onnxruntime.tools.make_dynamic_shape_fixed`` does for static-shape targets): every input
and output shape is static, the chains stay. placement folds them (they are constants
once the shapes are static). Exported without dynamic axes, the TorchScript exporter
folds the sizes itself, and the dynamo exporter (which needs onnxscript) emits no such
chains; neither is what a model downloaded from a hub looks like.

The layer follows Hugging Face's ``LlamaDecoderLayer`` (RMSNorm, q/k/v/o projections
without bias, rotary embedding on the full head, causal softmax attention, SiLU-gated MLP,
two residuals) at batch 1; weights are random (seeded).

The bundled ``examples/llama_layer_tiny.onnx`` (hidden 64, 2 heads, FFN 172, 8 tokens,
49,536 parameters, 220 KB) was made by ``python examples/export_llama_layer.py``;
the tests use it, so neither they nor CI need torch. ``--size 7b`` exports the LLaMA-7B
layer (hidden 4096, 32 heads, FFN 11008: 202,383,360 parameters, 0.8 GB of fp32 weights).
``--layers N`` stacks N such layers (``benchmarks/model_memory.py`` exports 8 layers of
``--size medium``: hidden 1024, 16 heads, FFN 2816, 12,847,104 parameters per layer).
``--past N`` makes it a decode step with a KV cache: ``--seq`` new tokens (1 for
decoding) at positions ``N ..`` attend over the ``N`` cached keys and values of each
layer (inputs ``past_key_<i>``, ``past_value_<i>``: ``[1, heads, N, head_dim]``) and
themselves; e.g. ``--size 7b --seq 1 --past 511`` is the LLaMA-7B decode layer of
``benchmarks/pim_llm_profiling.py``. A model over protobuf's 2 GiB keeps its weights in
``<file>.data`` beside the ``.onnx``.

Needs torch, which placement does not depend on: ``pip install -e '.[export]'`` (pins
``torch==2.13.0``).

Usage: ``python examples/export_llama_layer.py [--size tiny|medium|7b] [--seq 8] [--layers 1]
[--past 0] [-o FILE]``
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import onnx
import torch
from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_dim_param_fixed
from torch import nn

SIZES = {
    "tiny": {"hidden": 64, "heads": 2, "ffn": 172},
    "medium": {"hidden": 1024, "heads": 16, "ffn": 2816},
    "7b": {"hidden": 4096, "heads": 32, "ffn": 11008},
}

DEFAULT_OUT = {
    "tiny": "examples/llama_layer_tiny.onnx",
    "medium": "llama_layer_medium.onnx",
    "7b": "llama_layer_7b.onnx",
}
OPSET = 17
SEED = 20240601
PROTOBUF_LIMIT = 2**31 - 1  # bytes of one serialized protobuf message


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class RotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
        inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        positions = position_ids[:, None, :].float()
        freqs = (inv_freq @ positions).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def causal_mask(bsz: int, seq: int, dtype: torch.dtype) -> torch.Tensor:
    """Hugging Face's ``_make_causal_mask``: 0 on and below the diagonal, min elsewhere."""
    mask = torch.full((seq, seq), torch.finfo(dtype).min)
    cond = torch.arange(mask.size(-1))
    mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
    return mask.to(dtype)[None, None, :, :].expand(bsz, 1, seq, seq)


def cached_causal_mask(bsz: int, seq: int, past: int, dtype: torch.dtype) -> torch.Tensor:
    """The mask of ``seq`` new tokens over ``past`` cached ones and themselves: query ``i``
    (position ``past + i``) sees every key up to its own position (min above it)."""
    keys = torch.arange(past + seq)
    queries = torch.arange(seq).view(seq, 1) + past
    mask = torch.zeros(seq, past + seq).masked_fill(keys > queries, torch.finfo(dtype).min)
    return mask.to(dtype)[None, None, :, :].expand(bsz, 1, seq, past + seq)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim)

    def forward(
        self, x: torch.Tensor, past_key: torch.Tensor | None = None,
        past_value: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        """``past_key``/``past_value`` ``[batch, heads, past, head_dim]``: the KV cache of
        the tokens before ``x`` (keys stored rotated, as Hugging Face's cache holds them)."""
        bsz, q_len, _ = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, q_len, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, q_len, self.heads, self.head_dim).transpose(1, 2)
        position_ids = torch.arange(q_len, device=x.device).unsqueeze(0)
        if past_key is not None:  # the new tokens come after the cached ones
            position_ids = position_ids + past_key.size(2)
        cos, sin = self.rotary_emb(v, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_key is not None:
            k = torch.cat([past_key, k], dim=2)
            v = torch.cat([past_value, v], dim=2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if past_key is None:
            scores = scores + causal_mask(bsz, q_len, x.dtype)
        else:
            scores = scores + cached_causal_mask(bsz, q_len, past_key.size(2), x.dtype)
        probs = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = MLP(hidden, ffn)

    def forward(self, hidden_states: torch.Tensor, *cache: torch.Tensor) -> torch.Tensor:
        """``cache``: nothing, or this layer's cached keys and values (:class:`Attention`)."""
        attn = self.self_attn(self.input_layernorm(hidden_states), *cache)
        h = hidden_states + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaStack(nn.Module):
    """``layers`` decoder layers one after the other (no embedding, no head)."""

    def __init__(self, layers: int, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(LlamaDecoderLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, hidden_states: torch.Tensor, *cache: torch.Tensor) -> torch.Tensor:
        """``cache``: nothing, or per layer its cached keys and values, in layer order."""
        for i, layer in enumerate(self.layers):
            hidden_states = layer(hidden_states, *cache[2 * i : 2 * i + 2])
        return hidden_states


def export(size: str, seq: int, out: Path, layers: int = 1, past: int = 0) -> int:
    """Export the layer (or ``layers`` stacked layers) to ``out`` (static shapes, batch 1);
    returns its parameter count. ``past > 0``: a decode step with a KV cache of ``past``
    tokens per layer (inputs ``past_key_<i>``/``past_value_<i>``, ``[1, heads, past,
    head_dim]``), the ``seq`` new tokens at positions ``past ..``."""
    torch.manual_seed(SEED)
    config = SIZES[size]
    layer = (LlamaDecoderLayer(**config) if layers == 1 else LlamaStack(layers, **config)).eval()
    x = torch.randn(1, seq, config["hidden"])
    dims = {0: "batch", 1: "seq"}
    names, inputs, axes = ["hidden_states"], [x], {"hidden_states": dims, "output": dims}
    if past:
        head_dim = config["hidden"] // config["heads"]
        for i in range(layers):
            for kind in ("key", "value"):
                names.append(f"past_{kind}_{i}")
                inputs.append(torch.randn(1, config["heads"], past, head_dim))
                axes[names[-1]] = {0: "batch", 2: "past"}
    with torch.no_grad():
        torch.onnx.export(
            layer, tuple(inputs), str(out), dynamo=False, opset_version=OPSET,
            input_names=names, output_names=["output"], dynamic_axes=axes,
        )  # fmt: skip
    params = sum(p.numel() for p in layer.parameters())
    del layer, inputs, x  # the 7B layer's weights: 0.8 GB
    pin_dims(out, {"batch": 1, "seq": seq, "past": past})
    return params


def pin_dims(path: Path, dims: dict[str, int]) -> None:
    """Fix the named dynamic dimensions of the model at ``path`` (in place), as
    ``python -m onnxruntime.tools.make_dynamic_shape_fixed`` does for static-shape
    targets; larger models keep their weights in ``<file>.data`` beside it."""
    model = onnx.load(str(path))
    for name, value in dims.items():
        make_dim_param_fixed(model.graph, name, value)
    fix_output_shapes(model)
    if model.ByteSize() < PROTOBUF_LIMIT:
        onnx.save(model, str(path))
    else:  # one protobuf message holds at most 2 GiB
        onnx.save(model, str(path), save_as_external_data=True,
                  location=path.name + ".data", size_threshold=1024)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--seq", type=int, default=8, help="static sequence length (batch 1)")
    parser.add_argument("--layers", type=int, default=1, help="decoder layers, stacked")
    parser.add_argument("--past", type=int, default=0,
                        help="cached tokens per layer: a decode step with a KV cache (0: none)")
    parser.add_argument("-o", "--out", type=Path, help="output .onnx (default by --size)")
    args = parser.parse_args()
    if args.layers < 1:
        parser.error("--layers must be at least 1")
    if args.past < 0 or args.seq < 1:
        parser.error("--past must be >= 0 and --seq >= 1")
    out = args.out or Path(DEFAULT_OUT[args.size])
    params = export(args.size, args.seq, out, args.layers, args.past)
    print(f"wrote {out} ({out.stat().st_size} bytes, {params} parameters)")


if __name__ == "__main__":
    main()
