"""How close the PIM path's host baseline is to ONNX Runtime: compiled JIT vs ORT, side by side.

For the paper's 15 tensor operators, the MLP and attention layers and the GPT-2 decode
layer (``placement.networks.workloads``), each in its own subprocess: build the ONNX
model, lower it with torch-mlir, optimize it for the host
(``placement.profiling.mlir.optimize``), JIT it with the C nest markers (exactly what
``placement profile --target pim --host-times compiled`` times), check its outputs
against ONNX Runtime, then time it and ONNX Runtime (1 intra-op thread, sequential,
all graph optimizations, the same input arrays) *alternately*, run after run, so both
see the same machine load: per side the median of ``--runs`` calls (wall time of the
call: ``session.run`` for ORT, the JIT entry point through ctypes for the JIT). The
unoptimized lowering (``--host-times jit``, today's method) is timed the same way with
fewer runs (``--jit-runs``; it is 30-500x slower).

Sizes: the largest size of the paper's Table 4 for the operator where one size runs in
under a minute here, else the largest that does; where the paper gives no size, the
largest default size of ``WORKLOADS`` (or one that shows the operator's regime). The
``size`` column says which (:data:`SIZES`).

Targets (compiled / ORT): within 3x for elementwise, transcendental, reduction,
normalization and GEMV workloads (the layers are GEMV-bound at batch 1, so 3x too),
within 6x for GEMM and convolution.

    python benchmarks/pim_host_baseline.py                  # the table (about 10 minutes)
    python benchmarks/pim_host_baseline.py --workloads gemv,softmax --runs 30
    python benchmarks/pim_host_baseline.py --ablation       # what each optimization step buys
    python benchmarks/pim_host_baseline.py --json out.json
    python benchmarks/pim_host_baseline.py --workloads matmul:512,matmul,gemv --without tile

``--workloads`` takes ``name:N`` for another size than :data:`SIZES`'. ``--without STEP``
also times, in the same process and beside ONNX Runtime in the same alternating way,
the pipeline without that step (its ratio in an extra column): what one step buys at
the table's sizes.

``--ablation`` times, for a few workloads, the pipeline with its steps added one at a
time (loops only, +interchange, +tile, +math, +dead-stores, +fastmath, +vector-width,
+aligned-alloc), each beside ONNX Runtime in the same alternating way.

The machine load (1-minute load average per CPU before and after, and the share of all
CPUs other processes kept busy while measuring) is printed with the table: on a shared
2-core VM ratios move by +-20 % between runs, side-by-side medians keep them comparable.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# workload -> (size, where the size comes from, target ratio)
SIZES: dict[str, tuple[int, str, float]] = {
    "ew_add": (1 << 20, "1M elements: WORKLOADS' largest (Table 4: >=4096, no upper size)", 3),
    "copy": (1 << 20, "1M elements: WORKLOADS' largest (no paper size)", 3),
    "scale": (1 << 20, "1M elements: WORKLOADS' largest (no paper size)", 3),
    "zeroing": (1 << 20, "1M elements: WORKLOADS' largest (no paper size)", 3),
    "relu": (1 << 20, "1M elements: WORKLOADS' largest (Table 4: >=4096, no upper size)", 3),
    "silu": (1 << 20, "1M elements: WORKLOADS' largest (no paper size)", 3),
    "gelu": (1 << 20, "1M elements: WORKLOADS' largest (no paper size)", 3),
    "tanh": (1 << 20, "1M elements: WORKLOADS' largest (no paper size)", 3),
    "softmax": (65536, "paper, Table 4's largest (64 rows)", 3),
    "layernorm": (16384, "WORKLOADS' largest (no paper size; 64 rows)", 3),
    "rmsnorm": (16384, "WORKLOADS' largest (no paper size; 64 rows)", 3),
    "mac": (4096, "paper, Table 4's largest (4096 x 4096 accumulators, 64 products each)", 6),
    "gemv": (16384, "paper, Table 4's largest (1 GiB weight)", 3),
    "matmul": (2048, "paper, Section 5.2's N = 2,048", 6),
    "depthwise_conv": (128, "WORKLOADS' largest (no paper size; 32 channels)", 6),
    "mlp": (4096, "paper's 4096 (Table 4's 8192 has 2 GiB of weights: over protobuf's 2 GB)", 3),
    "attention": (8192, "paper, Table 4's largest (hidden 8192, 128 cached tokens)", 3),
    "gpt2_layer": (128, "WORKLOADS' largest: 128 cached tokens (paper: GPT-J/LLaMA layers)", 3),
}
ORDER = list(SIZES)
ABLATION_WORKLOADS = ("gemv", "softmax", "layernorm", "tanh", "gelu", "matmul",
                      "depthwise_conv", "gpt2_layer")  # fmt: skip
ABLATION_SIZES = {
    "gemv": 4096, "softmax": 4096, "layernorm": 4096, "tanh": 1 << 20, "gelu": 1 << 20,
    "matmul": 512, "depthwise_conv": 64, "gpt2_layer": 0,
}  # fmt: skip


# --------------------------------------------------------------------------- child


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _jit(program: Any) -> tuple[Any, Any, list[Any]]:
    """The program JITted with the C markers, as the timer does; (entry, packed args, keep)."""
    import ctypes

    from torch_mlir.runtime.np_to_memref import get_ranked_memref_descriptor

    from placement.profiling.nest_markers import load_c_markers
    from placement.profiling.nest_timing import jit_with_markers, program_arguments

    lib = load_c_markers()
    engine, callbacks = jit_with_markers(program, lib.enter, lib.exit)
    arrays = program_arguments(program, 0)
    descriptors = [get_ranked_memref_descriptor(a) for a in arrays]
    pointers = [ctypes.pointer(ctypes.pointer(d)) for d in descriptors]
    packed = (ctypes.c_void_p * len(pointers))(*[ctypes.cast(p, ctypes.c_void_p) for p in pointers])
    entry = engine.lookup(program.func_name)
    return entry, packed, [engine, callbacks, arrays, descriptors, pointers]


def _side_by_side(entry: Any, packed: Any, session: Any, feeds: dict[str, Any], runs: int,
                  warmup: int) -> tuple[float, float]:  # fmt: skip
    """Median wall seconds of the JIT call and of ORT's session.run, alternating."""
    for _ in range(warmup):
        entry(packed)
        session.run(None, feeds)
    jit, ort = [], []
    clock = time.perf_counter_ns
    for i in range(runs):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for side in order:
            t0 = clock()
            if side == 0:
                entry(packed)
                jit.append(clock() - t0)
            else:
                session.run(None, feeds)
                ort.append(clock() - t0)
    return statistics.median(jit) * 1e-9, statistics.median(ort) * 1e-9


