"""What the subcommands share: exit codes, option groups, flag checks, messages, measuring.

Conventions: progress and information on stderr (silenced by ``-q``), results on
stdout, every user error a one-line :class:`~placement.errors.PlacementError`
(``placement: error: ...``, exit 1), warnings as ``placement: warning: ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import platform
import sys
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from placement.errors import PlacementError
from placement.io import check_output_file as check_writable
from placement.profiling.ort.robust import (
    AUTO_TIME_BUDGET,
    AUTO_TOLERANCE,
    MIN_SECONDS,
    SPACED_PAUSE_SECONDS,
    parse_runs,
)
from placement.solvers.names import FORMULATION_NAMES

EXIT_ERROR = 1  # bad input, solver failure, failed verification
EXIT_USAGE = 2  # argparse's own code for bad command lines
EXIT_NO_SOLUTION = 3  # time limit reached before any placement was found
EPILOG = (
    "exit codes: 0 success (a time-limited solve prints its gap and a warning), 1 error,"
    " 2 usage error, 3 time limit reached without any placement"
)


@dataclasses.dataclass(frozen=True)
class Command:
    """How a subcommand appears in ``placement --help`` and its own ``--help``; the module
    that declares it as ``COMMAND`` also has ``add_arguments(parser)`` and ``run(args)``."""

    name: str
    help: str
    description: str | None = None
    epilog: str | None = None
    formatter_class: type[argparse.HelpFormatter] = argparse.HelpFormatter


OPT_LEVELS = ("disable", "basic", "extended", "all")  # ONNX Runtime graph optimization
CIM_OVERRIDE_FLAGS = (
    "crossbars", "t_mvm_ns", "bus_gbps", "internal_gbps", "elem_bytes", "crossbar_size",
)  # fmt: skip


def info(args: argparse.Namespace | NestProfiling, text: str) -> None:
    """A progress or information line on stderr, unless ``-q`` (``args.quiet``)."""
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)


def warn(text: str) -> None:
    print(f"placement: warning: {text}", file=sys.stderr)


def package_version() -> str:
    try:
        return version("placement")
    except PackageNotFoundError:
        return "unknown"


# --------------------------------------------------------------------------- option groups


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


FORMULATION_CHOICES = ("auto", *FORMULATION_NAMES)


def formulation_option(group: argparse._ActionsContainer) -> None:
    """``--formulation``, with the same choices, default and words wherever a CIM model is
    built (``solve``, ``export``)."""
    group.add_argument(
        "--formulation",
        choices=list(FORMULATION_CHOICES),
        default="auto",
        help="CIM model: the paper's Eqs. 5-14 ('faithful'), plus valid bounds ('bounded'),"
        " or plus per-pair big-M from a heuristic schedule ('tightened'); all have the same"
        " optimum. 'auto' (default): bounded for near-chain graphs, tightened otherwise",
    )


def profiling_options(group: argparse._ActionsContainer) -> None:
    """How host latencies are measured (ONNX Runtime, or the MLIR JIT for PIM).

    ``--runs`` takes a number or ``auto``. ``args.runs`` is always an integer (``auto``
    stores the default 20, which the PIM target uses) and ``args.runs_auto`` says whether
    ``auto`` was given (:func:`measure_host` then measures until stable).
    """
    default_runs = 20

    def runs_type(text: str) -> int | str:
        try:
            return parse_runs(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    class RunsAction(argparse.Action):
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            auto = values == "auto"
            setattr(namespace, self.dest, default_runs if auto else values)
            namespace.runs_auto = auto

    group.add_argument(
        "--runs",
        type=runs_type,
        action=RunsAction,
        default=default_runs,
        metavar="N|auto",
        help=f"measured runs (default {default_runs}), taken in rounds of up to 4 back-to-back"
        " runs with a short pause between rounds (then more, see --min-seconds); per"
        " operator its fastest run. 'auto' (ONNX Runtime): add rounds of 4 runs until the"
        f" fastest run time moved by at most {100 * AUTO_TOLERANCE:g} %%"
        f" over the last 3 rounds (at least 5 rounds) or {AUTO_TIME_BUDGET:g} s are spent;"
        f" with --target pim, 'auto' means {default_runs} runs",
    )
    group.set_defaults(runs_auto=False)
    group.add_argument("--warmup", type=int, default=5, help="warm-up runs (default 5)")
    group.add_argument(
        "--min-seconds",
        type=float,
        default=MIN_SECONDS,
        metavar="S",
        help="ONNX Runtime: when the --runs runs took less, add rounds"
        f" {SPACED_PAUSE_SECONDS:g} s apart until"
        f" the profile spans S seconds (default {MIN_SECONDS:g}; 0: only --runs), so that"
        " it reaches past the slow spells of a shared machine",
    )
    group.add_argument(
        "--threads", type=int, default=1,
        help="ONNX Runtime intra-op threads when profiling (default 1; solver threads:"
        " --solver-threads)",
    )  # fmt: skip
    group.add_argument(
        "--optimization",
        choices=OPT_LEVELS,
        default="all",
        help="ORT graph optimization level (default all)",
    )
    memory_limit_option(group)


def memory_limit_option(group: argparse._ActionsContainer) -> None:
    """``--memory-limit GB`` of the commands that run a model (``args.memory_limit``)."""

    def gigabytes(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"expected a positive number of GB, got {text!r}")
        return value

    group.add_argument(
        "--memory-limit",
        type=gigabytes,
        metavar="GB",
        help="refuse a model whose run needs more memory than this, estimated from its"
        " static shapes before anything is allocated (default: half the available memory)",
    )


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


# --------------------------------------------------------------------------- flag checks


def check_solver_flags(args: argparse.Namespace) -> None:
    """Fail before spending time on profiling."""
    if not args.time_limit > 0:
        raise PlacementError(
            f"--time-limit must be a positive number of seconds, got {args.time_limit}"
        )
    if not args.gap >= 0:
        raise PlacementError(f"--gap must be a non-negative fraction, got {args.gap}")
    if args.solver_threads is not None and args.solver_threads < 1:
        raise PlacementError(f"--solver-threads must be at least 1, got {args.solver_threads}")
    if args.workers is not None:
        from placement.solvers.workers import parse_workers

        args.workers = parse_workers(args.workers, "--workers")


def check_override_flags(args: argparse.Namespace) -> None:
    """The CIM hardware overrides given must be positive (NaN is refused too)."""
    for flag in CIM_OVERRIDE_FLAGS:
        value = getattr(args, flag)
        if value is not None and not value > 0:
            raise PlacementError(f"--{flag.replace('_', '-')} must be positive, got {value}")


def check_output_file(path: str, flag: str) -> None:
    """Fail before hours of work if the output cannot be written where asked."""
    check_writable(path, f"{flag} {path}")


# --------------------------------------------------------------------------- hardware


def modelled_host(args: argparse.Namespace) -> bool:
    """True when ``--hardware`` names hardware whose host latencies come from the host
    model (``[host] latency = "model"``): nothing needs to be profiled then."""
    from placement.hardware.cim import load_hardware

    return bool(args.hardware) and load_hardware(args.hardware).host.modelled


def cim_hardware(
    args: argparse.Namespace,
    profiled_machine: str | None,
    profile_meta: dict[str, Any] | None = None,
) -> Any:
    """The CIM :class:`~placement.hardware.cim.Hardware` of the flags; warns when the
    profile was measured on another kind of host than the hardware describes
    (:func:`placement.hardware.hostcheck.host_latency_source`)."""
    from placement.hardware.base import default_preset_for
    from placement.hardware.cim import load_hardware, with_overrides
    from placement.hardware.hostcheck import host_latency_source

    if args.hardware:
        hw = load_hardware(args.hardware)
        origin = "chosen"
    else:
        hw = load_hardware(default_preset_for(profiled_machine))
        origin = f"default for a host profiled on {profiled_machine or platform.machine()}"
    check_override_flags(args)
    overrides = {flag: getattr(args, flag) for flag in CIM_OVERRIDE_FLAGS}
    size = overrides.pop("crossbar_size")  # square crossbars: rows = cols
    hw = with_overrides(hw, **overrides, crossbar_rows=size, crossbar_cols=size)
    info(args, f"hardware ({origin}): {hw.describe()}")
    meta = dict(profile_meta or {})
    if profiled_machine:
        meta.setdefault("machine", profiled_machine)
    source = host_latency_source(hw.name, hw.host, meta)
    if source.warning:
        warn(source.warning)
    return hw


# --------------------------------------------------------------------------- measuring


def run_counter(
    args: argparse.Namespace | NestProfiling, label: str
) -> Callable[[int, int], None]:
    """Progress of ``label: run done/total`` on stderr: redrawn in place on a terminal,
    a few lines in logs, nothing with ``-q``."""
    interactive = sys.stderr.isatty()

    def progress(done: int, runs: int) -> None:
        if getattr(args, "quiet", False):
            return
        text = f"{label}: run {done}/{runs}"
        if interactive:
            print(f"\r{text}", end="\n" if done == runs else "", file=sys.stderr, flush=True)
        elif done == runs or done % max(1, runs // 4) == 0:
            print(text, file=sys.stderr, flush=True)

    return progress


def profiled_line(runs: int, warmup: int, started: float, detail: str = "") -> str:
    """"profiled 20 runs (+5 warm-up) in 3.1 s (detail)": the measured runs counted as the
    run counter counts them (``run 20/20``), the warm-up runs beside them."""
    warm = f" (+{warmup} warm-up)" if warmup else ""
    extra = f" ({detail})" if detail else ""
    return f"profiled {runs} runs{warm} in {time.perf_counter() - started:.1f} s{extra}"


def measure_host(args: argparse.Namespace, model_path: str) -> Any:
    """Profile ``model_path`` with ONNX Runtime as the flags say (a HostProfile)."""
    from placement.profiling.ort.measure import profile_model

    started = time.perf_counter()
    profile = profile_model(
        model_path,
        runs="auto" if getattr(args, "runs_auto", False) else args.runs,
        warmup=args.warmup,
        min_seconds=args.min_seconds,
        intra_op_threads=args.threads,
        optimization=args.optimization,
        progress=run_counter(args, "profiling with ONNX Runtime"),
        memory_limit_gb=args.memory_limit,
    )
    meta = profile.metadata
    how = f"{meta['rounds']} rounds" if "rounds" in meta else ""
    if "stopped" in meta:
        how += f", --runs auto stopped: {meta['stopped']}"
    info(args, profiled_line(meta.get("runs", args.runs), args.warmup, started, how))
    for text in dict.fromkeys(meta.get("warnings", [])):  # each once, in order
        warn(text)
    return profile


@dataclasses.dataclass(frozen=True)
class NestProfiling:
    """How ``--target pim`` measures a model's loop nests: the profiling flags, read from
    ``args`` once (None: the default of
    :func:`~placement.profiling.nest_measure.profile_nests`), and ``-q``. What lowers and
    measures the nests takes these and the model's path, not the flags."""

    runs: int
    warmup: int
    min_seconds: float = MIN_SECONDS  # --min-seconds: the ONNX Runtime profile's span
    memory_limit_gb: float | None = None
    counters: str | None = None  # --counters-source
    host_times: str | None = None
    cache: str | None = None
    quiet: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> NestProfiling:
        """The settings of the flags; a command without ``--counters-source``,
        ``--host-times`` or ``--cache`` (``sweep``) measures with their defaults."""
        return cls(
            runs=args.runs,
            warmup=args.warmup,
            min_seconds=getattr(args, "min_seconds", MIN_SECONDS),
            memory_limit_gb=args.memory_limit,
            counters=getattr(args, "counters_source", None),
            host_times=getattr(args, "host_times", None),
            cache=getattr(args, "cache", None),
            quiet=bool(getattr(args, "quiet", False)),
        )


