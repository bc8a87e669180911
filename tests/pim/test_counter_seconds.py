"""Rule C3 divides the counted traffic by the time of the program that was counted.

With ONNX Runtime host times (``--host-times ort``) the counters are counted (or
simulated) on the compiled program, while ``T_cpu`` is ONNX Runtime's time: Eq. 6 must use
the compiled program's own time (``NestProfile.counter_seconds``), else a compiled, untiled
matmul's L2 misses over ONNX Runtime's 6-7x shorter time read as a bandwidth no program
achieved. Closed forms: 64 MiB over 50 ms is 1.342 GB/s (below theta), over 1 ms 67.1 GB/s.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pim_oracles import big, sim

from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.pim.instance import PimInstance
from placement.pim.instance import build_instance as pim_instance
from placement.pim.output import read_bandwidth
from placement.pim.rules import apply_operator_rule, decide, rule_placement
from placement.profiling.counters import TABLE1_EVENTS
from placement.profiling.nest_profile import NestProfile

SPEC = PimSpec()
MB = 1 << 20
BYTES = 64 * MB
LINES = BYTES / 64  # the stream read once, in 64 B lines


def ort_profile(counter_source: str = "simulated", jit: dict | None = None) -> NestProfile:
    nests = [big(0), big(1)]
    detail = {"source": "ort", "jit_seconds": {"n000": 50e-3, "n001": 50e-3} if jit is None
              else jit}  # fmt: skip
    counters = {n.id: sim(ir=1e6, llr=LINES) for n in nests}
    return NestProfile(
        nests=nests, t_cpu={"n000": 1e-3, "n001": 1e-3}, counters=counters,
        counter_source=counter_source, model_sha256="0" * 64, model_path="m.onnx",
        source_kind="onnx", metadata={"runs": 1, "host_times_detail": detail},
        host_times="ort",
    )  # fmt: skip


@pytest.mark.unit
def test_c3_uses_the_counted_programs_time_and_c1_keeps_t_cpu():
    n = big()
    fast = decide(n, 1e-3, sim(ir=1e6, llr=LINES), SPEC)  # ORT's 1 ms as the denominator
    assert fast.place == "pim" and "BW_read 67.1 GB/s" in fast.reason
    d = decide(n, 1e-3, sim(ir=1e6, llr=LINES), SPEC, counter_seconds=50e-3)
    c1, c3 = d.conditions[0], d.conditions[2]
    assert c1.passed and c1.value == 1e-3  # stage 1 still judges the host time
    assert d.place == "host" and not c3.passed and c3.value == pytest.approx(BYTES / 50e-3)
    assert "BW_read 1.34 GB/s <= theta" in d.reason
    # Hardware counters take the same denominator: n_rd * L over the counted time.
    hw = dict.fromkeys(TABLE1_EVENTS, 0.0) | {"offcore_requests.all_data_rd": BYTES / 64}
    assert decide(n, 1e-3, hw, SPEC, counter_seconds=50e-3).conditions[2].value == pytest.approx(
        BYTES / 50e-3
    )
    # A counted program that took no time gives no bandwidth: C3 not evaluated, host.
    zero = decide(n, 1e-3, sim(ir=1e6, llr=LINES), SPEC, counter_seconds=0.0)
    assert zero.place == "host" and zero.undetermined and zero.conditions[2].passed is None
    with pytest.raises(PlacementError, match="'n000': counted-program time must be a time"):
        decide(n, 1e-3, sim(ir=1e6, llr=LINES), SPEC, counter_seconds=-1.0)


@pytest.mark.unit
def test_profile_counter_seconds_per_host_time_source():
    profile = ort_profile()
    assert profile.counter_seconds == {"n000": 50e-3, "n001": 50e-3}
    # Counters from a file: what was counted is unknown, T_cpu as before.
    assert ort_profile("file").counter_seconds == profile.t_cpu
    assert replace(profile, host_times="compiled").counter_seconds == profile.t_cpu
    with pytest.raises(PlacementError, match="'jit_seconds' of nest 'n001' must be a time"):
        _ = ort_profile(jit={"n000": 50e-3}).counter_seconds


@pytest.mark.unit
def test_instance_of_an_ort_profile_decides_c3_on_the_compiled_time():
    profile = ort_profile()
    inst = pim_instance(profile, SPEC, 32)
    assert inst.counter_seconds == {"n000": 50e-3, "n001": 50e-3}
    rule = rule_placement(inst)
    assert all(d.place == "host" for d in rule.values())
    assert rule["n000"].conditions[2].value == pytest.approx(BYTES / 50e-3)
    # The report shows the same bandwidth the rule used.
    bw = read_bandwidth(profile.nests[0], 1e-3, profile.counters["n000"], 64, 50e-3)
    assert bw.simulated and bw.value == pytest.approx(BYTES / 50e-3)
    with pytest.raises(PlacementError, match="counted-program time must be a time"):
        PimInstance(nests=tuple(profile.nests), t_cpu=profile.t_cpu, spec=SPEC,
                    counter_seconds={"n000": -1.0})  # fmt: skip


@pytest.mark.unit
def test_operator_region_sums_the_counted_times():
    a, b = big(0, node="op"), big(1, node="op")
    counters = {"n000": sim(ir=1e6, llr=LINES), "n001": sim(ir=1e6, llr=LINES)}
    t = {"n000": 1e-3, "n001": 1e-3}
    d = apply_operator_rule([a, b], t, counters, SPEC, 32,
                            counter_seconds={"n000": 40e-3, "n001": 60e-3})["n000"]  # fmt: skip
    assert d.conditions[2].value == pytest.approx(2 * BYTES / 100e-3)  # a ratio of sums
    assert d.place == "host"
