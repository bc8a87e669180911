"""The ``placement`` command.

Every failure the user can cause prints one line ``placement: error: ...`` on
stderr and exits 1 (2 for command-line usage errors); nothing is written to an
output file unless the whole command succeeded.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from placement.cli.pim import add_pim_solve_arguments
from placement.errors import PlacementError
from placement.solvers.base import SolveStatus

OPT_LEVELS = ("disable", "basic", "extended", "all")
EXIT_ERROR = 1  # bad input, solver failure, failed verification
EXIT_USAGE = 2  # argparse's own code for bad command lines
EXIT_NO_SOLUTION = 3  # time limit reached before any placement was found
EPILOG = (
    "exit codes: 0 success (a time-limited solve prints its gap and a warning), 1 error,"
    " 2 usage error, 3 time limit reached without any placement"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except PlacementError as exc:
        print(f"placement: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("placement: interrupted", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement",
        description="Optimal placement of ML workloads on a host CPU + compute-in-memory (CIM)"
        " accelerator or processing-in-memory (PIM) cores.",
    )
    parser.add_argument("--version", action="version", version=f"placement {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    solve = sub.add_parser(
        "solve",
        help="profile (or load a profile), build the placement ILP, solve, verify, report",
        description="Find the latency-optimal CPU/CIM placement of an ONNX model's operators "
        "(CIM paper Eqs. 1-14), verify it independently and report the speed-up over CPU-only.",
        epilog=EPILOG,
    )
    solve.add_argument(
        "model", help="ONNX file with static shapes (or .mlir at linalg level, --target pim)"
    )
    solve.add_argument(
        "--target", choices=["cim", "pim"], default="cim", help="accelerator kind (default: cim)"
    )
    cim_hardware_options(solve)
    add_pim_solve_arguments(solve.add_argument_group("PIM target (--target pim)"))
    prof = solve.add_argument_group("host latencies")
    prof.add_argument(
        "--profile", metavar="FILE", help="use a saved (nest) profile instead of measuring"
    )
    _profiling_options(prof)
    sol = solve.add_argument_group("solver (HiGHS)")
    sol.add_argument("--time-limit", type=float, default=600.0, help="seconds (default 600)")
    sol.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap (default 1e-4)")
    sol.add_argument("--solver-threads", type=int, default=None, help="HiGHS threads")
    sol.add_argument(
        "--solver",
        choices=["auto", "highs", "cpsat+highs", "cpsat", "scip", "cbc", "gurobi"],
        default="auto",
        help="CIM: 'cpsat+highs' gives OR-Tools CP-SAT half the time limit and HiGHS its"
        " schedule as a start (best on heavily branched graphs such as YOLO); 'auto'"
        " (default): cpsat+highs where the formulation choice is 'tightened' and OR-Tools"
        " is installed, HiGHS otherwise; SCIP, CBC, Gurobi where installed",
    )
    sol.add_argument(
        "--formulation",
        choices=["auto", "faithful", "bounded", "tightened"],
        default="auto",
        help="CIM model: the paper's Eqs. 5-14 ('faithful'), plus valid bounds ('bounded'),"
        " or plus per-pair big-M from a heuristic schedule ('tightened'); all have the same"
        " optimum. 'auto' (default): bounded for near-chain graphs, tightened otherwise",
    )
    sol.add_argument(
        "--no-warm-start",
        dest="warm_start",
        action="store_false",
        default=None,
        help="do not give HiGHS the list-scheduling heuristic's placement as a MIP start"
        " (default: a start for the tightened formulation)",
    )
    out = solve.add_argument_group("output")
    out.add_argument("--json", metavar="FILE", help="write the full placement and schedule")
    out.add_argument("--details", action="store_true", help="print the per-operator schedule")
    out.add_argument(
        "--plot",
        metavar="FILE",
        help="Gantt chart of the placement, .png or .svg (PIM: the first core count)",
    )
    out.add_argument("--solver-log", action="store_true", help="stream HiGHS's log to stderr")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    solve.set_defaults(handler=_cmd_solve_target)

    profile = sub.add_parser(
        "profile",
        help="measure per-operator host latencies with ONNX Runtime and save them",
        description="Profile every operator of an ONNX model with ONNX Runtime on this machine "
        "(median of N runs after warm-up) and save a profile reusable with 'solve --profile'.",
    )
    profile.add_argument(
        "model", help="ONNX file with static shapes (or .mlir at linalg level, --target pim)"
    )
    profile.add_argument("-o", "--output", required=True, metavar="FILE", help="profile JSON")
    profile.add_argument(
        "--target",
        choices=["cim", "pim"],
        default="cim",
        help="cim: per-operator ONNX Runtime latencies (default); pim: per-loop-nest MLIR JIT"
        " times and Table 1 counters",
    )
    _profiling_options(profile)
    profile.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    profile.set_defaults(handler=_cmd_profile_target)

    nests = sub.add_parser(
        "nests",
        help="list the loop nests the MLIR lowering materializes (the PIM decision units)",
        description="Lower an ONNX (or linalg-level .mlir) model with torch-mlir to bufferized"
        " parallel loops and print one row per loop nest.",
    )
    nests.add_argument("model", help="ONNX file with static shapes, or .mlir at linalg level")
    nests.add_argument("--json", metavar="FILE", help="write the nests as JSON")
    nests.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    nests.set_defaults(handler=_cmd_nests)

    presets = sub.add_parser("presets", help="list the hardware presets")
    presets.set_defaults(handler=_cmd_presets)

    # Commands that live in their own modules: sweep, bench + export, report.
    from placement.cli import bench as cli_bench
    from placement.cli import report as cli_report
    from placement.cli import sweep as cli_sweep

    for command_module in (cli_sweep, cli_bench, cli_report):
        command_module.register(sub)
    return parser


def cim_hardware_options(parser: argparse.ArgumentParser) -> None:
    """The CIM hardware flags, shared by every command that builds a CIM instance."""
    hw = parser.add_argument_group("hardware (default: the preset matching the profiled host)")
    hw.add_argument("--hardware", metavar="PRESET|FILE", help="preset name or TOML file")
    hw.add_argument("--crossbars", type=int, help="crossbar budget C")
    hw.add_argument("--t-mvm-ns", type=float, help="latency of one MVM, ns")
    hw.add_argument("--bus-gbps", type=float, help="CPU-CIM shared bus bandwidth, GB/s")
    hw.add_argument("--internal-gbps", type=float, help="CIM internal bandwidth, GB/s")
    hw.add_argument("--elem-bytes", type=int, help="bytes per element moved (int8: 1)")
    hw.add_argument("--crossbar-size", type=int, metavar="N", help="square crossbars of NxN cells")


def _profiling_options(group: argparse._ActionsContainer) -> None:
    group.add_argument("--runs", type=int, default=20, help="measured runs (default 20)")
    group.add_argument("--warmup", type=int, default=5, help="warm-up runs (default 5)")
    group.add_argument("--threads", type=int, default=1, help="ORT intra-op threads (default 1)")
    group.add_argument(
        "--optimization",
        choices=OPT_LEVELS,
        default="all",
        help="ORT graph optimization level (default all)",
    )


def _cmd_solve_target(args: argparse.Namespace) -> int:
    from placement.cli.pim import cmd_solve_pim, pim_only_flags_given

    if args.target == "pim":
        return cmd_solve_pim(args)
    flags = pim_only_flags_given(args)
    if flags:
        raise PlacementError(f"{', '.join(flags)}: PIM option(s), need --target pim")
    return _cmd_solve(args)


def _cmd_profile_target(args: argparse.Namespace) -> int:
    if args.target == "pim":
        from placement.cli.pim import cmd_profile_pim

        return cmd_profile_pim(args)
    return _cmd_profile(args)


def _cmd_nests(args: argparse.Namespace) -> int:
    from placement.cli.pim import cmd_nests

    return cmd_nests(args)


def _cmd_presets(args: argparse.Namespace) -> int:
    from placement.hardware.base import default_preset_for, preset_names
    from placement.hardware.cim import load_hardware

    default = default_preset_for()
    for name in preset_names():
        hw = load_hardware(name)
        mark = "  (default on this machine)" if name == default else ""
        print(f"{name}{mark}\n    {hw.description}\n    {hw.describe()}")
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    from placement.graph import load_graph

    graph = load_graph(args.model)  # validates the model before spending time on it
    profile = _measure(args, graph.path)
    profile.save(args.output)
    _info(args, f"saved profile of {len(profile.latencies)} nodes to {args.output}")
    return 0


def _cmd_solve(args: argparse.Namespace) -> int:
    from placement.cim.instance import cim_instance
    from placement.cim.report import result_document, summary_lines
    from placement.cim.solve import solve_cim
    from placement.graph import load_graph
    from placement.io import write_json_atomic
    from placement.profiling.host_profile import HostProfile

    _check_solver_flags(args)
    if args.plot:
        from placement.plots.common import check_figure_path

        check_figure_path(args.plot, "--plot")  # before any profiling or solving
    graph = load_graph(args.model)
    n_cim = len(graph.cim_capable())
    _info(
        args,
        f"model: {graph.path} ({len(graph.operators)} operators, {n_cim} CIM-capable,"
        f" {len(graph.edges)} data edges)",
    )
    if args.profile:
        profile = HostProfile.load(args.profile)
        profile.check_matches(graph.sha256, graph.path)
        source = f"loaded from {args.profile}"
    else:
        profile = _measure(args, graph.path)
        source = "measured now"
    meta = profile.metadata
    _info(
        args,
        f"host profile: {source} ({meta.get('runs')} runs, {meta.get('intra_op_threads')}"
        f" thread(s), ONNX Runtime {meta.get('onnxruntime_version')},"
        f" optimization {meta.get('optimization')}, {meta.get('machine')})",
    )
    hw = _hardware(args, meta.get("machine"))
    instance = cim_instance(graph, profile.latencies, hw.cim)
    solver = _auto_solver(instance, args)
    _info(
        args,
        f"parallel operator pairs: {len(instance.parallel_pairs)}; solving with {solver}"
        f" ({args.formulation} formulation, time limit {args.time_limit:g} s,"
        f" relative gap {args.gap:g}) ...",
    )
    if solver == "highs":
        placement = solve_cim(
            instance,
            time_limit=args.time_limit,
            rel_gap=args.gap,
            threads=args.solver_threads,
            tee=[sys.stderr] if args.solver_log else False,
            formulation=args.formulation,
            warm_start=args.warm_start,
        )
    else:
        placement = _solve_with_other_solver(instance, args, solver)
    for line in summary_lines(placement, graph, hw, args.details):
        print(line)
    if args.json:
        # allow_nan: a result document has always been written even with an infinite bound.
        doc = result_document(placement, graph, hw, meta)
        write_json_atomic(args.json, doc, allow_nan=True)
        _info(args, f"wrote {args.json}")
    if args.plot and placement.schedule is not None:
        from placement.plots.common import save_figure
        from placement.plots.gantt import cim_gantt

        edges = [(e.src, e.dst, e.t_transfer) for e in instance.edges]
        save_figure(cim_gantt(placement.to_json(), edges, title=graph.path), args.plot)
        _info(args, f"wrote {args.plot}")
    status = placement.result.status
    if placement.schedule is None:
        print(
            f"placement: no placement found within the time limit of {args.time_limit:g} s;"
            " raise --time-limit",
            file=sys.stderr,
        )
        return EXIT_NO_SOLUTION
    if status == SolveStatus.TIME_LIMIT:
        print(
            "placement: warning: time limit reached; the placement above is the best found and"
            " verified, but not proven optimal (see its gap)",
            file=sys.stderr,
        )
    return 0


def _auto_solver(instance, args: argparse.Namespace) -> str:
    """'auto': CP-SAT then HiGHS on branched graphs (measured best on YOLOv5n), else HiGHS."""
    if args.solver != "auto":
        return args.solver
    from placement.cim.solve import auto_formulation
    from placement.solvers.cpsat import cpsat_unavailable

    formulation = auto_formulation(instance) if args.formulation == "auto" else args.formulation
    if formulation == "tightened" and args.warm_start is not False and not cpsat_unavailable():
        return "cpsat+highs"
    return "highs"


def _solve_with_other_solver(instance, args: argparse.Namespace, solver: str):
    """The benchmark's solver modes (SCIP, CBC, Gurobi, CP-SAT, CP-SAT then HiGHS), verified."""
    from placement.bench.run import check_solvers, run_one
    from placement.cim.solve import CimPlacement, auto_formulation
    from placement.cim.verify import verify_cim

    reason = check_solvers([solver])[solver]
    if reason is not None:
        raise PlacementError(f"solver {solver} is not available: {reason}")
    formulation = auto_formulation(instance) if args.formulation == "auto" else args.formulation
    run = run_one(
        instance,
        formulation,
        solver,
        time_limit=args.time_limit,
        rel_gap=args.gap,
        threads=args.solver_threads,
        warm_start=args.warm_start,
    )
    verification = None
    if run.schedule is not None:
        verification = verify_cim(instance, run.schedule, claimed_makespan=run.result.objective)
        verification.raise_if_failed()
    return CimPlacement(
        instance, run.result, run.schedule, verification, instance.cpu_only_latency
    )


