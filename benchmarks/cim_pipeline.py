"""End-to-end CIM pipeline benchmark: where the time goes, and how big the models get.

For each ONNX file (default: the bundled examples) it reports ingestion,
profiling and plain-inference time (so the profiling overhead is a ratio
measured side by side), Pyomo build time, HiGHS time, model size, status,
gap and the process's peak memory. With ``--synthetic N`` it also builds a
branched random instance of N operators (no ONNX, no profiling) to show how
build and hand-off compare with the solve on a YOLO-sized graph.

    python benchmarks/cim_pipeline.py [model.onnx ...] [--repeat 3] [--synthetic 250]

Timings are medians over ``--repeat`` runs in this one process.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import time
from pathlib import Path

from placement.cim.instance import CimEdge, CimInstance, CimOperator, cim_instance
from placement.cim.pipeline import solve
from placement.graph import load_graph
from placement.hardware.base import default_preset_for
from placement.hardware.cim import load_hardware
from placement.profiling.ort.measure import plain_inference_seconds, profile_model

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = [
    ROOT / "examples" / "resnet_tiny.onnx",
    ROOT / "examples" / "resnet_tiny_int8.onnx",
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_model(path: Path, runs: int, repeat: int, time_limit: float) -> dict[str, object]:
    hw = load_hardware(default_preset_for())
    t0 = time.perf_counter()
    graph = load_graph(path)
    ingest = time.perf_counter() - t0

    # Profiling overhead per measured run (profiled run wall time vs plain run wall time,
    # interleaved so load drifts hit both), and the fixed cost of a profiling call
    # (session creation, optimized-graph dump, attribution) over its runs.
    prof_run, plain_run, prof_call, profile = [], [], [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        profile = profile_model(path, runs=runs, warmup=5)
        prof_call.append(time.perf_counter() - t0)
        prof_run.append(profile.metadata["median_run_wall_seconds"])
        plain = plain_inference_seconds(
            path, runs=runs, warmup=5, intra_op_threads=1, optimization="all"
        )
        plain_run.append(statistics.median(plain))
    assert profile is not None
    instance = cim_instance(graph, profile.latencies, hw.cim)
    solves = [
        solve(instance, formulation="faithful", solver="highs", time_limit=time_limit)
        for _ in range(repeat)
    ]
    res = solves[-1].result
    return {
        "model": path.name,
        "operators": len(instance.operators),
        "pairs": len(instance.parallel_pairs),
        "vars": res.size.variables,
        "bins": res.size.binaries,
        "cons": res.size.constraints,
        "ingest_s": ingest,
        "profile_call_s": statistics.median(prof_call),
        "profiled_run_s": statistics.median(prof_run),
        "plain_run_s": statistics.median(plain_run),
        "build_s": statistics.median(s.result.build_seconds for s in solves),
        "solve_s": statistics.median(s.result.solve_seconds for s in solves),
        "status": res.status.value,
        "gap": res.gap,
        "speedup": solves[-1].speedup,
        "peak_mb": peak_rss_mb(),
    }


def branched_instance(n_ops: int, seed: int = 0) -> CimInstance:
    """A YOLO-like layered DAG: chains that fork into 2-3 branches and join again."""
    rng = random.Random(seed)
    ops, edges = [], []
    frontier = ["op0"]
    ops.append(CimOperator("op0", rng.uniform(1e-4, 2e-3), rng.uniform(1e-5, 5e-4), 4, "Conv"))
    i = 1
    while i < n_ops:
        width = rng.choice([1, 1, 2, 3])
        heads = []
        for _ in range(width):
            depth = rng.randint(1, 4)
            prev = rng.choice(frontier)
            for _ in range(depth):
                if i >= n_ops:
                    break
                name = f"op{i}"
                supported = rng.random() < 0.5
                ops.append(
                    CimOperator(
                        name,
                        rng.uniform(2e-5, 2e-3),
                        rng.uniform(1e-5, 5e-4) if supported else None,
                        rng.randint(1, 12) if supported else 0,
                        "Conv" if supported else "Mul",
                    )
                )
                edges.append(CimEdge(prev, name, rng.uniform(1e-6, 5e-5)))
                prev, i = name, i + 1
            heads.append(prev)
        frontier = heads if len(heads) > 1 or rng.random() < 0.5 else heads
        if len(heads) > 1 and i < n_ops:
            join = f"op{i}"
            ops.append(CimOperator(join, rng.uniform(1e-5, 1e-4), None, 0, "Concat"))
            edges += [CimEdge(h, join, rng.uniform(1e-6, 5e-5)) for h in heads]
            frontier, i = [join], i + 1
    return CimInstance.build(ops, edges, crossbar_budget=100)


def bench_synthetic(n_ops: int, repeat: int, time_limit: float) -> dict[str, object]:
    inst = branched_instance(n_ops)
    solves = [
        solve(inst, formulation="faithful", solver="highs", time_limit=time_limit)
        for _ in range(repeat)
    ]
    res = solves[-1].result
    build = statistics.median(s.result.build_seconds for s in solves)
    solve = statistics.median(s.result.solve_seconds for s in solves)
    return {
        "model": f"synthetic-{n_ops}",
        "operators": n_ops,
        "pairs": len(inst.parallel_pairs),
        "vars": res.size.variables,
        "bins": res.size.binaries,
        "cons": res.size.constraints,
        "build_s": build,
        "solve_s": solve,
        "status": res.status.value,
        "gap": res.gap,
        "build_share": build / (build + solve),
        "peak_mb": peak_rss_mb(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=20, help="measured profiling runs")
    ap.add_argument("--repeat", type=int, default=3, help="repetitions for medians")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--synthetic", type=int, default=0, help="also a branched N-operator instance")
    args = ap.parse_args()
    for path in args.models or DEFAULT_MODELS:
        row = bench_model(path, args.runs, args.repeat, args.time_limit)
        row["overhead_per_run"] = row["profiled_run_s"] / row["plain_run_s"]
        print(_fmt(row), flush=True)
    if args.synthetic:
        print(_fmt(bench_synthetic(args.synthetic, args.repeat, args.time_limit)), flush=True)
    return 0


def _fmt(row: dict[str, object]) -> str:
    parts = []
    for key, value in row.items():
        if isinstance(value, float):
            value = f"{value:.4g}"
        parts.append(f"{key}={value}")
    return "  ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
