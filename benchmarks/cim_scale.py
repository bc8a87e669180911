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
also the time to hand the built model to HiGHS (``load s``:
``placement.solvers.highs.to_highs``, the first part of every HiGHS solve). With
``--solve``: the product's solve under ``--time-limit``: status, certified gap, wall
time, peak memory after it, and the method (``--method``; "auto" decomposes these graphs).

    python benchmarks/cim_scale.py --sizes 500,1000,2000 --widths 2,4,8 [--load]
        [--solve --time-limit 60]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import time
from dataclasses import dataclass

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.solvers.workers import parse_workers


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


@dataclass(frozen=True)
class Shape:
    """The parameters of :func:`branched`: what real and synthetic graphs vary."""

    width: int  # branches per block (2-16)
    depth: int  # operators per branch: 1 to this many
    cim_share: float  # share of the branch operators the accelerator supports
    crossbars: tuple[int, int]  # crossbars of a CIM-capable operator: uniform in this range
    spread: str  # CIM benefit: "wide" (t_acc 0.05-1.5x t_host) or "ties" (near-equal)
    skip: float  # chance that a branch operator also reads the block's input
    residual: int  # a residual Add closes every this-many-th block (0: none)
    demand: float  # crossbars all CIM-capable operators need, over the budget
    long_skip: float = 0.0  # chance that a block's input also feeds the next block's end

    def label(self) -> str:
        lo, hi = self.crossbars
        return (f"w{self.width} d{self.depth} cim{self.cim_share:.0%} xb{lo}-{hi} {self.spread}"
                f" skip{self.skip:g} res{self.residual} long{self.long_skip:g}"
                f" D{self.demand:g}x")


def branched(n: int, shape: Shape, seed: int = 0, budget: int | None = None) -> CimInstance:
    """About ``n`` operators in blocks of ``shape.width`` branches between a block input
    and a Concat (with a residual Add after it every ``shape.residual`` blocks), chained.

    Latencies: host log-uniform in 10 us - 1 ms ("ties": CIM-capable operators all near
    100 us, accelerator 0.80-0.84x, so that many offloads gain nearly the same); transfers
    up to 0.3x the producer's host latency. The budget is the crossbars of every
    CIM-capable operator over ``shape.demand`` (or ``budget``).
    """
    rng = random.Random(f"{seed}/{n}/{shape}")
    ops: list[CimOperator] = []
    edges: list[CimEdge] = []
    host: dict[str, float] = {}

    def op(kind: str, capable: bool = False) -> str:
        name = f"{kind}{len(ops)}"
        if capable and shape.spread == "ties":
            t_host = 1e-4 * rng.uniform(0.99, 1.01)
            t_acc = t_host * rng.uniform(0.80, 0.84)
        else:
            t_host = 10 ** rng.uniform(-5, -3)
            t_acc = t_host * rng.uniform(0.05, 1.5)
        host[name] = t_host
        if capable:
            ops.append(CimOperator(name, t_host, t_acc, rng.randint(*shape.crossbars)))
        else:
            ops.append(CimOperator(name, t_host))
        return name

    def edge(u: str, v: str) -> None:
        edges.append(CimEdge(u, v, host[u] * rng.uniform(0.0, 0.3)))

    last = op("src", rng.random() < shape.cim_share)
    previous_input = None
    blocks = 0
    while len(ops) < n:
        block_input = last
        ends = []
        for _ in range(shape.width):
            prev = block_input
            for k in range(rng.randint(1, shape.depth)):
                cur = op("op", rng.random() < shape.cim_share)
                edge(prev, cur)
                if k > 0 and rng.random() < shape.skip:
                    edge(block_input, cur)
                prev = cur
            ends.append(prev)
        last = op("cat")
        for e in ends:
            edge(e, last)
        blocks += 1
        if shape.residual and blocks % shape.residual == 0:
            add = op("add")
            edge(last, add)
            edge(block_input, add)
            last = add
        if previous_input is not None and rng.random() < shape.long_skip:
            edge(previous_input, last)
        previous_input = block_input
    if budget is None:
        need = sum(o.crossbars for o in ops if o.supported)
        budget = max(max((o.crossbars for o in ops if o.supported), default=1),
                     round(need / shape.demand))
    return CimInstance.build(ops, edges, budget)