def _hardware(args: argparse.Namespace, profiled_machine: str | None):
    from placement.hardware.base import default_preset_for
    from placement.hardware.cim import load_hardware, with_overrides

    if args.hardware:
        hw = load_hardware(args.hardware)
        origin = "chosen"
    else:
        hw = load_hardware(default_preset_for(profiled_machine))
        origin = f"default for a host profiled on {profiled_machine or platform.machine()}"
    _check_override_flags(args)
    size = args.crossbar_size
    hw = with_overrides(
        hw,
        crossbars=args.crossbars,
        t_mvm_ns=args.t_mvm_ns,
        bus_gbps=args.bus_gbps,
        internal_gbps=args.internal_gbps,
        elem_bytes=args.elem_bytes,
        crossbar_rows=size,
        crossbar_cols=size,
    )
    _info(args, f"hardware ({origin}): {hw.describe()}")
    if profiled_machine and _arch_family(profiled_machine) != _arch_family(hw.host.arch):
        print(
            f"placement: warning: host latencies were measured on {profiled_machine}, but"
            f" hardware '{hw.name}' describes another host: {hw.host.name}, {hw.host.arch}",
            file=sys.stderr,
        )
    return hw


def _check_solver_flags(args: argparse.Namespace) -> None:
    """Fail before spending time on profiling."""
    if not args.time_limit > 0:
        raise PlacementError(
            f"--time-limit must be a positive number of seconds, got {args.time_limit}"
        )
    if not args.gap >= 0:
        raise PlacementError(f"--gap must be a non-negative fraction, got {args.gap}")
    if args.solver_threads is not None and args.solver_threads < 1:
        raise PlacementError(f"--solver-threads must be at least 1, got {args.solver_threads}")


