"""Handing a Pyomo model to HiGHS: Pyomo's persistent interface against the matrix path.

    python benchmarks/highs_loading.py [--blocks 60] [--sizes 500,2000] [--whole 200,1000]

Until December 2026 the HiGHS backend went through Pyomo's persistent HiGHS interface
(``pyomo.contrib.solver``'s ``highs``: ``set_instance``, then ``solve``); it now reads
the rows with Pyomo's linear expression walker and hands HiGHS all of them in one call
(``placement.solvers.highs.to_highs``). This benchmark solves the same models both ways,
one after the other under the same load, and prints the median wall time per solve of
the hand-over and of the whole solve, and whether both found the same optimum:

* block models of the decomposition (``placement.cim.frontier.block_instance``) of the
  branched family of ``benchmarks/cim_scale.py`` (grid shapes 1-7, seed 0), at a scarce
  and at a full budget: thousands of these small solves are what a 10,000-operator
  decomposition spends its minute on;
* whole models of fork-join graphs (``cim_scale.fork_join``, w=4) of ``--whole`` operators.

Both paths solve with HiGHS's defaults, the project's relative gap, one thread and 10 s
per solve; "both proven" counts the models both proved optimal, "differ" those of them
whose optima differ by more than the two gaps allow.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

from cim_scale import branched, family_grid, fork_join

from placement.cim.frontier import CIM, HOST, block_instance, split
from placement.models.cim_makespan.build import build_cim_model
from placement.solvers.base import DEFAULT_REL_GAP, SolveOptions
from placement.solvers.registry import BACKENDS

#: Seconds per solve (either way).
LIMIT = 10.0


def persistent(model: Any) -> tuple[float, float, float | None, bool]:
    """(hand-over s, whole solve s, objective, proven) through Pyomo's persistent interface."""
    from pyomo.contrib.solver.common.factory import SolverFactory

    tick = time.perf_counter()
    solver = SolverFactory("highs")
    solver.set_instance(model)
    loaded = time.perf_counter()
    res = solver.solve(model, rel_gap=DEFAULT_REL_GAP, threads=1, time_limit=LIMIT,
                       load_solutions=False,
                       raise_exception_on_nonoptimal_result=False)  # fmt: skip
    proven = res.termination_condition.name == "convergenceCriteriaSatisfied"
    return loaded - tick, time.perf_counter() - tick, res.incumbent_objective, proven


def matrix(model: Any) -> tuple[float, float, float | None, bool]:
    """(hand-over s, whole solve s, objective, proven) through the product's HiGHS backend."""
    from placement.solvers.highs import to_highs

    tick = time.perf_counter()
    to_highs(model)  # timed alone; the backend's solve below builds its own
    loaded = time.perf_counter() - tick
    tick = time.perf_counter()
    options = SolveOptions(rel_gap=DEFAULT_REL_GAP, threads=1, time_limit=LIMIT)
    res = BACKENDS["highs"].solve(model, options)
    return loaded, time.perf_counter() - tick, res.objective, res.status.value == "optimal"


def compare(label: str, instances: list[Any]) -> None:
    rows = {"persistent": ([], []), "matrix": ([], [])}
    differ = proven = 0
    for inst in instances:
        objectives = []
        for name, run in (("persistent", persistent), ("matrix", matrix)):
            load, total, objective, closed = run(build_cim_model(inst))
            rows[name][0].append(load)
            rows[name][1].append(total)
            objectives.append((objective, closed))
        (a, a_closed), (b, b_closed) = objectives
        if a_closed and b_closed:  # both proven: the optima agree within the two gaps
            proven += 1
            differ += abs(a - b) > 2 * DEFAULT_REL_GAP * max(abs(a), 1e-12)
    (pl, pt), (ml, mt) = rows["persistent"], rows["matrix"]
    ms = 1e3
    print(f"{label:<44} {len(instances):>5} {statistics.median(pl) * ms:>9.1f}"
          f" {statistics.median(ml) * ms:>9.1f} {statistics.median(pt) * ms:>9.1f}"
          f" {statistics.median(mt) * ms:>9.1f} {sum(pt) / sum(mt):>7.2f} {proven:>6} {differ:>6}",
          flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=60, help="block models per graph and budget")
    ap.add_argument("--sizes", default="2000", help="operators of the branched graphs")
    ap.add_argument("--shapes", default="1,2,3,4,5,6,7", help="grid shapes (1-7) to use")
    ap.add_argument("--whole", default="100,400", help="operators of whole fork-join models")
    args = ap.parse_args()
    print(f"host: {platform.machine()}, {os.cpu_count()} CPUs; load (1-min average) before"
          f" {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'models':<44} {'n':>5} {'load ms':>9} {'(matrix)':>9} {'solve ms':>9}"
          f" {'(matrix)':>9} {'ratio':>7} {'both':>6} {'differ':>6}")
    print(f"{'':<44} {'':>5} {'persist.':>9} {'':>9} {'persist.':>9} {'':>9}"
          f" {'sum p/m':>7} {'proven':>6} {'':>6}")
    for n in map(int, args.sizes.split(",")):
        for k, shape in enumerate(family_grid(7), start=1):
            if str(k) not in args.shapes.split(","):
                continue
            inst = branched(n, shape)
            blocks = [b for b in split(inst)[0] if b.operators][: args.blocks]
            for budget, name in ((max(1, inst.crossbar_budget // 50), "scarce"),
                                 (inst.crossbar_budget, "full")):  # fmt: skip
                subs = [block_instance(inst, b, HOST if i % 2 else CIM, HOST, budget)
                        for i, b in enumerate(blocks)]  # fmt: skip
                compare(f"{n} ops shape {k} blocks, {name} budget {budget}", subs)
    for n in map(int, args.whole.split(",")):
        compare(f"whole fork-join w=4, {n} ops", [fork_join(n, 4, seed) for seed in range(3)])
    print(f"load (1-min average) after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
