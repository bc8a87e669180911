"""LLM decode workloads profiled for PIM on this machine: peak memory and phase times.

The workloads (made once, cached under ``benchmarks/out/pim_llm/``; the exports need
torch and transformers, ``pip install -e '.[export]'``; measuring needs neither), fp32,
batch 1, decode steps with a KV cache of ``workloads.DECODE_PAST`` = 511 tokens unless
said otherwise:

=================  ===============================================================================
``llama7b``        LLaMA-7B layer, ``workloads.decoder_layer(**LLAMA7B, kind="llama", past=511)``
``llama7b-torch``  the same layer exported from PyTorch: ``examples/export_llama_layer.py
                   --size 7b --seq 1 --past 511``
``gptj6b``         GPT-J-6B layer, ``decoder_layer(**GPTJ6B, kind="gptj", past=511)``
``gptj6b-hf``      transformers' ``GPTJBlock`` (random weights) exported:
                   ``examples/export_hf_decoder.py gptj --past 511``
``gpt2-hf``        transformers' 12-layer GPT-2 small with embeddings and LM head, decode:
                   ``examples/export_hf_decoder.py gpt2 --past 511``
``gpt2-hf-prefill`` the same model, a prefill of 128 tokens without cache
                   (``--past 0 --seq 128``)
``llama-stack8``   8 LLaMA-style layers at width 1024 (``workloads.llama_at_width(1024)``:
``llama-stack32``  16 heads, FFN 2752), ``decoder_stack(..., layers=8 or 32, past=511)``;
                   32 LLaMA-7B layers (25.9 GB) do not fit this machine's 24 GB
=================  ===============================================================================

Measured per workload, in a fresh interpreter each: what ``placement profile MODEL --target
pim --host-times ort --cache cold -o FILE`` runs (``profile_nests``, counters ``auto``:
the callgrind simulation here, where no PMU counts): the time of each phase
(``metadata["phase_seconds"]``) and the peak resident set of the profiling process
(``VmHWM``) and, sampled every 20 ms per phase, of the process plus its children (the
simulation's driver under valgrind) -- the memory the machine must have. A child forked
and not yet running its own program is not added: its resident pages are the profiler's,
shared (counted, they made a 1.58 GB "peak" of GPT-2's 0.79 GB profiler at the fork
that starts valgrind). Each peak is
in GB (1e9 B) and as a multiple of the model's weights (its initializers' bytes). The
machine's 1-minute load average before and after each workload is printed with it.

``--code DIR`` (repeatable) measures with the ``placement`` package of another checkout
(e.g. an older commit, ``git archive``d), side by side: before/after. ``--workloads``
picks (default: all); ``--runs``/``--warmup`` as the CLI's (20/5); ``--no-counters``
leaves the simulation out.

``--compare-simulations`` instead simulates each workload's compiled program twice, cold,
with this host's caches: every nest (the full simulation), then with repeated layers
taken from representatives (:mod:`placement.profiling.repeats`), and prints both times,
the totals of each counter and the worst per-nest differences.

    python benchmarks/pim_llm_profiling.py [--workloads llama7b,gpt2-hf] [--code OLD --code .]
    python benchmarks/pim_llm_profiling.py --compare-simulations --workloads gpt2-hf
    python benchmarks/pim_llm_profiling.py --workloads llama7b-torch --save benchmarks/out/pim_llm
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from model_memory import machine  # the same machine line as the CIM memory benchmark

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out" / "pim_llm"
SAMPLE_SECONDS = 0.02

# name -> (how it is made, arguments)
WORKLOADS: dict[str, tuple[str, dict]] = {
    "llama7b": ("builder", {"kind": "llama", "width": "7b"}),
    "llama7b-torch": ("script", {"argv": ["export_llama_layer.py", "--size", "7b", "--seq", "1",
                                          "--past", "511"]}),
    "gptj6b": ("builder", {"kind": "gptj", "width": "6b"}),
    "gptj6b-hf": ("script", {"argv": ["export_hf_decoder.py", "gptj", "--past", "511"]}),
    "gpt2-hf": ("script", {"argv": ["export_hf_decoder.py", "gpt2", "--past", "511"]}),
    "gpt2-hf-prefill": ("script", {"argv": ["export_hf_decoder.py", "gpt2", "--past", "0",
                                            "--seq", "128"]}),
    "llama-stack8": ("builder", {"kind": "llama", "width": 1024, "layers": 8}),
    "llama-stack32": ("builder", {"kind": "llama", "width": 1024, "layers": 32}),
}  # fmt: skip


# --------------------------------------------------------------------------- workloads


def model_path(name: str) -> Path:
    """The workload's model, made now (in a child process: this one stays small) if missing."""
    path = OUT / f"{name}.onnx"
    if not path.exists():
        print(f"making {path} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, __file__, "--make", name], check=True)
    return path


def make(name: str) -> None:
    from placement.networks import workloads as W

    how, spec = WORKLOADS[name]
    OUT.mkdir(parents=True, exist_ok=True)
    final = OUT / f"{name}.onnx"
    partial = OUT / f"{name}.partial.onnx"
    if how == "script":
        argv = [sys.executable, str(ROOT / "examples" / spec["argv"][0]), *spec["argv"][1:]]
        subprocess.run([*argv, "-o", str(partial)], check=True)
        data = partial.with_name(partial.name + ".data")
        if data.exists():  # over 2 GiB: the weights beside it, named after the final file
            raise SystemExit(f"{name}: the export has external data; keep it as {partial}")
    else:
        dims = {"7b": W.LLAMA7B, "6b": W.GPTJ6B}.get(spec["width"])
        dims = dims or W.llama_at_width(spec["width"])
        model = W.decoder_stack(**dims, layers=spec.get("layers", 1), kind=spec["kind"],
                                past=W.DECODE_PAST)  # fmt: skip
        import onnx

        onnx.save(model, str(partial))
        del model
    partial.rename(final)


def weight_bytes(path: Path) -> int:
    """Bytes of the model's initializers (its weights and constants), not read."""
    import numpy as np
    import onnx

    from placement.onnxfile import read_onnx

    model = read_onnx(path, load_weights=False)
    total = 0
    for init in model.graph.initializer:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(init.data_type)).itemsize
        total += int(np.prod(init.dims, dtype=np.int64)) * itemsize
    return total


