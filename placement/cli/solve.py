"""``placement solve``: profile (or load a profile), build the model, solve, verify, report.

One parser for both targets; ``--target`` picks the handler in :data:`HANDLERS`. Each
target's options are checked before any profiling, and the other target's options are
refused with one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from placement.cli.common import (
    EPILOG,
    EXIT_NO_SOLUTION,
    Command,
    NestProfiling,
    check_output_file,
    check_override_flags,
    check_solver_flags,
    cim_hardware,
    cim_hardware_options,
    counters_source_option,
    formulation_option,
    host_times_options,
    info,
    measure_host,
    measure_nests_with_counters,
    modelled_host,
    profiling_options,
    report_representatives,
    warn,
)
from placement.cli.progress import solve_progress
from placement.devices.pim import AUTO_COPY, COPY_CHOICES, resolve_copy
from placement.errors import PlacementError, repeated
from placement.hardware.pim import DEFAULT_PIM_PRESET
from placement.solvers.base import SolveStatus
from placement.solvers.names import MIP_BACKENDS, SOLVERS
from placement.solvers.workers import AUTO_MAX_WORKERS, AUTO_WORKERS, WORKERS_AFTER
from placement.tables import for_terminal

DEFAULT_PIM_CORES = "32,64,128"  # the paper's sweep (Table 2)
DEFAULT_COPY = AUTO_COPY  # the hardware's memory architecture (Eq. 8 where it states none)
GRANULARITY_CHOICES = ("loop", "operator", "basic-block")
SOLVER_CHOICES = SOLVERS
PIM_SOLVERS = MIP_BACKENDS  # PIM models are MIPs; "auto" is HiGHS
# Options that only mean something for one target (defaults are applied by the handler,
# so that their use with the other target can be detected and refused).
CIM_ONLY = ("hardware", "crossbars", "t_mvm_ns", "bus_gbps", "internal_gbps", "elem_bytes",
            "crossbar_size", "workers", "scheduler", "scheduler_timeout", "objective",
            "max_latency_ms", "max_energy_mj", "min_fps")  # fmt: skip
PIM_ONLY = ("pim_hardware", "pim_cores", "pim_times", "counters", "counters_source", "copy",
            "granularity", "allow_estimates", "host_times", "cache",
            "compare_granularities")  # fmt: skip


COMMAND = Command(
    "solve",
    help="profile (or load a profile), build the placement ILP, solve, verify, report",
    description="Find the latency-optimal CPU/CIM placement of an ONNX model's operators "
    "(CIM paper Eqs. 1-14), verify it independently and report the speed-up over CPU-only.",
    epilog=EPILOG,
)


def add_arguments(solve: argparse.ArgumentParser) -> None:
    solve.add_argument(
        "model", help="ONNX file with static shapes (or .mlir at linalg level, --target pim)"
    )
    solve.add_argument(
        "--target", choices=["cim", "pim"], default="cim", help="accelerator kind (default: cim)"
    )
    cim_hardware_options(solve)
    objective_options(solve.add_argument_group("objective (CIM; default: minimum latency)"))
    pim_solve_options(solve.add_argument_group("PIM target (--target pim)"))
    prof = solve.add_argument_group("host latencies")
    prof.add_argument(
        "--profile", metavar="FILE", help="use a saved (nest) profile instead of measuring"
    )
    profiling_options(prof)
    sol = solve.add_argument_group("solver (HiGHS)")
    sol.add_argument("--time-limit", type=float, default=600.0, help="seconds (default 600)")
    sol.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap (default 1e-4)")
    sol.add_argument(
        "--solver-threads", type=int, default=None,
        help="solver threads (default: the solver's own choice)",
    )  # fmt: skip
    sol.add_argument(
        "--solver",
        choices=list(SOLVER_CHOICES),
        default="auto",
        help="CIM: 'cpsat+highs' gives OR-Tools CP-SAT half the time limit and HiGHS its"
        " schedule as a start (best on heavily branched graphs such as YOLO); 'auto'"
        " (default): cpsat+highs where the formulation choice is 'tightened' and OR-Tools"
        " is installed, HiGHS otherwise; SCIP, CBC, Gurobi where installed",
    )
    formulation_option(sol)
    sol.add_argument(
        "--method",
        choices=["auto", "monolithic", "decomposition"],
        default="auto",
        help="CIM: 'decomposition' splits the graph at operators that every path passes"
        " through and no edge that may carry a transfer jumps over, and"
        " solves the blocks between them alone, combined exactly (an optimum, or a"
        " certified gap when time runs out); 'monolithic' solves one model. 'auto'"
        " (default): decomposition for graphs of 150 operators or more whose largest"
        " block holds at most half of them",
    )
    sol.add_argument(
        "--workers", default=None, metavar="N",
        help="CIM decomposition: solve a round's blocks in N worker processes, each with 1"
        " solver thread (default auto: as many as the CPUs this process may use, at most"
        f" {AUTO_MAX_WORKERS}; 1: in this process). Workers start after"
        f" {WORKERS_AFTER:g} s of decomposition"
        " and take 1-2 s to start; until then this process solves blocks itself",
    )  # fmt: skip
    sol.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="CIM decomposition: solve a round's blocks on this Dask cluster, e.g."
        " tcp://host:8786 (its workers need this package installed)",
    )  # fmt: skip
    sol.add_argument(
        "--scheduler-timeout", type=float, default=None, metavar="S",
        help="give up connecting to the scheduler (or waiting for a worker) after S seconds"
        " (default 10)",
    )  # fmt: skip
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
    out.add_argument(
        "--trace",
        metavar="FILE.json",
        help="the schedule as Chrome trace-event JSON (Perfetto, chrome://tracing): one"
        " track per device (host, CIM, bus; host, PIM), times in microseconds (PIM: the"
        " first core count)",
    )
    out.add_argument("--solver-log", action="store_true", help="stream HiGHS's log to stderr")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def objective_options(group: argparse._ActionsContainer) -> None:
    """What a CIM solve minimizes and bounds (no defaults here: see the module docstring)."""
    group.add_argument(
        "--objective", choices=["latency", "energy", "throughput", "crossbars"],
        help="minimize the single-frame latency (default, the paper's), the energy per"
        " inference (the hardware's energy model), the period of a pipelined frame stream"
        " (maximum frames/s) or the crossbars used",
    )  # fmt: skip
    group.add_argument("--max-latency-ms", type=float, metavar="MS",
                       help="bound the single-frame latency")  # fmt: skip
    group.add_argument("--max-energy-mj", type=float, metavar="MJ",
                       help="bound the energy per inference")  # fmt: skip
    group.add_argument("--min-fps", type=float, metavar="FPS",
                       help="bound the pipelined stream's frame rate from below")  # fmt: skip


def objective_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~placement.cim.objectives.Objective` of the flags (checked)."""
    from placement.cim.objectives import Objective

    bounds = []
    for flag, axis, to_si in (("max_latency_ms", "latency", lambda v: v * 1e-3),
                              ("max_energy_mj", "energy", lambda v: v * 1e-3),
                              ("min_fps", "period", lambda v: 1.0 / v)):  # fmt: skip
        value = getattr(args, flag, None)
        if value is None:
            continue
        if not (value > 0 and value < float("inf")):
            raise PlacementError(f"--{flag.replace('_', '-')} must be a positive number, got"
                                 f" {value}")  # fmt: skip
        bounds.append((axis, to_si(value)))
    minimize = args.objective or "latency"
    # the other axes break ties: a placement no worse on latency, then energy
    then = tuple(a for a in ("latency", "energy") if a != minimize and minimize != "latency")
    return Objective(minimize, bounds=tuple(bounds), then=then[:1])


