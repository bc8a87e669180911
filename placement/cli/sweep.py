"""``placement sweep``: a design-space sweep from the command line (:mod:`placement.sweep.run`).

Conventions are those of :mod:`placement.cli`: info and progress on stderr (silenced
by ``-q``), the summary table on stdout, every user error one line
``placement: error: ...`` with exit code 1, files written atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from placement.cli import EXIT_INTERRUPTED
from placement.cli.common import (
    FORMULATION_CHOICES,
    Command,
    NestProfiling,
    info,
    measure_host,
    measure_nests,
    profiling_options,
    warn,
)
from placement.cli.solve import SOLVER_CHOICES
from placement.devices.pim import COPY_CHOICES
from placement.errors import PlacementError
from placement.tables import for_terminal

# Convenience flags -> grid keys (file units); every key is also reachable with --set.
CIM_FLAGS = {
    "crossbars": "crossbars",
    "t_mvm_ns": "t_mvm_ns",
    "bus_gbps": "bus_gbps",
    "internal_gbps": "internal_gbps",
    "elem_bytes": "elem_bytes",
    "crossbar_size": "crossbar_size",
}
PIM_FLAGS = {"pim_cores": "cores"}
EPILOG = """\
examples:
  placement sweep model.onnx --target cim --hardware arm-a72,x86-ryzen \\
      --crossbars 25,50,100,200 --t-mvm-ns 50,100,500,1000 -o sweep/
  placement sweep a.onnx b.onnx --target cim --set bus_gbps=5,10,20 -o sweep/
  placement sweep model.onnx --target pim --pim-cores 32,64,128 --set t_sw_us=1,2,4 -o sweep/
  placement sweep ... --scheduler tcp://host:8786     # the same sweep on a Dask cluster

