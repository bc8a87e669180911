"""What a PIM solve reports: the table on the terminal and the JSON document.

Derived values that are estimated rather than measured carry ``"estimated": true``
next to the value in the document and a ``*`` in the table; values and rule decisions
from simulated counters (a cache simulation, not hardware events) carry
``"simulated": true`` and a ``~``. Nests whose T_pim comes from a ``--pim-times`` file
(measured or simulated outside this tool) carry ``#`` after their id and
``"t_pim_source": "file"`` (the others: ``"analytical model"``). The rule's reasons are
printed once per distinct reason, with the nests (and core counts) it applies to.
What is specific to basic-block granularity and the comparison of granularities
(Table 5) is in :mod:`placement.pim.granularity`; documents of loop and operator solves
without the comparison hold none of its keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.devices.pim import COPY_DESCRIPTIONS
from placement.hardware.pim import PimHardware
from placement.nests import LoopNest
from placement.pim.granularity import (
    blocks_json,
    comparison_json,
    comparison_lines,
    crossing_lines,
    granularity_note,
    model_place,
    split_lines,
)
from placement.pim.instance import PimInstance
from placement.pim.pipeline import CoreResult
from placement.pim.rules import read_traffic, simulated_store_bound
from placement.pim.times import MODEL_SOURCE
from placement.profiling.counters import (
    BACKEND_EVENTS,
    EV_BOUND_ON_STORES,
)
from placement.profiling.dram_bandwidth import describe as describe_dram_read
from placement.profiling.nest_profile import FILE, MEASURED, SIMULATED, NestProfile
from placement.solvers.base import SolveStatus
from placement.solvers.registry import get_backend
from placement.tables import text_table
from placement.units import fmt_bytes, fmt_gap, fmt_time

RESULT_FORMAT = "placement-pim-result"
RESULT_VERSION = 1


# --------------------------------------------------------------------------- derived values


@dataclass(frozen=True)
class Derived:
    """A value derived for display; ``estimated`` when not from a measured counter,
    ``simulated`` when from simulated counters (placement.profiling.simulated)."""

    value: float | None
    estimated: bool
    simulated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "estimated": self.estimated, "simulated": self.simulated}


def read_bandwidth(
    nest: LoopNest, t_cpu: float, counters: Mapping[str, float] | None, cache_line: int,
    counted: float | None = None,
) -> Derived:  # fmt: skip
    """Eq. 6 from the off-core read counter, else from the simulated off-core read bytes
    (simulated), each over ``counted`` (the counted program's time; default ``t_cpu``),
    else fetch_bytes / T_cpu (estimated)."""
    traffic = None if counters is None else read_traffic(counters, cache_line)
    if traffic is not None:
        nbytes, simulated = traffic
        seconds = t_cpu if counted is None else counted
        return Derived(nbytes / seconds if seconds > 0 else None, False, simulated)
    return Derived(nest.fetch_bytes / t_cpu if t_cpu > 0 else None, True)


def store_bound(counters: Mapping[str, float] | None) -> Derived:
    """Eq. 7 from the counters, else its simulated form (placement.pim.rules); no
    estimate exists (None without either)."""
    if counters is None:
        return Derived(None, False)
    if any(e not in counters for e in (EV_BOUND_ON_STORES, *BACKEND_EVENTS)):
        cycles = simulated_store_bound(counters)
        if cycles is None:
            return Derived(None, False)
        c_store, backend = cycles
        return Derived(c_store / backend if backend > 0 else 0.0, False, True)
    c_store = counters[EV_BOUND_ON_STORES]
    backend = math.fsum(counters[e] for e in BACKEND_EVENTS) + c_store
    return Derived(c_store / backend if backend > 0 else 0.0, False)


# --------------------------------------------------------------------------- JSON


def pim_document(
    profile: NestProfile,
    hw: PimHardware,
    results: Sequence[CoreResult],
    *,
    copy: str,
    granularity: str,
    allow_estimates: bool,
) -> dict[str, Any]:
    """The complete JSON document of a PIM solve (see the module docstring)."""
    spec = hw.pim
    counters = profile.counters or {}
    counted = profile.counter_seconds if counters else {}
    sources = results[0].placement.instance.pim_time_sources if results else {}
    nests = []
    for n in profile.nests:
        t = profile.t_cpu[n.id]
        row = n.to_json()
        row["t_cpu"] = t
        row["t_pim"] = {str(r.cores): r.placement.instance.pim_time(n.id) for r in results}
        row["t_pim_source"] = sources.get(n.id, MODEL_SOURCE)
        row["counters"] = counters.get(n.id)
        row["read_bandwidth"] = read_bandwidth(
            n, t, counters.get(n.id), spec.cache_line, counted.get(n.id)
        ).to_json()
        row["store_bound"] = store_bound(counters.get(n.id)).to_json()
        nests.append(row)
    per_core = []
    for r in results:
        model = r.placement.to_json()
        rs = r.rule_speedup
        compared = comparison_json(r)
        per_core.append(
            {
                "n_cores": r.cores,
                "rule": {
                    "hybrid": r.rule_hybrid.to_json(),
                    "speedup": None if math.isinf(rs) else rs,
                    "on_pim": r.rule_on_pim,
                    "estimated": any(d.estimated for d in r.rule.values()),
                    "simulated": any(d.simulated for d in r.rule.values()),
                    "decisions": {k: d.to_json() for k, d in r.rule.items()},
                },
                "model": model,
            }
            | ({} if compared is None else {"granularities": compared})
        )
    compare = any(r.by_granularity for r in results)
    blocks = blocks_json(results[0].placement.instance) if results else None
    return {
        "format": RESULT_FORMAT,
        "version": RESULT_VERSION,
        "target": "pim",
        "model": {
            "path": profile.model_path,
            "sha256": profile.model_sha256,
            "source_kind": profile.source_kind,
            "nests": len(profile.nests),
        },
        "hardware": hw.to_json(),
        "options": {
            "copy": copy,
            "copy_accounting": COPY_DESCRIPTIONS[copy],
            "memory": spec.memory,
            "granularity": granularity,
            "allow_estimates": allow_estimates,
            "cores": [r.cores for r in results],
        }
        | ({"compare_granularities": True} if compare else {}),
        "nest_profile": {
            "source": profile.source,
            "counter_source": profile.counter_source,
            "metadata": profile.metadata,
        },
        "estimates": {
            "read_bandwidth": "fetch_bytes / T_cpu where the off-core read counter is missing",
            "t_pim": t_pim_statement(results),
        },
        "t_pim": t_pim_provenance(results),
        "simulated": {
            "counters": profile.counter_source == SIMULATED,
            "read_bandwidth": "simulated LL read misses x line size / T_cpu (callgrind)",
            "store_bound": "share of the simulated cycle estimate (Ir + 10 per D1 miss + 100"
            " per LL miss) spent on LL write misses: 100 DLmw / estimate (placement.pim.rules)",
        },
        "cpu_only": profile.cpu_only,
        "baseline": baseline(profile),
        "rule_thresholds": None
        if not results
        else rule_thresholds(results[0].placement.instance, hw.name, profile.host_dram_read),
        "nests": nests,
        "results": per_core,
    } | ({} if blocks is None else {"basic_blocks": blocks})



def rule_thresholds(
    instance: PimInstance, hardware: str, measurement: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Rule C3's theta and C4's sigma, and where ``B_cpu`` (theta's scale) comes from:
    ``profile`` (measured on the profiling host, ``measurement`` its record) or
    ``hardware`` (the description's ``host_dram_gbps``; the profile has no measurement)."""
    spec = instance.spec
    return {
        "theta": instance.theta,
        "theta_ratio": spec.theta_ratio,
        "b_cpu": instance.b_cpu,
        "b_cpu_source": "profile" if instance.b_cpu_measured else "hardware",
        "b_cpu_measurement": dict(measurement) if instance.b_cpu_measured and measurement
        else None,
        "hardware_b_cpu": spec.host_dram_bandwidth,
        "sigma": spec.sigma,
        "statement": threshold_line(instance, hardware, measurement),
    }


def threshold_line(
    instance: PimInstance, hardware: str, measurement: Mapping[str, Any] | None
) -> str:
    """One line: theta = ratio x B_cpu, which B_cpu and from where, and sigma."""
    spec = instance.spec
    if instance.b_cpu_measured:
        where = "measured on the profiling host: " + describe_dram_read(measurement or {})
        if spec.host_dram_bandwidth != instance.b_cpu:
            where += f"; {hardware}'s {spec.host_dram_bandwidth / 1e9:g} GB/s not used"
    else:
        where = f"from {hardware}'s host_dram_gbps: the profile holds no measurement of its host"
    return (
        f"rule thresholds: theta = {spec.theta_ratio:g} x B_cpu {instance.b_cpu / 1e9:.5g} GB/s"
        f" = {instance.theta / 1e9:.3g} GB/s (B_cpu {where}); sigma {spec.sigma:g}"
    )


def t_pim_provenance(results: Sequence[CoreResult]) -> dict[str, Any]:
    """Where each nest's T_pim comes from: a ``--pim-times`` file or the analytical model."""
    instance = results[0].placement.instance if results else None
    sources = instance.pim_time_sources if instance else {}
    measured = instance.measured if instance else None
    return {
        "analytical_model": "placement.devices.pim (compute + memory + synchronization;"
        " constants in hardware.pim), not measured",
        "file": None if measured is None else measured.to_json(),
        "nests_from_file": [k for k, v in sources.items() if v != MODEL_SOURCE],
        "nests_from_model": [k for k, v in sources.items() if v == MODEL_SOURCE],
        "rule_c1": "T_pim_min (the C1 lower bound) is analytical whatever the source of T_pim",
    }


def t_pim_statement(results: Sequence[CoreResult]) -> str:
    """One phrase: where the T_pim of this result comes from (the table's footer)."""
    instance = results[0].placement.instance if results else None
    sources = instance.pim_time_sources if instance else {}
    from_file = sum(v != MODEL_SOURCE for v in sources.values())
    if instance is None or not from_file:
        return "T_pim from the analytical PIM model (not measured)"
    label = instance.measured.label if instance.measured else "times given in code"
    if from_file == len(sources):
        return f"T_pim from {label} for every nest"
    marked = "the nest marked #" if from_file == 1 else f"the {from_file} nests marked #"
    return (
        f"T_pim from {label} for {marked}, from the analytical PIM model (not measured) for"
        f" the other {len(sources) - from_file}"
    )


# --------------------------------------------------------------------------- baseline

# A CPU-only time above ONNX Runtime's by more than rounding (the ort source sums ORT's
# own per-operator times) counts as slower.
SLOWER_TOLERANCE = 1.0 + 1e-6


def baseline(profile: Any) -> dict[str, Any]:
    """The CPU-only baseline every speed-up is relative to, beside ONNX Runtime's.

    ``ratio_to_ort`` = the profile's CPU-only time (sum of nest T_cpu) / ONNX Runtime's
    CPU-only time for the same model (None when not measured: .mlir input, or a profile
    written before it was recorded); ``slower_than_ort`` when above 1: speed-ups are
    then measured against a host slower than what users run today, by that factor.
    """
    host_times = getattr(profile, "host_times", "jit")
    ort = getattr(profile, "ort_cpu_only", None)
    ratio = profile.cpu_only / ort if ort else None
    detail = profile.metadata.get("host_times_detail")
    apportioning = (detail or {}).get("apportioning") or {}
    return {
        "host_times": host_times,
        "description": getattr(profile, "host_times_description", host_times),
        # False for profiles written before the source was recorded (they hold jit times)
        "recorded": detail is not None,
        "cache": getattr(profile, "cache", "warm"),
        "cpu_only": profile.cpu_only,
        "ort_cpu_only": ort,
        "ratio_to_ort": ratio,
        "slower_than_ort": bool(ratio is not None and ratio > SLOWER_TOLERANCE),
        "ort_operators_without_nests_seconds": apportioning.get("operators_without_nests_seconds"),
        "statement": "; ".join(baseline_lines(profile)),
    }


def baseline_lines(profile: Any) -> list[str]:
    """One or two lines: where T_cpu comes from, and how the CPU-only time compares with
    ONNX Runtime's (how much slower, when it is)."""
    host_times = getattr(profile, "host_times", "jit")
    description = getattr(profile, "host_times_description", host_times)
    cache = getattr(profile, "cache", "warm")
    detail = profile.metadata.get("host_times_detail")
    if detail is None and host_times == "jit":
        description += " (a profile written before host-time sources were recorded)"
    lines = [f"baseline: host times {host_times}: {description}; {cache} cache"]
    ort = getattr(profile, "ort_cpu_only", None)
    cpu_only = profile.cpu_only
    if not ort:
        why = (
            "nothing for ONNX Runtime to run (.mlir input)"
            if profile.source_kind == "mlir"
            else "not measured for this profile; re-profile to compare"
        )
        lines.append(f"baseline vs ONNX Runtime: ONNX Runtime CPU-only time: {why}")
        return lines
    ratio = cpu_only / ort
    text = (
        f"baseline vs ONNX Runtime: CPU-only {fmt_time(cpu_only)} vs ONNX Runtime (1 thread)"
        f" {fmt_time(ort)} for the same model"
    )
    if ratio > SLOWER_TOLERANCE:
        text += (
            f": the baseline is {ratio:.2f}x slower than ONNX Runtime, so every speed-up"
            f" below is relative to a host {ratio:.2f}x slower than what users run today"
        )
    else:
        text += f" ({ratio:.2f}x of it)"
        left = ((detail or {}).get("apportioning") or {}).get("operators_without_nests_seconds")
        if left:
            text += (
                f"; {fmt_time(left)} of ONNX Runtime's time is in operators with no loop nest"
                " (on the host whatever the placement, in no T_cpu)"
            )
    lines.append(text)
    return lines


# --------------------------------------------------------------------------- terminal


def nest_table(nests: Sequence[Any]) -> list[str]:
    """``placement nests``: one row per loop nest."""
    return text_table(
        [["nest", "origin", "linalg op", "N_iter", "N_total", "trips", "fetch", "flush"]],
        [[n.id, _origin(n), n.linalg_op.removeprefix("linalg."), str(n.n_iter), str(n.n_total),
          str(n.trip_count), fmt_bytes(n.fetch_bytes), fmt_bytes(n.flush_bytes)]
         for n in nests],
        right=range(3, 8), shrink=1,
    )  # fmt: skip


def summary_lines(
    profile: Any,
    hw: Any,
    results: Sequence[Any],
    copy: str,
    granularity: str,
    allow_estimates: bool,
) -> list[str]:
    spec = hw.pim
    measurement = getattr(profile, "host_dram_read", None)  # B_cpu measured when profiling
    lines = [
        f"model: {profile.model_path} ({profile.source_kind}), {len(profile.nests)} loop nests;"
        f" CPU-only {fmt_time(profile.cpu_only)} (sum of nest T_cpu)",
        *baseline_lines(profile),
        f"hardware counters: {_counter_status(profile)}",
        *(
            [threshold_line(results[0].placement.instance, hw.name, measurement)]
            if results
            else []
        ),
        "",
    ]
    sources = results[0].placement.instance.pim_time_sources if results else {}
    counted = profile.counter_seconds if profile.counters else {}
    table, estimated_bw, simulated_any = _nest_rows(profile, spec, sources, counted)
    lines += text_table(
        [["nest", "origin", "N_iter", "N_total", "fetch", "flush", "T_cpu", "BW_read",
          "StoreBnd"], ["", "", "", "", "", "", "", "(GB/s)", ""]],
        table, right=range(2, 9), shrink=1,
    )  # fmt: skip
    lines.append("")
    placed = _placement_rows(profile.nests, results)
    simulated_any |= any(d.simulated for r in results for d in r.rule.values())
    if placed:
        lines.append(
            "nests that the rule or the model puts on PIM at some core count (rule/model;"
            " all others host/host)"
        )
        lines += text_table(
            [["nest", "origin", *(f"N={r.cores}" for r in results)]], placed,
            right=range(2, 2 + len(results)), shrink=1,
        )  # fmt: skip
    else:
        lines.append("no nest is on PIM under the rule or the model at any core count")
    lines.append("")
    lines.extend(reason_lines(profile.nests, results))
    lines.append("")
    rows, any_rule_estimated = _core_rows(results)
    lines += text_table(
        [["N_core", "placement", "T_hybrid", "T_host", "T_pim", "T_copy", "N_reg*T_sw",
          "speed-up", "on PIM"]],
        rows, right=(0, *range(2, 9)),
    )  # fmt: skip

    for extra in (crossing_lines(results), split_lines(results), comparison_lines(results)):
        if extra:
            lines += ["", *extra]
    lines.append("")
    lines.append(_solver_line(results))
    lines.append(
        f"T_hybrid = T_host + T_pim + T_copy + N_region*T_sw (Eq. 9); {t_pim_statement(results)}"
        f"; model granularity: {granularity}; the rule decides per nest"
        + granularity_note(granularity)
    )
    lines.append(
        f"memory architecture of {hw.name}: {spec.memory_text()}; T_copy: {copy}"
        f" ({COPY_DESCRIPTIONS[copy]})"
    )
    lines.extend(load_lines(results))
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
    if simulated_any:
        over = ("the compiled program's time (the program simulated; T_cpu is ONNX Runtime's)"
                if counted != dict(profile.t_cpu) else "T_cpu")  # fmt: skip
        lines.append(
            "~ simulated, not measured: from a callgrind cache simulation of the program"
            f" ({_geometry_text(profile)}): BW_read = LL read misses x line / {over} (rule C3),"
            " StoreBnd = the share of the simulated cycles spent on LL write misses (rule C4;"
            " see placement.pim.rules)"
        )
    return lines


def load_lines(results: Sequence[Any]) -> list[str]:
    """The one-time cost at model load (partitioned memory: weights placed in the banks),
    kept out of T_hybrid; nothing when there is none."""
    cells = []
    for r in results:
        model = r.placement.hybrid
        if (model is not None and model.load > 0) or r.rule_hybrid.load > 0:
            mine = "-" if model is None else fmt_time(model.load)
            cells.append(f"N={r.cores}: model {mine}, rule {fmt_time(r.rule_hybrid.load)}")
    if not cells:
        return []
    return [
        "once, at model load (not in T_hybrid): the resident weights the PIM nests read,"
        " placed in the banks over the link: " + "; ".join(cells)
    ]


def _nest_rows(
    profile: Any, spec: Any, sources: Mapping[str, str], counted: Mapping[str, float]
) -> tuple[list[list[str]], bool, bool]:
    """The cells of the nest table (``counted``: each nest's counted program time); whether
    any read bandwidth is estimated, and whether any value is simulated."""
    counters = profile.counters or {}
    rows, estimated, simulated = [], False, False
    for n in profile.nests:
        t = profile.t_cpu[n.id]
        bw = read_bandwidth(n, t, counters.get(n.id), spec.cache_line, counted.get(n.id))
        sb = store_bound(counters.get(n.id))
        estimated |= bw.estimated
        simulated |= bw.simulated or sb.simulated
        nid = n.id + ("#" if sources.get(n.id, MODEL_SOURCE) != MODEL_SOURCE else "")
        rows.append([
            nid, _origin(n), str(n.n_iter), str(n.n_total), fmt_bytes(n.fetch_bytes),
            fmt_bytes(n.flush_bytes), fmt_time(t),
            "-" if bw.value is None else f"{bw.value / 1e9:.3g}{_mark(bw)}",
            "-" if sb.value is None else f"{sb.value:.3f}{_mark(sb)}",
        ])  # fmt: skip
    return rows, estimated, simulated


def _placement_rows(nests: Sequence[Any], results: Sequence[Any]) -> list[list[str]]:
    """rule/model per core count of the nests that either puts on PIM (or the model
    splits, at basic-block granularity) somewhere."""
    splits = {r.cores: set(r.placement.split_nests) for r in results}
    rows = []
    for n in nests:
        cells, anywhere = [], False
        for r in results:
            d = r.rule[n.id]
            model = model_place(r.placement, n.id, splits[r.cores])
            anywhere |= d.place == "pim" or model in ("pim", "split")
            cells.append(f"{d.place}{_mark(d)}/{model}")
        if anywhere:
            rows.append([n.id, _origin(n), *cells])
    return rows


def _core_rows(results: Sequence[Any]) -> tuple[list[list[str]], bool]:
    """Two rows per core count, the model's optimum and the rule's placement (Eq. 9
    terms each); whether any rule decision is estimated."""
    rows, any_estimated = [], False
    for r in results:
        p = r.placement
        mark = "*" if any(d.estimated for d in r.rule.values()) else ""
        any_estimated |= bool(mark)
        if p.hybrid is None:
            rows.append([str(r.cores), "model", "no solution", *["-"] * 6])
        else:
            rows.append([str(r.cores), "model", *_hybrid_cells(p.hybrid, p.speedup),
                         str(len(r.model_on_pim or []))])  # fmt: skip
        rule = _hybrid_cells(r.rule_hybrid, r.rule_speedup)
        rule[0] += mark
        rule[-1] += mark
        rows.append(["", "rule", *rule, str(len(r.rule_on_pim))])
    return rows, any_estimated


def _hybrid_cells(h: Any, speedup: float | None) -> list[str]:
    """T_hybrid, T_host, T_pim, T_copy, N_region x T_sw, speed-up."""
    return [fmt_time(h.total), fmt_time(h.host), fmt_time(h.pim), fmt_time(h.copy),
            f"{h.n_region}x{fmt_time(h.t_sw)}", _fmt_speedup(speedup)]  # fmt: skip


def reason_lines(nests: Sequence[Any], results: Sequence[Any]) -> list[str]:
    """The rule's reasons, each printed once with the nests and core counts it decided.

    Decisions are grouped by their value-free ``summary``, place and labels; the values
    of each nest are in the table and in the JSON document (``reason``)."""
    order = {n.id: i for i, n in enumerate(nests)}
    groups: dict[tuple[str, str], dict[str, list[int]]] = {}
    for n in nests:
        for r in results:
            d = r.rule[n.id]
            key = (d.place + _mark(d), d.summary or d.reason)
            groups.setdefault(key, {}).setdefault(n.id, []).append(r.cores)
    lines = [
        "rule decisions (Eqs. 1-7), once per reason; each nest's values: the table above"
        " and the JSON document"
    ]
    for (place, summary), by_nest in groups.items():
        lines.append(f"  {place}: {summary}")
        by_cores: dict[tuple[int, ...], list[str]] = {}
        for nid, cores in by_nest.items():
            by_cores.setdefault(tuple(cores), []).append(nid)
        for cores, ids in by_cores.items():
            count = f"{len(ids)} nest{'s' if len(ids) != 1 else ''}"
            label = "N=" + ",".join(map(str, cores))
            lines.append(f"      {label}: {_id_ranges(ids, order)} ({count})")
    return lines


def _id_ranges(ids: Sequence[str], order: Mapping[str, int]) -> str:
    """Nest ids in program order, runs of three or more consecutive nests as 'a-b'."""
    ranked = sorted(ids, key=lambda i: order[i])
    parts: list[str] = []
    run: list[str] = []
    for nid in ranked:
        if run and order[nid] != order[run[-1]] + 1:
            parts.append(_run_text(run))
            run = []
        run.append(nid)
    if run:
        parts.append(_run_text(run))
    return ", ".join(parts)


def _run_text(run: list[str]) -> str:
    if len(run) >= 3:
        return f"{run[0]}-{run[-1]}"
    return ", ".join(run)


def _mark(x: Any) -> str:
    """'*' for an estimated value or decision, '~' for a simulated one."""
    if getattr(x, "estimated", False):
        return "*"
    return "~" if getattr(x, "simulated", False) else ""


def _geometry_text(profile: Any) -> str:
    sim = profile.metadata.get("simulation") if isinstance(profile.metadata, dict) else None
    caches = sim.get("caches") if isinstance(sim, dict) else None
    if not isinstance(caches, dict):
        return "cache geometry not recorded"
    try:
        d1, ll = caches["D1"], caches["LL"]
        text = (
            f"D1 {_kib(d1['size'])} {d1['assoc']}-way, LL = {caches.get('ll_level', 'LL')}"
            f" {_kib(ll['size'])} {ll['assoc']}-way, {ll['line']} B lines"
        )
    except (KeyError, TypeError):
        return "cache geometry not recorded"
    version = sim.get("valgrind_version")
    return text + (f"; valgrind {version}" if version else "")


def _kib(size: Any) -> str:
    return fmt_bytes(float(size))


def _counter_status(profile: Any) -> str:

    reason = profile.counters_unavailable_reason
    if reason is not None:
        return (
            f"unavailable: {reason}. Rule conditions C3/C4 are not evaluated; load counters"
            " measured elsewhere with --counters FILE, simulate them (profile with"
            " --counters-source simulated), or estimate C3 with --allow-estimates"
        )
    have = len(profile.counters or {})
    if profile.counter_source == SIMULATED:
        return (
            f"none; simulated instead (marked ~) for {have} nests: callgrind cache simulation"
            f" ({_geometry_text(profile)})"
        )
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
        proven = res.gap is None or res.status == SolveStatus.OPTIMAL
        gap = "" if proven else f" gap {fmt_gap(res.gap)}"
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
    labels = sorted({get_backend(r.placement.result.solver).label for r in results})
    return f"solver: {'/'.join(labels)} {', '.join(parts)}; {check}"


# --------------------------------------------------------------------------- helpers


def _origin(nest: Any) -> str:
    if nest.onnx_node:
        return f"{nest.onnx_node} ({nest.onnx_op_type})" if nest.onnx_op_type else nest.onnx_node
    return nest.linalg_op.removeprefix("linalg.") or "?"


def _fmt_speedup(s: float | None) -> str:
    if s is None:
        return "-"
    return "inf" if s == float("inf") else f"{s:.2f}x"


