"""The rule and the report with simulated counters (a cache simulation, not hardware events)."""

import json

import pytest
from pim_oracles import big, nest, operand, sim

from placement.hardware.pim import PimSpec, load_pim_hardware
from placement.pim.instance import PimInstance
from placement.pim.output import pim_document, reason_lines, store_bound, summary_lines
from placement.pim.pipeline import solve_for_cores
from placement.pim.rules import (
    SIM_L1_MISS_CYCLES,
    SIM_LL_MISS_CYCLES,
    apply_operator_rule,
    decide,
    rule_placement,
    simulated_store_bound,
)
from placement.profiling.nest_profile import NestProfile

SPEC = PimSpec()
MB = 1 << 20


def lines(nbytes):
    return nbytes / 64


@pytest.mark.unit
def test_c3_from_simulated_off_core_reads_is_labelled_simulated():
    n = big()
    d = decide(n, 10e-3, sim(ir=1e6, llr=lines(64 * MB)), SPEC)  # 6.7 GB/s
    assert d.place == "pim" and d.simulated and not d.estimated and not d.undetermined
    assert d.reason.startswith("C3 passed (simulated): BW_read 6.71 GB/s > theta 2.01 GB/s")
    assert d.summary == "C3 passed (simulated): BW_read > theta 2.01 GB/s"
    c3 = d.conditions[2]
    assert c3.simulated and c3.to_json()["simulated"] is True
    assert d.to_json()["simulated"] is True and d.to_json()["summary"] == d.summary


@pytest.mark.unit
def test_c4_definition_on_closed_form_counts():
    # A streaming fill past the LL: one LL write miss per line, 3 instructions per line.
    fill = sim(ir=3 * 1000, llw=1000)
    c_store, c_backend = simulated_store_bound(fill)
    assert c_store == SIM_LL_MISS_CYCLES * 1000
    assert c_backend == 3000 + SIM_LL_MISS_CYCLES * 1000
    assert c_store / c_backend == pytest.approx(100 / 103)
    # An elementwise add past the LL: two read misses per write miss, 10 Ir per line.
    add = sim(ir=10 * 1000, llr=2000, llw=1000)
    c_store, c_backend = simulated_store_bound(add)
    assert c_store / c_backend == pytest.approx(100 / 310)
    # A fill that stays in the LL (D1 misses only): not store-bound in the C4 sense.
    resident = sim(ir=3000, d1w=1000)
    c_store, c_backend = simulated_store_bound(resident)
    assert c_store == 0 and c_backend == 3000 + SIM_L1_MISS_CYCLES * 1000
    assert simulated_store_bound({"sim.instructions": 1.0}) is None


@pytest.mark.unit
def test_c4_passes_alone_for_a_write_stream_and_every_nest_is_decided():
    n = big()
    fill = decide(n, 10e-3, sim(ir=3e6, llw=lines(64 * MB)), SPEC)
    assert fill.place == "pim" and fill.simulated
    assert fill.reason.startswith("C4 passed (simulated): StoreBound 0.972 > sigma 0.4")
    add = decide(n, 10e-3, sim(ir=1e7, llr=lines(1 * MB), llw=lines(1 * MB) / 2), SPEC)
    assert add.place == "host" and not add.undetermined  # C3 0.1 GB/s, C4 ~0.3: decided
    assert add.reason.startswith("C3 failed (simulated): BW_read 0.105 GB/s <= theta")
    assert "C4 failed (simulated): StoreBound" in add.reason
    assert add.summary == ("C3 failed (simulated): BW_read <= theta 2.01 GB/s; C4 failed"
                           " (simulated): StoreBound <= sigma 0.4")  # fmt: skip


@pytest.mark.unit
def test_hardware_events_take_precedence_over_simulated_ones():
    hw = {
        "offcore_requests.all_data_rd": 0.0, "exe_activity.bound_on_stores": 0.0,
        "cycle_activity.stalls_total": 100.0, "exe_activity.1_ports_util": 10.0,
        "exe_activity.2_ports_util": 10.0,
    }  # fmt: skip
    d = decide(big(), 10e-3, {**hw, **sim(ir=1e6, llr=lines(64 * MB), llw=1e6)}, SPEC)
    assert d.place == "host" and not d.simulated


@pytest.mark.unit
def test_operator_level_sums_simulated_events():
    a = big(0, node="op")
    b = big(1, node="op")
    counters = {"n000": sim(ir=1e6, llr=lines(32 * MB)), "n001": sim(ir=1e6, llr=lines(32 * MB))}
    t = {"n000": 5e-3, "n001": 5e-3}
    by_nest = apply_operator_rule([a, b], t, counters, SPEC)
    d = by_nest["n000"]
    assert d.place == "pim" and d.simulated
    assert "BW_read 6.71 GB/s" in d.reason  # 64 MiB / 10 ms: a ratio of sums
    assert d.summary.startswith("operator level: C3 passed (simulated)")


def profile_of(nests, t_cpu, counters, source="simulated"):
    meta = {"runs": 3, "simulation": {
        "caches": {"D1": {"size": 49152, "assoc": 12, "line": 64, "sets": 64},
                   "LL": {"size": 2097152, "assoc": 16, "line": 64, "sets": 2048},
                   "ll_level": "L2 (private to cpu0)"},
        "valgrind_version": "3.19.0"}}  # fmt: skip
    return NestProfile(
        nests=list(nests), t_cpu=t_cpu, counters=counters, counter_source=source,
        model_sha256="0" * 64, model_path="m.onnx", source_kind="onnx", metadata=meta,
    )  # fmt: skip


