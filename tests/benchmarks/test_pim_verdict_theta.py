"""The theta window of benchmarks/pim_verdict_theta.py on hand-made bandwidths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def theta():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import pim_verdict_theta

        yield pim_verdict_theta
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_classes_hold_exactly_inside_the_window(theta):
    gb = 1e9
    needs = [
        theta.Need("S1", "ew_add n000", theta.OFFLOAD, 9 * gb, None),
        theta.Need("G3", "gemv n001", theta.OFFLOAD, 4 * gb, None),
        theta.Need("T1", "silu n000", theta.KEEP, 1 * gb, None),
        theta.Need("G1", "matmul n001", theta.KEEP, 0.5 * gb, None),
    ]
    # keep needs theta >= 1 GB/s, offload needs theta < 4 GB/s
    for t in (1.0, 2.0, 3.999):
        assert theta.classes_holding(needs, t * gb) == {"S1", "G3", "T1", "G1"}
    assert theta.classes_holding(needs, 0.99 * gb) == {"S1", "G3", "G1"}
    assert theta.classes_holding(needs, 4 * gb) == {"S1", "T1", "G1"}  # C3 is strict: BW > theta
    assert theta.classes_holding(needs, 10 * gb) == {"T1", "G1"}


def test_a_class_with_one_nest_decided_elsewhere_holds_or_fails_at_every_theta(theta):
    needs = [
        theta.Need("G9", "depthwise_conv n001", theta.KEEP, None, False),  # C4 offloads it
        theta.Need("G9", "depthwise_conv n000", theta.KEEP, 0.1e9, None),
        theta.Need("S1", "zeroing n000", theta.OFFLOAD, None, True),  # C4 offloads it
    ]
    for t in (0.0, 1e9, 1e12):
        assert theta.classes_holding(needs, t) == {"S1"}
