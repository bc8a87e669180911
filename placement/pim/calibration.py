"""Torch-PIM's calibration of the rule's thresholds (Section 4.4), run on this host's nests.

The paper: "We sweep theta over 0.50-4.00 GB/s on the 44 profiled loops, of which 29
benefit from offloading under end-to-end CPU/PIM execution. Below 1.73 GB/s,
compute-bound regions pass, and false positives rise to 3-4; at and above 1.80 GB/s
they reach their minimum of 2. In the other direction, false negatives grow [...] We
therefore adopt theta = 2.0 GB/s, the midpoint of the [1.80, 2.13] GB/s interval over
which false positives are minimal, which is 0.12 x B_cpu [...] and is carried to other
platforms as that ratio. [...] the decision matches end-to-end execution for 37/44 =
0.841 of them." Two false positives "persist at every theta >= 1.80 GB/s [...] up to
4.00 GB/s", so the interval is where false positives are fewest *and*, among those
thresholds, false negatives too. The same procedure here:

* Ground truth per nest (``pays``): offloading that nest alone pays end to end under the
  model -- Eq. 9 of the all-host placement with only that nest on PIM
  (:func:`placement.pim.verifier.evaluate_placement`: the hardware's copy accounting,
  T_pim of the analytical model or of ``--pim-times``) is below the CPU-only time.
* The rule's inputs per nest come from the rule itself
  (:func:`placement.pim.rules.rule_placement` at the chosen core count): whether stage 1
  (C1 and C2) passes, C3's ``BW_read`` and C4's ``StoreBound``. theta and sigma enter
  the rule only as ``BW_read > theta`` and ``StoreBound > sigma``, so its decision at
  any thresholds is ``stage1 and (BW_read > theta or StoreBound > sigma)``; the sweep
  evaluates that, and :func:`check_against_rule` runs the rule itself at the chosen
  thresholds and refuses a disagreement. The rule (C1-C4) is the published one; only
  theta and sigma are calibrated.
* theta is swept as its ratio to ``B_cpu`` (the rule's ``theta = theta_ratio x B_cpu``),
  each nest's ``BW_read`` over the ``B_cpu`` of its own profile (the host's, see
  :func:`calibrate`, for a profile without one). A decision changes only where the
  threshold crosses a nest's value, so the sweep is exact, not a grid: a range
  ``[lo, hi)`` splits into segments between consecutive values, one decision set each.
* theta first, on C3 alone (C4 off); then sigma over the nests C3 leaves to it at the
  chosen theta (stage 1 passed, C3 failed) -- C4 decides only what C3 does not.
* Choosing a threshold: the segments with the fewest false positives and, among them,
  the fewest false negatives. As the threshold rises, nests only switch from PIM to host,
  so false positives never rise and false negatives never fall: the chosen segments are
  one interval, and every switch changes a count, so it is a single segment
  ``[a, b)``. The threshold is its midpoint. A range in which no nest's decision
  changes does not determine the threshold: the hardware's value is kept if it lies in
  the range (else the range's midpoint), and the result says so.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from placement.errors import PlacementError
from placement.pim.instance import PimInstance
from placement.pim.rules import rule_placement
from placement.pim.verifier import evaluate_placement

#: The paper's theta sweep (Section 4.4), GB/s, on its host's B_cpu.
PAPER_THETA_RANGE_GBPS = (0.50, 4.00)
PAPER_B_CPU_GBPS = 16.754
PAPER_THETA_INTERVAL_GBPS = (1.80, 2.13)
PAPER_AGREEMENT = (37, 44)
SIGMA_RANGE = (0.0, 1.0)  # StoreBound is a fraction of backend cycles


@dataclass(frozen=True)
class NestEvidence:
    """What the calibration knows of one nest: the rule's inputs and the ground truth."""

    model: str
    nest: str
    pays: bool  # offloading it alone lowers Eq. 9 below CPU-only
    t_cpu: float
    t_alone: float  # Eq. 9 with only this nest on PIM
    stage1: bool  # C1 and C2 pass
    stage1_reason: str  # the rule's reason when stage 1 fails ("" otherwise)
    read_bandwidth: float | None  # C3's BW_read, B/s (None: not evaluated)
    store_bound: float | None  # C4's StoreBound (None: not evaluated)
    b_cpu: float | None  # B_cpu of the nest's profile, B/s (None: not measured)
    estimated: bool = False  # BW_read estimated (--allow-estimates)
    read_ratio: float | None = None  # BW_read / B_cpu, set by calibrate()

    def offloads(self, theta_ratio: float, sigma: float) -> bool:
        """The rule's decision at these thresholds (module docstring)."""
        c3 = self.read_ratio is not None and self.read_ratio > theta_ratio
        c4 = self.store_bound is not None and self.store_bound > sigma
        return self.stage1 and (c3 or c4)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Counts:
    """A confusion matrix: the rule's decision (offload or not) against ``pays``."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.tp + other.tp, self.fp + other.fp, self.tn + other.tn,
                      self.fn + other.fn)  # fmt: skip

    @property
    def total(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def agree(self) -> int:
        return self.tp + self.tn

    @property
    def agreement(self) -> float:
        return self.agree / self.total if self.total else math.nan

    def text(self) -> str:
        """'37/44 = 0.841 (TP 24, FP 2, TN 13, FN 5)'."""
        return (
            f"{self.agree}/{self.total} = {self.agreement:.3f} (TP {self.tp}, FP {self.fp},"
            f" TN {self.tn}, FN {self.fn})"
        )

    def to_json(self) -> dict[str, Any]:
        return {"tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn,
                "agree": self.agree, "total": self.total, "agreement": self.agreement}  # fmt: skip


def count(decisions: Iterable[tuple[bool, bool]]) -> Counts:
    """Counts of ``(offloaded, pays)`` pairs."""
    tp = fp = tn = fn = 0
    for offloaded, pays in decisions:
        if offloaded:
            tp, fp = tp + pays, fp + (not pays)
        else:
            fn, tn = fn + pays, tn + (not pays)
    return Counts(tp, fp, tn, fn)


@dataclass(frozen=True)
class Segment:
    """Thresholds in ``[lo, hi)`` that all decide alike, with their counts."""

    lo: float
    hi: float
    counts: Counts

    @property
    def midpoint(self) -> float:
        return (self.lo + self.hi) / 2

    def to_json(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "counts": self.counts.to_json()}


def sweep(
    decided: Sequence[tuple[float, bool]], fixed: Counts, lo: float, hi: float
) -> list[Segment]:
    """The segments of ``[lo, hi)`` for nests offloaded when ``value > threshold``.

    ``decided``: ``(value, pays)`` of the nests the threshold decides; ``fixed``: the
    counts of the others (their decision does not depend on it)."""
    check_range(lo, hi, "threshold range")
    cuts = sorted({v for v, _ in decided if lo < v < hi})
    bounds = [lo, *cuts, hi]
    return [
        Segment(a, b, fixed + count((v > a, pays) for v, pays in decided))
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


def best_segment(segments: Sequence[Segment]) -> Segment:
    """The segment with the fewest false positives, then the fewest false negatives (the
    lowest of equals: by the module docstring there is only one)."""
    return min(segments, key=lambda s: (s.counts.fp, s.counts.fn, s.lo))


@dataclass(frozen=True)
class Threshold:
    """A calibrated threshold: the value, the interval it is the midpoint of, whether the
    range determined it, and the whole sweep."""

    value: float
    interval: Segment
    determined: bool
    range: tuple[float, float]
    segments: tuple[Segment, ...]
    deciding: int  # nests whose decision the threshold decides (the sweep's base)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "interval": self.interval.to_json(),
            "determined": self.determined,
            "deciding_nests": self.deciding,
            "range": list(self.range),
            "segments": [s.to_json() for s in self.segments],
        }


def choose(segments: Sequence[Segment], current: float, deciding: int) -> Threshold:
    """The midpoint of the best segment (to the fewest significant digits that stay in
    it); ``current`` (the hardware's value) when no nest's decision changes over the
    range and it lies in it (module docstring). ``deciding``: the nests swept."""
    lo, hi = segments[0].lo, segments[-1].hi
    best = best_segment(segments)
    if len(segments) > 1:
        return Threshold(short_inside(best), best, True, (lo, hi), tuple(segments), deciding)
    value = current if lo <= current < hi else short_inside(best)
    return Threshold(value, best, False, (lo, hi), tuple(segments), deciding)


def short_inside(segment: Segment) -> float:
    """The segment's midpoint rounded to 3 or more significant digits, as few as keep it
    strictly inside ``(lo, hi)``: a hardware file states it readably, deciding alike."""
    mid = segment.midpoint
    for digits in range(3, 17):
        value = float(f"{mid:.{digits}g}")
        if segment.lo < value < segment.hi:
            return value
    return mid


@dataclass(frozen=True)
class Calibration:
    """theta (as a ratio to B_cpu) and sigma calibrated on ``nests``; ``b_cpu`` the host's."""

    nests: tuple[NestEvidence, ...]
    b_cpu: float
    theta: Threshold  # values are ratios theta / B_cpu
    sigma: Threshold
    counts: Counts  # at the calibrated thresholds
    hardware_counts: Counts  # at the hardware's thresholds, to compare
    hardware_theta_ratio: float
    hardware_sigma: float

    @property
    def theta_ratio(self) -> float:
        return self.theta.value

    @property
    def theta_bandwidth(self) -> float:
        """theta in B/s on this host's B_cpu."""
        return self.theta.value * self.b_cpu

    def wrong(self) -> tuple[list[NestEvidence], list[NestEvidence]]:
        """(false positives, false negatives) at the calibrated thresholds."""
        fp = [n for n in self.nests if n.offloads(self.theta_ratio, self.sigma.value)
              and not n.pays]  # fmt: skip
        fn = [n for n in self.nests if n.pays
              and not n.offloads(self.theta_ratio, self.sigma.value)]  # fmt: skip
        return fp, fn

    def to_json(self) -> dict[str, Any]:
        return {
            "b_cpu": self.b_cpu,
            "theta_ratio": self.theta_ratio,
            "theta": self.theta_bandwidth,
            "theta_sweep": self.theta.to_json(),
            "sigma": self.sigma.value,
            "sigma_sweep": self.sigma.to_json(),
            "counts": self.counts.to_json(),
            "hardware_thresholds": {
                "theta_ratio": self.hardware_theta_ratio,
                "sigma": self.hardware_sigma,
                "counts": self.hardware_counts.to_json(),
            },
            "paper": {
                "theta_range_gbps": list(PAPER_THETA_RANGE_GBPS),
                "theta_interval_gbps": list(PAPER_THETA_INTERVAL_GBPS),
                "b_cpu_gbps": PAPER_B_CPU_GBPS,
                "agreement": f"{PAPER_AGREEMENT[0]}/{PAPER_AGREEMENT[1]}",
            },
            "nests": [n.to_json() for n in self.nests],
        }


def nest_evidence(
    instance: PimInstance, model: str, *, copy: str = "auto", allow_estimates: bool = False
) -> list[NestEvidence]:
    """Every nest of ``instance`` (at its core count): the rule's inputs and whether
    offloading it alone pays under Eq. 9 with ``copy`` accounting."""
    decisions = rule_placement(instance, allow_estimates=allow_estimates)
    cpu_only = instance.cpu_only
    ids = [n.id for n in instance.nests]
    out = []
    for nid in ids:
        alone = evaluate_placement(instance, {m: m == nid for m in ids}, copy=copy).total
        conditions = {c.name: c for c in decisions[nid].conditions}
        stage1 = all(conditions[c].passed is True for c in ("C1", "C2"))
        c3, c4 = conditions.get("C3"), conditions.get("C4")
        out.append(
            NestEvidence(
                model=model, nest=nid, pays=alone < cpu_only, t_cpu=instance.t_cpu[nid],
                t_alone=alone, stage1=stage1,
                stage1_reason="" if stage1 else decisions[nid].reason,
                read_bandwidth=None if c3 is None or c3.passed is None else c3.value,
                store_bound=None if c4 is None or c4.passed is None else c4.value,
                b_cpu=instance.host_dram_bandwidth,
                estimated=bool(c3 is not None and c3.estimated),
            )  # fmt: skip
        )
    return out


def host_b_cpu(measured: Iterable[float | None]) -> float | None:
    """The host's B_cpu from the profiles' measurements: their median (None: none has one)."""
    values = [b for b in measured if b is not None]
    return statistics.median(values) if values else None


def calibrate(
    nests: Sequence[NestEvidence],
    b_cpu: float,
    *,
    theta_range: tuple[float, float],
    sigma_range: tuple[float, float] = SIGMA_RANGE,
    hardware_theta_ratio: float,
    hardware_sigma: float,
) -> Calibration:
    """theta (as a ratio to B_cpu, ``theta_range`` in ratios too) and sigma over
    ``nests``, as the module docstring says. ``b_cpu`` (B/s): the host's, which scales
    the ``BW_read`` of nests whose profile measured none (the calibrated hardware file
    states it, so the rule will use it for them too)."""
    check_range(*theta_range, "theta range")
    check_range(*sigma_range, "sigma range", upper=1.0)
    if not nests:
        raise PlacementError("nothing to calibrate: no loop nests")
    if not any(n.pays for n in nests):
        raise PlacementError(
            f"nothing to calibrate: offloading pays for none of the {len(nests)} nests"
            " (each alone on PIM, Eq. 9 is never below CPU-only), so every threshold agrees"
            " with every nest alike; no hardware file written"
        )
    if not any(n.stage1 for n in nests):
        raise PlacementError(
            f"nothing to calibrate: none of the {len(nests)} nests passes stage 1 (C1, C2),"
            " so theta and sigma decide no nest; no hardware file written"
        )
    nests = [
        dataclasses.replace(n, read_ratio=None if n.read_bandwidth is None
                            else n.read_bandwidth / (n.b_cpu or b_cpu))
        for n in nests
    ]  # fmt: skip
    if not any(n.stage1 and (n.read_ratio is not None or n.store_bound is not None)
               for n in nests):  # fmt: skip
        raise PlacementError(
            "nothing to calibrate: no nest that passes stage 1 has C3's read bandwidth or"
            " C4's store-bound fraction (no counters: profile with --counters-source"
            " simulated, or estimate C3 with --allow-estimates); no hardware file written"
        )
    # theta on C3 alone: after stage 1, the nests with a read ratio are decided by it.
    ratio = {i: n.read_ratio for i, n in enumerate(nests) if n.stage1 and n.read_ratio is not None}
    others = count((False, n.pays) for i, n in enumerate(nests) if i not in ratio)
    theta = choose(
        sweep([(r, nests[i].pays) for i, r in ratio.items()], others, *theta_range),
        hardware_theta_ratio, len(ratio),
    )  # fmt: skip
    # sigma on what C3 leaves at that theta.
    c3_pass = {i for i, r in ratio.items() if r > theta.value}
    store = {i: n.store_bound for i, n in enumerate(nests)
             if n.stage1 and i not in c3_pass and n.store_bound is not None}  # fmt: skip
    fixed = count((i in c3_pass, n.pays) for i, n in enumerate(nests) if i not in store)
    sigma = choose(
        sweep([(s, nests[i].pays) for i, s in store.items()], fixed, *sigma_range),
        hardware_sigma, len(store),
    )  # fmt: skip
    return Calibration(
        nests=tuple(nests),
        b_cpu=b_cpu,
        theta=theta,
        sigma=sigma,
        counts=count((n.offloads(theta.value, sigma.value), n.pays) for n in nests),
        hardware_counts=count(
            (n.offloads(hardware_theta_ratio, hardware_sigma), n.pays) for n in nests
        ),
        hardware_theta_ratio=hardware_theta_ratio,
        hardware_sigma=hardware_sigma,
    )


def check_against_rule(
    calibration: Calibration, instances: Sequence[tuple[str, PimInstance]], *,
    allow_estimates: bool = False,
) -> None:  # fmt: skip
    """Run the rule itself with the calibrated thresholds on every instance (as the
    written hardware file will make it run, ``B_cpu`` of a profile without one being the
    host's) and refuse any decision that differs from the sweep's closed form."""
    closed = {(n.model, n.nest): n.offloads(calibration.theta_ratio, calibration.sigma.value)
              for n in calibration.nests}  # fmt: skip
    for model, instance in instances:
        spec = dataclasses.replace(
            instance.spec, theta_ratio=calibration.theta_ratio, sigma=calibration.sigma.value,
            host_dram_bandwidth=calibration.b_cpu,
        )  # fmt: skip
        rule = rule_placement(dataclasses.replace(instance, spec=spec),
                              allow_estimates=allow_estimates)  # fmt: skip
        for nid, decision in rule.items():
            if decision.on_pim != closed[(model, nid)]:
                raise PlacementError(
                    f"internal error: at the calibrated thresholds the rule puts {model}"
                    f" {nid} on {decision.place}, the calibration's closed form does not"
                    f" ({decision.reason})"
                )


def check_range(lo: float, hi: float, what: str, *, upper: float | None = None) -> None:
    """``0 <= lo < hi`` (``<= upper`` where given), finite: else a one-line error."""
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (lo, hi)):
        raise PlacementError(f"{what} must be two finite numbers, got {lo!r}, {hi!r}")
    if lo < 0:
        raise PlacementError(f"{what} {lo:g},{hi:g}: must not be negative")
    if hi <= lo:
        raise PlacementError(f"{what} {lo:g},{hi:g} is empty: need LO < HI")
    if upper is not None and hi > upper:
        raise PlacementError(f"{what} {lo:g},{hi:g}: at most {upper:g}")
