"""Export Hugging Face transformers decoders (random weights) to ONNX, as a user's model would be.

Two models, built from their transformers configurations with random weights (seeded;
nothing is downloaded), exported with ``torch.onnx.export`` (TorchScript, ``dynamo=False``,
opset 17) with dynamic axes and then pinned to static shapes, like
``examples/export_llama_layer.py`` (whose ``pin_dims`` this uses):

* ``gptj``: one GPT-J-6B decoder layer (``GPTJBlock`` of ``GPTJConfig(n_embd=4096,
  n_head=16, rotary_dim=64)``: FFN 16384 with ``gelu_new``, attention and MLP in parallel
  on one LayerNorm; 201,355,264 parameters, 0.81 GB of fp32 weights) in a decode step:
  ``hidden_states [1, 1, 4096]`` at position ``--past``, the KV cache ``past_key``,
  ``past_value [1, 16, past, 256]`` (keys stored rotated, as transformers' cache holds
  them) handed to the layer in a ``DynamicCache``; the rotary sin/cos of GPT-J's own
  ``GPTJRotaryEmbedding`` at ``position_ids = past``. ``--layers N`` stacks N blocks.
* ``gpt2``: GPT-2 small, ``GPT2LMHeadModel(GPT2Config())``: 12 layers, hidden 768,
  12 heads, token and position embeddings, LM head tied to the token embedding
  (124,439,808 parameters). ``--past N`` (N > 0): a decode step, ``input_ids [1, 1]``
  at position N and per layer ``past_key_<i>``, ``past_value_<i>`` ``[1, 12, N, 64]``;
  ``--past 0``: a prefill of ``--seq`` tokens (no cache). The output is the logits of
  every new token.

Attention is transformers' ``eager`` implementation (MatMul, Softmax, MatMul in the
graph). Needs torch and transformers, which placement does not depend on: ``pip install
-e '.[export]'``.

Usage: ``python examples/export_hf_decoder.py gptj|gpt2 [--past 511] [--seq 1] [--layers N]
[--size full|tiny] -o FILE``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel, GPTJConfig
from transformers.models.gptj.modeling_gptj import GPTJBlock, GPTJRotaryEmbedding

sys.path.insert(0, str(Path(__file__).resolve().parent))
from export_llama_layer import OPSET, SEED, pin_dims  # noqa: E402

# Configuration keys per model and --size: "full" is EleutherAI/gpt-j-6b's published
# configuration (n_inner None: 4 x n_embd = 16384) and GPT2Config()'s GPT-2 small; "tiny"
# keeps every operator at small widths, for tests.
SIZES = {
    "gptj": {
        "full": {"n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048},
        "tiny": {"n_embd": 64, "n_head": 4, "rotary_dim": 8, "n_positions": 2048},
    },
    "gpt2": {"full": {}, "tiny": {"n_embd": 64, "n_head": 4, "vocab_size": 1000}},
}


class GPTJDecodeStep(nn.Module):
    """``layers`` GPT-J blocks on new tokens after ``past`` cached ones (no embedding, no
    head): transformers' ``GPTJBlock`` with its cache and rotary embedding."""

    def __init__(self, config: GPTJConfig, layers: int) -> None:
        super().__init__()
        self.config = config
        self.blocks = nn.ModuleList(GPTJBlock(config, layer_idx=i) for i in range(layers))
        self.rotary_emb = GPTJRotaryEmbedding(config)

    def forward(self, hidden_states: torch.Tensor, *past: torch.Tensor) -> torch.Tensor:
        cache = DynamicCache(config=self.config)
        for i in range(len(self.blocks)):
            cache.update(past[2 * i], past[2 * i + 1], i)
        seq = hidden_states.size(1)
        position_ids = (torch.arange(seq) + past[0].size(2)).unsqueeze(0)
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for block in self.blocks:
            hidden_states = block(
                hidden_states, attention_mask=None, position_ids=position_ids, cache=cache,
                use_cache=True, position_embeddings=position_embeddings,
            )  # fmt: skip
        return hidden_states


