"""``placement bench`` and ``placement export`` (conventions of :mod:`placement.cli`:
progress on stderr, tables on stdout, user errors as one-line PlacementErrors)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from placement.errors import PlacementError


def register(sub: Any) -> None:
    """Add the ``bench`` and ``export`` subcommands to the ``placement`` parser."""
    from placement.bench.run import FORMULATION_NAMES, GRIDS, MODES

    bench = sub.add_parser(
        "bench",
        help="run networks x DSE grid x formulations x solvers; write runs.csv/json + Table I",
        description="Benchmark the CIM placement ILP (paper Table I): for every network, hardware"
        " preset and grid point, run every formulation with every solver, verify every"
        " placement, write OUT/runs.csv, OUT/runs.json, OUT/summary.{txt,csv} and print the"
        " Table-I-shaped summary. Host latencies are profiled once per network and cached in"
        " OUT/profiles/.",
    )
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
                       help=f"comma-separated, of {', '.join(MODES)} (default highs)")
    bench.add_argument("--skip-unavailable", action="store_true",
                       help="record unavailable solvers as 'unavailable' rows instead of failing")
    bench.add_argument("--time-limit", type=float, default=60.0, help="per run, s (default 60)")
    bench.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap (default 1e-4)")
    bench.add_argument("--threads", type=int, default=2, help="solver threads (default 2)")
    bench.add_argument("--repeat", type=int, default=1, help="runs per combination (default 1)")
    bench.add_argument("--profile-runs", type=int, default=20,
                       help="ONNX Runtime measured runs when profiling (default 20)")
    bench.add_argument("-o", "--output", default="bench_out", metavar="DIR",
                       help="output directory (default bench_out)")
    bench.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    bench.set_defaults(handler=cmd_bench)

    export = sub.add_parser(
        "export",
        help="write the placement ILP of a model as MPS or LP for another solver",
        description="Build the CIM placement ILP of an ONNX model (as 'solve' would) and write"
        " it as MPS or LP (by the suffix of -o) with symbolic names. Times in the file are in"
        " the model's unit (printed, and written to OUT.json): objective x unit = seconds.",
    )
    export.add_argument("model", help="ONNX file with static shapes")
    export.add_argument("-o", "--output", required=True, metavar="FILE.mps|FILE.lp")
    export.add_argument("--target", choices=["cim"], default="cim",
                        help="accelerator kind (only cim has an exportable ILP here)")
    export.add_argument("--formulation", choices=list(FORMULATION_NAMES), default="tightened",
                        help="faithful: Eqs. 5-14; tightened (default): with valid inequalities"
                        " and the heuristic's makespan as the row T <= UB")
    from placement.cli import _profiling_options, cim_hardware_options

    cim_hardware_options(export)
    prof = export.add_argument_group("host latencies")
    prof.add_argument("--profile", metavar="FILE", help="a saved profile instead of measuring")

    _profiling_options(prof)
    export.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    export.set_defaults(handler=cmd_export)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def cmd_bench(args: argparse.Namespace) -> int:
    from placement.bench.run import check_solvers, format_summary, run_bench, summarize

    if not args.time_limit > 0:
        raise PlacementError(f"--time-limit must be positive, got {args.time_limit}")
    if not args.gap >= 0:
        raise PlacementError(f"--gap must be a non-negative fraction, got {args.gap}")
    if args.threads < 1:
        raise PlacementError(f"--threads must be at least 1, got {args.threads}")
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
        threads=args.threads,
        repeat=args.repeat,
        profile_runs=args.profile_runs,
        progress=None if args.quiet else sys.stderr,
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


def cmd_export(args: argparse.Namespace) -> int:
    import pyomo.environ as pyo

    from placement.bench.export import FORMATS, write_model
    from placement.cim.instance import cim_instance
    from placement.cli import _check_override_flags, _hardware, _info, _measure
    from placement.graph import load_graph
    from placement.models.cim.build import build_cim_model, formulation_families
    from placement.profiling.host_profile import HostProfile
    from placement.solvers.highs import model_size

    out = Path(args.output)
    if out.suffix.lower() not in FORMATS:
        raise PlacementError(f"{out}: the output must end in .mps or .lp")
    _check_override_flags(args)
    graph = load_graph(args.model)
    if args.profile:
        profile = HostProfile.load(args.profile)
        profile.check_matches(graph.sha256, graph.path)
    else:
        profile = _measure(args, graph.path)
    hw = _hardware(args, profile.metadata.get("machine"))
    instance = cim_instance(graph, profile.latencies, hw.cim)
    model = build_cim_model(instance, families=formulation_families(args.formulation))
    write_model(model, out)
    unit = pyo.value(model.time_unit)
    size = model_size(model)
    sidecar = out.with_name(out.name + ".json")
    sidecar.write_text(json.dumps({
        "model": str(graph.path),
        "formulation": args.formulation,
        "time_unit_seconds": unit,
        "objective": "makespan T in time units (x time_unit_seconds = seconds)",
        "variables": {"host[v]": "1 = operator v on the host CPU, 0 = on CIM",
                      "start[v]": "start time", "finish[v]": "finish time",
                      "transfer[u,v]": "1 = u and v on different devices",
                      "order[u,v]": "1 = u before v on the host (parallel pairs)"},
        "hardware": hw.to_json(),
        "size": {"variables": size.variables, "binaries": size.binaries,
                 "constraints": size.constraints},
        "operators": len(instance.operators),
        "parallel_pairs": len(instance.parallel_pairs),
    }, indent=2) + "\n")
    _info(args, f"{size.variables} variables ({size.binaries} binary), {size.constraints} rows")
    print(f"wrote {out} ({args.formulation}; objective x {unit:g} = makespan in seconds)"
          f" and {sidecar}")
    return 0