def measure_one(name: str, n: int, runs: int, warmup: int, jit_runs: int,
                workdir: Path, without: str = "") -> dict[str, Any]:  # fmt: skip
    from placement.networks.workloads import WORKLOADS
    from placement.profiling.host import LoadProbe
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import DEFAULT_STEPS, optimize_program
    from placement.profiling.nest_timing import check_outputs, random_inputs

    probe = LoadProbe()
    path = workdir / f"{name}_{n}.onnx"
    path.write_bytes(WORKLOADS[name].build(n).SerializeToString())
    t0 = time.perf_counter()
    program = lower_onnx(path)
    lowered = time.perf_counter()
    compiled = optimize_program(program)
    optimized = time.perf_counter()
    session = _session(path)
    feeds = {a.name: v for a, v in zip(program.inputs, random_inputs(program, 0).values(),
                                       strict=True)}  # fmt: skip
    entry, packed, keep = _jit(compiled)
    entry(packed)
    error = check_outputs(compiled, keep[2], path)  # outputs of the compiled program vs ORT
    t_compiled, t_ort = _side_by_side(entry, packed, session, feeds, runs, warmup)
    del keep
    if without:
        steps = [s for s in DEFAULT_STEPS if s != without]
        entry, packed, keep = _jit(optimize_program(program, steps=steps))
        t_without, t_ort_without = _side_by_side(entry, packed, session, feeds, runs, warmup)
        del keep
    row: dict[str, Any] = {
        "workload": name, "N": n, "nests": len(program.nests),
        "compiled_s": t_compiled, "ort_s": t_ort, "max_abs_error": error,
        "lower_s": lowered - t0, "optimize_s": optimized - lowered,
        "interchanged": len(compiled.metadata["host_optimization"].get("interchanged", {})),
        "tiled": compiled.metadata["host_optimization"].get("tiled", {}),
    }  # fmt: skip
    if without:
        row.update(without=without, without_s=t_without, ort_s_without_pass=t_ort_without)
    if jit_runs > 0:
        entry, packed, keep = _jit(program)
        t_jit, t_ort2 = _side_by_side(entry, packed, session, feeds, jit_runs, 1)
        row["jit_s"], row["ort_s_jit_pass"] = t_jit, t_ort2
        del keep
    row["load"] = probe.stop()
    path.unlink(missing_ok=True)
    return row