def pim_solve_options(group: argparse._ActionsContainer) -> None:
    """The options of ``--target pim`` (no defaults here: see the module docstring)."""
    group.add_argument(
        "--pim-hardware",
        metavar="PRESET|FILE",
        help=f"PIM preset or TOML file (default {DEFAULT_PIM_PRESET})",
    )
    group.add_argument(
        "--pim-cores",
        metavar="N[,N...]",
        help=f"PIM core counts to evaluate, comma-separated (default {DEFAULT_PIM_CORES})",
    )
    group.add_argument(
        "--pim-times",
        metavar="FILE",
        help="PIM times per nest and core count, measured or simulated elsewhere (CSV:"
        " nest_id,cores,t_pim_s, seconds over all invocations; or JSON {nest: {cores:"
        " seconds}}); they replace the analytical T_pim of the nests the file names (the"
        " others keep it; rule C1's T_pim_min stays analytical)",
    )
    group.add_argument(
        "--counters",
        metavar="FILE",
        help="Table 1 counters per nest measured elsewhere (CSV: nest_id + the five events;"
        " or JSON keyed by nest id); replaces the profile's counters",
    )
    counters_source_option(group)
    host_times_options(group)
    group.add_argument(
        "--copy",
        choices=COPY_CHOICES,
        help="copy accounting: auto (default) = the PIM hardware's memory architecture"
        " (shared or partitioned; upper_bound where the hardware states none); upper_bound"
        " = the paper's Eq. 8; exact = residency within PIM segments; shared = write-backs"
        " of host-dirty data and re-reads of PIM-written data, nothing copied; partitioned"
        " = operands over the host-PIM link, weights resident in the banks",
    )
    group.add_argument(
        "--granularity",
        choices=GRANULARITY_CHOICES,
        help="model decides per loop nest (default), per ONNX operator, or per basic block"
        " of each nest (lowers the model again to read its blocks)",
    )
    group.add_argument(
        "--compare-granularities",
        action="store_true",
        default=None,
        help="also solve the other two granularities and compare them as the paper's"
        " Table 5 does (crossings, differences in %% of the loop-granularity time)",
    )
    group.add_argument(
        "--allow-estimates",
        action="store_true",
        default=None,
        help="let rule C3 use read bandwidth estimated as fetch bytes / T_cpu where the"
        " off-core read counter is missing (labelled '*')",
    )


