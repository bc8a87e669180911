"""CIM placement at scale: synthetic fork-join graphs shaped like CNN/transformer graphs.

``fork_join(n, w, seed)``: blocks of ``w`` parallel branches of 1-3 operators between a
fork and a join operator (the join closes the block: a residual Add, a Concat), chained
until about ``n`` operators; 40 % of the operators are CIM-capable (1-4 crossbars, an
accelerator latency 0.1-1.5x the host's), transfers up to 0.3x the producer's host
latency, a budget of 100 crossbars. Seeded: the same arguments give the same instance.

For each size and width it reports, in CPU seconds of this process: preprocessing (``pairs
s``: the parallel pairs; ``struct s``: reachability, bottlenecks, head/tail bounds), the
list-scheduling heuristic (``heur s``; run only where the formulation needs its upper
bound, as ``placement.cim.build_model`` does for "tightened"), the Pyomo build (``build
s``: ``build_cim_model``, structure included; ``build_model`` costs heur s + build s) and
the model-size count (``size s``), then the rows and the peak memory; with ``--load``
also the time to hand the built model to HiGHS (``load s``: the persistent interface's
``set_instance``, the first part of every HiGHS solve). With ``--solve``: the product's
solve under ``--time-limit``: status, certified gap, wall time, peak memory after it,
and the method (``--method``; "auto" decomposes these graphs).

    python benchmarks/cim_scale.py --sizes 500,1000,2000 --widths 2,4,8 [--load]
        [--solve --time-limit 60]
"""

from __future__ import annotations

import argparse
import random
import resource
import time

from placement.cim.instance import CimEdge, CimInstance, CimOperator


def fork_join(n: int, w: int, seed: int = 0, budget: int = 100) -> CimInstance:
    """A chain of fork-join blocks of about ``n`` operators, ``w`` branches each."""
    rng = random.Random(seed * 1_000_003 + n * 101 + w)
    ops: list[CimOperator] = []
    edges: list[CimEdge] = []

    def op(kind: str) -> str:
        name = f"{kind}{len(ops)}"
        t_host = rng.uniform(1e-5, 1e-3)
        if kind == "op" and rng.random() < 0.4:
            ops.append(CimOperator(name, t_host, t_host * rng.uniform(0.1, 1.5),
                                   rng.randint(1, 4)))  # fmt: skip
        else:
            ops.append(CimOperator(name, t_host))
        return name

    def edge(u: str, v: str) -> None:
        t_host = next(o.t_host for o in reversed(ops) if o.name == u)
        edges.append(CimEdge(u, v, t_host * rng.uniform(0.0, 0.3)))

    last = op("src")
    while len(ops) < n:
        fork = op("fork")
        edge(last, fork)
        ends = []
        for _ in range(w):
            prev = fork
            for _ in range(rng.randint(1, 3)):
                cur = op("op")
                edge(prev, cur)
                prev = cur
            ends.append(prev)
        join = op("join")
        for e in ends:
            edge(e, join)
        last = join
    return CimInstance.build(ops, edges, budget)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,1000,2000")
    ap.add_argument("--widths", default="2,4,8")
    ap.add_argument("--solve", action="store_true")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--formulation", default="auto")
    ap.add_argument("--solver", default="auto")
    ap.add_argument("--method", default="auto", help="auto, monolithic or decomposition")
    ap.add_argument("--no-build", action="store_true",
                    help="skip timing the whole model's build (with --solve at large sizes)")
    ap.add_argument("--load", action="store_true",
                    help="also time handing the built model to HiGHS (set_instance)")
    args = ap.parse_args()
    from placement.cim.pipeline import resolve_formulation, solve
    from placement.models.cim_makespan.build import formulation_families
    from placement.models.cim_makespan.structure import structure

    solve_head = f"{'status':>14}{'gap %':>9}{'wall s':>8}{'peak MB':>9}  method"
    print(f"{'n':>6}{'w':>3}{'ops':>7}{'pairs':>8}{'pairs s':>9}{'struct s':>9}{'heur s':>9}"
          f"{'build s':>9}{'size s':>8}{'rows':>9}{'peak MB':>9}"
          + (f"{'load s':>8}" if args.load else "")
          + (solve_head if args.solve else ""))  # fmt: skip
    for n in map(int, args.sizes.split(",")):
        for w in map(int, args.widths.split(",")):
            inst = fork_join(n, w)
            t0 = time.process_time()
            pairs = len(inst.parallel_pairs)
            t1 = time.process_time()
            structure(inst, 1.0)
            t2 = time.process_time()
            line = f"{n:>6}{w:>3}{len(inst.operators):>7}{pairs:>8}{t1 - t0:>9.2f}{t2 - t1:>9.2f}"
            if args.no_build:
                line += f"{'-':>9}{'-':>9}{'-':>8}{'-':>9}{'-':>9}"
            else:
                families = formulation_families(resolve_formulation(inst, args.formulation))
                line += _build_columns(inst, families, args.load)
            if args.solve:
                tick = time.perf_counter()
                placed = solve(inst, formulation=args.formulation, solver=args.solver,
                               time_limit=args.time_limit, method=args.method)  # fmt: skip
                wall = time.perf_counter() - tick
                gap = placed.result.gap
                opts = placed.result.options
                how = opts["method"]
                if how == "decomposition":
                    how += f" ({opts['blocks']} blocks, {opts['block_solves']} solves)"
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                line += (f"{placed.result.status.value:>14}"
                         f"{'-' if gap is None else f'{100 * gap:.3f}':>9}{wall:>8.1f}"
                         f"{peak:>9.0f}  {how}")
            print(line, flush=True)


def _build_columns(inst: CimInstance, families: tuple[str, ...], load: bool) -> str:
    """heur s, build s, size s, rows, peak MB (and load s with ``load``)."""
    from placement.cim.list_scheduling import heuristic_schedule
    from placement.models.cim_makespan.build import build_cim_model
    from placement.solvers.contrib import contrib_solver, model_size

    t0 = time.process_time()
    ub = heuristic_schedule(inst).makespan if "window_big_m" in families else None
    t1 = time.process_time()
    model = build_cim_model(inst, families=families, upper_bound=ub)
    t2 = time.process_time()
    rows = model_size(model).constraints
    t3 = time.process_time()
    heur = "-" if ub is None else f"{t1 - t0:.2f}"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    line = f"{heur:>9}{t2 - t1:>9.2f}{t3 - t2:>8.2f}{rows:>9}{peak:>9.0f}"
    if load:
        t4 = time.process_time()
        contrib_solver("highs").set_instance(model)
        line += f"{time.process_time() - t4:>8.2f}"
    return line


if __name__ == "__main__":
    main()
