"""The PIM side of the ``placement`` command: ``nests``, ``profile --target pim``,
``solve --target pim``. Conventions are those of :mod:`placement.cli`: info lines on
stderr (silenced by ``-q``), the summary on stdout, every user error a one-line
:class:`~placement.errors.PlacementError`, ``--json``/``-o`` written atomically.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.io import write_json_atomic
from placement.pim.rules import fmt_bandwidth, fmt_time
from placement.solvers.base import SolveStatus

DEFAULT_PIM_HARDWARE = "pim-icelake"
DEFAULT_PIM_CORES = "32,64,128"  # the paper's sweep (Table 2)
DEFAULT_COPY = "upper_bound"  # the paper's Eq. 8; "exact" is this project's refinement
COPY_CHOICES = ("upper_bound", "exact")
GRANULARITY_CHOICES = ("loop", "operator")
# solve options that only mean something for the CIM target
CIM_ONLY = ("hardware", "crossbars", "t_mvm_ns", "bus_gbps", "internal_gbps", "elem_bytes",
            "crossbar_size")  # fmt: skip
PIM_ONLY = ("pim_hardware", "pim_cores", "counters", "copy", "granularity", "allow_estimates")
EXIT_NO_SOLUTION = 3


def add_pim_solve_arguments(parser_or_group: argparse._ActionsContainer) -> None:
    """The ``solve`` options of ``--target pim`` (defaults applied in :func:`cmd_solve_pim`,
    so that their use with ``--target cim`` can be detected and refused)."""
    g = parser_or_group
    g.add_argument(
        "--pim-hardware",
        metavar="PRESET|FILE",
        help=f"PIM preset or TOML file (default {DEFAULT_PIM_HARDWARE})",
    )
    g.add_argument(
        "--pim-cores",
        metavar="N[,N...]",
        help=f"PIM core counts to evaluate, comma-separated (default {DEFAULT_PIM_CORES})",
    )
    g.add_argument(
        "--counters",
        metavar="FILE",
        help="Table 1 counters per nest measured elsewhere (CSV: nest_id + the five events;"
        " or JSON keyed by nest id); replaces the profile's counters",
    )
    g.add_argument(
        "--copy",
        choices=COPY_CHOICES,
        help="copy accounting: upper_bound = the paper's Eq. 8 (default), exact = residency"
        " within PIM segments",
    )
    g.add_argument(
        "--granularity",
        choices=GRANULARITY_CHOICES,
        help="model decides per loop nest (default) or per ONNX operator",
    )
    g.add_argument(
        "--allow-estimates",
        action="store_true",
        default=None,
        help="let rule C3 use read bandwidth estimated as fetch bytes / T_cpu where the"
        " off-core read counter is missing (labelled '*')",
    )


def pim_only_flags_given(args: argparse.Namespace) -> list[str]:
    """PIM options present on the command line (for refusing them with --target cim)."""
    return [f"--{k.replace('_', '-')}" for k in PIM_ONLY if getattr(args, k, None) is not None]


# --------------------------------------------------------------------------- nests


def cmd_nests(args: argparse.Namespace) -> int:
    from placement.pim.pipeline import lower_model, model_sha256

    sha = model_sha256(args.model)
    started = time.perf_counter()
    program = lower_model(args.model)
    _info(
        args,
        f"model: {args.model} ({program.source_kind}), {len(program.nests)} loop nests,"
        f" lowered in {time.perf_counter() - started:.2f} s",
    )
    for line in nest_table(program.nests):
        print(line)
    if args.json:
        document = {
            "format": "placement-nests",
            "version": 1,
            "model": {"path": str(args.model), "sha256": sha, "source_kind": program.source_kind},
            "nests": [n.to_json() for n in program.nests],
        }
        write_json_atomic(args.json, document)
        _info(args, f"wrote {args.json}")
    return 0


def nest_table(nests: Sequence[Any]) -> list[str]:
    rows = [
        f"{'nest':<6}{'origin':<30}{'linalg op':<17}{'N_iter':>10}{'N_total':>12}"
        f"{'trips':>7}{'fetch':>11}{'flush':>11}"
    ]
    for n in nests:
        rows.append(
            f"{n.id:<6}{_origin(n)[:29]:<30}{n.linalg_op.removeprefix('linalg.')[:16]:<17}"
            f"{n.n_iter:>10}{n.n_total:>12}{n.trip_count:>7}"
            f"{fmt_bytes(n.fetch_bytes):>11}{fmt_bytes(n.flush_bytes):>11}"
        )
    return rows


# --------------------------------------------------------------------------- profile


def cmd_profile_pim(args: argparse.Namespace) -> int:
    _check_output_dir(args.output, "-o")
    profile = _profile(args)
    profile.save(args.output)
    _info(args, f"saved nest profile of {len(profile.nests)} nests to {args.output}")
    reason = profile.counters_unavailable_reason
    if reason is not None:
        _counters_warning(reason)
    return 0


def _profile(args: argparse.Namespace) -> Any:
    from placement.pim.pipeline import lower_model, model_sha256, profile_nests

    model_sha256(args.model)  # a missing file fails before torch-mlir is loaded
    started = time.perf_counter()
    program = lower_model(args.model)
    _info(
        args,
        f"model: {args.model} ({program.source_kind}), {len(program.nests)} loop nests,"
        f" lowered in {time.perf_counter() - started:.2f} s",
    )
    interactive = sys.stderr.isatty()
    label = {"timing": "timing loop nests in the MLIR JIT", "counters": "counting Table 1 events"}

    def progress(phase: str, done: int, runs: int) -> None:
        if args.quiet:
            return
        text = f"{label.get(phase, phase)}: run {done}/{runs}"
        if interactive:  # one line, redrawn in place
            print(f"\r{text}", end="\n" if done == runs else "", file=sys.stderr, flush=True)
        elif done == runs or done % max(1, runs // 4) == 0:  # a few lines in logs
            print(text, file=sys.stderr, flush=True)

    started = time.perf_counter()
    profile = profile_nests(args.model, args.runs, args.warmup, progress=progress, program=program)
    meta = profile.metadata
    checked = (
        f", outputs match ONNX Runtime (max abs error {meta['max_abs_error']:.3g})"
        if meta.get("checked_against")
        else ""
    )
    _info(
        args,
        f"profiled {args.warmup + args.runs} runs in {time.perf_counter() - started:.1f} s"
        f" (marker overhead {meta.get('marker_pair_ns', 0):.0f} ns per nest){checked}",
    )
    return profile


# --------------------------------------------------------------------------- solve


def cmd_solve_pim(args: argparse.Namespace) -> int:
    from placement.cli import _check_solver_flags
    from placement.hardware.pim import load_pim_hardware
    from placement.pim.pipeline import (
        model_sha256,
        pim_document,
        solve_pim_for_cores,
        with_counters_file,
    )
    from placement.profiling.nest_profile import NestProfile

    # Everything the user typed is checked before any lowering, timing or solving.
    cim_flags = [f"--{k.replace('_', '-')}" for k in CIM_ONLY if getattr(args, k, None) is not None]
    if cim_flags:
        raise PlacementError(
            f"{', '.join(cim_flags)}: CIM option(s), not used with --target pim"
            " (PIM hardware: --pim-hardware, --pim-cores)"
        )
    _check_solver_flags(args)
    if getattr(args, "plot", None):
        from placement.plots.common import check_figure_path

        check_figure_path(args.plot, "--plot")
    cores = parse_cores(args.pim_cores or DEFAULT_PIM_CORES)
    copy = args.copy or DEFAULT_COPY
    granularity = args.granularity or "loop"
    allow_estimates = bool(args.allow_estimates)
    hw = load_pim_hardware(args.pim_hardware or DEFAULT_PIM_HARDWARE)
    if args.json:
        _check_output_dir(args.json, "--json")
    if args.counters and not Path(args.counters).is_file():
        raise PlacementError(f"{args.counters}: no such counters file")

    if args.profile:
        sha = model_sha256(args.model)
        profile = NestProfile.load(args.profile)
        profile.check_matches(sha, args.model)
        source = f"loaded from {args.profile}"
    else:
        profile = _profile(args)
        source = "measured now"
    meta = profile.metadata
    _info(
        args,
        f"nest profile: {source} ({len(profile.nests)} nests, {meta.get('runs')} runs,"
        f" torch-mlir {meta.get('torch_mlir_version')}, {meta.get('machine')})",
    )
    if args.counters:
        profile = with_counters_file(profile, args.counters)
    _info(args, f"PIM hardware: {hw.describe()}")
    _info(
        args,
        f"solving {len(cores)} core count(s) with HiGHS ({copy} copy, {granularity}"
        f" granularity, time limit {args.time_limit:g} s each) ...",
    )
    results = solve_pim_for_cores(
        profile, hw, cores, copy, granularity, allow_estimates,
        time_limit=args.time_limit, rel_gap=args.gap, threads=args.solver_threads,
        tee=[sys.stderr] if args.solver_log else False,
    )  # fmt: skip
    for line in solve_summary_lines(profile, hw, results, copy, granularity, allow_estimates):
        print(line)
    document = pim_document(
        profile, hw, results, copy=copy, granularity=granularity,
        allow_estimates=allow_estimates,
    )  # fmt: skip
    if args.json:
        write_json_atomic(args.json, document)
        _info(args, f"wrote {args.json}")
    if getattr(args, "plot", None) and results[0].placement.on_pim is not None:
        from placement.plots.common import save_figure
        from placement.plots.gantt import pim_gantt

        title = f"{Path(profile.model_path).name}, N_core={results[0].cores}"
        save_figure(pim_gantt(document, cores=results[0].cores, title=title), args.plot)
        _info(args, f"wrote {args.plot}")
    missing = [r.cores for r in results if r.placement.on_pim is None]
    if missing:
        print(
            f"placement: no placement found within the time limit of {args.time_limit:g} s"
            f" for N_core {', '.join(map(str, missing))}; raise --time-limit",
            file=sys.stderr,
        )
        return EXIT_NO_SOLUTION
    if any(r.placement.result.status == SolveStatus.TIME_LIMIT for r in results):
        print(
            "placement: warning: time limit reached; the placements above are the best found"
            " and verified, but not all proven optimal (see their gaps)",
            file=sys.stderr,
        )
    return 0


def parse_cores(text: str) -> list[int]:
    """'32,64,128' -> [32, 64, 128]; anything else is a one-line error."""
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise PlacementError(
                f"--pim-cores must be a comma-separated list of positive whole numbers,"
                f" got {part!r} in {text!r}"
            )
        if int(part) not in out:
            out.append(int(part))
    return out


def solve_summary_lines(
    profile: Any,
    hw: Any,
    results: Sequence[Any],
    copy: str,
    granularity: str,
    allow_estimates: bool,
) -> list[str]:
    from placement.pim.pipeline import read_bandwidth, store_bound

    spec = hw.pim
    counters = profile.counters or {}
    lines = [
        f"model: {profile.model_path} ({profile.source_kind}), {len(profile.nests)} loop nests;"
        f" CPU-only {fmt_time(profile.cpu_only)} (sum of nest T_cpu)",
        f"hardware counters: {_counter_status(profile)}",
        "",
    ]
    estimated_bw = False
    header = (
        f"{'nest':<6}{'origin':<26}{'N_iter':>9}{'N_total':>11}{'fetch':>10}{'flush':>10}"
        f"{'T_cpu':>10}{'BW_read':>12}{'StoreBnd':>9}"
    )
    header += "".join(f"{'N=' + str(r.cores):>13}" for r in results)
    lines.append(header)
    lines.append(" " * (len(header) - 13 * len(results)) + f"{'(rule/model)':>13}")
    for n in profile.nests:
        t = profile.t_cpu[n.id]
        bw = read_bandwidth(n, t, counters.get(n.id), spec.cache_line)
        sb = store_bound(counters.get(n.id))
        estimated_bw |= bw.estimated
        bw_text = (
            "-" if bw.value is None else fmt_bandwidth(bw.value) + ("*" if bw.estimated else "")
        )
        sb_text = "-" if sb.value is None else f"{sb.value:.3f}"
        row = (
            f"{n.id:<6}{_origin(n)[:25]:<26}{n.n_iter:>9}{n.n_total:>11}"
            f"{fmt_bytes(n.fetch_bytes):>10}{fmt_bytes(n.flush_bytes):>10}"
            f"{fmt_time(t):>10}{bw_text:>12}{sb_text:>9}"
        )
        for r in results:
            d = r.rule[n.id]
            rule = d.place + ("*" if d.estimated else "")
            model = (
                "-"
                if r.placement.on_pim is None
                else ("pim" if r.placement.on_pim[n.id] else "host")
            )
            row += f"{rule + '/' + model:>13}"
        lines.append(row)

    lines.append("")
    lines.append("rule decisions (Eqs. 1-7) and their reasons:")
    for n in profile.nests:
        groups: dict[tuple[str, str, bool], list[int]] = {}
        for r in results:
            d = r.rule[n.id]
            groups.setdefault((d.place, d.reason, d.estimated), []).append(r.cores)
        for (place, reason, est), cores in groups.items():
            mark = "*" if est else ""
            lines.append(f"  {n.id} N={','.join(map(str, cores))}: {place}{mark}: {reason}")

    lines.append("")
    lines.append(
        f"{'N_core':>6}{'T_hybrid':>11}{'T_host':>11}{'T_pim':>11}{'T_copy':>11}"
        f"{'N_reg*T_sw':>14}{'speed-up':>10}{'on PIM':>8}   |{'rule T_hybrid':>14}"
        f"{'speed-up':>10}{'on PIM':>8}"
    )
    any_rule_estimated = False
    for r in results:
        p = r.placement
        rule_est = any(d.estimated for d in r.rule.values())
        any_rule_estimated |= rule_est
        mark = "*" if rule_est else ""
        rh = r.rule_hybrid
        rule_part = (
            f"{fmt_time(rh.total) + mark:>14}{_fmt_speedup(r.rule_speedup) + mark:>10}"
            f"{len(r.rule_on_pim):>8}"
        )
        if p.hybrid is None:
            lines.append(f"{r.cores:>6}{'no solution':>11}{'':>57}{'-':>8}   |{rule_part}")
            continue
        h = p.hybrid
        switch = f"{h.n_region}x{fmt_time(h.t_sw)}"
        lines.append(
            f"{r.cores:>6}{fmt_time(h.total):>11}{fmt_time(h.host):>11}{fmt_time(h.pim):>11}"
            f"{fmt_time(h.copy):>11}{switch:>14}{_fmt_speedup(p.speedup):>10}"
            f"{len(r.model_on_pim or []):>8}   |{rule_part}"
        )

    lines.append("")
    lines.append(_solver_line(results))
    lines.append(
        "T_hybrid = T_host + T_pim + T_copy + N_region*T_sw (Eq. 9); T_pim from the analytical"
        " PIM model (not measured); T_copy: "
        + ("Eq. 8 upper bound" if copy == "upper_bound" else "exact residency within segments")
        + f"; model granularity: {granularity}; the rule decides per nest"
    )
    if estimated_bw or any_rule_estimated:
        use = (
            "used by rule C3 (--allow-estimates)"
            if allow_estimates
            else "shown only; rule C3 is not evaluated without the counter (--allow-estimates)"
        )
        lines.append(
            "* estimated, not measured: BW_read = fetch bytes / T_cpu where the off-core read"
            f" counter is missing; {use}"
        )
    return lines


def _counter_status(profile: Any) -> str:
    from placement.profiling.nest_profile import FILE, MEASURED

    reason = profile.counters_unavailable_reason
    if reason is not None:
        return (
            f"unavailable: {reason}. Rule conditions C3/C4 are not evaluated; load counters"
            " measured elsewhere with --counters FILE, or estimate C3 with --allow-estimates"
        )
    have = len(profile.counters or {})
    if profile.counter_source == MEASURED:
        return f"measured on this host (Table 1 events, perf_event_open) for {have} nests"
    if profile.counter_source == FILE:
        where = profile.metadata.get("counters_file", "a file")
        return f"loaded from {where} for {have} of {len(profile.nests)} nests"
    return profile.counter_source


def _solver_line(results: Sequence[Any]) -> str:
    parts = []
    for r in results:
        res = r.placement.result
        status = {SolveStatus.OPTIMAL: "optimal", SolveStatus.TIME_LIMIT: "TIME LIMIT"}.get(
            res.status, res.status.value
        )
        gap = (
            ""
            if res.gap is None or res.status == SolveStatus.OPTIMAL
            else (f" gap {res.gap * 100:.3g}%")
        )
        parts.append(f"N={r.cores} {status}{gap}")
    verified = all(
        r.placement.verification is not None and r.placement.verification.ok
        for r in results
        if r.placement.on_pim is not None
    )
    check = (
        "verification passed (Eq. 9 recomputed independently)"
        if verified
        else ("verification NOT run")
    )
    return f"solver: HiGHS {', '.join(parts)}; {check}"


# --------------------------------------------------------------------------- helpers


def _origin(nest: Any) -> str:
    if nest.onnx_node:
        return f"{nest.onnx_node} ({nest.onnx_op_type})" if nest.onnx_op_type else nest.onnx_node
    return nest.linalg_op.removeprefix("linalg.") or "?"


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def _fmt_speedup(s: float | None) -> str:
    if s is None:
        return "-"
    return "inf" if s == float("inf") else f"{s:.2f}x"


def _counters_warning(reason: str) -> None:
    print(
        f"placement: warning: hardware counters unavailable: {reason}. The profile holds"
        " times only; load counters measured elsewhere with `solve --counters FILE`",
        file=sys.stderr,
    )


def _check_output_dir(path: str, flag: str) -> None:
    """Fail before hours of work if the output cannot be written where asked."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise PlacementError(f"{flag} {path}: is a directory")
    if not parent.is_dir():
        raise PlacementError(f"{flag} {path}: directory {parent} does not exist")


def _info(args: argparse.Namespace, text: str) -> None:
    if not getattr(args, "quiet", False):
        print(text, file=sys.stderr)
