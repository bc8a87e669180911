"""Earliest-start schedules of a given assignment and host sequence (no solver)."""

from __future__ import annotations

import pytest

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import CimSchedule, all_host_schedule, asap_schedule
from placement.errors import PlacementError

pytestmark = pytest.mark.unit


def diamond() -> CimInstance:
    """a -> {b, c} -> d; b and c are parallel; d is host-only."""
    return CimInstance.build(
        [
            CimOperator("a", 1.0e-3, 0.5e-3, 2),
            CimOperator("b", 2.0e-3, 1.0e-3, 3),
            CimOperator("c", 3.0e-3, 0.5e-3, 1),
            CimOperator("d", 1.0e-3),
        ],
        [
            CimEdge("a", "b", 1e-4),
            CimEdge("a", "c", 2e-4),
            CimEdge("b", "d", 3e-4),
            CimEdge("c", "d", 4e-4),
        ],
        10,
    )


def test_all_host_is_serial_sum():
    inst = diamond()
    s = asap_schedule(inst, dict.fromkeys("abcd", True), ["a", "c", "b", "d"])
    assert s.start == pytest.approx({"a": 0.0, "c": 1e-3, "b": 4e-3, "d": 6e-3})
    assert s.makespan == pytest.approx(7e-3)
    assert s.makespan == pytest.approx(inst.cpu_only_latency)
    assert all_host_schedule(inst).makespan == pytest.approx(inst.cpu_only_latency)


def test_cim_runs_parallel_with_host_and_pays_transfers():
    inst = diamond()
    on_host = {"a": True, "b": True, "c": False, "d": True}
    s = asap_schedule(inst, on_host, ["a", "b", "d"])
    # c on CIM: starts after a + transfer, runs while b is on the host.
    assert s.start["c"] == pytest.approx(1e-3 + 2e-4)
    assert s.finish["c"] == pytest.approx(1.7e-3)
    assert s.start["b"] == pytest.approx(1e-3)  # same device as a: no transfer
    assert s.finish["b"] == pytest.approx(3e-3)
    # d waits for b (same device) and c + transfer 4e-4 = 2.1e-3.
    assert s.start["d"] == pytest.approx(3e-3)
    assert s.makespan == pytest.approx(4e-3)


def test_transfers_are_not_serialized():
    # Host a feeds two CIM ops: both transfers overlap in time.
    inst = diamond()
    on_host = {"a": True, "b": False, "c": False, "d": True}
    s = asap_schedule(inst, on_host, ["a", "d"])
    assert s.start["b"] == pytest.approx(1e-3 + 1e-4)
    assert s.start["c"] == pytest.approx(1e-3 + 2e-4)
    assert s.start["d"] == pytest.approx(max(2.1e-3 + 3e-4, 1.7e-3 + 4e-4))


def test_host_order_contradicting_precedence_names_the_operators():
    inst = diamond()
    with pytest.raises(PlacementError, match="'d'.*before 'a'|'a'.*precedes"):
        asap_schedule(inst, dict.fromkeys("abcd", True), ["d", "a", "b", "c"])


def test_host_order_contradiction_through_a_cim_operator():
    # a (host) -> b (CIM) -> d (host): d cannot precede a even though no edge joins them.
    inst = diamond()
    on_host = {"a": True, "b": False, "c": False, "d": True}
    with pytest.raises(PlacementError, match="'d'"):
        asap_schedule(inst, on_host, ["d", "a"])


@pytest.mark.parametrize(
    ("order", "needle"),
    [
        (["a", "b", "d"], "misses host operator 'c'"),
        (["a", "b", "c", "d", "a"], "'a' more than once"),
        (["a", "b", "c", "d", "x"], "'x'"),
    ],
)
def test_host_order_must_list_host_operators_once(order, needle):
    with pytest.raises(PlacementError, match=needle):
        asap_schedule(diamond(), dict.fromkeys("abcd", True), order)


def test_host_order_rejects_a_cim_operator():
    on_host = {"a": True, "b": False, "c": True, "d": True}
    with pytest.raises(PlacementError, match="'b', which is not a host operator"):
        asap_schedule(diamond(), on_host, ["a", "b", "c", "d"])


def test_unsupported_on_cim_and_missing_device_are_errors():
    inst = diamond()
    with pytest.raises(PlacementError, match="'d' is not supported"):
        asap_schedule(inst, {"a": True, "b": True, "c": True, "d": False}, ["a", "b", "c"])
    with pytest.raises(PlacementError, match="no device for operator 'd'"):
        asap_schedule(inst, {"a": True, "b": True, "c": True}, ["a", "b", "c"])


def test_json_round_trip_and_helpers():
    inst = diamond()
    s = asap_schedule(inst, {"a": False, "b": True, "c": False, "d": True}, ["b", "d"])
    again = CimSchedule.from_json(s.to_json())
    assert again == s
    assert s.crossbars_used(inst) == 3
    assert s.host_order == ["b", "d"]
    with pytest.raises(PlacementError, match="malformed schedule"):
        CimSchedule.from_json({"operators": {"a": {}}})
