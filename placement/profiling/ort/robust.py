"""Robust statistics for host latencies measured on a shared, noisy machine.

Pure functions (no ONNX Runtime, no clock) used by
:func:`placement.profiling.ort.measure.profile_model`; the definitions here are the
ones its profile files record.

Rounds
------
The measured runs are taken in *rounds*: the runs of a round back to back, a short
pause (:data:`ROUND_PAUSE_SECONDS`) between rounds, so that a burst of background
load hits one round rather than all of them. ``runs`` measured runs are split by
:func:`round_sizes` into ``ceil(runs / RUNS_PER_ROUND)`` rounds whose sizes differ by
at most one (20 runs: 5 rounds of 4; 6 runs: 2 rounds of 3; 1 run: 1 round of 1).
When those runs would take less than :data:`MIN_SECONDS` (at the warm-up's pace),
rounds of :data:`RUNS_PER_ROUND` runs follow, :data:`SPACED_PAUSE_SECONDS` apart, as
many as make the profile span about that long.

Statistic (``minimum-over-runs``)
---------------------------------
Per operator, :func:`fastest_time` takes the minimum over all measured runs (the
minimum over rounds of each round's minimum). Load only ever adds time, and on this
kind of shared VM it comes in spells: for seconds at a time every run is 30-45 %
slower (benchmarks/README.md, "The quick start's reproducibility"), often for more
than half of a profile's rounds, which moved the former statistic (the median over
rounds of the round minima) by as much; the minimum over a profile that spans a few
seconds is reached in the fast spells between them. A profile's ``kernel_total`` is
the sum of these per-operator statistics, so the per-operator latencies still sum to
it exactly (no single run need reach all minima at once: the sum is the operators'
own latencies, without the slowdowns other processes add).

Spread (relative interquartile range)
-------------------------------------
:func:`relative_spread` of values ``v`` is ``(p75(v) - p25(v)) / p50(v)``, the
percentiles interpolated linearly between order statistics (NumPy's default;
``statistics.quantiles(method="inclusive")``); 0 for fewer than two values or a zero
median. Per operator it is taken over the per-round minima (relative to their median,
not to the reported minimum); for the profile's total over the *per-round totals of
minima* ``T_r = sum over operators of min over the runs of round r`` (reported as
``total_spread``). With one round the spread is 0: nothing to compare.

Stability (``--runs auto``)
---------------------------
:func:`is_stable`: the statistic, recomputed after every round, moved by at most
``tolerance`` (relative to its latest value) over the last :data:`AUTO_WINDOW` added
rounds, and at least :data:`AUTO_MIN_ROUNDS` rounds were measured.

Warnings
--------
:func:`stability_warning` returns one sentence when the total's spread exceeds
:data:`SPREAD_WARNING` and fewer than :data:`FAST_ROUNDS` rounds ran within that much
of the fastest round (so the minimum is not confirmed: a repeated profile can read as
much higher as the slowest round did), or the machine was busy: other processes kept
more than
:data:`LOAD_WARNING` of the CPUs busy while measuring or, when that was not measured
(too short a measurement, no ``/proc/stat``), the 1-minute load average per CPU
before measuring exceeded it. The load average counts every runnable process,
including the measuring one's own earlier work, hence the measured share comes first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

STATISTIC = "minimum-over-runs"
SPREAD_DEFINITION = "(p75 - p25) / p50 of the per-round minima (linear percentiles)"
RUNS_PER_ROUND = 4  # nominal runs per round, back to back
ROUND_PAUSE_SECONDS = 0.005  # sleep between two rounds
# Measure for at least this long, so that a profile reaches past a slow spell of the
# machine (benchmarks/README.md, "The quick start's reproducibility": spells last up to
# ~10 s; in two 15-minute records a 2 s window read > 5 % high in 9-20 % of the windows,
# 6 s in 2 %, 8 s in 0.5-0.7 %).
MIN_SECONDS = 8.0
# Sleep between the rounds that extend a profile to MIN_SECONDS: about as many runs as
# the former 2 s of rounds 0.1 s apart, spread over the longer window.
SPACED_PAUSE_SECONDS = 0.3
SPREAD_WARNING = 0.05  # total_spread above this warns, unless FAST_ROUNDS confirm the minimum
FAST_ROUNDS = 3  # rounds within SPREAD_WARNING of the fastest round that confirm it
LOAD_WARNING = 0.5  # busy fraction of the CPUs (others' load) above this warns
AUTO_TOLERANCE = 0.02  # --runs auto: relative change allowed over the last rounds
AUTO_TIME_BUDGET = 30.0  # --runs auto: seconds for warm-up and measured runs
AUTO_MIN_ROUNDS = 5  # --runs auto: never stop as stable before this many rounds
AUTO_WINDOW = 3  # --runs auto: rounds over which the statistic must stay put


def round_sizes(runs: int, per_round: int = RUNS_PER_ROUND) -> list[int]:
    """Sizes of the rounds ``runs`` measured runs are taken in (sum = ``runs``)."""
    if runs < 1 or per_round < 1:
        raise ValueError(f"runs and per_round must be >= 1, got {runs}, {per_round}")
    rounds = math.ceil(runs / per_round)
    base, extra = divmod(runs, rounds)
    return [base + 1 if i < extra else base for i in range(rounds)]


def group_rounds(values: Sequence[float], sizes: Sequence[int]) -> list[list[float]]:
    """``values`` (one per run, in run order) cut into consecutive rounds of ``sizes``."""
    if sum(sizes) != len(values):
        raise ValueError(f"{len(values)} values do not fill rounds of sizes {list(sizes)}")
    rounds: list[list[float]] = []
    start = 0
    for size in sizes:
        rounds.append(list(values[start : start + size]))
        start += size
    return rounds


def round_minima(per_round_values: Sequence[Sequence[float]]) -> list[float]:
    """The minimum of each round (every round must hold at least one value)."""
    if not per_round_values or any(len(r) == 0 for r in per_round_values):
        raise ValueError("every round needs at least one value")
    return [min(r) for r in per_round_values]


def fastest_time(per_round_values: Sequence[Sequence[float]]) -> float:
    """The minimum over all runs, i.e. over rounds of the round minima (``minimum-over-runs``)."""
    return float(min(round_minima(per_round_values)))


def relative_spread(values: Sequence[float]) -> float:
    """``(p75 - p25) / p50`` of ``values`` (linear percentiles); 0 if < 2 values or p50 = 0."""
    if len(values) < 2:
        return 0.0
    p25, p50, p75 = np.percentile(np.asarray(values, dtype=float), [25, 50, 75])
    if not p50 > 0:
        return 0.0
    return float((p75 - p25) / p50)


def round_totals(per_node_rounds: Sequence[Sequence[Sequence[float]]]) -> list[float]:
    """Per round, the sum over nodes of the node's minimum in that round.

    ``per_node_rounds[n][r]`` holds node ``n``'s values in round ``r``.
    """
    if not per_node_rounds:
        return []
    count = len(per_node_rounds[0])
    return [math.fsum(min(node[r]) for node in per_node_rounds) for r in range(count)]


def is_stable(
    history: Sequence[float],
    tolerance: float,
    *,
    min_rounds: int = AUTO_MIN_ROUNDS,
    window: int = AUTO_WINDOW,
) -> bool:
    """Whether the statistic after each round (``history``) has settled (module docstring)."""
    if len(history) < max(min_rounds, window + 1):
        return False
    recent = history[-(window + 1) :]
    latest = history[-1]
    if not latest > 0:
        return False
    return (max(recent) - min(recent)) / latest <= tolerance


def stability_warning(
    *,
    total_spread: float,
    rounds: int,
    load_per_cpu_before: float | None,
    busy_others_per_cpu: float | None,
    round_totals: Sequence[float] = (),
    spread_limit: float = SPREAD_WARNING,
    load_limit: float = LOAD_WARNING,
) -> str | None:
    """One warning sentence when the profile may not be reproducible, else ``None``.

    ``round_totals`` (the per-round totals of minima) tell how many rounds confirm the
    fastest and how much slower the slowest was; without them a high spread always warns.
    ``busy_others_per_cpu`` (others' share of all CPUs while measuring) decides about the
    load when known; else ``load_per_cpu_before`` (1-minute load average per CPU).
    """
    reasons: list[str] = []
    fastest = min(round_totals, default=0.0)
    fast = sum(1 for t in round_totals if t <= fastest * (1 + spread_limit))
    unconfirmed = total_spread > spread_limit and fast < FAST_ROUNDS
    if unconfirmed:
        reason = (
            f"the total varied by {100 * total_spread:.1f} % between rounds (interquartile"
            f" range over {rounds} rounds; limit {100 * spread_limit:.0f} %)"
        )
        if fastest > 0:
            reason += (
                f" and only {fast} of them ran within {100 * spread_limit:.0f} % of the"
                f" fastest, so a repeated profile can read up to"
                f" {100 * (max(round_totals) / fastest - 1):.0f} % higher"
            )
        reasons.append(reason)
    if busy_others_per_cpu is not None:
        if busy_others_per_cpu > load_limit:
            reasons.append(
                f"other processes kept {100 * busy_others_per_cpu:.0f} % of the CPUs busy"
                " while measuring"
            )
    elif load_per_cpu_before is not None and load_per_cpu_before > load_limit:
        reasons.append(
            f"the machine was busy before measuring (load average {load_per_cpu_before:.2f}"
            " per CPU)"
        )
    if not reasons:
        return None
    advice = "re-profile on an idle machine"
    if unconfirmed:
        advice += ", or measure longer (--min-seconds, or --runs auto)"
    return (
        "host latencies may not be reproducible: "
        + "; ".join(reasons)
        + f". Every reported speed-up scales with them: {advice}"
    )


def parse_runs(text: str) -> int | str:
    """``"auto"`` or an integer, from a command-line word; ``ValueError`` otherwise.

    The range (``>= 1``) is checked where the runs are used, as for any ``--runs``.
    """
    word = text.strip().lower()
    if word == "auto":
        return "auto"
    try:
        return int(word)
    except ValueError:
        raise ValueError(f"expected a whole number of runs or 'auto', got {text!r}") from None
