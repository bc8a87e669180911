"""The independent verifier accepts correct schedules and names what is wrong in broken ones."""

from __future__ import annotations

import copy

import pytest

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import CimSchedule, asap_schedule
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError

pytestmark = pytest.mark.unit


def instance(budget: int = 4) -> CimInstance:
    """a -> {b, c} -> d, plus an independent host-only e."""
    return CimInstance.build(
        [
            CimOperator("a", 1.0e-3, 0.5e-3, 2),
            CimOperator("b", 2.0e-3, 1.0e-3, 3),
            CimOperator("c", 3.0e-3, 0.5e-3, 1),
            CimOperator("d", 1.0e-3),
            CimOperator("e", 0.5e-3),
        ],
        [
            CimEdge("a", "b", 1e-4),
            CimEdge("a", "c", 2e-4),
            CimEdge("b", "d", 3e-4),
            CimEdge("c", "d", 4e-4),
        ],
        budget,
    )


def good() -> CimSchedule:
    # c on CIM (1 crossbar); host sequence a, e, b, d.
    on_host = {"a": True, "b": True, "c": False, "d": True, "e": True}
    return asap_schedule(instance(), on_host, ["a", "e", "b", "d"])


def broken(**changes) -> CimSchedule:
    s = copy.deepcopy(good())
    for table, values in changes.items():
        getattr(s, table).update(values)
    return s


def test_valid_schedule_passes():
    s = good()
    v = verify_cim(instance(), s, claimed=s.makespan)
    assert v.ok, v.violations
    assert v.recomputed_makespan == pytest.approx(s.makespan)
    v.raise_if_failed()  # no exception
    assert v.to_json()["ok"] is True


def test_noise_within_tolerance_passes():
    s = good()
    s.start["b"] -= 1e-12
    s.finish["b"] -= 1e-12
    assert verify_cim(instance(), s, claimed=s.makespan * (1 + 1e-9)).ok


def test_host_overlap_is_named():
    s = good()
    # Move e on top of b: e runs [b.start, b.start + 0.5 ms).
    t = s.start["b"]
    s = broken(start={"e": t}, finish={"e": t + 0.5e-3})
    v = verify_cim(instance(), s)
    assert not v.ok
    assert any("overlap" in m and "'e'" in m and "'b'" in m for m in v.violations), v.violations


def test_precedence_violation_is_named():
    s = good()
    s.start["d"] -= 0.5e-3
    s.finish["d"] -= 0.5e-3
    s.makespan = s.finish["d"]
    v = verify_cim(instance(), s)
    assert any("precedence 'b' -> 'd'" in m for m in v.violations), v.violations


def test_missing_transfer_time_is_a_precedence_violation():
    s = good()
    # c is on CIM and a on host: c must wait for the 0.2 ms transfer; start it right at a's end.
    dur = s.finish["c"] - s.start["c"]
    s.start["c"] = s.finish["a"]
    s.finish["c"] = s.start["c"] + dur
    v = verify_cim(instance(), s)
    msg = [m for m in v.violations if "precedence 'a' -> 'c'" in m]
    assert msg and "transfer" in msg[0], v.violations


def test_budget_exceeded_names_the_cim_operators():
    inst = instance(budget=2)
    on_host = {"a": False, "b": True, "c": False, "d": True, "e": True}
    s = asap_schedule(inst, on_host, ["e", "b", "d"])
    v = verify_cim(inst, s)
    assert any("budget exceeded: 3 crossbars used > 2" in m and "a, c" in m
               for m in v.violations), v.violations


def test_unsupported_operator_on_cim_is_named():
    s = broken(on_host={"d": False})
    v = verify_cim(instance(), s)
    assert any("'d' is placed on CIM" in m for m in v.violations), v.violations


def test_wrong_duration_is_named():
    s = broken(finish={"a": good().finish["a"] - 0.25e-3})
    v = verify_cim(instance(), s)
    assert any("operator 'a': finish - start" in m and "host latency" in m
               for m in v.violations), v.violations


def test_duration_uses_the_device_latency():
    # b marked CIM but keeps its host timing: the CIM latency is 1 ms, not 2 ms.
    s = broken(on_host={"b": False})
    v = verify_cim(instance(), s)
    assert any("operator 'b'" in m and "CIM latency" in m for m in v.violations), v.violations


def test_wrong_claimed_makespan_is_reported():
    s = good()
    v = verify_cim(instance(), s, claimed=s.makespan * 0.9)
    assert not v.ok
    assert any("claimed makespan" in m for m in v.violations)
    # A claim below what the same assignment and host order can achieve is impossible.
    assert any("recomputed makespan" in m for m in v.violations)


def test_non_finite_claim_is_reported():
    v = verify_cim(instance(), good(), claimed=float("nan"))
    assert not v.ok and "claimed makespan nan is not a finite number" in v.violations[0]


def test_inconsistent_makespan_field_is_reported():
    s = good()
    s.makespan *= 1.5
    v = verify_cim(instance(), s)
    assert any("differs from the latest finish" in m and "'d'" in m for m in v.violations)


def test_slack_schedule_passes_but_recomputes_faster():
    # Delaying every start by the same amount is feasible; the recomputation is faster.
    s = copy.deepcopy(good())
    for v in s.start:
        s.start[v] += 1e-3
        s.finish[v] += 1e-3
    s.makespan += 1e-3
    v = verify_cim(instance(), s, claimed=s.makespan)
    assert v.ok, v.violations
    assert v.recomputed_makespan == pytest.approx(good().makespan)


def test_missing_and_unknown_operators():
    s = copy.deepcopy(good())
    del s.start["e"]
    s.on_host["zz"] = True
    v = verify_cim(instance(), s)
    assert any("'e' has no start" in m for m in v.violations)
    assert any("unknown operator 'zz'" in m for m in v.violations)


def test_raise_if_failed_is_one_line_with_count():
    s = broken(on_host={"d": False})
    v = verify_cim(instance(), s, claimed=1.0)
    assert len(v.violations) >= 2
    with pytest.raises(PlacementError) as err:
        v.raise_if_failed()
    text = str(err.value)
    assert text.startswith("verification failed: ")
    assert f"(+{len(v.violations) - 1} more)" in text
    assert "\n" not in text