def ablate_one(name: str, n: int, runs: int, warmup: int, workdir: Path) -> dict[str, Any]:
    from placement.networks.workloads import WORKLOADS
    from placement.profiling.host import LoadProbe
    from placement.profiling.mlir.lower import lower_onnx
    from placement.profiling.mlir.optimize import STEPS, optimize_program
    from placement.profiling.nest_timing import random_inputs

    probe = LoadProbe()
    path = workdir / f"{name}_{n}.onnx"
    path.write_bytes(WORKLOADS[name].build(n).SerializeToString())
    program = lower_onnx(path)
    session = _session(path)
    feeds = {a.name: v for a, v in zip(program.inputs, random_inputs(program, 0).values(),
                                       strict=True)}  # fmt: skip
    variants = [("jit (as lowered)", None), ("loops only", ())]
    variants += [(f"+{step}", STEPS[: i + 1]) for i, step in enumerate(STEPS)]
    out = {"workload": name, "N": n, "variants": []}
    for label, steps in variants:
        prog = program if steps is None else optimize_program(program, steps=steps)
        entry, packed, keep = _jit(prog)
        count = max(3, runs // 4) if steps is None else runs
        t, t_ort = _side_by_side(entry, packed, session, feeds, count, warmup)
        out["variants"].append({"label": label, "jit_s": t, "ort_s": t_ort})
        del keep
    out["load"] = probe.stop()
    path.unlink(missing_ok=True)
    return out


def child_main(argv: list[str]) -> int:
    kind, name, n, runs, warmup, jit_runs, workdir, dest, without = argv
    if kind == "ablate":
        row = ablate_one(name, int(n), int(runs), int(warmup), Path(workdir))
    else:
        row = measure_one(name, int(n), int(runs), int(warmup), int(jit_runs), Path(workdir),
                          without)  # fmt: skip
    Path(dest).write_text(json.dumps(row))
    return 0


# --------------------------------------------------------------------------- parent


def run_child(kind: str, name: str, n: int, args: argparse.Namespace, workdir: Path) -> dict:
    dest = workdir / f"{kind}_{name}_{n}.json"
    cmd = [sys.executable, __file__, "--child", kind, name, str(n), str(args.runs),
           str(args.warmup), str(args.jit_runs), str(workdir), str(dest),
           args.without or ""]  # fmt: skip
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"workload": name, "N": n, "error": f"timeout after {args.timeout} s"}
    if proc.returncode != 0 or not dest.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"workload": name, "N": n, "error": " | ".join(tail)}
    row = json.loads(dest.read_text())
    row["wall_s"] = time.perf_counter() - start
    return row


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def machine_load() -> str:
    cpus = os.cpu_count() or 1
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {cpus} CPUs"


