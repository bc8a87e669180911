"""The calibration against the rule and the model it calibrates: theta follows the
profile's measured B_cpu, each nest's evidence agrees with the rule and with an
independent Eq. 9 (the oracles' ``hybrid_cost``), the rule itself decides as the sweep's
closed form at the calibrated thresholds, and the written hardware file loads."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from pim_oracles import PARTITIONED_SPEC, hybrid_cost, random_instance

from placement.errors import PlacementError
from placement.hardware.pim import load_pim_hardware
from placement.pim.calibration import NestEvidence, calibrate, check_against_rule, nest_evidence
from placement.pim.calibration_output import Setting, hardware_toml, summary_lines
from placement.pim.instance import PimInstance, build_instance
from placement.pim.rules import rule_placement
from placement.profiling.nest_profile import NestProfile

pytestmark = pytest.mark.unit

HW = load_pim_hardware("pim-icelake")
GB = 1e9
OLD_PROFILE = Path(__file__).resolve().parents[1] / "golden" / "resnet_tiny.nests.json"


def with_counters(instance: PimInstance, seed: int) -> PimInstance:
    """At 4 cores, host times 1x-50x the random ones (some nests fail C1, some pay, some
    do not) and Table 1 events: read bandwidths of 0.1-10 GB/s, store-bound 0-0.6."""
    rng = random.Random(seed)
    t_cpu = {k: v * rng.choice([0.3, 1, 3, 50]) for k, v in instance.t_cpu.items()}
    counters = {}
    for n in instance.nests:
        store = rng.uniform(0, 60)
        counters[n.id] = {
            "offcore_requests.all_data_rd": rng.uniform(0.1, 10) * GB * t_cpu[n.id] / 64,
            "exe_activity.bound_on_stores": store,
            "cycle_activity.stalls_total": 100 - store,
            "exe_activity.1_ports_util": 0.0,
            "exe_activity.2_ports_util": 0.0,
        }
    return dataclasses.replace(instance, counters=counters, t_cpu=t_cpu, n_cores=4)


def test_theta_scales_with_the_profiles_b_cpu_and_falls_back_to_the_hardwares():
    inst = with_counters(random_instance(1, 6), 1)
    assert inst.b_cpu == inst.spec.host_dram_bandwidth and not inst.b_cpu_measured
    assert inst.theta == pytest.approx(0.12 * 16.754 * GB)
    fast = dataclasses.replace(inst, host_dram_bandwidth=40 * GB)
    assert fast.b_cpu_measured and fast.theta == pytest.approx(0.12 * 40 * GB)
    c3 = {nid: [c for c in d.conditions if c.name == "C3"] for nid, d in
          rule_placement(fast).items()}  # fmt: skip
    assert all(c[0].threshold == pytest.approx(4.8 * GB) for c in c3.values() if c)
    assert any(c for c in c3.values())
    with pytest.raises(PlacementError, match="B_cpu must be a bandwidth > 0"):
        dataclasses.replace(inst, host_dram_bandwidth=0.0)


def test_build_instance_carries_the_profiles_measurement(tmp_path):
    profile = NestProfile.load(OLD_PROFILE)  # written before B_cpu was measured
    assert profile.host_dram_read is None and profile.host_dram_bandwidth is None
    assert build_instance(profile, HW).host_dram_bandwidth is None
    measured = dataclasses.replace(profile, host_dram_read={"gbps": 12.5, "method": "m"})
    measured.save(tmp_path / "p.json")
    again = NestProfile.load(tmp_path / "p.json")
    assert again.host_dram_bandwidth == 12.5 * GB
    assert build_instance(again, HW).theta == pytest.approx(0.12 * 12.5 * GB)


@pytest.mark.parametrize("copy", ["upper_bound", "exact", "shared"])
@pytest.mark.parametrize("seed", range(6))
def test_evidence_agrees_with_the_rule_and_an_independent_eq9(seed, copy):
    inst = with_counters(random_instance(seed, 7, cache="warm"), seed)
    evidence = nest_evidence(inst, "m", copy=copy)
    rule = rule_placement(inst)
    cpu_only = sum(inst.t_cpu.values())
    for n, e in zip(inst.nests, evidence, strict=True):
        alone = hybrid_cost(inst, [m.id == n.id for m in inst.nests], copy)
        assert e.t_alone == pytest.approx(alone, rel=1e-9)
        assert e.pays == (alone < cpu_only)
        conditions = {c.name: c for c in rule[n.id].conditions}
        assert e.stage1 == (conditions["C1"].passed and conditions["C2"].passed)
        if e.stage1:
            assert e.read_bandwidth == pytest.approx(conditions["C3"].value)
            assert e.store_bound == pytest.approx(conditions["C4"].value)


def test_partitioned_evidence_uses_the_partitioned_accounting():
    inst = with_counters(random_instance(3, 6, spec=PARTITIONED_SPEC), 3)
    evidence = nest_evidence(inst, "m")  # auto: the spec's partitioned memory
    for n, e in zip(inst.nests, evidence, strict=True):
        alone = hybrid_cost(inst, [m.id == n.id for m in inst.nests], "partitioned")
        assert e.t_alone == pytest.approx(alone, rel=1e-9)


def calibrated(seeds=range(4)):
    instances = [(f"m{s}", with_counters(random_instance(s, 8, cache="warm"), s)) for s in seeds]
    evidence = [e for label, inst in instances for e in nest_evidence(inst, label)]
    cal = calibrate(evidence, HW.pim.host_dram_bandwidth, theta_range=(0.0, 1.0),
                    hardware_theta_ratio=0.12, hardware_sigma=0.4)  # fmt: skip
    return cal, instances


def test_the_rule_decides_as_the_closed_form_at_the_calibrated_thresholds():
    cal, instances = calibrated()
    check_against_rule(cal, instances)  # raises on any difference
    # a tampered closed form is caught
    nests = list(cal.nests)
    i = next(k for k, n in enumerate(nests) if n.stage1 and n.read_ratio is not None)
    flipped = 0.0 if nests[i].offloads(cal.theta_ratio, cal.sigma.value) else 10.0
    nests[i] = dataclasses.replace(nests[i], read_ratio=flipped, store_bound=None)
    assert nests[i].offloads(cal.theta_ratio, cal.sigma.value) != cal.nests[i].offloads(
        cal.theta_ratio, cal.sigma.value)  # fmt: skip
    with pytest.raises(PlacementError, match="internal error"):
        check_against_rule(dataclasses.replace(cal, nests=tuple(nests)), instances)


SETTING = Setting(
    date="2026-01-01T00:00:00+00:00", host="test host", models=("m0", "m1"), cores=4,
    hardware=HW.name, memory=HW.pim.memory_text(), copy="shared", t_pim="model",
    profiles="hand-made", b_cpu="given", theta_range="0-1",
)  # fmt: skip


def test_the_report_says_when_the_interval_ends_the_range_and_nothing_is_offloaded():
    # c (0.3) pays, a (0.4) does not: no false positive only above 0.4, to the range's end
    nests = [NestEvidence("m", n, pays, 1e-3, 1e-3, True, "", ratio * 10 * GB, None, None)
             for n, ratio, pays in (("a", 0.4, False), ("c", 0.3, True))]  # fmt: skip
    cal = calibrate(nests, 10 * GB, theta_range=(0.0, 1.0), hardware_theta_ratio=0.12,
                    hardware_sigma=0.4)  # fmt: skip
    assert (cal.theta.interval.lo, cal.theta.interval.hi) == pytest.approx((0.4, 1.0))
    text = "\n".join(summary_lines(cal, SETTING))
    assert "the interval ends at the range's upper end" in text
    assert "the rule offloads no nest" in text
    assert "1/2 = 0.500 (TP 0, FP 0, TN 1, FN 1)" in text


def test_the_hardware_file_loads_with_the_calibrated_values(tmp_path):
    cal, _ = calibrated()
    setting = SETTING
    text = hardware_toml(HW, cal, setting, host_name="Test CPU", host_arch="x86_64")
    path = tmp_path / "hw.toml"
    path.write_text(text)
    loaded = load_pim_hardware(path)
    assert loaded.pim.theta_ratio == cal.theta_ratio and loaded.pim.sigma == cal.sigma.value
    assert loaded.pim.host_dram_bandwidth == pytest.approx(cal.b_cpu)
    unchanged = dataclasses.replace(loaded.pim, theta_ratio=HW.pim.theta_ratio,
                                    sigma=HW.pim.sigma,
                                    host_dram_bandwidth=HW.pim.host_dram_bandwidth)  # fmt: skip
    assert unchanged == HW.pim
    assert loaded.host.name == "Test CPU" and loaded.name == "pim-icelake-calibrated"
    comments = [line for line in text.splitlines() if line.startswith("#")]
    agreement = f"{cal.counts.agree}/{cal.counts.total} = {cal.counts.agreement:.3f}"
    assert any(agreement in line and "37/44 = 0.841" in line for line in comments)
    assert any("models: m0, m1" in line for line in comments)
    assert summary_lines(cal, setting)[0].startswith(
        "calibration (Torch-PIM Section 4.4) over 32 loop nests of 2 models at N_core 4")
