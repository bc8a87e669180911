"""Transformer decoder stacks as CIM targets: a 12-layer GPT-2 small and a 32-layer
LLaMA-style stack (fp32, from ``placement.networks.workloads``), solved under a deadline.

Each stack is built at batch 1, one token, a KV cache of ``--past`` tokens (decode step),
written under ``benchmarks/out/`` (reused when present), ingested (``load_graph``),
profiled once with ONNX Runtime on this machine (1 thread, ``--runs`` runs), then solved
by ``cim.solve`` with the product's defaults (method, formulation and solver ``auto``)
under ``--time-limit`` at every crossbar budget of ``--crossbars`` (50 ns MVM, the
``--hardware`` preset; its host should be this machine's architecture, else the
profile describes another host). Per point it prints the status, the certified gap,
the method that ran, the wall time of the solve (deadline included) and the speed-up
beside the CPU-only latency it is measured against.

The LLaMA-style stack keeps LLaMA's layer (RMSNorm, q/k/v/o without biases, SwiGLU)
at a width whose weights fit this machine (``--llama-hidden``, default 1024: 32 layers
of 4h^2 + 3h*ffn weights, 0.40 G parameters by ``workloads.parameter_count``, 1.6 GB
fp32; at LLaMA-7B's 4096 the same stack would be 6.5 G parameters, 25.9 GB).

    python benchmarks/cim_transformers.py [--time-limit 60] [--crossbars 25,50,100,200]
        [--past 128] [--runs 10] [--hardware x86-ryzen] [--models gpt2,llama]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import onnx

from placement import cim, load_graph, load_hardware, profile_host
from placement.networks.workloads import GPT2, LLAMA7B, decoder_stack
from placement.profiling.host_profile import HostProfile
from placement.solvers.workers import parse_workers

OUT = Path(__file__).resolve().parent / "out"


def stacks(args: argparse.Namespace) -> dict[str, Path]:
    """The models asked for, built once into benchmarks/out/."""
    llama = {"hidden": args.llama_hidden, "heads": args.llama_hidden // 64,
             "ffn": LLAMA7B["ffn"] * args.llama_hidden // LLAMA7B["hidden"]}  # fmt: skip
    specs = {
        "gpt2": (f"gpt2_small_12l_past{args.past}", dict(GPT2, layers=12, kind="gpt2")),
        "llama": (f"llama_{args.llama_hidden}_32l_past{args.past}",
                  dict(llama, layers=32, kind="llama")),
    }  # fmt: skip
    paths = {}
    OUT.mkdir(exist_ok=True)
    for key in args.models.split(","):
        name, kwargs = specs[key]
        path = OUT / f"{name}.onnx"
        if not path.exists():
            tick = time.perf_counter()
            model = decoder_stack(**kwargs, seq=1, past=args.past)
            onnx.save(model, path, save_as_external_data=True, location=f"{name}.data")
            print(f"built {path.name} in {time.perf_counter() - tick:.1f} s")
        paths[name] = path
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--crossbars", default="25,50,100,200")
    ap.add_argument("--past", type=int, default=128, help="KV cache length (tokens)")
    ap.add_argument("--runs", type=int, default=10, help="ONNX Runtime profiling runs")
    ap.add_argument("--hardware", default="x86-ryzen")
    ap.add_argument("--llama-hidden", type=int, default=1024)
    ap.add_argument("--workers", default="auto",
                    help="block solves' worker processes: a number, or auto (the default,"
                    " as `placement solve`'s)")
    ap.add_argument("--keep-profiles", action="store_true",
                    help="profile each stack once and reuse the profile from benchmarks/out/"
                    " afterwards (compare code versions on the same latencies)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"machine load before: {load:.2f} (1-minute average, {os.cpu_count()} CPUs)")
    for name, path in stacks(args).items():
        tick = time.perf_counter()
        graph = load_graph(path)
        ingest = time.perf_counter() - tick
        saved = OUT / f"{name}.profile.json"
        if args.keep_profiles and saved.exists():
            profile = HostProfile.load(saved)
            load = profile.metadata.get("machine_load", {})
            print(f"{name}: profile reused from {saved} (1-minute load when measured:"
                  f" {load.get('loadavg_before', '?')})")  # fmt: skip
        else:
            profile = profile_host(graph, runs=args.runs, warmup=2)
            if args.keep_profiles:
                profile.save(saved)
        n = len(graph.operators)
        print(f"\n{name}: {n} operators, ingested in {ingest:.1f} s; CPU-only (ONNX Runtime,"
              f" 1 thread, measured here) {profile.kernel_total * 1e3:.2f} ms")  # fmt: skip
        print(f"{'C':>5} {'status':>11} {'gap':>9} {'method':>14} {'wall s':>7}"
              f" {'makespan':>10} {'speed-up':>9} {'offloaded':>10}")  # fmt: skip
        for crossbars in (int(c) for c in args.crossbars.split(",")):
            hardware = load_hardware(args.hardware, crossbars=crossbars, t_mvm_ns=50)
            instance = cim.build_instance(graph, profile, hardware)
            tick = time.perf_counter()
            placed = cim.solve(instance, time_limit=args.time_limit,
                               workers=parse_workers(args.workers, "--workers"))
            wall = time.perf_counter() - tick
            res = placed.result
            assert placed.verification is not None and placed.verification.ok
            on_cim = sum(1 for v in placed.schedule.on_host.values() if not v)
            print(f"{crossbars:>5} {res.status.value:>11} {100 * (res.gap or 0):>8.4f}%"
                  f" {res.options.get('method', '?'):>14} {wall:>7.1f}"
                  f" {placed.schedule.makespan * 1e3:>8.3f}ms"
                  f" {instance.cpu_only_latency / placed.schedule.makespan:>8.3f}x"
                  f" {on_cim:>5}/{n}")  # fmt: skip
    print(f"\nmachine load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