class GPT2Step(nn.Module):
    """GPT-2 on ``input_ids``, after the per-layer caches in ``past`` (none: a prefill)."""

    def __init__(self, config: GPT2Config) -> None:
        super().__init__()
        self.config = config
        self.model = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor, *past: torch.Tensor) -> torch.Tensor:
        cache = None
        cached = 0
        if past:
            cache = DynamicCache(config=self.config)
            for i in range(self.config.n_layer):
                cache.update(past[2 * i], past[2 * i + 1], i)
            cached = past[0].size(2)
        # Every token visible, as generate() passes it (without a mask, transformers'
        # packed-sequence check uses aten::diff, which has no ONNX export).
        mask = torch.ones(input_ids.size(0), cached + input_ids.size(1), dtype=torch.long)
        out = self.model(input_ids=input_ids, cache=cache, attention_mask=mask,
                         use_cache=bool(past), logits_to_keep=0)  # fmt: skip
        return out.logits


def export(
    model: str, out: Path, *, past: int, seq: int = 1, layers: int | None = None,
    size: str = "full",
) -> int:  # fmt: skip
    """Export ``model`` (module docstring) at ``size`` to ``out``; returns its parameter
    count."""
    torch.manual_seed(SEED)
    sizes = SIZES[model][size]
    if model == "gptj":
        if past < 1 or seq != 1:
            raise ValueError("gptj: a decode step, --seq 1 and --past >= 1")
        config = GPTJConfig(**sizes, n_layer=layers or 1, attn_implementation="eager")
        module: nn.Module = GPTJDecodeStep(config, layers or 1)
        heads, hidden = config.n_head, config.n_embd
        names = ["hidden_states"]
        inputs = [torch.randn(1, seq, hidden)]
    else:
        config = GPT2Config(**sizes, n_layer=layers or 12, attn_implementation="eager")
        module = GPT2Step(config)
        heads, hidden = config.n_head, config.n_embd
        names = ["input_ids"]
        inputs = [torch.randint(0, config.vocab_size, (1, seq))]
    module.eval()
    axes = {names[0]: {0: "batch", 1: "seq"}, "output": {0: "batch", 1: "seq"}}
    for i in range(config.n_layer if past else 0):
        for kind in ("key", "value"):
            name = f"past_{kind}_{i}" if model == "gpt2" or config.n_layer > 1 else f"past_{kind}"
            names.append(name)
            inputs.append(torch.randn(1, heads, past, hidden // heads))
            axes[name] = {0: "batch", 2: "past"}
    with torch.no_grad():
        torch.onnx.export(
            module, tuple(inputs), str(out), dynamo=False, opset_version=OPSET,
            input_names=names, output_names=["output"], dynamic_axes=axes,
        )  # fmt: skip
    params = sum(p.numel() for p in module.parameters())
    del module, inputs
    pin_dims(out, {"batch": 1, "seq": seq, "past": past})
    return params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=("gptj", "gpt2"))
    parser.add_argument("--past", type=int, default=511, help="cached tokens (gpt2: 0 = prefill)")
    parser.add_argument("--seq", type=int, default=1, help="new tokens (gptj: 1)")
    parser.add_argument("--layers", type=int, help="decoder layers (default: gptj 1, gpt2 12)")
    parser.add_argument("--size", choices=("full", "tiny"), default="full",
                        help="full: the published widths; tiny: small widths, for tests")
    parser.add_argument("-o", "--out", type=Path, required=True, help="output .onnx")
    args = parser.parse_args()
    if args.past < 0 or args.seq < 1 or (args.layers is not None and args.layers < 1):
        parser.error("--past must be >= 0, --seq and --layers >= 1")
    try:
        params = export(args.model, args.out, past=args.past, seq=args.seq, layers=args.layers,
                        size=args.size)  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes, {params} parameters)")


if __name__ == "__main__":
    main()