#: The graph of the issue that motivated the family, rebuilt: blocks of 8 branches of 1-3
#: operators reading the block's input, a residual Add every other block, small
#: one-crossbar convolutions that gain little, 100 crossbars.
ISSUE_SHAPE = Shape(8, 3, 0.5, (1, 1), "ties", 0.5, 2, 9.0)
ISSUE_BUDGET = 100
#: Levels of each parameter the grid draws from.
LEVELS = {
    "width": (2, 4, 8, 16),
    "depth": (1, 3, 6),
    "cim_share": (0.1, 0.4, 0.9),
    "crossbars": ((1, 1), (1, 4), (2, 16), (8, 48)),
    "spread": ("wide", "ties"),
    "skip": (0.0, 0.5),
    "residual": (0, 1, 2),
    "demand": (0.5, 2.0, 5.0, 20.0),
    "long_skip": (0.0, 0.0, 0.3),
}


def family_grid(count: int, seed: int = 0) -> list[Shape]:
    """``count`` shapes drawn from :data:`LEVELS`, each level of each parameter used in
    turn (a Latin-hypercube draw over the levels, shuffled by ``seed``)."""
    rng = random.Random(seed)
    columns = {}
    for key, levels in LEVELS.items():
        column = [levels[i % len(levels)] for i in range(count)]
        rng.shuffle(column)
        columns[key] = column
    return [Shape(**{key: columns[key][i] for key in LEVELS}) for i in range(count)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,1000,2000")
    ap.add_argument("--widths", default="2,4,8")
    ap.add_argument("--solve", action="store_true")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--formulation", default="auto")
    ap.add_argument("--solver", default="auto")
    ap.add_argument("--method", default="auto",
                    help="auto, monolithic or decomposition (with --family: several,"
                    " comma-separated, each solved in turn)")
    ap.add_argument("--no-build", action="store_true",
                    help="skip timing the whole model's build (with --solve at large sizes)")
    ap.add_argument("--load", action="store_true",
                    help="also time handing the built model to HiGHS (to_highs)")
    ap.add_argument("--family", metavar="SIZES",
                    help="solve the branched family (:func:`family_grid` and the issue's shape)"
                    " at these sizes, e.g. 500,2000,10000, instead of the fork-join table")
    ap.add_argument("--shapes", type=int, default=8, help="shapes of the family grid")
    ap.add_argument("--only", metavar="ROWS", help="with --family: only these row numbers")
    ap.add_argument("--scheduler", metavar="ADDRESS",
                    help="solve the block solves on this Dask cluster (tcp://host:port)")
    ap.add_argument("--workers", default="auto",
                    help="block solves' worker processes: a number, or auto (the default,"
                    " as `placement solve`'s: the usable CPUs when it decomposes)")
    ap.add_argument("--yolo", metavar="VARIANTS",
                    help="solve YOLO-like graphs (benchmarks/yolo_like.py: v5u, v5u-p2, v8n,"
                    " v8n-p2) at every point of the paper's grid instead")
    ap.add_argument("--hosts", default="arm-a72-model,x86-ryzen-model",
                    help="with --yolo: the hardware presets (modelled host latencies)")
    ap.add_argument("--crossbars", default="25,50,100,200", help="with --yolo")
    ap.add_argument("--t-mvm-ns", default="50,100,500,1000", help="with --yolo")
    ap.add_argument("--bounds", action="store_true",
                    help="with --yolo: lower bounds instead of the solve (the host work the"
                    " budget leaves, the longest path, the model without ordering rows)")
    args = ap.parse_args()
    if args.family:
        family_table(args)
        return
    if args.yolo and args.bounds:
        yolo_bounds(args)
        return
    if args.yolo:
        yolo_table(args)
        return
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
                               time_limit=args.time_limit, method=args.method,
                               workers=_workers(args))  # fmt: skip
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