# --------------------------------------------------------------------------- measuring


def _rss(pid: int | str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _cmdline(pid: int | str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *_children(kid)]
    return found


def measure_child(path: str, runs: int, warmup: int, counters: str, save: str) -> None:
    """Profile ``path`` here; print one JSON line with phases and memory peaks.

    ``save`` (a path, or ``-`` for none) keeps the profile, for ``pim_llm_decode.py``.
    """
    samples: list[tuple[float, int, int]] = []
    done = threading.Event()
    me = os.getpid()

    # A child forked but not yet exec'd (subprocess with preexec_fn forks) shows the
    # profiler's own pages, shared copy-on-write, as its resident set: not memory of its
    # own, so it is not added (its cmdline is still the profiler's).
    mine = _cmdline(me)

    def sample() -> None:
        while not done.is_set():
            kids = sum(_rss(k) for k in _children(me) if _cmdline(k) != mine)
            samples.append((time.time(), _rss(me), kids))
            done.wait(SAMPLE_SECONDS)

    from placement.profiling.nest_measure import profile_nests

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    started = time.perf_counter()
    profile = profile_nests(path, runs=runs, warmup=warmup, host_times="ort", cache="cold",
                            counters=counters)  # fmt: skip
    ended = time.perf_counter()
    done.set()
    thread.join()
    if save != "-":
        profile.save(save)
    meta = profile.metadata
    phases = meta.get("phase_seconds") or {}
    begun = meta.get("phase_started") or {}
    bounds = [(name, begun[name], begun[name] + seconds) for name, seconds in phases.items()
              if name in begun]  # fmt: skip
    per_phase = {}
    for name, lo, hi in bounds:
        inside = [(s, k) for t, s, k in samples if lo <= t <= hi] or [(0, 0)]
        per_phase[name] = {"self": max(s for s, _ in inside),
                           "total": max(s + k for s, k in inside)}  # fmt: skip
    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))
    sim = meta.get("simulation") or {}
    print(json.dumps({
        "seconds": ended - started,
        "phases": phases,
        "peak_self": hwm,
        "peak_total_sampled": max((s + k for _, s, k in samples), default=0),
        "per_phase": per_phase,
        "nests": len(profile.nests),
        "counters": profile.counter_source,
        "simulation": (sim.get("nests") or {}).get("summary"),
        "simulation_seconds": sim.get("total_seconds"),
        "cpu_only_ms": 1e3 * sum(profile.t_cpu.values()),
        "ort_ms": None if profile.ort_cpu_only is None else 1e3 * profile.ort_cpu_only,
        "load": meta.get("machine_load"),
    }))  # fmt: skip