Interrupted? Run the same command again: the finished points (DIR/points.jsonl) are
kept and only the others are solved. Results: DIR/points.csv and DIR/points.json (one
row per point), DIR/schedules/<point_id>.json, DIR/manifest.json; the column schema is
documented in placement/sweep/run.py. Dask workers must have the placement package
installed (same version). exit codes: 0 done (failed points are reported as rows with
status 'error' and a warning), 1 error, 2 usage error, 130 interrupted (resumable)."""


COMMAND = Command(
    "sweep",
    help="solve a grid of hardware parameters (in parallel or on Dask); tidy CSV/JSON",
    description="Solve and verify the optimal placement at every point of a cartesian grid:\n"
    "models x hardware x values of any spec field. Each model is profiled once; the\n"
    "points run in local worker processes or on a Dask cluster, and an interrupted\n"
    "sweep resumes where it stopped.",
    epilog=EPILOG,
    formatter_class=argparse.RawDescriptionHelpFormatter,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL", help="ONNX file(s) with static shapes")
    p.add_argument(
        "--target", choices=["cim", "pim"], default="cim", help="accelerator kind (default: cim)"
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="sweep directory (created)")
    p.add_argument(
        "--force",
        action="store_true",
        help="DIR holds another sweep (other models, grid or options): discard its results",
    )
    g = p.add_argument_group(
        "grid (values comma-separated, in file units; unswept keys keep the hardware's value)"
    )
    g.add_argument(
        "--hardware",
        metavar="PRESET|FILE[,...]",
        help="hardware descriptions, comma-separated (default: the CIM preset matching this"
        " machine; pim-icelake for --target pim)",
    )
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        dest="settings",
        help="sweep any spec field, repeatable. CIM: crossbars, crossbar_rows, crossbar_cols,"
        " crossbar_size, t_mvm_ns, bus_gbps, internal_gbps, elem_bytes. PIM: any [pim] key,"
        " e.g. cores, t_sw_us, clock_ghz, read_gbps",
    )
    g.add_argument("--crossbars", metavar="LIST", help="= --set crossbars=LIST")
    g.add_argument("--t-mvm-ns", metavar="LIST", help="= --set t_mvm_ns=LIST")
    g.add_argument("--bus-gbps", metavar="LIST", help="= --set bus_gbps=LIST")
    g.add_argument("--internal-gbps", metavar="LIST", help="= --set internal_gbps=LIST")
    g.add_argument("--elem-bytes", metavar="LIST", help="= --set elem_bytes=LIST")
    g.add_argument(
        "--crossbar-size", metavar="LIST", help="square crossbars, = --set crossbar_size=LIST"
    )
    g.add_argument("--pim-cores", metavar="LIST", help="PIM only, = --set cores=LIST")
    pim = p.add_argument_group("PIM model (--target pim)")
    pim.add_argument(
        "--copy",
        choices=COPY_CHOICES,
        default=None,
        help="PIM copy accounting: auto (default) = the hardware's memory architecture"
        " (shared or partitioned; upper_bound where it states none), upper_bound = the"
        " paper's Eq. 8, exact = residency within PIM segments, shared, partitioned",
    )
    pim.add_argument(
        "--granularity",
        choices=["loop", "operator"],
        default=None,
        help="decide per loop nest (default) or per ONNX operator",
    )
    prof = p.add_argument_group("host latencies (measured once per model, before the points)")
    prof.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="FILE",
        help="saved (nest) profile, repeatable; matched to its model by SHA-256",
    )
    profiling_options(prof)
    sol = p.add_argument_group("solver (per point)")
    sol.add_argument("--time-limit", type=float, default=600.0, help="seconds (default 600)")
    sol.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap (default 1e-4)")
    sol.add_argument(
        "--solver-threads",
        type=int,
        default=1,
        help="solver threads per point (default 1: results independent of the worker count)",
    )
    sol.add_argument(
        "--formulation",
        choices=list(FORMULATION_CHOICES),
        default="auto",
        help="CIM model, as for 'placement solve' (default auto)",
    )
    sol.add_argument(
        "--solver",
        choices=list(SOLVER_CHOICES),
        default="auto",
        help="solver, as for 'placement solve' (default auto; PIM: a MIP backend, auto ="
        " HiGHS)",
    )
    ex = p.add_argument_group("execution")
    ex.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"local worker processes (default min(2, CPUs) = {_default_workers()})",
    )
    ex.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler, e.g. tcp://host:8786: solve the points on that cluster",
    )
    ex.add_argument(
        "--scheduler-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="give up connecting to the scheduler (or waiting for a worker) after S seconds"
        " (default 10)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def _default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def grid_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~placement.sweep.run.Grid` the command line describes (checked)."""
    from placement.sweep.grid import Grid, parse_setting, parse_values

    target = args.target
    own, other = (CIM_FLAGS, PIM_FLAGS) if target == "cim" else (PIM_FLAGS, CIM_FLAGS)
    wrong = [f"--{f.replace('_', '-')}" for f in other if getattr(args, f, None) is not None]
    if wrong:
        raise PlacementError(f"{', '.join(wrong)}: not a grid option of --target {target}")
    if target == "cim" and (args.copy or args.granularity):
        raise PlacementError("--copy/--granularity: PIM options, need --target pim")
    params: list[tuple[str, Any]] = []
    for flag, key in own.items():
        text = getattr(args, flag, None)
        if text is not None:
            params.append((key, parse_values(target, key, text)))
    params += [parse_setting(target, s) for s in args.settings]
    if args.hardware is not None:
        hardware = [h.strip() for h in args.hardware.split(",")]
        if not all(hardware):
            raise PlacementError(f"--hardware {args.hardware!r}: an empty name in the list")
    elif target == "cim":
        from placement.hardware.base import default_preset_for

        hardware = [default_preset_for()]
    else:
        from placement.hardware.pim import DEFAULT_PIM_PRESET

        hardware = [DEFAULT_PIM_PRESET]
    return Grid(target, tuple(hardware), tuple(params))