def lowered_line(model: str, program: Any, seconds: float) -> str:
    """"model: m.onnx (onnx), 49 loop nests, lowered in 0.31 s"."""
    return (
        f"model: {model} ({program.source_kind}), {len(program.nests)} loop nests,"
        f" lowered in {seconds:.2f} s"
    )


def measure_nests(
    model: str, how: NestProfiling, check_nests: Callable[[list[str]], None] | None = None
) -> Any:
    """Lower ``model`` and time its loop nests in the MLIR JIT (a NestProfile), with the
    counters and host times ``how`` asks for, and a line on each step.

    ``check_nests`` is called with the nest ids once the model is lowered, before anything
    is timed (files keyed by nest id fail fast). An impossible choice, such as
    ``--host-times ort`` for .mlir, fails before anything is lowered."""
    from placement.profiling.nest_measure import profile_nests

    counters = {
        "timing": run_counter(how, "timing loop nests in the MLIR JIT"),
        "counters": run_counter(how, "counting Table 1 events"),
    }

    def progress(phase: str, done: int, runs: int) -> None:
        counters.get(phase, run_counter(how, phase))(done, runs)

    def lowered(program: Any, seconds: float) -> None:
        info(how, lowered_line(model, program, seconds))
        if check_nests is not None:
            check_nests([n.id for n in program.nests])

    started = time.perf_counter()
    profile = profile_nests(
        model, how.runs, how.warmup, progress=progress, lowered=lowered,
        memory_limit_gb=how.memory_limit_gb, counters=how.counters,
        host_times=how.host_times, cache=how.cache, min_seconds=how.min_seconds,
    )  # fmt: skip
    meta = profile.metadata
    checked = (
        f", outputs match ONNX Runtime (max abs error {meta['max_abs_error']:.3g})"
        if meta.get("checked_against")
        else ""
    )
    overhead = f"marker overhead {meta.get('marker_pair_ns', 0):.0f} ns per nest"
    info(how, profiled_line(how.runs, how.warmup, started, overhead) + checked)
    return profile


