"""``placement pareto``: the exact Pareto front of a model's CIM placements over two or
three of latency, energy, crossbars and throughput (:mod:`placement.sweep.pareto`).

Conventions are those of :mod:`placement.cli`: info on stderr (silenced by ``-q``), the
front's table on stdout, every user error one line with exit code 1, files written
atomically; an interrupted run resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from placement.cli import EXIT_INTERRUPTED
from placement.cli.common import (
    Command,
    check_override_flags,
    cim_hardware,
    cim_hardware_options,
    formulation_option,
    info,
    measure_host,
    modelled_host,
    profiling_options,
    warn,
)
from placement.cli.solve import SOLVER_CHOICES
from placement.errors import PlacementError
from placement.tables import for_terminal

EPILOG = """\
examples:
  placement pareto model.onnx --axes latency,energy --hardware arm-a72 --crossbars 100 -o front/
  placement pareto model.onnx --axes latency,throughput --profile model.profile.json -o front/
  placement pareto model.onnx --axes latency,energy,crossbars --max-latency-ms 20 -o front/

Every point is solved exactly (lexicographically, so no point is dominated) and labelled
optimal or with its gap. Results: DIR/front.csv and DIR/front.json (one row per point, a
column per axis, status and gap), DIR/front.png (the figure), DIR/report.md (the table,
where the numbers come from, the command); DIR/points.jsonl logs every solve and
DIR/schedules/ keeps each placement. Interrupted? Run the same command again: the solved
steps are kept. exit codes: 0 done (an incomplete front says why, with a warning), 1
error, 2 usage error, 130 interrupted (resumable)."""

COMMAND = Command(
    "pareto",
    help="exact Pareto front of latency, energy, crossbars, throughput (CIM)",
    description="Compute the Pareto front of a model's CPU/CIM placements over two or three\n"
    "of latency, energy, crossbars and throughput, exactly, by the epsilon-constraint\n"
    "method; every point verified independently.",
    epilog=EPILOG,
    formatter_class=argparse.RawDescriptionHelpFormatter,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX file with static shapes")
    p.add_argument(
        "--axes", required=True, metavar="A,B[,C]",
        help="two or three of latency, energy, crossbars, throughput; the first is"
        " minimized (throughput maximized) at each step under bounds on the others",
    )  # fmt: skip
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="front directory")
    p.add_argument("--force", action="store_true",
                   help="DIR holds another front or sweep: discard its results")  # fmt: skip
    cim_hardware_options(p)
    bounds = p.add_argument_group("bounds every point keeps")
    bounds.add_argument("--max-latency-ms", type=float, metavar="MS",
                        help="single-frame latency at most MS")  # fmt: skip
    bounds.add_argument("--max-energy-mj", type=float, metavar="MJ",
                        help="energy per inference at most MJ")  # fmt: skip
    bounds.add_argument("--min-fps", type=float, metavar="FPS",
                        help="pipelined frame rate at least FPS")  # fmt: skip
    prof = p.add_argument_group("host latencies (measured once, before the solves)")
    prof.add_argument("--profile", metavar="FILE", help="use a saved host profile")
    profiling_options(prof)
    sol = p.add_argument_group("solver (per solve)")
    sol.add_argument("--time-limit", type=float, default=600.0,
                     help="seconds per solve (default 600)")  # fmt: skip
    sol.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap (default 1e-4)")
    sol.add_argument("--solver-threads", type=int, default=1,
                     help="solver threads per solve (default 1)")  # fmt: skip
    sol.add_argument("--solver", choices=list(SOLVER_CHOICES), default="auto",
                     help="as for 'placement solve' (default auto); 'cpsat' alone cannot"
                     " prove what its rounded data relax")  # fmt: skip
    formulation_option(sol)
    sol.add_argument("--step", type=float, default=1e-4, metavar="FRACTION",
                     help="each point at least this fraction below the previous one on the"
                     " bounded axis (default 1e-4; crossbars: 1)")  # fmt: skip
    sol.add_argument("--max-points", type=int, default=200,
                     help="stop after this many points (default 200)")  # fmt: skip
    ex = p.add_argument_group("execution")
    ex.add_argument("--workers", type=int, default=1,
                    help="local worker processes (default 1; the two ends of a front run side"
                    " by side with 2)")  # fmt: skip
    ex.add_argument("--scheduler", metavar="ADDRESS",
                    help="Dask scheduler, e.g. tcp://host:8786: solve on that cluster")
    ex.add_argument("--scheduler-timeout", type=float, default=10.0, metavar="S",
                    help="seconds to wait for the scheduler or a worker (default 10)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def fixed_bounds(args: argparse.Namespace) -> dict[str, float]:
    """The bounds every point keeps, in SI units, by axis."""
    out: dict[str, float] = {}
    for flag, name, to_si in (("max_latency_ms", "latency", lambda v: v * 1e-3),
                              ("max_energy_mj", "energy", lambda v: v * 1e-3),
                              ("min_fps", "period", lambda v: 1.0 / v)):  # fmt: skip
        value = getattr(args, flag)
        if value is None:
            continue
        if not (value > 0 and value < float("inf")):
            raise PlacementError(f"--{flag.replace('_', '-')} must be a positive number,"
                                 f" got {value}")  # fmt: skip
        out[name] = to_si(value)
    return out


def run(args: argparse.Namespace) -> int:
    from placement.cim.pareto import parse_axes
    from placement.graph import load_graph
    from placement.profiling.host_profile import HostProfile
    from placement.sweep.pareto import run_pareto
    from placement.sweep.plan import SolverOptions
    from placement.sweep.store import SweepStore

    axes = parse_axes(args.axes)
    fixed = fixed_bounds(args)
    check_override_flags(args)
    graph = load_graph(args.model)  # a bad model fails before anything else
    meta = None
    if args.profile and not modelled_host(args):
        meta = HostProfile.load(args.profile).metadata
    hw = cim_hardware(args, meta.get("machine") if meta else None, meta)
    if "energy" in axes or "energy" in fixed:
        if hw.cim.energy is None or (hw.host.active_power is None and meta is None):
            raise PlacementError(f"hardware '{hw.name}' has no energy model: its [cim] energy"
                                 " constants or [host] active_power_w are missing")
    settings = SolverOptions(time_limit=args.time_limit, rel_gap=args.gap,
                             threads=args.solver_threads, formulation=args.formulation,
                             solver=args.solver)  # fmt: skip
    try:
        result = run_pareto(
            graph.path, hw, axes, args.output, settings=settings, fixed=fixed,
            profile=args.profile, measure=lambda path: measure_host(args, path),
            rel_step=args.step, max_points=args.max_points, workers=args.workers,
            scheduler=args.scheduler, scheduler_timeout=args.scheduler_timeout,
            force=args.force, info=lambda text: info(args, text),
            memory_limit_gb=args.memory_limit,
        )  # fmt: skip
    except KeyboardInterrupt:
        saved = SweepStore(args.output).count_logged()
        print(f"placement: interrupted; {saved} solved step(s) are saved in {args.output};"
              " run the same command again to resume", file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED
    lines = front_lines(result, hw, graph.path)
    for line in for_terminal(lines):
        print(line)
    write_outputs(result, hw, graph.path, args)
    info(args, f"{len(result.rows)} solves ({result.solved} now, {result.resumed} resumed) in"
               f" {result.seconds:.1f} s; wrote {result.store.csv_path},"
               f" {result.store.dir / 'front.png'}, {result.store.dir / 'report.md'}")
    if result.failed:
        warn(f"{result.failed[0]['point_id']} failed: {result.failed[0].get('message')}")
    elif not result.complete:
        warn(f"the front may be incomplete: {result.note}")
    return 0


def front_lines(result: Any, hw: Any, model: str) -> list[str]:
    """The front as a table, with whether it is complete."""
    from placement.sweep.pareto import front_table

    head = f"Pareto front of {Path(model).name} on {hw.name} over {', '.join(result.axes)}:"
    state = ("complete (no further point exists)" if result.complete
             else f"INCOMPLETE: {result.note}")  # fmt: skip
    return [head, *front_table(result), f"front: {len(result.front)} points, {state}"]


def command_line(args: argparse.Namespace) -> str:
    """The command that computes (or resumes) this front, for the report."""
    words = ["placement", "pareto", args.model, "--axes", args.axes, "-o", args.output]
    flags = ("hardware", "crossbars", "t_mvm_ns", "bus_gbps", "internal_gbps", "elem_bytes",
             "crossbar_size", "max_latency_ms", "max_energy_mj", "min_fps", "profile")
    for flag in flags:
        value = getattr(args, flag, None)
        if value is not None:
            words += [f"--{flag.replace('_', '-')}", f"{value:g}" if isinstance(value, float)
                      else str(value)]  # fmt: skip
    for flag, default in (("time_limit", 600.0), ("gap", 1e-4), ("solver", "auto"),
                          ("formulation", "auto"), ("step", 1e-4), ("max_points", 200)):
        value = getattr(args, flag)
        if value != default:
            words += [f"--{flag.replace('_', '-')}", f"{value:g}" if isinstance(value, float)
                      else str(value)]  # fmt: skip
    return " ".join(shlex.quote(w) for w in words)


def write_outputs(result: Any, hw: Any, model: str, args: argparse.Namespace) -> None:
    """front.png and report.md beside front.csv."""
    from placement.io import write_text_atomic
    from placement.plots.common import save_figure
    from placement.plots.pareto import front_figure
    from placement.sweep.pareto import report_markdown

    directory = result.store.dir
    host = result.host_source
    if result.front:
        title = f"{Path(model).stem} on {hw.name}"
        save_figure(front_figure(result.front, result.axes, title, host), directory / "front.png")
    report = report_markdown(result, hw, model, command_line(args))
    write_text_atomic(directory / "report.md", report, "Pareto report")
