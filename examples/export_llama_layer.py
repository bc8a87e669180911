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

Needs torch, which placement does not depend on: ``pip install -e '.[export]'`` (pins
``torch==2.13.0``).

Usage: ``python examples/export_llama_layer.py [--size tiny|7b] [--seq 8] [-o FILE]``
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
    "7b": {"hidden": 4096, "heads": 32, "ffn": 11008},
}

DEFAULT_OUT = {"tiny": "examples/llama_layer_tiny.onnx", "7b": "llama_layer_7b.onnx"}
OPSET = 17
SEED = 20240601


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


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=False)
        self.k_proj = nn.Linear(hidden, hidden, bias=False)
        self.v_proj = nn.Linear(hidden, hidden, bias=False)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bsz, q_len, _ = x.size()
        q = self.q_proj(x).view(bsz, q_len, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, q_len, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, q_len, self.heads, self.head_dim).transpose(1, 2)
        position_ids = torch.arange(q_len, device=x.device).unsqueeze(0)
        cos, sin = self.rotary_emb(v, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = scores + causal_mask(bsz, q_len, x.dtype)
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

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        h = hidden_states + self.self_attn(self.input_layernorm(hidden_states))
        return h + self.mlp(self.post_attention_layernorm(h))


def export(size: str, seq: int, out: Path) -> int:
    """Export the layer to ``out`` (static shapes, batch 1); returns its parameter count."""
    torch.manual_seed(SEED)
    config = SIZES[size]
    layer = LlamaDecoderLayer(**config).eval()
    x = torch.randn(1, seq, config["hidden"])
    dims = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(
            layer, (x,), str(out), dynamo=False, opset_version=OPSET,
            input_names=["hidden_states"], output_names=["output"],
            dynamic_axes={"hidden_states": dims, "output": dims},
        )  # fmt: skip
    params = sum(p.numel() for p in layer.parameters())
    del layer, x  # the 7B layer's weights: 0.8 GB
    model = onnx.load(str(out))
    make_dim_param_fixed(model.graph, "batch", 1)
    make_dim_param_fixed(model.graph, "seq", seq)
    fix_output_shapes(model)
    onnx.save(model, str(out))
    return params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--seq", type=int, default=8, help="static sequence length (batch 1)")
    parser.add_argument("-o", "--out", type=Path, help="output .onnx (default by --size)")
    args = parser.parse_args()
    out = args.out or Path(DEFAULT_OUT[args.size])
    params = export(args.size, args.seq, out)
    print(f"wrote {out} ({out.stat().st_size} bytes, {params} parameters)")


if __name__ == "__main__":
    main()
