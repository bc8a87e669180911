"""The Section 4.4 calibration's sweep, interval and midpoint on hand-made nests whose
bandwidths, store-bound fractions and ground truths are given: closed forms, and a
brute-force grid over the thresholds as an independent oracle."""

from __future__ import annotations

import itertools

import pytest

from placement.errors import PlacementError
from placement.pim.calibration import (
    Counts,
    NestEvidence,
    Segment,
    calibrate,
    count,
    short_inside,
    sweep,
)

pytestmark = pytest.mark.unit

GB = 1e9
B_CPU = 10 * GB  # the host's B_cpu: bandwidths below are ratios x 10 GB/s
HW_THETA, HW_SIGMA = 0.12, 0.4


def evidence(name, gbps=None, pays=False, *, stage1=True, store=None, b_cpu=None, model="m"):
    return NestEvidence(
        model=model, nest=name, pays=pays, t_cpu=1e-3, t_alone=5e-4 if pays else 2e-3,
        stage1=stage1, stage1_reason="" if stage1 else "C1 failed", read_bandwidth=None
        if gbps is None else gbps * GB, store_bound=store, b_cpu=b_cpu,
    )  # fmt: skip


def run(nests, theta=(0.0, 1.0), sigma=(0.0, 1.0), b_cpu=B_CPU):
    return calibrate(nests, b_cpu, theta_range=theta, sigma_range=sigma,
                     hardware_theta_ratio=HW_THETA, hardware_sigma=HW_SIGMA)  # fmt: skip


def test_separable_bandwidths_give_the_interval_between_the_classes():
    # 1 and 2 GB/s do not pay, 3 and 5 GB/s do: theta/B_cpu in [0.2, 0.3) separates them
    # exactly (at 0.2 the 2 GB/s nest fails C3: BW_read > theta is strict).
    nests = [evidence("a", 1), evidence("b", 2), evidence("c", 3, True), evidence("d", 5, True)]
    cal = run(nests)
    assert [(s.lo, s.hi) for s in cal.theta.segments] == [
        (0.0, 0.1), (0.1, 0.2), (0.2, 0.3), (0.3, 0.5), (0.5, 1.0)]  # fmt: skip
    assert [(s.counts.fp, s.counts.fn) for s in cal.theta.segments] == [
        (2, 0), (1, 0), (0, 0), (0, 1), (0, 2)]  # fmt: skip
    assert (cal.theta.interval.lo, cal.theta.interval.hi) == (0.2, 0.3)
    assert cal.theta_ratio == pytest.approx(0.25) and cal.theta.determined
    assert cal.theta_bandwidth == pytest.approx(2.5 * GB)
    assert cal.counts == Counts(tp=2, fp=0, tn=2, fn=0) and cal.counts.agreement == 1.0


def test_persistent_false_positive_keeps_the_lowest_threshold_with_fewest_false_negatives():
    # As the paper's two false positives that persist up to 4.00 GB/s: a nest that does not
    # pay (d, 5 GB/s) above every one that does. Over the whole range FP reach 0 only
    # above 5 GB/s ([0.5, 1)). Within a range ending at 0.45, FP are fewest (1: d) from
    # 0.2 on, and among those thresholds FN are fewest (1: a) in [0.2, 0.3): 0.25.
    nests = [evidence("a", 1, True), evidence("b", 2), evidence("c", 3, True),
             evidence("d", 5), evidence("e", 0.5, False)]  # fmt: skip
    whole = run(nests)
    assert (whole.theta.interval.lo, whole.theta.interval.hi) == (0.5, 1.0)
    assert whole.theta.interval.counts == Counts(tp=0, fp=0, tn=3, fn=2)
    part = run(nests, theta=(0.0, 0.45))
    assert [(s.counts.fp, s.counts.fn) for s in part.theta.segments] == [
        (3, 0), (2, 0), (2, 1), (1, 1), (1, 2)]  # fmt: skip
    assert (part.theta.interval.lo, part.theta.interval.hi) == (0.2, 0.3)
    assert part.theta_ratio == pytest.approx(0.25)
    assert part.counts == Counts(tp=1, fp=1, tn=2, fn=1)


