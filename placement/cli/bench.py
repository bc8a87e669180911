"""``placement bench``: networks x DSE grid x formulations x solvers, Table-I style
(engine: :mod:`placement.bench.run`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from placement.cli.common import Command, memory_limit_option
from placement.errors import PlacementError

COMMAND = Command(
    "bench",
    help="run networks x DSE grid x formulations x solvers; write runs.csv/json + Table I",
    description="Benchmark the CIM placement ILP (paper Table I): for every network, hardware"
    " preset and grid point, run every formulation with every solver, verify every"
    " placement, write OUT/runs.csv, OUT/runs.json, OUT/summary.{txt,csv} and print the"
    " Table-I-shaped summary. Host latencies are profiled once per network and cached in"
    " OUT/profiles/.",
)


def add_arguments(bench: argparse.ArgumentParser) -> None:
    from placement.bench.choices import FORMULATION_NAMES, GRIDS, MODES

    bench.add_argument(
        "networks",
        nargs="+",
        metavar="NETWORK|ONNX",
        help="resnet18, resnet50, mobilenetv2, yolov5n (int8, generated on first use)"
        " or ONNX files",
    )
    bench.add_argument("--grid", default="paper", metavar="|".join(GRIDS) + "|CxT",
                       help="paper: 25/50/100/200 crossbars x 50/100/500/1000 ns (default);"
                       " single: the preset's own values; or e.g. 25,100x50,1000")
    bench.add_argument("--hardware", default="arm-a72", metavar="PRESET[,PRESET]",
                       help="hardware presets, comma-separated (default arm-a72)")
    bench.add_argument("--formulations", default="faithful,tightened",
                       help=f"comma-separated, of {', '.join(FORMULATION_NAMES)}"
                       " (default faithful,tightened)")
    bench.add_argument("--solvers", default="highs",
                       help=f"comma-separated, of {', '.join(MODES)} (default highs; auto:"
                       " placement solve's defaults, formulation and method auto too)")
    bench.add_argument("--skip-unavailable", action="store_true",
                       help="record unavailable solvers as 'unavailable' rows instead of failing")
    bench.add_argument("--time-limit", type=float, default=60.0, help="per run, s (default 60)")
    bench.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap (default 1e-4)")
    bench.add_argument("--solver-threads", type=int, default=None, metavar="N",
                       help="solver threads per run (default 2)")
    bench.add_argument("--threads", type=int, default=None, dest="old_threads", metavar="N",
                       help="deprecated spelling of --solver-threads (elsewhere --threads means"
                       " ONNX Runtime threads)")
    bench.add_argument("--repeat", type=int, default=1, help="runs per combination (default 1)")
    bench.add_argument("--profile-runs", type=int, default=20,
                       help="ONNX Runtime measured runs when profiling (default 20)")
    memory_limit_option(bench)
    bench.add_argument("-o", "--output", default="bench_out", metavar="DIR",
                       help="output directory (default bench_out)")
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def solver_threads(args: argparse.Namespace) -> int:
    """``--solver-threads``, or the deprecated ``--threads`` (with a warning): bench's
    ``--threads`` meant solver threads, every other command's means ONNX Runtime's."""
    from placement.cli.common import warn

    if args.old_threads is not None:
        if args.solver_threads is not None:
            raise PlacementError("--threads is the deprecated spelling of --solver-threads;"
                                 " give only --solver-threads")
        warn("bench --threads is deprecated: use --solver-threads (--threads means ONNX"
             " Runtime threads in solve, profile, sweep and export)")
        args.solver_threads = args.old_threads
    threads = 2 if args.solver_threads is None else args.solver_threads
    if threads < 1:
        raise PlacementError(f"--solver-threads must be at least 1, got {threads}")
    return threads


def run(args: argparse.Namespace) -> int:
    from placement.bench.run import check_solvers, run_bench
    from placement.bench.summary import format_summary, summarize
    from placement.cli.common import warn

    if not args.time_limit > 0:
        raise PlacementError(f"--time-limit must be positive, got {args.time_limit}")
    if not args.gap >= 0:
        raise PlacementError(f"--gap must be a non-negative fraction, got {args.gap}")
    threads = solver_threads(args)
    solvers = _split(args.solvers)
    if not solvers:
        raise PlacementError("--solvers names no solver")
    missing = {s: why for s, why in check_solvers(solvers).items() if why is not None}
    if missing and not args.skip_unavailable:
        s, why = next(iter(missing.items()))
        raise PlacementError(f"solver {s} is unavailable: {why} (or pass --skip-unavailable)")
    out = Path(args.output)
    rows = run_bench(
        args.networks,
        out,
        grid=args.grid,
        hardware=_split(args.hardware),
        formulations=_split(args.formulations),
        solvers=solvers,
        time_limit=args.time_limit,
        rel_gap=args.gap,
        threads=threads,
        repeat=args.repeat,
        profile_runs=args.profile_runs,
        progress=None if args.quiet else sys.stderr,
        warn=warn,
        memory_limit_gb=args.memory_limit,
    )
    for line in format_summary(summarize(rows)):
        print(line)
    print(f"wrote {out / 'runs.csv'}, {out / 'runs.json'}, {out / 'summary.txt'}",
          file=sys.stderr)
    failed = [r for r in rows if r["status"] == "error" or
              (r["status"] in ("optimal", "time_limit") and not r["verified"])]
    if failed:
        print(f"placement: error: {len(failed)} run(s) failed; see the message column of"
              f" {out / 'runs.csv'}", file=sys.stderr)
        return 1
    return 0