def run(args: argparse.Namespace) -> int:
    other = CIM_ONLY if args.target == "pim" else PIM_ONLY
    given = [f"--{k.replace('_', '-')}" for k in other if getattr(args, k, None) is not None]
    if given and args.target == "pim":
        raise PlacementError(
            f"{', '.join(given)}: CIM option(s), not used with --target pim"
            " (PIM hardware: --pim-hardware, --pim-cores)"
        )
    if given:
        raise PlacementError(f"{', '.join(given)}: PIM option(s), need --target pim")
    return HANDLERS[args.target](args)


def solve_cim(args: argparse.Namespace) -> int:
    from placement.cim.energy import host_power
    from placement.cim.instance import cim_instance
    from placement.cim.objectives import solve
    from placement.cim.output import host_source, result_document, summary_lines
    from placement.cim.pipeline import (
        block_choices,
        plan_method,
        resolve_formulation,
        resolve_solver,
        unavailable_reason,
    )
    from placement.graph import load_graph
    from placement.io import write_json_atomic

    check_solver_flags(args)
    check_scheduler_flags(args)
    check_override_flags(args)  # and --hardware: read by host_profile, before profiling
    if args.plot:
        from placement.plots.common import check_figure_path

        check_figure_path(args.plot, "--plot")  # before any profiling or solving
    if args.trace:
        from placement.plots.trace import check_trace_path

        check_trace_path(args.trace)
    if args.json:
        check_output_file(args.json, "--json")
    graph = load_graph(args.model)
    n_cim = len(graph.cim_capable())
    info(
        args,
        f"model: {graph.path} ({len(graph.operators)} operators, {n_cim} CIM-capable,"
        f" {len(graph.edges)} data edges)",
    )
    objective = objective_from_args(args)
    if not objective.latency_only and (args.method == "decomposition" or args.workers
                                       or args.scheduler):
        raise PlacementError("--method decomposition, --workers and --scheduler solve the"
                             " latency objective only; other objectives and bounds are solved"
                             " whole")  # fmt: skip
    profile, meta = host_profile(args, graph)
    hw = cim_hardware(args, meta.get("machine") if meta else None, meta)
    instance = cim_instance(graph, profile.latencies if profile else None, hw.cim, host=hw.host,
                            host_power=host_power(hw, meta))  # fmt: skip
    if "energy" in objective.axes and not instance.has_energy:
        raise PlacementError(f"hardware '{hw.name}' has no energy model: its [cim] energy"
                             " constants or [host] active_power_w are missing")  # fmt: skip
    formulation = resolve_formulation(instance, args.formulation)
    solver = resolve_solver(formulation, args.solver, args.warm_start)
    how = f"{solver} ({formulation} formulation)"
    needed: tuple[str, ...] = (solver,)
    if objective.latency_only:  # other objectives are solved whole
        plan = plan_method(instance, args.method, time_limit=args.time_limit)
        block_formulation, block_solver = block_choices(args.formulation, args.solver)
        blocks = (f"decomposition at cut operators, each block with {block_solver}"
                  f" ({block_formulation})")  # fmt: skip
        then = f"{blocks}, then the whole model with {how}"
        how = {"monolithic": how, "decomposition": blocks,
               "decomposition+monolithic": then}[plan.method]  # fmt: skip
        needed = {"monolithic": (solver,), "decomposition": (block_solver,)}.get(
            plan.method, (solver, block_solver))  # fmt: skip
        info(args, f"method: {plan.method} ({plan.why})")
    goal = "" if objective.latency_only else f"{objective.describe()}, "
    info(
        args,
        f"parallel operator pairs: {len(instance.parallel_pairs)}; solving {goal}by {how},"
        f" time limit {args.time_limit:g} s, relative gap {args.gap:g} ...",
    )
    for name in needed:
        reason = unavailable_reason(name) if name != "highs" else None
        if reason is not None:
            raise PlacementError(f"solver {name} is not available: {reason}")
    with solve_progress(args) as monitor:
        lines = monitor.line if monitor is not None else (lambda line: info(args, line))
        placement = solve(
            instance,
            objective=objective,
            formulation=args.formulation,
            solver=args.solver,
            time_limit=args.time_limit,
            rel_gap=args.gap,
            threads=args.solver_threads,
            tee=[sys.stderr] if args.solver_log else False,
            warm_start=args.warm_start,
            method=args.method,
            progress=None if args.quiet else lines,
            monitor=monitor,
            workers=args.workers or AUTO_WORKERS,
            scheduler=args.scheduler,
            scheduler_timeout=args.scheduler_timeout or 10.0,
        )
    if placement.result.status == SolveStatus.INFEASIBLE:
        raise PlacementError(f"no placement meets the bounds ({objective.describe()}):"
                             " proven infeasible; relax a bound")  # fmt: skip
    for line in for_terminal(summary_lines(placement, graph, hw, args.details, meta)):
        print(line)
    if args.json:
        # allow_nan: a result document has always been written even with an infinite bound.
        doc = result_document(placement, graph, hw, meta)
        write_json_atomic(args.json, doc, allow_nan=True)
        info(args, f"wrote {args.json}")
    if args.plot and placement.schedule is not None:
        from placement.plots.common import save_figure
        from placement.plots.gantt import cim_gantt

        edges = [(e.src, e.dst, e.t_transfer) for e in instance.edges]
        doc = placement.to_json() | {"host": host_source(hw, meta).to_json()}  # the caption
        save_figure(cim_gantt(doc, edges, title=graph.path), args.plot)
        info(args, f"wrote {args.plot}")
    if args.trace and placement.schedule is not None:
        from placement.plots.timeline import cim_timeline
        from placement.plots.trace import write_trace

        edges = [(e.src, e.dst, e.t_transfer) for e in instance.edges]
        write_trace(args.trace, cim_timeline(placement.to_json(), edges), {
            "model": str(graph.path), "hardware": hw.name, "cpu_only_us": placement.cpu_only * 1e6,
        })  # fmt: skip
        info(args, f"wrote {args.trace}")
    if placement.schedule is None:
        print(
            f"placement: no placement found within the time limit of {args.time_limit:g} s;"
            " raise --time-limit",
            file=sys.stderr,
        )
        return EXIT_NO_SOLUTION
    if placement.result.status == SolveStatus.TIME_LIMIT:
        warn(
            "time limit reached; the placement above is the best found and verified, but"
            " not proven optimal (see its gap)"
        )
    return 0