def test_nests_failing_stage_1_or_without_counters_are_constant_host_decisions():
    nests = [evidence("a", 1), evidence("c", 3, True),
             evidence("x", 9, True, stage1=False),  # fails C1: host at any threshold -> FN
             evidence("y", None, False),  # no counters: host -> TN
             ]  # fmt: skip
    cal = run(nests)
    assert (cal.theta.interval.lo, cal.theta.interval.hi) == (0.1, 0.3)
    assert cal.theta.deciding == 2
    assert cal.counts == Counts(tp=1, fp=0, tn=2, fn=1)


def test_sigma_is_swept_on_the_nests_c3_leaves_and_only_those():
    nests = [
        evidence("a", 1), evidence("c", 3, True),  # theta -> [0.1, 0.3)
        evidence("s1", 0.0, True, store=0.2),  # C3 fails; pays; C4 passes below 0.2
        evidence("s2", 0.0, False, store=0.6),  # C3 fails; does not pay
        evidence("s3", 12, False, store=0.9),  # above the theta range: C3 always passes
    ]
    cal = run(nests)
    assert (cal.theta.interval.lo, cal.theta.interval.hi) == (0.1, 0.3)
    assert cal.sigma.deciding == 2
    assert [(s.lo, s.hi) for s in cal.sigma.segments] == [(0.0, 0.2), (0.2, 0.6), (0.6, 1.0)]
    # s3 is a false positive at every sigma (C3), a constant
    assert [(s.counts.fp, s.counts.fn) for s in cal.sigma.segments] == [(2, 0), (2, 1), (1, 1)]
    assert cal.sigma.value == pytest.approx(0.8)
    assert cal.counts == Counts(tp=1, fp=1, tn=2, fn=1)


def test_a_range_that_no_value_falls_in_keeps_the_hardware_value():
    nests = [evidence("a", 1), evidence("c", 3, True)]
    cal = run(nests, theta=(0.4, 0.9))  # 0.1 and 0.3 are below the range
    assert not cal.theta.determined and len(cal.theta.segments) == 1
    assert cal.theta_ratio == pytest.approx(0.65)  # the hardware's 0.12 is not in it
    assert run(nests, theta=(0.35, 0.9)).theta_ratio == pytest.approx(0.625)
    inside = run(nests, theta=(0.05, 0.09))
    assert not inside.theta.determined and inside.theta_ratio == pytest.approx(0.07)
    # no nest with a store-bound fraction: sigma keeps the hardware's 0.4
    assert not inside.sigma.determined and inside.sigma.value == HW_SIGMA


def test_each_profiles_b_cpu_scales_its_nests_and_the_host_s_the_others():
    # 9 GB/s measured on a 30 GB/s host is ratio 0.3; 1 GB/s of a profile without a
    # measurement is 1 / 10 = 0.1 (the host's B_cpu, which the written file states). Only
    # those two scalings give the interval [0.1, 0.3) (p alone scaled by the host: 0.9;
    # q by 30 GB/s: 0.033).
    nests = [evidence("p", 9, True, b_cpu=30 * GB), evidence("q", 1, False)]
    cal = run(nests)
    assert {n.nest: n.read_ratio for n in cal.nests} == pytest.approx({"p": 0.3, "q": 0.1})
    assert (cal.theta.interval.lo, cal.theta.interval.hi) == pytest.approx((0.1, 0.3))
    assert cal.counts == Counts(tp=1, fp=0, tn=1, fn=0)


