"""What the Torch-PIM verdict benchmark measures: the workloads, their sizes (the paper's
where it states one), the core counts and host-time sources, and one :class:`Job` per
profile it caches (read by ``pim_paper_verdicts.py`` and the ``pim_verdict_*`` modules)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out" / "pim_verdicts"
CORES = (32, 64, 128)
SOURCES = ("compiled", "ort", "jit")
PROFILED = ("compiled", "jit")  # "ort" is derived from the compiled profile
DECODER_PAST = 128  # cached tokens of the decode step (see the module docstring)
RUNS, WARMUP = 7, 2
BIG_RUNS, BIG_WARMUP = 5, 1  # workloads with >= 100 MB of weights

# Fig. 3 / Section 5.2: workload -> (N, where N comes from). The paper states sizes only in
# Table 4 (and N = 2,048 for matmul in Section 5.2); elsewhere we say which we chose.
FIG_SIZES: dict[str, tuple[int, str]] = {
    **{name: (1 << 20, "1M elements (paper: no size; Table 4 relu/ew_add: >=4096)")
       for name in ("ew_add", "copy", "scale", "zeroing", "relu")},
    **{name: (1 << 20, "1M elements (paper: no size)") for name in ("silu", "gelu", "tanh")},
    "softmax": (65536, "Table 4's largest (64 rows)"),
    "layernorm": (16384, "64 x 16384 (paper: no size)"),
    "rmsnorm": (16384, "64 x 16384 (paper: no size)"),
    "mac": (4096, "Table 4's largest (4096 x 4096 accumulators, 64 products each)"),
    "gemv": (16384, "Table 4's largest (1 GiB weight)"),
    "matmul": (2048, "Section 5.2's N = 2,048"),
    "depthwise_conv": (128, "32 x 128 x 128 (paper: no size)"),
    "mlp": (4096, "Table 4's 8192 has 2 GiB of weights, over protobuf's 2 GB: 4096"),
    "attention": (8192, "Table 4's largest (hidden 8192, 128 cached tokens)"),
    "gptj_layer": (DECODER_PAST, "GPT-J-6B widths, decode step, 128 cached tokens"),
    "llama_layer": (DECODER_PAST, "LLaMA-7B widths, decode step, 128 cached tokens"),
}  # fmt: skip
# The unoptimized loops of a 2048^3 matmul take ~10 s per run and hours under callgrind.
JIT_SIZE_OVERRIDE = {"matmul": (512, "jit: 512 (2048 as lowered: hours under callgrind)")}

# Table 4 (and Section 5.3's text for layernorm and silu): the sizes of each operator.
TABLE4_SIZES: dict[str, tuple[int, ...]] = {
    "mac": (256, 1024, 2048, 4096),
    "mlp": (1024, 4096),  # 8192: over protobuf's 2 GB
    "attention": (512, 1024, 2048, 4096, 8192),
    "gemv": (512, 1024, 4096, 8192, 16384),
    "relu": (512, 1024, 4096, 65536, 1 << 20),
    "ew_add": (512, 1024, 4096, 65536, 1 << 20),
    "softmax": (1024, 4096, 16384, 32768, 65536),
    "depthwise_conv": (32, 64, 128),
    "layernorm": (1024, 4096, 16384),
    "silu": (1024, 4096, 65536, 1 << 20),
}
# Table 5's workloads need their basic blocks (a fresh lowering): saved with the profile.
TABLE5 = ("gptj_layer", "llama_layer", "attention")
# What --quick evaluates: the verdict classes the issue requires.
QUICK = ("ew_add", "copy", "scale", "zeroing", "relu", "silu", "gelu", "tanh", "matmul",
         "gemv", "mac", "depthwise_conv", "gptj_layer", "llama_layer")  # fmt: skip
BIG = ("gemv", "mlp", "attention", "gptj_layer", "llama_layer")


@dataclass(frozen=True)
class Job:
    workload: str
    n: int
    source: str  # "compiled" | "jit"

    @property
    def stem(self) -> str:
        return f"{self.workload}_{self.n}_{self.source}"

    @property
    def profile_path(self) -> Path:
        return OUT / "profiles" / f"{self.stem}.nests.json"

    @property
    def loops_path(self) -> Path:
        return OUT / "profiles" / f"{self.workload}_{self.n}.loops.json"

    @property
    def big(self) -> bool:
        return self.workload in BIG and self.n >= 4096 or self.workload.endswith("_layer")


def fig_size(workload: str, source: str) -> tuple[int, str]:
    if source == "jit" and workload in JIT_SIZE_OVERRIDE:
        return JIT_SIZE_OVERRIDE[workload]
    return FIG_SIZES[workload]


def jobs(quick: bool) -> list[Job]:
    """Every profile the claims read, compiled before jit, small before large."""
    wanted: dict[tuple[str, int, str], None] = {}
    for source in PROFILED:
        for name in FIG_SIZES:
            if not quick or name in QUICK:
                wanted[(name, fig_size(name, source)[0], source)] = None
        if not quick:
            for name, sizes in TABLE4_SIZES.items():
                for n in sizes:
                    wanted[(name, n, source)] = None
    out = [Job(*k) for k in wanted]
    return sorted(out, key=lambda j: (PROFILED.index(j.source), j.big, j.workload, j.n))
