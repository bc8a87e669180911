"""``placement profile``: measure host latencies once and save them for ``solve --profile``.

``--target cim``: per-operator ONNX Runtime latencies (a host profile); ``--target pim``:
per-loop-nest MLIR JIT times and, where the host exposes them, Table 1 counters (a
nest profile).
"""

from __future__ import annotations

import argparse
from typing import Any

from placement.cli.common import (
    check_output_file,
    counters_warning,
    info,
    measure_host,
    measure_nests,
    profiling_options,
)


def register(sub: Any) -> None:
    """Add ``profile`` to the ``placement`` parser's subcommands."""
    profile = sub.add_parser(
        "profile",
        help="measure per-operator host latencies with ONNX Runtime and save them",
        description="Profile every operator of an ONNX model with ONNX Runtime on this machine "
        "(after warm-up, per operator the median over rounds of each round's fastest run) and"
        " save a profile reusable with 'solve --profile'.",
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
    profiling_options(profile)
    profile.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    profile.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return HANDLERS[args.target](args)


def profile_cim(args: argparse.Namespace) -> int:
    from placement.graph import load_graph

    graph = load_graph(args.model)  # validates the model before spending time on it
    profile = measure_host(args, graph.path)
    profile.save(args.output)
    info(args, f"saved profile of {len(profile.latencies)} nodes to {args.output}")
    return 0


def profile_pim(args: argparse.Namespace) -> int:
    check_output_file(args.output, "-o")
    profile = measure_nests(args)
    profile.save(args.output)
    info(args, f"saved nest profile of {len(profile.nests)} nests to {args.output}")
    reason = profile.counters_unavailable_reason
    if reason is not None:
        counters_warning(reason)
    return 0


HANDLERS = {"cim": profile_cim, "pim": profile_pim}