def check_scheduler_flags(args: argparse.Namespace) -> None:
    """--scheduler's address and --scheduler-timeout, before any profiling; a Dask cluster
    or local workers, not both."""
    if args.scheduler_timeout is not None and not args.scheduler_timeout > 0:
        raise PlacementError(f"--scheduler-timeout must be positive, got {args.scheduler_timeout}")
    if args.scheduler is None:
        if args.scheduler_timeout is not None:
            raise PlacementError("--scheduler-timeout: only with --scheduler")
        return
    from placement.solvers.workers import check_scheduler_address

    check_scheduler_address(args.scheduler)
    if args.workers is not None:
        raise PlacementError("--workers and --scheduler: the block solves run in local"
                             " worker processes or on a Dask cluster, not both")


def host_profile(args: argparse.Namespace, graph: Any) -> tuple[Any, dict[str, Any] | None]:
    """(HostProfile, its metadata) of ``--profile`` or measured now; (None, None) when
    ``--hardware`` models the host latencies (then nothing is measured)."""
    from placement.cim.instance import check_latencies
    from placement.profiling.host_profile import HostProfile

    if modelled_host(args):
        if args.profile:
            warn(
                f"--profile {args.profile} is not used: hardware '{args.hardware}' takes the host"
                ' latencies from the host model (host.latency = "model")'
            )
        info(args, "host latencies: modelled by the analytical host model (estimate), not measured")
        return None, None
    if args.profile:
        profile = HostProfile.load(args.profile)
        profile.check_matches(graph.sha256, graph.path)
        check_latencies(graph, profile.latencies, f"profile {args.profile}")
        source = f"loaded from {args.profile}"
    else:
        profile = measure_host(args, graph.path)
        source = "measured now"
    meta = profile.metadata
    info(
        args,
        f"host profile: {source} ({meta.get('runs')} runs, {meta.get('intra_op_threads')}"
        f" thread(s), ONNX Runtime {meta.get('onnxruntime_version')},"
        f" optimization {meta.get('optimization')}, {meta.get('machine')})",
    )
    return profile, meta