def measure_nests_with_counters(
    model: str, how: NestProfiling, check_nests: Callable[[list[str]], None] | None = None
) -> Any:
    """:func:`measure_nests`, with a line on the time of each phase and one on the
    simulated counters' cost when the profile has them."""
    profile = measure_nests(model, how, check_nests)
    phases = profile.metadata.get("phase_seconds")
    if isinstance(phases, dict) and phases:
        load = (profile.metadata.get("machine_load") or {}).get("before")
        load_text = f" (load average {load:.1f} before)" if isinstance(load, float) else ""
        times = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items())
        info(how, f"phases: {times}{load_text}")
    sim = profile.metadata.get("simulation")
    if profile.simulated and isinstance(sim, dict):
        info(
            how,
            f"simulated counters: callgrind cache simulation in {sim['total_seconds']:.1f} s"
            f" ({sim['warmup']} warm-up + 1 counted run)",
        )
    report_representatives(how, profile)
    return profile


def report_representatives(out: argparse.Namespace | NestProfiling, profile: Any) -> None:
    """The line saying which nests' simulated counters are those of a representative layer
    (nothing when every nest was simulated)."""
    sim = profile.metadata.get("simulation")
    nests = sim.get("nests") if profile.simulated and isinstance(sim, dict) else None
    if isinstance(nests, dict) and nests.get("skipped_nests"):
        info(out, f"simulated counters: {nests['summary']}")


def counters_warning(reason: str) -> None:
    warn(
        f"hardware counters unavailable: {reason}. The profile holds times only; load"
        " counters measured elsewhere with `solve --counters FILE`"
    )
