"""``placement profile``: measure host latencies once and save them for ``solve --profile``.

``--target cim``: per-operator ONNX Runtime latencies (a host profile); ``--target pim``:
per-loop-nest MLIR JIT times and counters per nest from ``--counters-source`` (a nest
profile): the Table 1 events where the host exposes them, else simulated ones.
"""

from __future__ import annotations

import argparse
from typing import Any

from placement.cli.common import (
    Command,
    NestProfiling,
    check_output_file,
    counters_source_option,
    counters_warning,
    host_times_options,
    info,
    measure_host,
    measure_nests_with_counters,
    profiling_options,
    warn,
)
from placement.errors import PlacementError

COMMAND = Command(
    "profile",
    help="measure per-operator host latencies with ONNX Runtime and save them",
    description="Profile every operator of an ONNX model with ONNX Runtime on this machine "
    "(after warm-up, over at least --min-seconds, per operator its fastest run) and"
    " save a profile reusable with 'solve --profile'.",
)


def add_arguments(profile: argparse.ArgumentParser) -> None:
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
    profiling_options(profile)
    counters_source_option(profile)
    host_times_options(profile)
    profile.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def report_host_times(args: argparse.Namespace, profile: Any) -> None:
    """The baseline lines and the timing warnings of a nest profile measured now."""
    from placement.pim.output import baseline_lines

    for line in baseline_lines(profile):
        info(args, line)
    for text in dict.fromkeys(profile.metadata.get("warnings") or []):  # each once
        warn(text)


def run(args: argparse.Namespace) -> int:
    return HANDLERS[args.target](args)


def profile_cim(args: argparse.Namespace) -> int:
    from placement.graph import load_graph

    if args.counters_source is not None:
        raise PlacementError("--counters-source: a PIM option, needs --target pim")
    for flag in ("host_times", "cache"):
        if getattr(args, flag, None) is not None:
            raise PlacementError(f"--{flag.replace('_', '-')}: a PIM option, needs --target pim")
    check_output_file(args.output, "-o")
    graph = load_graph(args.model)  # validates the model before spending time on it
    profile = measure_host(args, graph.path)
    profile.save(args.output)
    info(args, f"saved profile of {len(profile.latencies)} nodes to {args.output}")
    return 0


def profile_pim(args: argparse.Namespace) -> int:
    check_output_file(args.output, "-o")
    profile = measure_nests_with_counters(args.model, NestProfiling.from_args(args))
    report_host_times(args, profile)
    if profile.host_dram_read is not None:
        from placement.profiling.dram_bandwidth import describe

        info(args, f"B_cpu (this host's DRAM read bandwidth, theta's scale in rule C3):"
                   f" {describe(profile.host_dram_read)}")  # fmt: skip
    profile.save(args.output)
    info(args, f"saved nest profile of {len(profile.nests)} nests to {args.output}")
    reason = profile.counters_unavailable_reason
    if reason is not None:
        counters_warning(reason)
    return 0


HANDLERS = {"cim": profile_cim, "pim": profile_pim}
