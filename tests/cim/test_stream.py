"""A stream of frames through a CIM placement (placement.cim.stream): the modulo schedule
reaches the busiest resource's load as its period, and the simulation checks it
independently, catching a period the placement cannot sustain."""

from __future__ import annotations

import dataclasses
import random

import pytest
from oracles import random_instance

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.schedule import asap_schedule
from placement.cim.stream import (
    BUS,
    HOST,
    crossbar_resource,
    minimum_period,
    modulo_schedule,
    resource_loads,
    simulate_stream,
)
from placement.errors import PlacementError


def chain() -> CimInstance:
    """host a (2) -> CIM b (3) -> host c (1), transfers of 0.5 each way."""
    ops = [CimOperator("a", 2.0), CimOperator("b", 4.0, 3.0, 1), CimOperator("c", 1.0)]
    return CimInstance.build(ops, [CimEdge("a", "b", 0.5), CimEdge("b", "c", 0.5)], 1)


@pytest.mark.unit
def test_loads_and_the_minimum_period_of_a_hand_made_placement():
    instance = chain()
    on_host = {"a": True, "b": False, "c": True}
    loads = resource_loads(instance, on_host)
    assert loads == {HOST: 3.0, BUS: 1.0, crossbar_resource("b"): 3.0}
    assert minimum_period(instance, on_host) == (3.0, HOST)  # a tie goes to the host
    schedule = asap_schedule(instance, on_host, ["a", "c"])
    assert schedule.makespan == 7.0  # one frame alone: 2 + 0.5 + 3 + 0.5 + 1
    modulo = modulo_schedule(instance, schedule)
    sim = simulate_stream(instance, modulo)
    assert sim.ok and modulo.period == 3.0
    # c waits for b: its phase (2) shifted by whole periods until b's output is there
    assert modulo.start["c"] == 8.0 and modulo.frame_latency == 9.0
    assert max(sim.latencies) <= modulo.frame_latency


@pytest.mark.unit
def test_a_transfer_does_not_wait_a_whole_period_for_the_bus():
    """Host a -> CIM b -> host c -> CIM d -> host e, every task 1 s, transfers 0.1 s: the
    host is busy 3 s per frame, the bus 0.4 s. With the host's cycle a, c, e, c (ready
    2.2 s after a starts) is on its phase at 4 s and e (ready at 6.2 s) at 8 s: 9 s, the
    least frame latency at period 3 (the cycle a, e, c gives 11 s). Packing the bus's
    transfers back to back as well would make each wait for its phase, a period apiece."""
    ops = [CimOperator("a", 1.0), CimOperator("b", 5.0, 1.0, 1), CimOperator("c", 1.0),
           CimOperator("d", 5.0, 1.0, 1), CimOperator("e", 1.0)]  # fmt: skip
    edges = [CimEdge(u, v, 0.1) for u, v in ("ab", "bc", "cd", "de")]
    instance = CimInstance.build(ops, edges, 2)
    on_host = {"a": True, "b": False, "c": True, "d": False, "e": True}
    schedule = asap_schedule(instance, on_host, ["a", "c", "e"])
    assert schedule.makespan == pytest.approx(5.4)
    modulo = modulo_schedule(instance, schedule)
    assert modulo.period == pytest.approx(3.0)
    assert modulo.frame_latency == pytest.approx(9.0)
    sim = simulate_stream(instance, modulo)
    assert sim.ok, sim.violations


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(20))
def test_random_placements_sustain_their_minimum_period(seed):
    rng = random.Random(9100 + seed)
    instance = random_instance(rng, 4 + seed % 8, edge_prob=0.3)
    schedule = heuristic_schedule(instance)
    period, _ = minimum_period(instance, schedule.on_host)
    modulo = modulo_schedule(instance, schedule)
    sim = simulate_stream(instance, modulo, claimed_period=period)
    assert sim.ok, sim.violations
    assert modulo.period == pytest.approx(period)
    assert min(sim.latencies) >= schedule.makespan * (1 - 1e-9) - 1e-15  # never faster alone


@pytest.mark.unit
def test_a_period_below_the_busiest_load_is_caught():
    instance = chain()
    schedule = asap_schedule(instance, {"a": True, "b": False, "c": True}, ["a", "c"])
    with pytest.raises(PlacementError, match="below the load of host"):
        modulo_schedule(instance, schedule, period=2.5)
    modulo = modulo_schedule(instance, schedule)
    too_fast = dataclasses.replace(modulo, period=2.7)  # the same starts, frames closer
    sim = simulate_stream(instance, too_fast)
    assert not sim.ok
    assert any("host" in v and "starts" in v for v in sim.violations)
    assert any("later than the schedule's frame latency" in v for v in sim.violations)
    claim = simulate_stream(instance, modulo, claimed_period=2.0)
    assert not claim.ok and "below the schedule's" in claim.violations[0]


@pytest.mark.unit
def test_a_placement_that_takes_no_time_streams_at_period_zero():
    ops = [CimOperator("a", 0.0), CimOperator("b", 0.0, 0.0, 1), CimOperator("c", 0.0)]
    instance = CimInstance.build(ops, [CimEdge("a", "b", 0.0), CimEdge("b", "c", 0.0)], 1)
    schedule = asap_schedule(instance, {"a": True, "b": False, "c": True}, ["a", "c"])
    modulo = modulo_schedule(instance, schedule)
    assert modulo.period == 0.0 and modulo.frame_latency == 0.0
    assert simulate_stream(instance, modulo).ok
