"""Peak memory of ``placement solve --target cim`` on transformer exports, stage by stage.

(The PIM path -- lowering, JIT timing, ONNX Runtime, cache simulation -- is measured
phase by phase, with the simulation's child process, by ``benchmarks/pim_llm_profiling.py``.)

The models (exported once, cached under ``benchmarks/out/``; exporting needs torch and
transformers: ``pip install -e '.[export]'``; measuring needs neither):

* ``gpt2``: Hugging Face transformers' ``GPT2LMHeadModel(GPT2Config())`` (12 layers,
  hidden 768, 124,439,808 parameters, 498 MB), random weights (seed 0), exported with
  ``torch.onnx.export`` (TorchScript, ``dynamo=False``, opset 17) at batch 1, 128 tokens,
  inputs ``input_ids`` and ``attention_mask`` (as Optimum exports decoders). The file
  is 652 MB: the exporter's constant folding adds a transposed copy of the tied token
  embedding (154 MB) for the LM head.
* ``llama8``: 8 LLaMA decoder layers of ``examples/export_llama_layer.py --size medium
  --layers 8 --seq 128`` (hidden 1024, 16 heads, FFN 2816; 102,776,832 parameters,
  411 MB).

Each in two layouts: ``single`` (one ``.onnx``) and ``external`` (``<name>.onnx`` beside
``<name>.onnx.data``, every tensor of 1 KiB or more in the data file, as
``onnx.save(..., save_as_external_data=True)`` writes it).

Measured, per model and layout, in a fresh interpreter each: the peak resident set
(``VmHWM``, restarted through ``/proc/self/clear_refs`` before each stage) of the
stages of ``solve`` in order: ``imports``, ``load_graph`` (read, check, fold, shapes,
DAG), ``profile`` (ONNX Runtime: session, random inputs, ``--warmup`` and ``--runs``
runs, trace, attribution) and ``solve`` (instance, CP-SAT/HiGHS under ``--time-limit``,
verification), the hardware the CLI picks on x86 (``x86-ryzen``); and the whole command
``placement solve MODEL --target cim --time-limit T --runs R --warmup W`` in a child
process (its ``ru_maxrss``). Each peak is shown in MB (1e6 B) and as a multiple of the
model's bytes (``.onnx`` plus data). Memory peaks barely move between runs; ``--repeat``
reports the median of several.

``--code DIR`` (repeatable) runs the same measurement with the ``placement`` package of
another checkout (e.g. a worktree of an older commit) in the child processes, side by
side: the before/after comparison.

    python benchmarks/model_memory.py [--models gpt2,llama8] [--layouts single,external]
        [--runs 20 --warmup 5 --time-limit 60] [--code OLD --code .] [--no-cli]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
SEQ = 128
STAGES = ("imports", "load_graph", "profile", "solve")


# --------------------------------------------------------------------------- exports


def export_gpt2(out: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config()
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, SEQ))
    kwargs = {"attention_mask": torch.ones_like(ids), "use_cache": False, "return_dict": False}
    with torch.no_grad():
        torch.onnx.export(
            model, (ids, kwargs), str(out), dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask"], output_names=["logits"],
        )  # fmt: skip


def export_llama8(out: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "export_llama_layer", ROOT / "examples" / "export_llama_layer.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.export("medium", SEQ, out, layers=8)


EXPORTS = {"gpt2": export_gpt2, "llama8": export_llama8}


def model_path(name: str, layout: str) -> Path:
    """The cached export (made now, in a child process, if missing: this process stays
    small, since a child forked from it starts with its resident set as its peak)."""
    single = OUT / f"{name}.onnx"
    path = single if layout == "single" else OUT / f"{name}_external" / f"{name}.onnx"
    if not path.exists():
        print(f"exporting {path} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, __file__, "--export", name, layout], check=True)
    return path


def export(name: str, layout: str) -> None:
    single = OUT / f"{name}.onnx"
    if not single.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        partial = single.with_suffix(".partial.onnx")
        EXPORTS[name](partial)
        partial.rename(single)
    if layout == "external":
        import onnx

        external = OUT / f"{name}_external" / f"{name}.onnx"
        external.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(onnx.load(str(single)), str(external), save_as_external_data=True,
                  location=f"{name}.onnx.data", size_threshold=1024)  # fmt: skip


def model_bytes(path: Path) -> int:
    data = path.with_name(path.name + ".data")
    return path.stat().st_size + (data.stat().st_size if data.exists() else 0)


# --------------------------------------------------------------------------- measuring


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _restart_peak() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # VmHWM := VmRSS


def stages_child(path: str, runs: int, warmup: int, time_limit: float) -> None:
    """Run the stages of ``solve`` on ``path`` here; print each stage's peak as JSON."""
    peaks: dict[str, dict[str, float]] = {}

    def stage(name, run):
        _restart_peak()
        before, started = _status("VmRSS"), time.perf_counter()
        value = run()
        peaks[name] = {
            "before": before,
            "peak": _status("VmHWM"),
            "seconds": time.perf_counter() - started,
        }
        return value

    def imports():
        from placement import cim, load_graph, load_hardware, profile_host

        return cim, load_graph, load_hardware, profile_host

    cim, load_graph, load_hardware, profile_host = stage("imports", imports)
    graph = stage("load_graph", lambda: load_graph(path))
    profile = stage("profile", lambda: profile_host(graph, runs=runs, warmup=warmup))
    hardware = load_hardware("x86-ryzen")
    instance = cim.build_instance(graph, profile, hardware)
    stage("solve", lambda: cim.solve(instance, time_limit=time_limit))
    print(json.dumps(peaks))


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code)}


