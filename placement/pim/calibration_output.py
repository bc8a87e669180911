"""What ``placement calibrate --target pim`` reports: the terminal lines, the hardware
TOML with the calibration's provenance in comments, and the JSON record.

The hardware file holds every key of the hardware the calibration ran on, unchanged,
except three: ``theta_ratio`` and ``sigma`` (calibrated) and ``host_dram_gbps`` (this
host's ``B_cpu``), so that ``placement solve --target pim --pim-hardware FILE`` runs
the rule with the calibrated thresholds on the same device model the ground truth used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.hardware.base import parse_hardware_tables
from placement.hardware.pim import PimHardware, pim_spec_from_table
from placement.pim.calibration import (
    PAPER_AGREEMENT,
    PAPER_B_CPU_GBPS,
    PAPER_THETA_INTERVAL_GBPS,
    Calibration,
    NestEvidence,
    Threshold,
)
from placement.tables import text_table
from placement.units import fmt_time

RECORD_FORMAT = "placement-pim-calibration"
RECORD_VERSION = 1
CALIBRATED_KEYS = ("host_dram_gbps", "theta_ratio", "sigma")
NARROW_BASE = 5  # a threshold swept over fewer nests says so


@dataclass(frozen=True)
class Setting:
    """What the calibration ran on, in words, for the report and the file's provenance."""

    date: str
    host: str  # "AMD EPYC (x86_64, 2 CPUs)"
    models: tuple[str, ...]
    cores: int
    hardware: str  # name of the hardware description
    memory: str  # its memory architecture in words
    copy: str  # "shared: ..." (the copy accounting and its description)
    t_pim: str  # where T_pim comes from
    profiles: str  # host times, cache state, counters
    b_cpu: str  # where the host's B_cpu comes from
    theta_range: str  # where the theta range comes from

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"models": list(self.models)}


def summary_lines(cal: Calibration, setting: Setting, *, details: bool = False) -> list[str]:
    """The report; ``details``: every segment of both sweeps, not only the chosen one and
    its neighbours."""
    nests = cal.nests
    pays = sum(n.pays for n in nests)
    stage1 = sum(n.stage1 for n in nests)
    models = len(setting.models)
    b = cal.b_cpu
    theta, sigma = cal.theta, cal.sigma
    lo, hi = theta.range
    paper_lo, paper_hi = PAPER_THETA_INTERVAL_GBPS
    lines = [
        f"calibration (Torch-PIM Section 4.4) over {len(nests)} loop nests of {models}"
        f" model{'s' if models != 1 else ''} at N_core {setting.cores} on {setting.hardware}",
        f"  ground truth: a nest pays if offloading it alone lowers Eq. 9 below CPU-only"
        f" (T_pim: {setting.t_pim}; T_copy: {setting.copy}): {pays} pay, {len(nests) - pays}"
        f" do not; {stage1} pass stage 1 (C1, C2)",
        f"  profiles: {setting.profiles}",
        f"  B_cpu {b / 1e9:.4g} GB/s: {setting.b_cpu}",
        "",
        f"theta on C3, over the {_nests(theta.deciding)} passing stage 1 with a read"
        f" bandwidth, swept over [{lo * b / 1e9:.3g}, {hi * b / 1e9:.3g}) GB/s ="
        f" [{lo:.4g}, {hi:.4g}) x B_cpu ({setting.theta_range}):",
        *_sweep_table(theta, details, "theta (GB/s)", b / 1e9),
        "  " + _choice("theta", theta, b / 1e9, "GB/s")
        + f"; the paper: [{paper_lo:.2f}, {paper_hi:.2f}] GB/s, 2.0 GB/s = 0.12 x"
        f" {PAPER_B_CPU_GBPS} GB/s",
        "",
        f"sigma on C4, over the {_nests(sigma.deciding)} C3 leaves undecided at that theta"
        f" (stage 1 passed, C3 failed, a store-bound fraction), swept over"
        f" [{sigma.range[0]:g}, {sigma.range[1]:g}):",
        *_sweep_table(sigma, details, "sigma", None),
        "  " + _choice("sigma", sigma, None, "")
        + "; the paper: 0.4, TMA's most conservative store-bound value",
        "",
        f"agreement at theta {cal.theta_bandwidth / 1e9:.3g} GB/s ({cal.theta_ratio:.4g} x"
        f" B_cpu), sigma {sigma.value:.3g}: {cal.counts.text()}; the paper:"
        f" {PAPER_AGREEMENT[0]}/{PAPER_AGREEMENT[1]} ="
        f" {PAPER_AGREEMENT[0] / PAPER_AGREEMENT[1]:.3f}",
        f"  with {setting.hardware}'s thresholds (theta_ratio {cal.hardware_theta_ratio:g},"
        f" sigma {cal.hardware_sigma:g}): {cal.hardware_counts.text()}",
    ]
    if cal.counts.tp + cal.counts.fp == 0:
        lines.append(
            "  at these thresholds the rule offloads no nest: with so few nests that pay,"
            " the fewest false positives is the rule that never offloads"
        )
    fp, fn = cal.wrong()
    for label, wrong in (("false positives", fp), ("false negatives", fn)):
        if wrong:
            lines.append(f"  {label}: " + "; ".join(_nest_text(n, b) for n in wrong))
    return lines


