"""``placement calibrate --target pim``: Torch-PIM's calibration of the rule's theta and
sigma (Section 4.4) on this host and the user's models, written as a hardware TOML that
``placement solve --target pim --pim-hardware FILE`` accepts.

Every model is profiled now (the options of ``placement profile --target pim``) or
loaded from ``--profile FILE`` (one per model, in order); the procedure and its ground
truth are :mod:`placement.pim.calibration`'s, the report and the file
:mod:`placement.pim.calibration_output`'s.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from placement.cli.common import (
    EPILOG,
    Command,
    NestProfiling,
    check_output_file,
    counters_source_option,
    host_times_options,
    info,
    measure_nests_with_counters,
    profiling_options,
    warn,
)
from placement.devices.pim import AUTO_COPY, COPY_CHOICES, COPY_DESCRIPTIONS, resolve_copy
from placement.errors import PlacementError
from placement.hardware.pim import DEFAULT_PIM_PRESET

COMMAND = Command(
    "calibrate",
    help="calibrate the PIM rule's theta and sigma on this host's loop nests (Torch-PIM"
    " Section 4.4) and write a hardware TOML",
    description="Run Torch-PIM's threshold calibration (Section 4.4) on this host and the"
    " given models: per loop nest, whether offloading it alone pays end to end under the"
    " model (Eq. 9); theta swept over a range, the interval with the fewest false positives"
    " (then false negatives), its midpoint; sigma the same way on the nests C3 leaves"
    " undecided. Prints the agreement (the paper: 37/44 = 0.841) and the confusion counts,"
    " and writes a hardware TOML for 'solve --target pim --pim-hardware'.",
    epilog=EPILOG,
)
PROFILING_FLAGS = ("counters_source", "host_times", "cache")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "models", nargs="+", metavar="MODEL",
        help="ONNX files with static shapes (or .mlir at linalg level) whose nests calibrate",
    )  # fmt: skip
    parser.add_argument(
        "--target", choices=["pim"], required=True,
        help="pim: the Torch-PIM threshold rule (the only calibrated target)",
    )  # fmt: skip
    parser.add_argument(
        "-o", "--output", metavar="FILE.toml",
        help="required: the calibrated hardware file (the hardware's keys with the calibrated"
        " theta_ratio and sigma and this host's host_dram_gbps; provenance in comments)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="append", metavar="FILE",
        help="a saved nest profile ('profile --target pim'), once per MODEL in the same order;"
        " default: profile every model now",
    )  # fmt: skip
    pim = parser.add_argument_group("PIM machine (the ground truth's model)")
    pim.add_argument(
        "--pim-hardware", metavar="PRESET|FILE",
        help=f"PIM preset or TOML file (default {DEFAULT_PIM_PRESET})",
    )  # fmt: skip
    pim.add_argument(
        "--pim-cores", metavar="N",
        help="the PIM core count the rule and the ground truth are evaluated at (default: the"
        " hardware's)",
    )  # fmt: skip
    pim.add_argument(
        "--pim-times", action="append", metavar="FILE",
        help="PIM times per nest and core count (as 'solve --pim-times'), once per MODEL in the"
        " same order; they replace the analytical T_pim of the nests they name",
    )  # fmt: skip
    pim.add_argument(
        "--copy", choices=COPY_CHOICES,
        help="copy accounting of the ground truth (as 'solve --copy'; default auto: the"
        " hardware's memory architecture)",
    )  # fmt: skip
    pim.add_argument(
        "--allow-estimates", action="store_true",
        help="let C3 use fetch bytes / T_cpu where the off-core read counter is missing",
    )  # fmt: skip
    cal = parser.add_argument_group("calibration")
    cal.add_argument(
        "--theta-range", metavar="LO,HI",
        help="theta's sweep in GB/s on this host (default: the paper's 0.50-4.00 GB/s scaled"
        " by this host's B_cpu / the paper's 16.754 GB/s)",
    )  # fmt: skip
    cal.add_argument(
        "--sigma-range", metavar="LO,HI",
        help="sigma's sweep, fractions of backend cycles (default 0,1)",
    )  # fmt: skip
    prof = parser.add_argument_group("profiling (models without --profile)")
    profiling_options(prof)
    counters_source_option(prof)
    host_times_options(prof)
    out = parser.add_argument_group("output")
    out.add_argument("--json", metavar="FILE", help="write the calibration's full record")
    out.add_argument(
        "--details", action="store_true",
        help="print every segment of both sweeps and every nest's evidence",
    )  # fmt: skip
    out.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    from placement.hardware.pim import load_pim_hardware
    from placement.io import write_json_atomic, write_text_atomic
    from placement.pim.calibration import (
        PAPER_B_CPU_GBPS,
        PAPER_THETA_RANGE_GBPS,
        SIGMA_RANGE,
        calibrate,
        check_against_rule,
        check_range,
        nest_evidence,
    )
    from placement.pim.calibration_output import (
        Setting,
        calibration_document,
        evidence_lines,
        hardware_toml,
        model_labels,
        summary_lines,
    )
    from placement.pim.instance import build_instance
    from placement.pim.times import load_pim_times
    from placement.profiling.host import cpu_model
    from placement.tables import for_terminal

    # Everything the user typed is checked before anything is profiled.
    output = _output_path(args.output)
    if args.json:
        check_output_file(args.json, "--json")
    models = list(args.models)
    hw = load_pim_hardware(args.pim_hardware or DEFAULT_PIM_PRESET)
    copy = resolve_copy(args.copy or AUTO_COPY, hw.pim)
    cores = _one_core_count(args.pim_cores, hw.pim.cores)
    theta_gbps = _parse_range(args.theta_range, "--theta-range")
    sigma_range = _parse_range(args.sigma_range, "--sigma-range") or SIGMA_RANGE
    if theta_gbps is not None:
        check_range(*theta_gbps, "--theta-range")
    check_range(*sigma_range, "--sigma-range", upper=1.0)
    profiles = _per_model(args.profile, models, "--profile")
    times_files = _per_model(args.pim_times, models, "--pim-times")
    if profiles:
        given = [f"--{f.replace('_', '-')}" for f in PROFILING_FLAGS if getattr(args, f, None)]
        if given:
            raise PlacementError(
                f"{', '.join(given)}: apply when profiling; with --profile the saved profiles'"
                " are used"
            )
    pim_times = []
    for path in times_files or []:
        times = load_pim_times(path)
        times.check(hw.pim.memory, [cores])
        pim_times.append(times)
    labels = model_labels(models)

    evidence: list[Any] = []
    instances = []
    measured = []
    profile_kinds: dict[str, None] = {}
    for i, model in enumerate(models):
        info(args, f"[{i + 1}/{len(models)}] {model}")
        times = pim_times[i] if pim_times else None
        profile = _profile(args, model, profiles[i] if profiles else None, times)
        if times is not None:
            times.check_nests(profile.nest_ids)
        instance = build_instance(profile, hw.pim, cores, times)
        instances.append((labels[i], instance))
        evidence += nest_evidence(
            instance, labels[i], copy=copy, allow_estimates=args.allow_estimates
        )
        measured.append(profile.host_dram_read)
        profile_kinds[f"host times {profile.host_times}, {profile.cache} cache, counters"
              f" {profile.counter_source}"] = None  # fmt: skip

    b_cpu, b_cpu_text = _host_b_cpu(args, measured)
    if theta_gbps is None:
        theta_range = tuple(v / PAPER_B_CPU_GBPS for v in PAPER_THETA_RANGE_GBPS)
        range_text = (
            f"the paper's {PAPER_THETA_RANGE_GBPS[0]:.2f}-{PAPER_THETA_RANGE_GBPS[1]:.2f} GB/s"
            f" x this host's B_cpu / the paper's {PAPER_B_CPU_GBPS} GB/s"
        )
    else:
        theta_range = tuple(v * 1e9 / b_cpu for v in theta_gbps)
        range_text = "--theta-range"
    calibration = calibrate(
        evidence, b_cpu, theta_range=theta_range, sigma_range=sigma_range,  # type: ignore[arg-type]
        hardware_theta_ratio=hw.pim.theta_ratio, hardware_sigma=hw.pim.sigma,
    )  # fmt: skip
    check_against_rule(calibration, instances, allow_estimates=args.allow_estimates)

    host = f"{cpu_model()} ({platform.machine()}, {os.cpu_count() or 1} CPUs)"
    t_pim = (
        "the analytical PIM model (not measured)"
        if not pim_times
        else "--pim-times " + ", ".join(t.label for t in pim_times)
        + " for the nests they name, the analytical model for the others"
    )
    setting = Setting(
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        host=host, models=tuple(labels), cores=cores, hardware=hw.name,
        memory=hw.pim.memory_text(), copy=f"{copy} ({COPY_DESCRIPTIONS[copy]})", t_pim=t_pim,
        profiles="; ".join(profile_kinds), b_cpu=b_cpu_text, theta_range=range_text,
    )  # fmt: skip
    for line in for_terminal(summary_lines(calibration, setting, details=args.details)):
        print(line)
    if args.details:
        for line in for_terminal(["", *evidence_lines(calibration)]):
            print(line)
    text = hardware_toml(hw, calibration, setting, host_name=cpu_model(),
                         host_arch=platform.machine())  # fmt: skip
    write_text_atomic(output, text, "calibrated hardware file")
    info(args, f"wrote {output}: use it with 'placement solve MODEL --target pim"
               f" --pim-hardware {output}'")  # fmt: skip
    if args.json:
        write_json_atomic(args.json, calibration_document(calibration, setting, hw, str(output)))
        info(args, f"wrote {args.json}")
    return 0


def _output_path(output: str | None) -> Path:
    if not output:
        raise PlacementError("-o FILE.toml is required: where to write the calibrated hardware")
    path = Path(output)
    if path.suffix.lower() != ".toml":
        raise PlacementError(
            f"-o {output}: the calibrated hardware file must end in .toml ('solve"
            " --pim-hardware' reads TOML)"
        )
    check_output_file(output, "-o")
    return path


def _one_core_count(text: str | None, default: int) -> int:
    from placement.cli.solve import parse_cores

    if text is None:
        return default
    cores = parse_cores(text)
    if len(cores) != 1:
        raise PlacementError(
            f"--pim-cores {text}: give one core count (the calibration evaluates the rule and"
            " the ground truth at one N_core)"
        )
    return cores[0]


def _parse_range(text: str | None, flag: str) -> tuple[float, float] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise PlacementError(f"{flag} {text}: expected LO,HI (two numbers)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise PlacementError(f"{flag} {text}: expected two finite numbers")
    return lo, hi


def _per_model(files: list[str] | None, models: list[str], flag: str) -> list[str] | None:
    if not files:
        return None
    if len(files) != len(models):
        raise PlacementError(
            f"{flag}: given {len(files)} times for {len(models)} model(s); give it once per"
            " MODEL, in the same order, or not at all"
        )
    return files


def _profile(args: argparse.Namespace, model: str, saved: str | None, times: Any) -> Any:
    """The nest profile of ``model``: loaded from ``saved`` or measured now."""
    from placement.profiling.nest_measure import model_sha256
    from placement.profiling.nest_profile import NestProfile

    if saved is not None:
        profile = NestProfile.load(saved)
        profile.check_matches(model_sha256(model), model)
        info(args, f"  nest profile: loaded from {saved} ({len(profile.nests)} nests)")
        return profile
    check = None if times is None else times.check_nests
    profile = measure_nests_with_counters(model, NestProfiling.from_args(args), check)
    for text in dict.fromkeys(profile.metadata.get("warnings") or []):
        warn(text)
    return profile


def _host_b_cpu(args: argparse.Namespace, measured: list[Any]) -> tuple[float, str]:
    """This host's B_cpu (B/s, 4 significant digits as the file states it) and where it
    comes from: the profiles' measurements, else one made now."""
    from placement.pim.calibration import host_b_cpu
    from placement.profiling.dram_bandwidth import describe, measure_dram_read

    values = [r["gbps"] * 1e9 for r in measured if r is not None]
    b_cpu = host_b_cpu(values)
    missing = sum(r is None for r in measured)
    if b_cpu is None:
        info(args, "measuring this host's DRAM read bandwidth (B_cpu): no profile holds one")
        record = measure_dram_read().to_json()
        b_cpu = record["gbps"] * 1e9
        text = f"measured now, no profile holds one: {describe(record)}"
    else:
        first = next(r for r in measured if r is not None)
        text = (
            f"median of {len(values)} profiles' measurements"
            f" ({', '.join(f'{v / 1e9:.3g}' for v in values)} GB/s), each a"
            f" {first.get('method', 'measurement')}"
            if len(values) > 1
            else f"the profile's measurement, {describe(first)}"
        )
    if missing:
        text += (
            f"; the {missing} profile(s) without a measurement are scaled by it too, as the"
            " written file makes the rule do"
        )
    return float(f"{b_cpu:.4g}"), text