def solve_pim(args: argparse.Namespace) -> int:
    from placement.hardware.pim import load_pim_hardware
    from placement.io import write_json_atomic
    from placement.pim.instance import build_instance
    from placement.pim.output import pim_document, summary_lines
    from placement.pim.pipeline import solve_for_cores
    from placement.pim.times import load_pim_times
    from placement.solvers.registry import get_backend

    # Everything the user typed is checked before any lowering, timing or solving.
    check_solver_flags(args)
    if args.solver not in ("auto", *PIM_SOLVERS):
        raise PlacementError(
            f"--solver {args.solver}: a CIM solver; --target pim solves with a MIP backend"
            f" ({', '.join(PIM_SOLVERS)})"
        )
    backend = get_backend("highs" if args.solver == "auto" else args.solver, mip=True)
    if args.plot:
        from placement.plots.common import check_figure_path

        check_figure_path(args.plot, "--plot")
    if args.trace:
        from placement.plots.trace import check_trace_path

        check_trace_path(args.trace)
    cores = parse_cores(args.pim_cores or DEFAULT_PIM_CORES)
    granularity = args.granularity or "loop"
    allow_estimates = bool(args.allow_estimates)
    hw = load_pim_hardware(args.pim_hardware or DEFAULT_PIM_PRESET)
    copy = resolve_copy(args.copy or DEFAULT_COPY, hw.pim)  # before anything is measured
    pim_times = None
    if args.pim_times:
        pim_times = load_pim_times(args.pim_times)
        pim_times.check(hw.pim.memory, cores)  # its nests once they are known
    if args.json:
        check_output_file(args.json, "--json")

    profile = nest_profile(args, pim_times)
    info(args, f"PIM hardware: {hw.describe()}")
    if pim_times is not None:
        pim_times.check_nests(profile.nest_ids)
        info(
            args,
            f"T_pim: from {pim_times.label} for {len(pim_times.times)} of"
            f" {len(profile.nests)} nests; the analytical model for the others",
        )
    compare = bool(args.compare_granularities)
    blocks = None
    if granularity == "basic-block" or compare:
        from placement.profiling.nest_measure import profile_loops

        blocks = profile_loops(args.model, profile)
    problem = build_instance(profile, hw.pim, cores[0], pim_times, blocks)
    if blocks is not None:
        count = sum(len(b.blocks) for b in problem.nest_blocks.values())
        info(args, f"basic blocks: {count} in {len(profile.nests)} nests, from lowering"
                   f" {args.model} again")  # fmt: skip
    info(
        args,
        f"solving {len(cores)} core count(s) with {backend.label} ({copy} copy, {granularity}"
        f" granularity{', and the other two to compare' if compare else ''}, time limit"
        f" {args.time_limit:g} s each) ...",
    )
    results = solve_for_cores(
        problem, cores, copy, granularity, allow_estimates,
        solver=backend.name, time_limit=args.time_limit, rel_gap=args.gap,
        threads=args.solver_threads, tee=[sys.stderr] if args.solver_log else False,
        compare=compare,
    )  # fmt: skip
    lines = summary_lines(profile, hw, results, copy, granularity, allow_estimates)
    for line in for_terminal(lines):
        print(line)
    document = pim_document(
        profile, hw, results, copy=copy, granularity=granularity,
        allow_estimates=allow_estimates,
    )  # fmt: skip
    if args.json:
        write_json_atomic(args.json, document)
        info(args, f"wrote {args.json}")
    if args.plot and results[0].placement.on_pim is not None:
        from placement.plots.common import save_figure
        from placement.plots.gantt import pim_gantt

        title = f"{Path(profile.model_path).name}, N_core={results[0].cores}"
        save_figure(pim_gantt(document, cores=results[0].cores, title=title), args.plot)
        info(args, f"wrote {args.plot}")
    if args.trace and results[0].placement.on_pim is not None:
        from placement.plots.timeline import pim_timeline
        from placement.plots.trace import write_trace

        write_trace(args.trace, pim_timeline(document, cores=results[0].cores), {
            "model": profile.model_path, "hardware": hw.name,
            "cpu_only_us": results[0].placement.cpu_only * 1e6,
        })  # fmt: skip
        info(args, f"wrote {args.trace}")
    missing = [r.cores for r in results if r.placement.on_pim is None]
    if missing:
        print(
            f"placement: no placement found within the time limit of {args.time_limit:g} s"
            f" for N_core {', '.join(map(str, missing))}; raise --time-limit",
            file=sys.stderr,
        )
        return EXIT_NO_SOLUTION
    if any(r.placement.result.status == SolveStatus.TIME_LIMIT for r in results):
        warn(
            "time limit reached; the placements above are the best found and verified, but"
            " not all proven optimal (see their gaps)"
        )
    return 0