def _nests(count: int) -> str:
    return f"{count} nest{'s' if count != 1 else ''}"


def _sweep_table(t: Threshold, details: bool, head: str, scale: float | None) -> list[str]:
    """The segments of a sweep (the chosen one marked), all of them or the chosen one and
    its neighbours."""
    segments = list(t.segments)
    at = segments.index(t.interval)
    shown = range(len(segments)) if details else range(max(0, at - 1), min(len(segments), at + 2))
    rows = []
    for i in shown:
        s = segments[i]
        cells = [_span(s.lo, s.hi, 4)]
        if scale is not None:
            cells = [_span(s.lo * scale, s.hi * scale, 3), *cells]
        c = s.counts
        rows.append([*cells, str(c.fp), str(c.fn), f"{c.agree}/{c.total}",
                     "<- chosen" if i == at else ""])  # fmt: skip
    heads = [head, "ratio to B_cpu"] if scale is not None else [head]
    table = text_table([[*heads, "FP", "FN", "agree", ""]], rows,
                       right=range(len(heads), len(heads) + 3), indent="  ")  # fmt: skip
    if not details and len(shown) < len(segments):
        table.append(f"  ({len(segments)} segments in all; --details lists them)")
    return table


def _span(lo: float, hi: float, digits: int) -> str:
    """'[lo, hi)' with ``digits`` significant digits, more where they would look equal."""
    while f"{lo:.{digits}g}" == f"{hi:.{digits}g}" and digits < 12:
        digits += 1
    return f"[{lo:.{digits}g}, {hi:.{digits}g})"


def _choice(name: str, t: Threshold, scale: float | None, unit: str) -> str:
    s = t.interval
    if scale is None:
        interval, value = _span(s.lo, s.hi, 4), f"{t.value:.4g}"
    else:
        interval = f"{_span(s.lo * scale, s.hi * scale, 3)} {unit}"
        value = f"{t.value * scale:.3g} {unit} = {t.value:.4g} x B_cpu"
    if not t.determined:
        return (
            f"no nest's decision changes over the range, so it does not determine {name}:"
            f" {name} = {value} (the hardware's where it lies in the range, else the midpoint)"
        )
    narrow = (
        f" (it rests on {_nests(t.deciding)}: a narrow base, as the paper says of its sigma)"
        if t.deciding < NARROW_BASE
        else ""
    )
    edge = (
        f"; the interval ends at the range's upper end: a {name} above the range may do"
        " better (widen the range)"
        if s.hi == t.range[1] and not (name == "sigma" and s.hi >= 1.0)  # StoreBound <= 1
        else ""
    )
    return (
        f"fewest false positives ({s.counts.fp}), then false negatives ({s.counts.fn}), over"
        f" {interval}; {name} = its midpoint {value}{narrow}{edge}"
    )


def _nest_text(n: NestEvidence, b_cpu: float) -> str:
    parts = []
    if n.read_bandwidth is not None:
        ratio = n.read_ratio if n.read_ratio is not None else n.read_bandwidth / b_cpu
        mark = "*" if n.estimated else ""
        parts.append(f"BW_read {n.read_bandwidth / 1e9:.3g}{mark} GB/s = {ratio:.3g} x B_cpu")
    if n.store_bound is not None:
        parts.append(f"StoreBound {n.store_bound:.3g}")
    return f"{n.model} {n.nest} ({', '.join(parts) or 'no counters'})"