def family_table(args: argparse.Namespace) -> None:
    """One row per (size, shape): the graph, then the product's solve under the deadline."""
    shapes = [ISSUE_SHAPE, *family_grid(args.shapes)]
    only = None if args.only is None else {int(r) for r in args.only.split(",")}
    print(f"host: {platform.machine()}, {os.cpu_count()} CPUs; load (1-min average) before"
          f" {os.getloadavg()[0]:.2f}; --time-limit {args.time_limit:g}, method {args.method},"
          f" formulation {args.formulation}, solver {args.solver}, workers {args.workers},"
          f" scheduler {args.scheduler}")
    print(f"{'row':>3} {'n':>6} {'ops':>6} {'pairs':>7} {'blocks':>6} {'big':>4} {'C':>6}"
          f" {'status':>11} {'gap %':>8} {'wall s':>7} {'load':>5}  {'shape':<52} method")
    row = 0
    for n in map(int, args.family.split(",")):
        for shape in shapes:
            row += 1
            if only is not None and row not in only:
                continue
            budget = ISSUE_BUDGET if shape is ISSUE_SHAPE else None
            inst = branched(n, shape, budget=budget)
            for method in args.method.split(","):
                print(_family_row(row, n, shape, inst, args, method), flush=True)
    print(f"load (1-min average) after {os.getloadavg()[0]:.2f}")


def _family_row(row: int, n: int, shape: Shape, inst: CimInstance,
                args: argparse.Namespace, method: str) -> str:  # fmt: skip
    from placement.cim.decompose import split
    from placement.cim.pipeline import solve

    blocks = [b for b in split(inst)[0] if b.operators]
    big = max((len(b.operators) for b in blocks), default=0)
    head = (f"{row:>3} {n:>6} {len(inst.operators):>6} {len(inst.parallel_pairs):>7}"
            f" {len(blocks):>6} {big:>4} {inst.crossbar_budget:>6}")
    load = os.getloadavg()[0]
    tick = time.perf_counter()
    placed = solve(inst, formulation=args.formulation, solver=args.solver,
                   time_limit=args.time_limit, method=method, workers=_workers(args),
                   scheduler=args.scheduler)  # fmt: skip
    wall = time.perf_counter() - tick
    res = placed.result
    gap = "-" if res.gap is None else f"{100 * res.gap:.3f}"
    assert placed.verification is not None and placed.verification.ok
    opts = res.options
    how = opts.get("method", "?")
    if "block_solves" in opts:
        where = f" in {opts['workers']} workers" if opts.get("workers", 1) > 1 else ""
        if opts.get("scheduler"):
            where = f" on the Dask cluster at {opts['scheduler']}"
        how += f" ({opts['block_solves']} block solves{where})"
    if opts.get("method_kept"):
        how += f"; kept: {opts['method_kept']}"
    elif opts.get("method_choice"):
        how += f"; {opts['method_choice']}"
    return (f"{head} {res.status.value:>11} {gap:>8} {wall:>7.1f} {load:>5.2f}  {shape.label():<52}"
            f" {how}")


def _workers(args: argparse.Namespace) -> int | str:
    """``--workers`` as :func:`placement.cim.pipeline.solve` takes it."""
    return parse_workers(args.workers, "--workers")