def print_table(rows: list[dict[str, Any]]) -> None:
    from placement.networks.workloads import WORKLOADS

    without = next((r["without"] for r in rows if r.get("without")), None)
    extra = f"{'w/o ' + without + '/ORT':>16}" if without else ""
    print(f"{'workload':<15}{'N':>8}{'nests':>6}{'compiled':>11}{'ORT':>11}{'ratio':>7}"
          f"{'target':>7}{'ok':>4}{extra}{'jit (as lowered)':>18}{'jit/ORT':>9}"
          f"{'others busy':>12}  size")  # fmt: skip
    for row in rows:
        name = row["workload"]
        if "error" in row:
            print(f"{name:<15}{row['N']:>8}  ERROR {row['error']}")
            continue
        ratio = row["compiled_s"] / row["ort_s"]
        target = SIZES[name][2]
        jit = row.get("jit_s")
        jit_ratio = jit / row["ort_s_jit_pass"] if jit else None
        busy = (row.get("load") or {}).get("busy_others_per_cpu")
        cell = ""
        if without:
            cell = f"{row['without_s'] / row['ort_s_without_pass']:>15.2f}x"
            cell += f" ({fmt_time(row['without_s'])})"
        size = SIZES[name][1] if row["N"] == SIZES[name][0] else "given (--workloads name:N)"
        print(
            f"{name:<15}{row['N']:>8}{row['nests']:>6}{fmt_time(row['compiled_s']):>11}"
            f"{fmt_time(row['ort_s']):>11}{ratio:>6.2f}x{target:>6g}x"
            f"{'yes' if ratio <= target else 'NO':>4}{cell}{fmt_time(jit):>18}"
            f"{'-' if jit_ratio is None else f'{jit_ratio:.0f}x':>9}"
            f"{'-' if busy is None else f'{100 * busy:.0f} %':>12}  {size}"
        )
    print()
    measured = [r for r in rows if "error" not in r]
    for target in sorted({SIZES[r["workload"]][2] for r in measured}):
        group = [r for r in measured if SIZES[r["workload"]][2] == target]
        ratios = [r["compiled_s"] / r["ort_s"] for r in group]
        within = sum(1 for v in ratios if v <= target)
        print(f"target {target:g}x: {within} of {len(group)} within, median ratio"
              f" {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x"
              f" ({', '.join(r['workload'] for r in group)})")  # fmt: skip
    print("ratio = compiled / ORT (medians of alternating calls); jit/ORT from its own pass;"
          " sizes: N as in placement.networks.workloads:")  # fmt: skip
    for name in dict.fromkeys(r["workload"] for r in rows):
        print(f"  {name}: N = {WORKLOADS[name].size_meaning}")


def print_ablation(rows: list[dict[str, Any]]) -> None:
    labels = [v["label"] for v in rows[0]["variants"]] if rows and "variants" in rows[0] else []
    print("JIT / ORT per pipeline prefix (steps added one at a time, each timed beside ORT):")
    print(f"{'workload':<15}{'N':>8}" + "".join(f"{lab:>17}" for lab in labels))
    for row in rows:
        if "error" in row:
            print(f"{row['workload']:<15}{row['N']:>8}  ERROR {row['error']}")
            continue
        cells = "".join(f"{v['jit_s'] / v['ort_s']:>16.2f}x" for v in row["variants"])
        print(f"{row['workload']:<15}{row['N']:>8}{cells}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", help="comma-separated subset of " + ",".join(ORDER))
    parser.add_argument("--runs", type=int, default=21, help="alternating runs (default 21)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--jit-runs", type=int, default=3,
                        help="runs of the unoptimized lowering (0: skip; default 3)")
    parser.add_argument("--ablation", action="store_true", help="per-step table instead")
    parser.add_argument("--without", metavar="STEP",
                        help="also time the pipeline without this optimization step")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per workload")
    parser.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    args = parser.parse_args(argv)
    names = args.workloads.split(",") if args.workloads else (
        list(ABLATION_WORKLOADS) if args.ablation else ORDER
    )  # fmt: skip
    sizes: dict[int, int] = {}
    for i, item in enumerate(names):
        name, _, size = item.partition(":")
        names[i] = name
        if size:
            if not size.isdigit() or int(size) < 1:
                parser.error(f"workload {item}: the size after ':' must be a positive integer")
            sizes[i] = int(size)
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(ORDER)}")
    if args.without:
        from placement.profiling.mlir.optimize import DEFAULT_STEPS

        if args.without not in DEFAULT_STEPS or args.ablation:
            parser.error(f"--without takes one of {', '.join(DEFAULT_STEPS)} (not with"
                         " --ablation)")  # fmt: skip
    print(f"# {' '.join([Path(sys.argv[0]).name, *argv])}")
    print(f"# before: {machine_load()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pim-host-baseline-") as tmp:
        for i, name in enumerate(names):
            if args.ablation:
                n = sizes.get(i, ABLATION_SIZES.get(name, SIZES[name][0]))
                row = run_child("ablate", name, n, args, Path(tmp))
            else:
                row = run_child("measure", name, sizes.get(i, SIZES[name][0]), args, Path(tmp))
            rows.append(row)
            print(f"  done {name} ({row.get('wall_s', 0):.0f} s)", file=sys.stderr, flush=True)
    print(f"# after: {machine_load()}")
    print()
    if args.ablation:
        print_ablation(rows)
    else:
        print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
