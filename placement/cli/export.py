"""``placement export``: the CIM placement ILP of a model as MPS or LP for another solver
(engine: :mod:`placement.bench.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from placement.cli.common import (
    Command,
    check_output_file,
    check_override_flags,
    cim_hardware,
    cim_hardware_options,
    formulation_option,
    info,
    profiling_options,
)
from placement.errors import PlacementError

COMMAND = Command(
    "export",
    help="write the placement ILP of a model as MPS or LP for another solver",
    description="Build the CIM placement ILP of an ONNX model (as 'solve' would) and write"
    " it as MPS or LP (by the suffix of -o) with symbolic names. Times in the file are in"
    " the model's unit (printed, and written to OUT.json): objective x unit = seconds.",
)


def add_arguments(export: argparse.ArgumentParser) -> None:
    export.add_argument("model", help="ONNX file with static shapes")
    export.add_argument("-o", "--output", required=True, metavar="FILE.mps|FILE.lp")
    export.add_argument("--target", choices=["cim"], default="cim",
                        help="accelerator kind (only cim has an exportable ILP here)")
    formulation_option(export)
    cim_hardware_options(export)
    prof = export.add_argument_group("host latencies")
    prof.add_argument("--profile", metavar="FILE", help="a saved profile instead of measuring")

    profiling_options(prof)
    export.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    from placement.bench.export import FORMATS, export_model
    from placement.cim.instance import cim_instance
    from placement.cli.solve import host_profile
    from placement.graph import load_graph
    from placement.hardware.hostcheck import host_latency_source

    out = Path(args.output)
    if out.suffix.lower() not in FORMATS:
        raise PlacementError(f"{out}: the output must end in .mps or .lp")
    check_output_file(str(out), "-o")
    check_override_flags(args)
    graph = load_graph(args.model)
    profile, meta = host_profile(args, graph)
    hw = cim_hardware(args, meta.get("machine") if meta else None, meta)
    instance = cim_instance(graph, profile.latencies if profile else None, hw.cim, host=hw.host)
    exported = export_model(instance, args.formulation, out, model_path=str(graph.path),
                            hardware=hw.to_json(),
                            host=host_latency_source(hw.name, hw.host, meta).to_json())
    size = exported.size
    info(args, f"{size.variables} variables ({size.binaries} binary), {size.constraints} rows")
    print(f"wrote {out} ({exported.formulation} formulation; objective x"
          f" {exported.time_unit:g} = makespan in seconds) and {exported.sidecar}")
    return 0