@pytest.mark.unit
def test_simulated_profile_round_trips_and_is_checked(tmp_path):
    nests = [big(0), big(1)]
    profile = profile_of(nests, {"n000": 1e-3, "n001": 1e-3},
                         {"n000": sim(ir=5), "n001": sim(ir=7)})  # fmt: skip
    path = tmp_path / "p.nests.json"
    profile.save(path)
    loaded = NestProfile.load(path)
    assert loaded == profile and loaded.simulated
    data = json.loads(path.read_text())
    data["counters"]["n001"].pop("sim.ll_read_misses")
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match="miss event.*sim.ll_read_misses"):
        NestProfile.load(path)
    data["counter_source"] = "measured"  # simulated events are not Table 1 events
    data["counters"]["n001"]["sim.ll_read_misses"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(Exception, match="offcore_requests.all_data_rd"):
        NestProfile.load(path)


def three_kinds():
    """n000/n001: stream (C3), n002: fill (C4), n003-n005: resident (fail), n006: tiny (C1)."""
    nests = [big(i) for i in range(6)] + [nest(6, (operand("s", 256, read=True, written=True),),
                                               n_iter=64)]  # fmt: skip
    t = {f"n00{i}": 10e-3 for i in range(6)} | {"n006": 1e-7}
    counters = {
        "n000": sim(ir=1e6, llr=lines(64 * MB)), "n001": sim(ir=1e6, llr=lines(64 * MB)),
        "n002": sim(ir=3e6, llw=lines(64 * MB)), "n003": sim(ir=1e6), "n004": sim(ir=1e6),
        "n005": sim(ir=1e6), "n006": sim(ir=10),
    }  # fmt: skip
    return nests, t, counters


@pytest.mark.solver
def test_report_prints_each_reason_once_and_labels_simulated_values():
    nests, t, counters = three_kinds()
    profile = profile_of(nests, t, counters)
    hw = load_pim_hardware()
    inst = PimInstance(nests=tuple(nests), t_cpu=t, spec=hw.pim, counters=counters)
    results = solve_for_cores(inst, [32, 64])
    lines = summary_lines(profile, hw, results, "upper_bound", "loop", False)
    text = "\n".join(lines)
    assert "hardware counters: none; simulated instead (marked ~) for 7 nests" in text
    assert "LL = L2 (private to cpu0) 2 MiB 16-way" in text
    reasons = lines[lines.index(next(x for x in lines if x.startswith("rule decisions"))):]
    reasons = reasons[: reasons.index("")]
    assert reasons[1:] == [
        "  pim~: C3 passed (simulated): BW_read > theta 2.01 GB/s",
        "      N=32,64: n000, n001 (2 nests)",
        "  pim~: C4 passed (simulated): StoreBound > sigma 0.4",
        "      N=32,64: n002 (1 nest)",
        "  host~: C3 failed (simulated): BW_read <= theta 2.01 GB/s; C4 failed (simulated):"
        " StoreBound <= sigma 0.4",
        "      N=32,64: n003-n005 (3 nests)",
        "  host: C1 failed: T_cpu < T_ctx + T_pim_min",
        "      N=32,64: n006 (1 nest)",
    ]
    nest_row, placed_row = [x for x in lines if x.startswith("n002 ")]  # nests, placements
    assert " 0~ " in nest_row and nest_row.endswith("0.972~") and "pim~/" in placed_row
    assert text.count("~ simulated, not measured") == 1
    assert "not evaluated" not in text

    doc = pim_document(profile, hw, results, copy="upper_bound", granularity="loop",
                       allow_estimates=False)  # fmt: skip
    assert doc["nest_profile"]["counter_source"] == "simulated"
    assert doc["simulated"]["counters"] is True
    first = doc["nests"][0]
    assert first["read_bandwidth"] == {"value": pytest.approx(64 * MB / 10e-3),
                                       "estimated": False, "simulated": True}  # fmt: skip
    rule = doc["results"][0]["rule"]
    assert rule["simulated"] is True and rule["decisions"]["n002"]["simulated"] is True
    assert rule["decisions"]["n006"]["simulated"] is False


@pytest.mark.unit
def test_reasons_differing_by_core_count_list_each_count():
    class R:
        def __init__(self, cores, rule):
            self.cores, self.rule = cores, rule

    nests, t, counters = three_kinds()
    spec32, spec128 = PimSpec(cores=32), PimSpec(cores=128)
    narrow = nest(7, (operand("z", 1 << 20, read=True, written=True),), n_iter=64)
    nests = nests + [narrow]  # N_iter 64: C2 passes at 32 cores, fails at 128
    t["n007"] = 10e-3
    counters["n007"] = sim(ir=1e6, llr=lines(64 * MB))
    inst32 = PimInstance(nests=tuple(nests), t_cpu=t, spec=spec32, counters=counters)
    inst128 = PimInstance(nests=tuple(nests), t_cpu=t, spec=spec128, counters=counters)
    results = [R(32, rule_placement(inst32)), R(128, rule_placement(inst128))]
    out = reason_lines(nests, results)
    i = out.index("  pim~: C3 passed (simulated): BW_read > theta 2.01 GB/s")
    assert out[i + 1 : i + 3] == [
        "      N=32,128: n000, n001 (2 nests)",
        "      N=32: n007 (1 nest)",
    ]
    c2 = out.index("  host: C2 failed: N_iter < N_core")
    assert out[c2 + 1] == "      N=128: n007 (1 nest)"


@pytest.mark.unit
def test_store_bound_display_value():
    assert store_bound(sim(ir=3000, llw=1000)).simulated
    assert store_bound(sim(ir=3000, llw=1000)).value == pytest.approx(100 / 103)
    assert store_bound(None).value is None