def evidence_lines(cal: Calibration) -> list[str]:
    """Every nest's evidence (``--details``): times, ground truth, the rule's inputs and
    its decision at the calibrated thresholds."""
    rows = []
    for n in cal.nests:
        bw = "-" if n.read_bandwidth is None else f"{n.read_bandwidth / 1e9:.3g}"
        ratio = "-" if n.read_ratio is None else f"{n.read_ratio:.4g}"
        sb = "-" if n.store_bound is None else f"{n.store_bound:.3g}"
        rule = "pim" if n.offloads(cal.theta_ratio, cal.sigma.value) else "host"
        rows.append([n.model, n.nest, fmt_time(n.t_cpu), fmt_time(n.t_alone),
                     "yes" if n.pays else "no", "yes" if n.stage1 else "no", bw, ratio, sb,
                     rule])  # fmt: skip
    return text_table(
        [["model", "nest", "T_cpu", "T alone", "pays", "stage 1", "BW_read", "/B_cpu",
          "StoreBnd", "rule"], ["", "", "", "on PIM", "", "", "(GB/s)", "", "", ""]],
        rows, right=range(2, 9), shrink=0,
    )  # fmt: skip


# --------------------------------------------------------------------------- the TOML


def hardware_toml(
    hw: PimHardware, cal: Calibration, setting: Setting, *, host_name: str, host_arch: str
) -> str:
    """The calibrated hardware file (module docstring), checked to load as
    ``--pim-hardware`` would load it."""
    values = hw.pim.to_file_units() | {
        "host_dram_gbps": cal.b_cpu / 1e9,
        "theta_ratio": cal.theta_ratio,
        "sigma": cal.sigma.value,
    }
    notes = {
        "host_dram_gbps": "B_cpu measured on this host (header)",
        "theta_ratio": f"calibrated: theta {cal.theta_bandwidth / 1e9:.3g} GB/s / B_cpu",
        "sigma": "calibrated (header)",
    }
    comments = [
        f"Calibrated by `placement calibrate --target pim` on {setting.date}, host"
        f" {setting.host}: Torch-PIM's Section 4.4 procedure on these models' nests.",
        "models: " + ", ".join(setting.models),
        *summary_lines(cal, setting),
        f"Every other key is {hw.name}'s"
        + ("" if hw.source == hw.name else f" ({hw.source})")
        + ", unchanged: see its sources there.",
    ]
    lines = [f"# {line}".rstrip() for line in comments]
    lines += [
        f"name = {_toml(f'{hw.name}-calibrated')}",
        f"description = {_toml(f'{hw.description} -- theta and sigma calibrated on {host_name}')}",
        f"source = {_toml(f'placement calibrate on {setting.date}; otherwise {hw.source}')}",
        "",
        "[host]",
        f"name = {_toml(host_name)}",
        f"arch = {_toml(host_arch)}",
        "",
        "[pim]",
    ]
    for key, value in values.items():
        note = f"  # {notes[key]}" if key in notes else ""
        lines.append(f"{key} = {_toml(value)}{note}")
    text = "\n".join(lines) + "\n"
    _check_loads(text, values)
    return text


def _no_base(name: str, seen: tuple[str, ...]) -> Any:
    raise PlacementError(f"internal error: the calibrated hardware file names a base ({name})")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(float(f"{value:.12g}"))
    return json.dumps(str(value))  # a TOML basic string


def _check_loads(text: str, values: dict[str, Any]) -> None:
    """The file parses, validates and holds the calibrated values (else an internal error,
    before anything is written)."""
    source = "the calibrated hardware file"
    _, _, table = parse_hardware_tables(text, source, (), device="pim", load_base=_no_base)
    spec = pim_spec_from_table(table, source)
    got = spec.to_file_units()
    for key in CALIBRATED_KEYS:
        if abs(float(got[key]) - float(values[key])) > 1e-9 * abs(float(values[key])):
            raise PlacementError(f"internal error: {source} holds {key} = {got[key]!r}")


# --------------------------------------------------------------------------- JSON


def calibration_document(
    cal: Calibration, setting: Setting, hw: PimHardware, output: str | None
) -> dict[str, Any]:
    """The JSON record of a calibration (``--json``)."""
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "setting": setting.to_json(),
        "hardware": hw.to_json(),
        "hardware_file": output,
        "calibration": cal.to_json(),
    }


def model_labels(paths: Sequence[str]) -> list[str]:
    """Short, distinct labels for model paths (file names, the full path where two share one)."""
    names = [Path(p).name for p in paths]
    return [n if names.count(n) == 1 else p for n, p in zip(names, paths, strict=True)]