def run(args: argparse.Namespace) -> int:
    from placement.sweep.plan import SolverOptions
    from placement.sweep.run import run_sweep
    from placement.sweep.store import SweepStore

    grid = grid_from_args(args)
    options = SolverOptions(
        time_limit=args.time_limit,
        rel_gap=args.gap,
        threads=args.solver_threads,
        copy=args.copy or "auto",
        granularity=args.granularity or "loop",
        formulation=args.formulation,
        solver=args.solver,
    )
    workers = _default_workers() if args.workers is None else args.workers
    if args.runs < 1 or args.warmup < 0:
        raise PlacementError(
            f"--runs must be >= 1 and --warmup >= 0 (got {args.runs}, {args.warmup})"
        )
    progress = ProgressLine(quiet=args.quiet)
    try:
        result = run_sweep(
            args.target,
            args.models,
            grid,
            args.output,
            options=options,
            profiles=args.profile,
            measure=lambda path: _measure(args, path),
            workers=workers,
            scheduler=args.scheduler,
            scheduler_timeout=args.scheduler_timeout,
            force=args.force,
            info=lambda text: info(args, text),
            progress=progress,
            warn=warn,
            memory_limit_gb=args.memory_limit,
        )
    except KeyboardInterrupt:
        progress.close()
        saved = SweepStore(args.output).count_logged()
        print(
            f"placement: interrupted; {saved} finished point(s) are saved in {args.output};"
            " run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    progress.close()
    for line in for_terminal(summary_lines(result)):
        print(line)
    info(
        args,
        f"{len(result.rows)} points ({result.solved} solved now, {result.resumed} resumed)"
        f" in {result.seconds:.1f} s; wrote {result.store.csv_path}, {result.store.json_path}",
    )
    failed = result.failed
    if failed:
        print(
            f"placement: warning: {len(failed)} point(s) failed (status 'error'); first:"
            f" {failed[0]['point_id']}: {failed[0]['message']}",
            file=sys.stderr,
        )
    return 0


def summary_lines(result: Any) -> list[str]:
    """Per model and hardware (a heading with where the host latencies came from), one
    row per point: the swept values, status, objective beside CPU-only, speed-up."""
    from placement.pim.rules import fmt_time
    from placement.sweep.plan import ID_COLUMNS, RESULT_COLUMNS
    from placement.tables import text_table

    keys = [c for c in result.columns if c not in (*ID_COLUMNS, *RESULT_COLUMNS)]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    # grid order (numbers compared as numbers), easier to read than point_id order
    for r in sorted(result.rows, key=lambda r: (r["model"], r["hardware"], *(r[k] for k in keys))):
        groups.setdefault((r["model"], r["hardware"]), []).append(r)
    lines: list[str] = []
    for (model, hardware), rows in groups.items():
        host = next((str(r.get("host_latencies")) for r in rows if r.get("host_latencies")), "")
        mismatch = any(r.get("host_mismatch") for r in rows)
        heading = f"{model} on {hardware}" + (f": host latencies {host}" if host else "")
        if mismatch and "mismatch" not in host.lower():
            heading += " (MISMATCH)"
        lines += ["", heading] if lines else [heading]
        body = [
            [*(_fmt(r[k]) for k in keys), str(r["status"]),
             "-" if r["objective_s"] is None else fmt_time(r["objective_s"]),
             "-" if r["cpu_only_s"] is None else fmt_time(r["cpu_only_s"]),
             "-" if r["speedup"] is None else f"{r['speedup']:.2f}x",
             "-" if r["n_offloaded"] is None else f"{r['n_offloaded']}/{_units(r)}"]
            for r in rows
        ]  # fmt: skip
        lines += text_table(
            [[*keys, "status", "objective", "CPU-only", "speed-up", "offloaded"]], body,
            right=(*range(len(keys)), *range(len(keys) + 1, len(keys) + 5)), indent="  ",
        )  # fmt: skip
    return lines


def _units(row: dict) -> object:
    """What a point places: its nests (PIM), else its operators (CIM)."""
    return row.get("n_nests") or row["n_operators"]


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


class ProgressLine:
    """``sweep: done/total points, elapsed, ETA`` on stderr: redrawn in place on a terminal,
    a line every ~10% otherwise (logs), nothing with ``-q``."""

    def __init__(self, quiet: bool = False, stream: Any = None) -> None:
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self.interactive = self.stream.isatty()
        self.started = time.perf_counter()
        self.first: int | None = None  # points done when this run started (resumed)
        self.last_step = -1
        self.drawn = False

    def __call__(self, done: int, total: int, resumed: int) -> None:
        if self.quiet:
            return
        if self.first is None:
            self.first = done
            self.started = time.perf_counter()
        elapsed = time.perf_counter() - self.started
        new = done - self.first
        eta = (
            "0 s"
            if done >= total
            else ("?" if new == 0 else f"{elapsed / new * (total - done):.0f} s")
        )
        pct = 100.0 * done / total if total else 100.0
        text = f"sweep: {done}/{total} points ({pct:.0f}%), {elapsed:.0f} s elapsed, ETA {eta}"
        if resumed:
            text += f" ({resumed} resumed)"
        if self.interactive:
            print(f"\r{text}\x1b[K", end="", file=self.stream, flush=True)
            self.drawn = True
            return
        step = int(pct // 10)  # a few lines in logs: one per 10%, and the last
        if step != self.last_step:
            print(text, file=self.stream, flush=True)
            self.last_step = step

    def close(self) -> None:
        if self.drawn:
            print(file=self.stream, flush=True)
            self.drawn = False


def _measure(args: argparse.Namespace, path: str) -> Any:
    """Profile one model on this machine, with the progress output of ``placement profile``."""
    if args.target == "cim":
        info(args, f"{path}: profiling with ONNX Runtime ...")
        return measure_host(args, path)
    return measure_nests(path, NestProfiling.from_args(args))