def yolo_table(args: argparse.Namespace) -> None:
    """One row per YOLO-like graph and point of the paper's grid (hosts x crossbars x MVM
    latency): the product's solve under the deadline."""
    import yolo_like

    from placement.cim.decompose import split
    from placement.cim.pipeline import solve

    print(f"host: {platform.machine()}, {os.cpu_count()} CPUs; load (1-min average) before"
          f" {os.getloadavg()[0]:.2f}; --time-limit {args.time_limit:g}, method {args.method},"
          f" formulation {args.formulation}, solver {args.solver}")  # fmt: skip
    print(f"{'graph':<8} {'ops':>4} {'pairs':>6} {'big':>4} {'hardware':<16} {'C':>4} {'MVM':>5}"
          f" {'status':>11} {'gap %':>8} {'wall s':>7} {'load':>5}  method")  # fmt: skip
    for variant in args.yolo.split(","):
        for hardware in args.hosts.split(","):
            for crossbars in map(int, args.crossbars.split(",")):
                for t_mvm in map(float, args.t_mvm_ns.split(",")):
                    inst = yolo_like.instance(variant, hardware, crossbars, t_mvm)
                    big = max(len(b.operators) for b in split(inst)[0])
                    load = os.getloadavg()[0]
                    tick = time.perf_counter()
                    placed = solve(inst, formulation=args.formulation, solver=args.solver,
                                   time_limit=args.time_limit, method=args.method,
                                   workers=_workers(args))  # fmt: skip
                    wall = time.perf_counter() - tick
                    res = placed.result
                    assert placed.verification is not None and placed.verification.ok
                    gap = "-" if res.gap is None else f"{100 * res.gap:.4f}"
                    how = f"{res.solver} {res.options.get('method', '?')}"
                    print(f"{variant:<8} {len(inst.operators):>4} {len(inst.parallel_pairs):>6}"
                          f" {big:>4} {hardware:<16} {crossbars:>4} {t_mvm:>5g}"
                          f" {res.status.value:>11} {gap:>8} {wall:>7.1f} {load:>5.2f}  {how}",
                          flush=True)  # fmt: skip
    print(f"load (1-min average) after {os.getloadavg()[0]:.2f}")


def yolo_bounds(args: argparse.Namespace) -> None:
    """Per YOLO-like graph and point: lower bounds in ms, from a knapsack (the host work the
    budget leaves at the least, :func:`placement.cim.frontier.host_work_floor`), the longest
    path (:func:`placement.cim.frontier.trivial_bound`), and the tightened model without its
    ordering rows solved by HiGHS (:func:`placement.cim.lazy_ordering.relaxed_model`, the
    first round of cpsat+highs' second phase), with its solve time; and the heuristic's
    makespan for scale."""
    import yolo_like

    from placement.cim.frontier import host_work_floor, max_crossbars, trivial_bound
    from placement.cim.lazy_ordering import relaxed_model
    from placement.cim.list_scheduling import heuristic_schedule
    from placement.models.common import solve_in_seconds
    from placement.solvers.base import SolveOptions
    from placement.solvers.registry import get_backend

    print(f"host: {platform.machine()}, {os.cpu_count()} CPUs; load (1-min average) before"
          f" {os.getloadavg()[0]:.2f}; bounds in ms")
    print(f"{'graph':<8} {'hardware':<16} {'C':>4} {'MVM':>5} {'knapsack':>9} {'path':>8}"
          f" {'relaxed':>9} {'relax s':>7} {'heuristic':>9}")
    for variant in args.yolo.split(","):
        for hardware in args.hosts.split(","):
            for crossbars in map(int, args.crossbars.split(",")):
                for t_mvm in map(float, args.t_mvm_ns.split(",")):
                    inst = yolo_like.instance(variant, hardware, crossbars, t_mvm)
                    names = [op.name for op in inst.operators]
                    top = max_crossbars(inst, names)
                    knapsack = float(host_work_floor(inst, names, top)[top])
                    heuristic = heuristic_schedule(inst).makespan
                    model = relaxed_model(inst, heuristic)
                    relaxed = solve_in_seconds(model, get_backend("highs", mip=True),
                                               SolveOptions(time_limit=60.0), what="CIM",
                                               item="operator")  # fmt: skip
                    print(f"{variant:<8} {hardware:<16} {crossbars:>4} {t_mvm:>5g}"
                          f" {1e3 * knapsack:>9.3f} {1e3 * trivial_bound(inst):>8.3f}"
                          f" {1e3 * relaxed.best_bound:>9.3f} {relaxed.solve_seconds:>7.2f}"
                          f" {1e3 * heuristic:>9.3f}", flush=True)  # fmt: skip


def _build_columns(inst: CimInstance, families: tuple[str, ...], load: bool) -> str:
    """heur s, build s, size s, rows, peak MB (and load s with ``load``)."""
    from placement.cim.list_scheduling import heuristic_schedule
    from placement.models.cim_makespan.build import build_cim_model
    from placement.solvers.contrib import model_size
    from placement.solvers.highs import to_highs

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
        to_highs(model)
        line += f"{time.process_time() - t4:>8.2f}"
    return line


if __name__ == "__main__":
    main()