def nest_profile(args: argparse.Namespace, pim_times: Any) -> Any:
    """The nest profile: loaded from ``--profile`` (it must match the model and the
    ``--host-times``/``--cache`` asked), or measured now as the profiling flags say, with
    the counters of ``--counters`` where given. Its flags are checked first, and
    ``pim_times`` and ``--counters`` against the nests before any is timed."""
    from placement.profiling.counters import load_counters
    from placement.profiling.nest_measure import model_sha256, with_counters_file
    from placement.profiling.nest_profile import NestProfile

    if args.counters and not Path(args.counters).is_file():
        raise PlacementError(f"{args.counters}: no such counters file")
    if args.counters_source is not None and args.profile:
        raise PlacementError(
            "--counters-source: applies when profiling; with --profile the saved profile's"
            " counters are used (--counters FILE replaces them)"
        )
    how = NestProfiling.from_args(args)  # what measures the nests sees these, not args
    if args.profile:
        sha = model_sha256(args.model)
        profile = NestProfile.load(args.profile)
        profile.check_matches(sha, args.model)
        for flag, wanted, held in (("--host-times", how.host_times, profile.host_times),
                                   ("--cache", how.cache, profile.cache)):  # fmt: skip
            if wanted is not None and wanted != held:
                raise PlacementError(
                    f"{flag} {wanted}: the profile {args.profile} was measured with"
                    f" {flag} {held}; re-profile with {flag} {wanted} or leave the flag out"
                )
        source = f"loaded from {args.profile}"
        report_representatives(how, profile)
    else:

        def check_files(ids: list[str]) -> None:  # before the nests are timed
            if pim_times is not None:
                pim_times.check_nests(ids)
            if args.counters:
                load_counters(args.counters, ids)

        profile = measure_nests_with_counters(args.model, how, check_files)
        for text in dict.fromkeys(profile.metadata.get("warnings") or []):
            warn(text)
        source = "measured now"
    meta = profile.metadata
    info(
        how,
        f"nest profile: {source} ({len(profile.nests)} nests, {meta.get('runs')} runs,"
        f" torch-mlir {meta.get('torch_mlir_version')}, {meta.get('machine')})",
    )
    return with_counters_file(profile, args.counters) if args.counters else profile


HANDLERS = {"cim": solve_cim, "pim": solve_pim}


def parse_cores(text: str) -> list[int]:
    """'32,64,128' -> [32, 64, 128]; anything else (also a count given twice) is a
    one-line error."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise PlacementError(
                f"--pim-cores must be a comma-separated list of positive whole numbers,"
                f" got {part!r} in {text!r}"
            )
        out.append(int(part))
    twice = repeated(out)
    if twice:
        raise PlacementError(
            f"--pim-cores {text}: {', '.join(map(str, twice))} given twice; give each once"
        )
    return out