def measure_stages(path: Path, code: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--stages-child", str(path), str(args.runs),
               str(args.warmup), str(args.time_limit)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=_env(code))
    if done.returncode != 0:
        raise SystemExit(f"stages of {path} with {code} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def measure_cli(path: Path, code: Path, args: argparse.Namespace) -> float:
    """Peak resident bytes of the whole ``placement solve`` command (``ru_maxrss`` counts
    this process's resident set at the fork: a few tens of MB)."""
    command = [sys.executable, "-m", "placement.cli", "solve", str(path), "--target", "cim",
               "--time-limit", str(args.time_limit), "--runs", str(args.runs),
               "--warmup", str(args.warmup), "-q"]  # fmt: skip
    child = subprocess.Popen(  # cwd: "-m" puts it first on sys.path, before PYTHONPATH
        command, env=_env(code), cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"placement solve {path} with {code} failed:\n{child.stderr.read()}")
    return usage.ru_maxrss * 1024


# --------------------------------------------------------------------------- report


def machine() -> str:
    total = 0
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    cpu = platform.processor() or platform.machine()
    return (f"{platform.node()}: {os.cpu_count()} CPUs ({cpu}), {total / 1e9:.1f} GB RAM,"
            f" Python {platform.python_version()}, {platform.platform()}")  # fmt: skip


def cell(value: float, size: int) -> str:
    return f"{value / 1e6:7.0f} MB {value / size:5.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,llama8")
    ap.add_argument("--layouts", default="single,external")
    ap.add_argument("--runs", type=int, default=20, help="profiled runs (the CLI's default)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=60.0, help="solve deadline, s")
    ap.add_argument("--code", type=Path, action="append",
                    help="checkout whose placement package to measure (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each; the median is shown")
    ap.add_argument("--no-cli", action="store_true", help="only the stages, not the command")
    args = ap.parse_args()
    codes = [c.resolve() for c in (args.code or [ROOT])]
    print(machine())
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    header = f"{'model':8} {'layout':8} {'file':>7} {'code':24}"
    header += "".join(f" {name + ' peak':>18}" for name in STAGES)
    header += "" if args.no_cli else f" {'whole command':>18}"
    print(header)
    for name in args.models.split(","):
        for layout in args.layouts.split(","):
            path = model_path(name, layout)
            size = model_bytes(path)
            for code in codes:
                runs = [measure_stages(path, code, args) for _ in range(args.repeat)]
                row = f"{name:8} {layout:8} {size / 1e6:4.0f} MB {str(code)[-24:]:24}"
                for stage in STAGES:
                    row += " " + cell(statistics.median(r[stage]["peak"] for r in runs), size)
                if not args.no_cli:
                    whole = statistics.median(measure_cli(path, code, args)
                                              for _ in range(args.repeat))  # fmt: skip
                    row += " " + cell(whole, size)
                print(row, flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("peak: resident set (VmHWM) of the process up to the end of the stage, restarted"
          " before it; x: multiple of the model's bytes (.onnx + .data)")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--stages-child":
        stages_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif len(sys.argv) == 4 and sys.argv[1] == "--export":
        export(sys.argv[2], sys.argv[3])
    else:
        main()
