"""Faithful vs tightened (+ heuristic warm start) CIM formulations on YOLO-sized graphs.

    python benchmarks/cim_formulations.py [--ops 250] [--time-limit 60] [--threads 2] [--seeds 0]

Two synthetic instances per seed: ``branched_instance`` (benchmarks/cim_pipeline.py,
few parallel pairs) and ``dense_branched_instance`` below (wider, longer branches:
about as many parallel pairs as a real YOLOv5n graph). Prints one line per solve.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cim_pipeline import branched_instance  # noqa: E402

from placement.cim.instance import CimEdge, CimInstance, CimOperator  # noqa: E402
from placement.cim.list_scheduling import heuristic_schedule  # noqa: E402
from placement.cim.pipeline import solve  # noqa: E402


def dense_branched_instance(n_ops: int, seed: int = 0, budget: int = 100) -> CimInstance:
    """Like ``branched_instance`` with 2-4 branches of 3-12 operators between joins."""
    rng = random.Random(seed)
    ops = [CimOperator("op0", rng.uniform(1e-4, 2e-3), rng.uniform(1e-5, 5e-4), 4, "Conv")]
    edges: list[CimEdge] = []
    frontier, i = "op0", 1
    while i < n_ops:
        heads = []
        for _ in range(rng.choice([2, 3, 3, 4, 4])):
            prev = frontier
            for _ in range(rng.randint(3, 12)):
                if i >= n_ops:
                    break
                name, supported = f"op{i}", rng.random() < 0.5
                ops.append(CimOperator(
                    name, rng.uniform(2e-5, 2e-3),
                    rng.uniform(1e-5, 5e-4) if supported else None,
                    rng.randint(1, 12) if supported else 0,
                ))
                edges.append(CimEdge(prev, name, rng.uniform(1e-6, 5e-5)))
                prev, i = name, i + 1
            if prev != frontier:
                heads.append(prev)
        if i >= n_ops or not heads:
            break
        join = f"op{i}"
        ops.append(CimOperator(join, rng.uniform(1e-5, 1e-4), None, 0, "Concat"))
        edges += [CimEdge(h, join, rng.uniform(1e-6, 5e-5)) for h in heads]
        frontier, i = join, i + 1
    return CimInstance.build(ops, edges, crossbar_budget=budget)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=250)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--which", nargs="*", default=["branched", "dense"])
    args = ap.parse_args()
    gens = {"branched": branched_instance, "dense": dense_branched_instance}
    for seed in args.seeds:
        for kind in args.which:
            inst = gens[kind](args.ops, seed)
            t0 = time.perf_counter()
            heur = heuristic_schedule(inst)
            t_heur = time.perf_counter() - t0
            print(f"{kind} seed={seed} ops={len(inst.operators)}"
                  f" pairs={len(inst.parallel_pairs)} heuristic={heur.makespan:.6g}s"
                  f" in {t_heur:.2f}s", flush=True)
            for form, ws in (("faithful", False), ("tightened", True), ("tightened", False),
                             ("faithful", True)):
                p = solve(inst, solver="highs", formulation=form, warm_start=ws,
                          time_limit=args.time_limit, threads=args.threads)
                r = p.result
                obj = "none" if r.objective is None else f"{r.objective:.6g}"
                bnd = "none" if r.best_bound is None else f"{r.best_bound:.6g}"
                gap = "none" if r.gap is None else f"{100 * r.gap:.2f}%"
                print(f"  {form:9s} warm={ws!s:5s} status={r.status.value} obj={obj} bound={bnd}"
                      f" gap={gap} solve={r.solve_seconds:.1f}s build={r.build_seconds:.2f}s"
                      f" rows={r.size.constraints} start={r.options.get('start', '-')}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
