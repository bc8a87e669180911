"""The two-stage threshold rule (Eqs. 1-7) on hand-made nests and counters."""

import dataclasses

import pytest
from pim_oracles import nest, operand

from placement.devices.pim import t_pim_min
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec
from placement.pim.instance import PimInstance
from placement.pim.rules import apply_rule, decide, rule_placement

pytestmark = pytest.mark.unit

SPEC = PimSpec()
MB = 1 << 20


def counters(n_rd=0.0, store=0.0, stalls=100.0, p1=10.0, p2=10.0):
    return {
        "offcore_requests.all_data_rd": n_rd,
        "EXE_ACTIVITY.BOUND_ON_STORES": store,
        "CYCLE_ACTIVITY.STALLS_TOTAL": stalls,
        "EXE_ACTIVITY.1_PORTS_UTIL": p1,
        "EXE_ACTIVITY.2_PORTS_UTIL": p2,
    }


def streaming(nbytes=64 * MB):
    """An elementwise add over nbytes per operand: the case offloading should always take."""
    elems = nbytes // 4
    return nest(0, (operand("arg0", nbytes, read=True, written=False, kind="argument"),
                    operand("arg1", nbytes, read=True, written=False, kind="argument"),
                    operand("arg2", nbytes, read=False, written=True, kind="argument")),
                n_iter=elems)


def test_huge_streaming_nest_is_offloaded_by_c3():
    n = streaming()
    t_cpu = 20e-3
    d = decide(n, t_cpu, counters(n_rd=2 * 64 * MB / 64), SPEC)  # 6.7 GB/s read
    assert d.place == "pim" and d.on_pim
    assert d.reason.startswith("C3 passed: BW_read 6.71 GB/s > theta 2.01 GB/s")
    assert [c.passed for c in d.conditions] == [True, True, True, False]
    assert not d.estimated


def test_tiny_nest_fails_c1_with_numbers():
    n = nest(0, (operand("a", 256, read=True, written=True),), n_iter=64)
    d = decide(n, 1.2e-6, counters(n_rd=1e6), SPEC)
    need = SPEC.t_ctx + t_pim_min(n, SPEC)
    assert d.place == "host"
    assert d.reason == f"C1 failed: T_cpu 1.2 us < T_ctx + T_pim_min {need * 1e6:.3g} us"
    assert len(d.conditions) == 2  # stage 2 never evaluated


def test_narrow_nest_fails_c2():
    n = nest(0, (operand("a", 64, read=True, written=True),), n_iter=16, n_total=16 * 10**6)
    d = decide(n, 1.0, counters(n_rd=1e9), SPEC)
    assert d.place == "host"
    assert d.reason == "C2 failed: N_iter 16 < N_core 32"
    assert decide(n, 1.0, counters(n_rd=1e9), SPEC, n_cores=16).place == "pim"


def test_c1_boundary_is_inclusive_and_c2_too():
    n = nest(0, (), n_iter=32, n_total=32000)
    need = SPEC.t_ctx + t_pim_min(n, SPEC)
    d = decide(n, need, counters(n_rd=1e9), SPEC)
    assert [c.passed for c in d.conditions[:2]] == [True, True]


def test_c3_threshold_is_strict():
    spec = dataclasses.replace(SPEC, theta_ratio=0.125, host_dram_bandwidth=16e9)  # 2 GB/s
    n = streaming()
    at = decide(n, 1e-3, counters(n_rd=31250), spec)  # exactly 2 GB/s
    assert at.place == "host" and "BW_read 2 GB/s <= theta 2 GB/s" in at.reason
    assert decide(n, 1e-3, counters(n_rd=31251), spec).place == "pim"


def test_compute_bound_nest_passes_stage1_fails_stage2():
    n = streaming()
    d = decide(n, 200e-3, counters(n_rd=1000, store=1, stalls=100), SPEC)
    assert d.place == "host" and not d.undetermined
    assert d.reason.startswith("C3 failed: BW_read")
    assert "C4 failed: StoreBound" in d.reason


def test_c4_store_bound_path_and_backend_includes_c_store():
    n = streaming()
    # c_store / (three events + c_store) = 60 / 100 > 0.4: the mac fill nest of the paper
    d = decide(n, 20e-3, counters(n_rd=0, store=60, stalls=30, p1=5, p2=5), SPEC)
    assert d.place == "pim" and d.reason == "C4 passed: StoreBound 0.6 > sigma 0.4"
    # 50 / (100 + 50) = 0.33 <= 0.4, although 50 / 100 would pass: c_backend counts c_store
    d = decide(n, 20e-3, counters(n_rd=0, store=50, stalls=80, p1=10, p2=10), SPEC)
    assert d.place == "host" and "StoreBound 0.333 <= sigma 0.4" in d.reason


def test_missing_counters_are_reported_not_guessed():
    n = streaming()
    d = decide(n, 20e-3, None, SPEC)
    assert d.place == "host" and d.undetermined
    assert "C3 not evaluated: counter offcore_requests.all_data_rd missing" in d.reason
    assert "C4 not evaluated" in d.reason and d.reason.endswith("kept on host")
    assert not d.estimated


def test_estimates_only_when_allowed_and_labelled():
    n = streaming()
    d = decide(n, 20e-3, None, SPEC, allow_estimates=True)
    # fetch_bytes / T_cpu = 128 MiB / 20 ms = 6.7 GB/s
    assert d.place == "pim" and d.estimated and not d.undetermined
    assert d.reason.startswith("C3 passed (estimated): fetch_bytes / T_cpu 6.71 GB/s")
    c3 = d.conditions[2]
    assert c3.estimated and c3.value == pytest.approx(2 * 64 * MB / 20e-3)
    # a partial counter set: measured C3, C4 unevaluable
    part = decide(n, 20e-3, {"offcore_requests.all_data_rd": 10}, SPEC, allow_estimates=True)
    assert part.place == "host" and part.undetermined and not part.estimated
    assert "C4 not evaluated: counter exe_activity.bound_on_stores" in part.reason


def test_missing_time_and_bad_counters():
    n = streaming()
    d = decide(n, None, counters(n_rd=1e9), SPEC)
    assert d.place == "host" and d.undetermined and d.reason.startswith("C1 not evaluated")
    with pytest.raises(PlacementError, match="counter 'EXE_ACTIVITY.BOUND_ON_STORES'"):
        decide(n, 1.0, counters(store=-1), SPEC)
    with pytest.raises(PlacementError, match="T_cpu must be"):
        decide(n, -1.0, counters(), SPEC)
    with pytest.raises(PlacementError, match="n_cores"):
        decide(n, 1.0, counters(), SPEC, n_cores=0)


def test_papi_prefixes_are_ignored():
    n = streaming()
    c = {f"perf::{k.upper()}": v for k, v in counters(n_rd=2 * 64 * MB / 64).items()}
    assert decide(n, 20e-3, c, SPEC).place == "pim"


def test_rule_over_an_instance():
    big, tiny = streaming(), nest(1, (operand("a", 256, read=True, written=True),), n_iter=64)
    inst = PimInstance((big, tiny), {big.id: 20e-3, tiny.id: 1e-6}, SPEC,
                       counters={big.id: counters(n_rd=2 * 64 * MB / 64)})
    out = rule_placement(inst)
    assert [d.place for d in out.values()] == ["pim", "host"]
    assert out[tiny.id].reason.startswith("C1 failed")
    same = apply_rule(inst.nests, inst.t_cpu, inst.counters, SPEC)
    assert same == out
    assert out[big.id].to_json()["conditions"][0]["name"] == "C1"