def test_sweep_and_best_interval_agree_with_a_brute_force_grid():
    """Random bandwidths and truths: the chosen interval holds exactly the grid thresholds
    with the lexicographically fewest (FP, FN), and its midpoint decides like them."""
    import random

    rng = random.Random(7)
    for trial in range(40):
        nests = [evidence(f"n{i}", round(rng.uniform(0, 8), 2), rng.random() < 0.5,
                          stage1=rng.random() < 0.8) for i in range(rng.randint(1, 9))]  # fmt: skip
        if not any(n.pays for n in nests) or not any(n.stage1 for n in nests):
            continue
        cal = run(nests)
        grid = [i / 1000 for i in range(1000)]
        score = {t: count((n.offloads(t, 1.0), n.pays) for n in cal.nests) for t in grid}
        best = min((c.fp, c.fn) for c in score.values())
        chosen = [t for t in grid if (score[t].fp, score[t].fn) == best]
        lo, hi = cal.theta.interval.lo, cal.theta.interval.hi
        assert all(lo <= t < hi for t in chosen), (trial, lo, hi, chosen[:3], chosen[-3:])
        assert all(t in chosen for t in grid if lo <= t < hi), trial
        assert (cal.theta.interval.counts.fp, cal.theta.interval.counts.fn) == best


def test_counts_and_segments():
    assert count([(True, True), (True, False), (False, False), (False, True), (False, True)]) \
        == Counts(1, 1, 1, 2)  # fmt: skip
    c = Counts(24, 2, 13, 5)
    assert (c.agree, c.total) == (37, 44) and c.text() == (
        "37/44 = 0.841 (TP 24, FP 2, TN 13, FN 5)")  # the paper's setting
    segments = sweep([(0.3, True), (0.3, False), (0.7, True)], Counts(tn=1), 0.0, 1.0)
    assert [(s.lo, s.hi, s.counts) for s in segments] == [
        (0.0, 0.3, Counts(2, 1, 1, 0)), (0.3, 0.7, Counts(1, 0, 2, 1)),
        (0.7, 1.0, Counts(0, 0, 2, 2))]  # fmt: skip


@pytest.mark.parametrize(("lo", "hi", "value"), [
    (1.80, 2.13, 1.965), (0.2, 0.3, 0.25), (0.1234567, 0.1234568, 0.12345675),
    (0.0, 0.0007218, 0.000361)])  # fmt: skip
def test_the_midpoint_is_written_short_but_stays_inside(lo, hi, value):
    got = short_inside(Segment(lo, hi, Counts()))
    assert lo < got < hi and got == pytest.approx(value, rel=5e-3)


@pytest.mark.parametrize(("nests", "message"), [
    ([evidence("a", 1), evidence("b", 5)], "offloading pays for none of the 2 nests"),
    ([evidence("a", 1, True, stage1=False)], "none of the 1 nests passes stage 1"),
    ([evidence("a", None, True)], "no nest that passes stage 1 has C3's read bandwidth"),
    ([], "no loop nests"),
])  # fmt: skip
def test_nothing_to_calibrate_is_one_line(nests, message):
    with pytest.raises(PlacementError, match=message) as err:
        run(nests)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("theta", "sigma", "message"), [
    ((-0.1, 0.5), (0.0, 1.0), "theta range -0.1,0.5: must not be negative"),
    ((0.5, 0.5), (0.0, 1.0), "theta range 0.5,0.5 is empty"),
    ((0.5, 0.2), (0.0, 1.0), "is empty"),
    ((0.0, 1.0), (0.0, 1.5), "sigma range 0,1.5: at most 1"),
    ((0.0, float("inf")), (0.0, 1.0), "two finite numbers"),
])  # fmt: skip
def test_ranges_out_of_range_are_refused(theta, sigma, message):
    nests = [evidence("a", 1), evidence("c", 3, True)]
    with pytest.raises(PlacementError, match=message):
        run(nests, theta=theta, sigma=sigma)


def test_every_pair_of_thresholds_in_the_chosen_intervals_decides_alike():
    nests = [evidence(f"n{i}", g, p, store=s) for i, (g, p, s) in enumerate(
        itertools.product((0.5, 1.5, 2.5), (True, False), (0.1, 0.5)))]  # fmt: skip
    cal = run(nests)
    t, s = cal.theta.interval, cal.sigma.interval
    expected = [n.offloads(cal.theta_ratio, cal.sigma.value) for n in cal.nests]
    for theta in (t.lo, t.midpoint, t.hi - 1e-9):
        for sigma in (s.lo, s.midpoint, s.hi - 1e-9):
            assert [n.offloads(theta, sigma) for n in cal.nests] == expected
