"""``placement profile``: measure host latencies once and save them for ``solve --profile``.

``--target cim``: per-operator ONNX Runtime latencies (a host profile); ``--target pim``:
per-loop-nest MLIR JIT times and counters per nest from ``--counters-source`` (a nest
profile): the Table 1 events where the host exposes them, else simulated ones.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from placement.cli.common import (
    Command,
    check_output_file,
    counters_warning,
    info,
    measure_host,
    measure_nests,
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


COUNTERS_SOURCES = ("auto", "perf", "simulated", "none")


def counters_source_option(group: argparse._ActionsContainer) -> None:
    """``--counters-source`` of ``--target pim`` (no default: see placement.cli.solve)."""
    group.add_argument(
        "--counters-source",
        choices=COUNTERS_SOURCES,
        help="PIM: where the rule's counters come from: perf = the Table 1 hardware events"
        " (Ice Lake PMU); simulated = a callgrind cache simulation of the program (needs"
        " valgrind and gcc; 3 runs at 10-100x the program's run time, more for vectorized"
        " code; labelled '~'); auto (default)"
        " = perf where available, else simulated where valgrind and gcc are installed,"
        " else none",
    )


HOST_TIMES_CHOICES = ("ort", "compiled", "jit")
CACHE_CHOICES = ("warm", "cold")


def host_times_options(group: argparse._ActionsContainer) -> None:
    """``--host-times`` and ``--cache`` of ``--target pim`` (no defaults here: applied by
    placement.profiling.nest_measure, so that their use with --target cim can be refused)."""
    group.add_argument(
        "--host-times",
        choices=HOST_TIMES_CHOICES,
        help="PIM: where each nest's host time T_cpu comes from: ort = ONNX Runtime's time"
        " of the nest's operator (1 thread) split over the operator's nests by their"
        " compiled-JIT shares (default for .onnx: the host users run today); compiled ="
        " the MLIR JIT of the host-optimized nests (default for .mlir); jit = the JIT of"
        " the nests as lowered, unoptimized (the paper's method, 30-500x slower than"
        " ONNX Runtime)",
    )
    group.add_argument(
        "--cache",
        choices=CACHE_CHOICES,
        help="PIM: cache state while timing the nests and ONNX Runtime: warm = runs back to"
        " back (default); cold = the last-level cache flushed before every run (a buffer of"
        " 2x the LLC, at least 64 MiB, is touched)",
    )


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
    profile = measure_nests_with_counters(args)
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


def measure_nests_with_counters(
    args: argparse.Namespace, check_nests: Callable[[list[str]], None] | None = None
) -> Any:
    """:func:`~placement.cli.common.measure_nests`, with a line on the time of each phase
    and one on the simulated counters' cost when the profile has them."""
    profile = measure_nests(args, check_nests)
    phases = profile.metadata.get("phase_seconds")
    if isinstance(phases, dict) and phases:
        load = (profile.metadata.get("machine_load") or {}).get("before")
        load_text = f" (load average {load:.1f} before)" if isinstance(load, float) else ""
        times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
        info(args, f"phases: {times}{load_text}")
    sim = profile.metadata.get("simulation")
    if profile.simulated and isinstance(sim, dict):
        info(
            args,
            f"simulated counters: callgrind cache simulation in {sim['total_seconds']:.1f} s"
            f" ({sim['warmup']} warm-up + 1 counted run)",
        )
    report_representatives(args, profile)
    return profile


def report_representatives(args: argparse.Namespace, profile: Any) -> None:
    """The line saying which nests' simulated counters are those of a representative layer
    (nothing when every nest was simulated)."""
    sim = profile.metadata.get("simulation")
    nests = sim.get("nests") if profile.simulated and isinstance(sim, dict) else None
    if isinstance(nests, dict) and nests.get("skipped_nests"):
        info(args, f"simulated counters: {nests['summary']}")


HANDLERS = {"cim": profile_cim, "pim": profile_pim}