def _check_override_flags(args: argparse.Namespace) -> None:
    for flag in (
        "crossbars",
        "t_mvm_ns",
        "bus_gbps",
        "internal_gbps",
        "elem_bytes",
        "crossbar_size",
    ):
        value = getattr(args, flag)
        if value is not None and not value > 0:  # also rejects NaN
            raise PlacementError(f"--{flag.replace('_', '-')} must be positive, got {value}")


def _arch_family(arch: str) -> str:
    arch = arch.lower()
    return "arm" if arch.startswith(("arm", "aarch")) else "x86"


def _measure(args: argparse.Namespace, model_path: str):
    from placement.profiling.ort.measure import profile_model

    total = args.warmup + args.runs
    started = time.perf_counter()

    interactive = sys.stderr.isatty()

    def progress(done: int, runs: int) -> None:
        if args.quiet:
            return
        if interactive:  # one line, redrawn in place
            end = "\n" if done == runs else ""
            print(
                f"\rprofiling with ONNX Runtime: run {done}/{runs}",
                end=end,
                file=sys.stderr,
                flush=True,
            )
        elif done == runs or done % max(1, runs // 4) == 0:  # a few lines in logs
            print(f"profiling with ONNX Runtime: run {done}/{runs}", file=sys.stderr, flush=True)

    profile = profile_model(
        model_path,
        runs=args.runs,
        warmup=args.warmup,
        intra_op_threads=args.threads,
        optimization=args.optimization,
        progress=progress,
    )
    _info(args, f"profiled {total} runs in {time.perf_counter() - started:.1f} s")
    return profile


def _info(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


def _version() -> str:
    try:
        return version("placement")
    except PackageNotFoundError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