def measure(path: Path, code: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--measure-child", str(path), str(args.runs),
               str(args.warmup), "none" if args.no_counters else "auto",
               str(args.save / f"{path.stem}.nests.json") if args.save else "-"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"profiling {path} with {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def compare_simulations(path: Path) -> None:
    """Full and representative-layer simulations of ``path``'s compiled program, cold."""
    from placement.profiling.cache_geometry import host_cache_geometry
    from placement.profiling.counters import (
        SIM_INSTRUCTIONS,
        SIM_LL_READ_MISSES,
        SIM_LL_WRITE_MISSES,
    )
    from placement.profiling.mlir.optimize import optimize_program
    from placement.profiling.nest_measure import lower_model
    from placement.profiling.repeats import simulation_plan
    from placement.profiling.simulated import simulate_nests

    program = optimize_program(lower_model(path))
    geometry = host_cache_geometry()
    plan = simulation_plan(program, geometry.ll.size, warm=False)
    print(f"{path.name}: {len(program.nests)} nests; {plan.summary()}")
    runs = {}
    for label, chosen in (("full", None), ("representative", plan)):
        load = os.getloadavg()[0]
        runs[label] = simulate_nests(program, geometry=geometry, cold=True, plan=chosen)
        meta = runs[label].metadata
        print(f"  {label:15} {meta['total_seconds']:7.1f} s (build {meta['build_seconds']:.1f} s,"
              f" valgrind {meta['simulation_seconds']:.1f} s), load {load:.2f} before")  # fmt: skip
    full, rep = runs["full"].counters, runs["representative"].counters
    for event in (SIM_INSTRUCTIONS, SIM_LL_READ_MISSES, SIM_LL_WRITE_MISSES):
        want = sum(c[event] for c in full.values())
        got = sum(c[event] for c in rep.values())
        big = [n for n, c in full.items() if c[event] >= 1000]
        worst = max(big, key=lambda n: abs(rep[n][event] - full[n][event]) / full[n][event],
                    default=None)  # fmt: skip
        line = f"  {event}: total {want:.4g} full, {got:.4g} representative ({got / want - 1:+.3%})"
        if worst is not None:
            w, g = full[worst][event], rep[worst][event]
            line += (f"; worst of the {len(big)} nests with >= 1000: {worst} {w:.0f} vs"
                     f" {g:.0f} ({g / w - 1:+.2%})")  # fmt: skip
        print(line, flush=True)


# --------------------------------------------------------------------------- report


def gb(value: float, weights: int) -> str:
    return f"{value / 1e9:5.2f} GB {value / weights:4.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-counters", action="store_true", help="no cache simulation")
    ap.add_argument("--code", type=Path, action="append",
                    help="checkout whose placement package to measure (repeatable)")
    ap.add_argument("--compare-simulations", action="store_true",
                    help="full vs representative-layer cache simulation of each workload")
    ap.add_argument("--save", type=Path, metavar="DIR",
                    help="keep each profile as DIR/<model>.nests.json (pim_llm_decode.py's input)")
    args = ap.parse_args()
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
    codes = [c.resolve() for c in (args.code or [ROOT])]
    names = args.workloads.split(",")
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    print(machine())
    if args.compare_simulations:
        for name in names:
            compare_simulations(model_path(name))
        return
    for name in names:
        path = model_path(name)
        weights = weight_bytes(path)
        for code in codes:
            before = os.getloadavg()[0]
            r = measure(path, code, args)
            after = os.getloadavg()[0]
            print(f"\n{name} ({path.name}, weights {weights / 1e9:.3f} GB, {r['nests']} nests)"
                  f" with {code}: load average {before:.2f} before, {after:.2f} after")  # fmt: skip
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in r["phases"].items()) or "not recorded"
            print(f"  total {r['seconds']:.1f} s: {phases}")
            print(f"  peak RSS: profiling process {gb(r['peak_self'], weights)}; with its"
                  f" children (sampled) {gb(r['peak_total_sampled'], weights)}")  # fmt: skip
            for phase, peak in r["per_phase"].items():
                print(f"    {phase:20} {gb(peak['self'], weights)} (+children"
                      f" {gb(peak['total'], weights)})")  # fmt: skip
            print(f"  counters: {r['counters']}; {r['simulation'] or ''}")
            ort = "not measured" if r["ort_ms"] is None else f"{r['ort_ms']:.2f} ms"
            print(f"  CPU-only {r['cpu_only_ms']:.2f} ms (ONNX Runtime {ort})", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--measure-child":
        measure_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
    elif len(sys.argv) == 3 and sys.argv[1] == "--make":
        make(sys.argv[2])
    else:
        main()
