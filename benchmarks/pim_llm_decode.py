"""LLM decoding on PIM: the model's optimum and the paper's rule, per memory architecture.

For every decode workload (a nest profile made with the defaults the issue asks for:
``--host-times ort --cache cold``, counters from the callgrind simulation where the host
has no PMU), every PIM preset and every core count, this prints the Eq.-9-optimal
placement (the ``placement solve --target pim`` model) and the Torch-PIM threshold rule's
placement, each as a speed-up over the profile's CPU-only time with the terms of Eq. 9,
under the preset's own memory architecture (``--copy auto``) and under the paper's Eq. 8
upper bound (``--copy upper_bound``) for comparison. A partitioned device's one-time cost
(the weights placed in its banks at model load) is shown beside, never inside, the
per-token time. The paper's speed-ups and published GEMV gains of real devices are printed
beside the table with their baselines: they are not the same experiment.

    python benchmarks/pim_llm_decode.py MODEL.onnx:PROFILE.json[:LABEL] ...
    python benchmarks/pim_llm_decode.py --make llama_layer,gptj_layer     # build + profile
    python benchmarks/pim_llm_decode.py ... --presets pim-icelake,pim-hbm,pim-upmem --json out.json

``--make`` builds the named workloads of ``placement.networks.workloads`` at the decode
step (one token, ``--past`` cached tokens, batch 1, fp32) into ``--out`` and profiles each
once (a profile already there for the same model file is reused).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_PRESETS = ("pim-icelake", "pim-hbm", "pim-upmem")
DEFAULT_CORES = (32, 64, 128)
OUT = Path(__file__).resolve().parent / "out" / "pim_llm_decode"
# The Torch-PIM paper's LLM results (abstract and Section 5.2): speed-up over CPU-only
# execution of the same lowered code, "across PIM configurations of 32 to 128 cores".
PAPER = {"llama": 3.6, "gptj": 5.1}
# Published GEMV gains of real PIM devices, each over its own baseline
# (shared/notes/pim-published.md gives where each was read).
PUBLISHED = (
    ("HBM-PIM (Samsung)", "GEMV 8.9x over the same GPU system without PIM", "IEEE Micro 2022"),
    ("GDDR6-AiM (SK hynix)", "GEMV-based workloads 7.5-10.5x over HBM2/GDDR6 systems",
     "ISSCC 2022 / JSSC 2023"),
    ("UPMEM", "GEMV with the matrix already in PIM memory: INT8 > 3x, INT4 10x over a"
     " dual-socket CPU", "arXiv 2510.15927"),
)  # fmt: skip


def load_avg() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def make_profiles(
    names: list[str], past: int, out: Path, runs: int
) -> list[tuple[Path, Path, str]]:
    """Build and profile each decode workload (reusing a profile of the same file)."""
    from placement.networks.workloads import build, parameter_count
    from placement.profiling.nest_measure import model_sha256, profile_nests
    from placement.profiling.nest_profile import NestProfile

    out.mkdir(parents=True, exist_ok=True)
    made = []
    for name in names:
        model_path = out / f"{name}_{past}.onnx"
        if not model_path.exists():
            model = build(name, past)
            print(f"{name}: {parameter_count(model) / 1e6:.1f} M parameters", file=sys.stderr)
            model_path.write_bytes(model.SerializeToString())
        profile_path = out / f"{name}_{past}.nests.json"
        if profile_path.exists():
            try:
                NestProfile.load(profile_path).check_matches(model_sha256(model_path), model_path)
                made.append((model_path, profile_path, name))
                continue
            except Exception as exc:  # another model file: make it again
                print(f"{profile_path}: {exc}; profiling again", file=sys.stderr)
        tick = time.perf_counter()
        print(f"{name}: profiling (load {load_avg()}) ...", file=sys.stderr)
        profile = profile_nests(model_path, runs=runs, warmup=2, host_times="ort", cache="cold")
        profile.save(profile_path)
        print(f"{name}: profiled in {time.perf_counter() - tick:.0f} s (load {load_avg()})",
              file=sys.stderr)  # fmt: skip
        made.append((model_path, profile_path, name))
    return made


def evaluate(
    profile: Any, preset: str, cores: int, copy: str, time_limit: float
) -> dict[str, Any]:
    """The optimum and the rule on ``cores`` cores of ``preset`` under ``copy``."""
    from placement.devices.pim import resolve_copy, speedup
    from placement.hardware.pim import load_pim_hardware
    from placement.pim.instance import build_instance
    from placement.pim.pipeline import solve_for_cores

    hw = load_pim_hardware(preset)
    instance = build_instance(profile, hw, cores)
    copy = resolve_copy(copy, hw.pim)
    (result,) = solve_for_cores(instance, [cores], copy=copy, time_limit=time_limit)
    placement = result.placement
    model, rule = placement.hybrid, result.rule_hybrid
    cpu = placement.cpu_only
    return {
        "preset": preset, "memory": hw.pim.memory, "cores": cores, "copy": copy,
        "cpu_only_s": cpu, "status": placement.result.status.value, "gap": placement.result.gap,
        "model": None if model is None else {**model.to_json(),
                                             "speedup": speedup(cpu, model.total),
                                             "on_pim": sum(placement.on_pim.values())},
        "rule": {**rule.to_json(), "speedup": speedup(cpu, rule.total),
                 "on_pim": len(result.rule_on_pim)},
        "theta_gbps": instance.theta / 1e9,
    }  # fmt: skip


def ms(x: float) -> str:
    return f"{x * 1e3:.3g} ms" if x >= 1e-4 else f"{x * 1e6:.3g} us"


def print_table(label: str, profile: Any, rows: list[dict[str, Any]]) -> None:
    ort = profile.ort_cpu_only
    base = f"CPU-only {ms(profile.cpu_only)} (sum of nest T_cpu, host times {profile.host_times})"
    if ort is not None:
        base += f"; ONNX Runtime 1 thread {ms(ort)}"
    host = profile.metadata.get("cpu_model") or profile.metadata.get("machine")
    print(f"\n### {label}: {len(profile.nests)} nests; {base}; cache {profile.cache}, host {host}")
    print("| preset (memory) | N | copy | model optimum | T_host / T_pim / T_copy | rule | "
          "T_host / T_pim / T_copy | once at load |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, u = r["model"], r["rule"]
        mcell = "-" if m is None else f"{m['speedup']:.2f}x ({m['on_pim']} nests)"
        mterms = "-" if m is None else f"{ms(m['host'])} / {ms(m['pim'])} / {ms(m['copy'])}"
        load = max(m["load_once"] if m else 0.0, u["load_once"])
        print(f"| {r['preset']} ({r['memory']}) | {r['cores']} | {r['copy']} | {mcell} |"
              f" {mterms} | {u['speedup']:.2f}x ({u['on_pim']} nests) |"
              f" {ms(u['host'])} / {ms(u['pim'])} / {ms(u['copy'])} |"
              f" {ms(load) if load else '-'} |")  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="*", metavar="MODEL:PROFILE[:LABEL]")
    p.add_argument("--make", default="", help="workloads to build and profile (comma list)")
    p.add_argument("--past", type=int, default=511, help="cached tokens (default 511)")
    p.add_argument("--runs", type=int, default=10, help="profiling runs (default 10)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--presets", default=",".join(DEFAULT_PRESETS))
    p.add_argument("--cores", default=",".join(map(str, DEFAULT_CORES)))
    p.add_argument("--time-limit", type=float, default=600.0)
    p.add_argument("--json", type=Path, help="write every row here")
    args = p.parse_args()

    from placement.profiling.nest_profile import NestProfile

    jobs = []
    for item in args.inputs:
        parts = item.split(":")
        if len(parts) not in (2, 3):
            p.error(f"{item!r}: expected MODEL:PROFILE[:LABEL]")
        label = parts[2] if len(parts) == 3 else Path(parts[0]).stem
        jobs.append((Path(parts[0]), Path(parts[1]), label))
    if args.make:
        jobs += make_profiles(args.make.split(","), args.past, args.out, args.runs)
    if not jobs:
        p.error("nothing to evaluate: give MODEL:PROFILE pairs or --make")
    presets = args.presets.split(",")
    cores = [int(c) for c in args.cores.split(",")]
    print(f"# LLM decode on PIM (load {load_avg()} on {os.cpu_count()} CPUs)")
    every = []
    for model_path, profile_path, label in jobs:
        profile = NestProfile.load(profile_path)
        rows = [
            evaluate(profile, preset, n, copy, args.time_limit)
            for preset in presets
            for n in cores
            for copy in ("auto", "upper_bound")
        ]
        print_table(label, profile, rows)
        every += [{"workload": label, "model": str(model_path), **r} for r in rows]
    print("\nThe paper's results (Torch-PIM, over CPU-only execution of its own lowered"
          " code, 32-128 cores): LLaMA-7B 3.6x, GPT-J-6B 5.1x.")
    print("Published GEMV gains of real devices, each over its own baseline:")
    for device, gain, where in PUBLISHED:
        print(f"* {device}: {gain} ({where})")
    if args.json:
        args.json.write_text(json.dumps(every, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
