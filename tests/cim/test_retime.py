"""Every reported CIM schedule is the best timing of its decisions (re-timing), and every
solve starts from, and never reports worse than, the CPU-only schedule and the heuristic's."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from oracles import random_instance

from placement.cim.instance import CimInstance
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.pipeline import solve
from placement.cim.schedule import (
    CimSchedule,
    all_host_schedule,
    asap_schedule,
    best_start,
    host_order_by_start,
    retime,
)
from placement.cim.verifier import verify_cim
from placement.solvers.base import SolveStatus

SEEDS = range(30)


def random_decisions(inst: CimInstance, rng: random.Random) -> tuple[dict[str, bool], list[str]]:
    """A random assignment within the budget and a random host order consistent with it."""
    on_host = {op.name: True for op in inst.operators}
    budget = inst.crossbar_budget
    for op in rng.sample(list(inst.operators), len(inst.operators)):
        if op.supported and op.crossbars <= budget and rng.random() < 0.5:
            on_host[op.name] = False
            budget -= op.crossbars
    order = []
    graph = inst.graph.copy()
    while graph:  # a random linear extension of the precedence, host operators only
        v = rng.choice([v for v in graph if graph.in_degree(v) == 0])
        graph.remove_node(v)
        if on_host[v]:
            order.append(v)
    return on_host, order


def delayed(inst: CimInstance, schedule: CimSchedule, rng: random.Random) -> CimSchedule:
    """The same decisions with every operator started later than it could (still valid)."""
    start, finish = {}, {}
    prev_host = None
    timing = nx.DiGraph(inst.graph)  # precedence plus the host order

    order = schedule.host_order
    timing.add_edges_from(zip(order, order[1:], strict=False))
    for v in nx.topological_sort(timing):
        s = 0.0
        for u in inst.graph.predecessors(v):
            extra = inst.transfer[(u, v)] if schedule.on_host[u] != schedule.on_host[v] else 0.0
            s = max(s, finish[u] + extra)
        if schedule.on_host[v] and prev_host is not None:
            s = max(s, finish[prev_host])
        s += rng.uniform(0.0, 2e-4)  # a deliberate delay
        op = inst.by_name[v]
        start[v] = s
        finish[v] = s + (op.t_host if schedule.on_host[v] else op.t_acc)
        if schedule.on_host[v]:
            prev_host = v
    return CimSchedule(dict(schedule.on_host), start, finish, max(finish.values()))


@pytest.mark.unit
@pytest.mark.parametrize("seed", SEEDS)
def test_a_delayed_schedule_is_retimed_to_the_earliest_start_one(seed):
    rng = random.Random(seed)
    inst = random_instance(rng, rng.randint(3, 12))
    on_host, order = random_decisions(inst, rng)
    asap = asap_schedule(inst, on_host, order)
    late = delayed(inst, asap, rng)
    assert verify_cim(inst, late).ok  # delayed, but valid
    timed = retime(inst, late)
    assert timed.on_host == asap.on_host and timed.host_order == asap.host_order
    assert timed.makespan == pytest.approx(asap.makespan, rel=1e-12)
    assert timed.start == pytest.approx(asap.start, rel=1e-12, abs=1e-15)
    # never longer, and exactly what the independent verifier recomputes
    assert timed.makespan <= late.makespan * (1 + 1e-12)
    check = verify_cim(inst, late)
    assert check.recomputed_makespan == pytest.approx(timed.makespan, rel=1e-12)
    assert retime(inst, timed).makespan == pytest.approx(timed.makespan, rel=1e-12)


def quadratic_host_order(inst, on_host, start):
    """The definition the verifier used before: earliest start among host operators whose
    host ancestors are all placed (an independent re-implementation)."""
    index = {op.name: i for i, op in enumerate(inst.operators)}
    host = [v for v in inst.graph.nodes if on_host[v]]
    blockers = {v: {a for a in nx.ancestors(inst.graph, v) if on_host[a]} for v in host}
    placed, order = set(), []
    while len(order) < len(host):
        ready = [v for v in host if v not in placed and blockers[v] <= placed]
        nxt = min(ready, key=lambda v: (start[v], index[v]))
        order.append(nxt)
        placed.add(nxt)
    return order


@pytest.mark.unit
@pytest.mark.parametrize("seed", SEEDS)
def test_host_order_by_start_matches_its_definition(seed):
    rng = random.Random(100 + seed)
    inst = random_instance(rng, rng.randint(3, 25))
    on_host, order = random_decisions(inst, rng)
    sched = asap_schedule(inst, on_host, order)
    # ties and tolerance-sized inversions: round the starts coarsely
    start = {v: round(t, 4) for v, t in sched.start.items()}
    assert host_order_by_start(inst, on_host, start) == quadratic_host_order(inst, on_host, start)


@pytest.mark.unit
def test_best_start_keeps_the_fastest_fitting_candidate():
    rng = random.Random(7)
    inst = random_instance(rng, 10, unsupported_prob=0.0)
    cpu = all_host_schedule(inst)
    heur = heuristic_schedule(inst)
    origin, start = best_start(inst, [("heuristic", heur)])
    assert start.makespan == pytest.approx(min(cpu.makespan, heur.makespan))
    assert origin == ("heuristic" if heur.makespan < cpu.makespan else "CPU-only")
    # a candidate over the budget is passed over, whatever its makespan
    greedy = {v: False for v in cpu.on_host}
    over = asap_schedule(inst, greedy, [])
    if over.crossbars_used(inst) > inst.crossbar_budget:
        assert best_start(inst, [("given", over)])[0] == "CPU-only"


def check_never_worse(inst: CimInstance, warm_start: bool, time_limit: float) -> None:
    # one model (not the decomposition that method="auto" picks on YOLO): the faithful
    # formulation itself is what must never end worse than its starts
    placed = solve(inst, formulation="faithful", solver="highs", time_limit=time_limit,
                   threads=1, warm_start=warm_start, method="monolithic")  # fmt: skip
    res = placed.result
    assert placed.schedule is not None and placed.verification.ok
    assert placed.schedule.makespan <= inst.cpu_only_latency * (1 + 1e-12)
    if warm_start:  # the heuristic ran (within its share of the deadline): never worse
        assert placed.schedule.makespan <= res.options["heuristic_makespan"] * (1 + 1e-12)
    assert res.objective == pytest.approx(placed.verification.recomputed_makespan, rel=1e-12)
    assert res.status in (SolveStatus.OPTIMAL, SolveStatus.TIME_LIMIT)
    assert res.options["start_from"] in ("CPU-only", "heuristic")


@pytest.mark.solver
@pytest.mark.parametrize("warm_start", [False, True])
def test_faithful_on_a_branched_graph_under_a_short_limit_is_never_worse(warm_start):
    # 100 operators, ~900 parallel pairs: the faithful model does not close in 0.5 s.
    inst = random_instance(random.Random(11), 100, edge_prob=0.15, max_crossbars=4)
    check_never_worse(inst, warm_start, time_limit=0.5)


@pytest.mark.slow
@pytest.mark.parametrize("warm_start", [False, True])
def test_faithful_on_yolov5n_under_a_short_limit_is_never_worse(warm_start):
    """The real YOLOv5n int8 graph (244 operators, ~1,900 parallel pairs) with host
    latencies proportional to each operator's output size (no profiling needed)."""
    from placement.cim.instance import cim_instance
    from placement.graph import load_graph
    from placement.hardware.cim import load_hardware, with_overrides
    from placement.networks.zoo import network_path

    graph = load_graph(network_path("yolov5n", int8=True))
    latencies = {name: 1e-9 * max(op.n_out, 1) for name, op in graph.operators.items()}
    hw = with_overrides(load_hardware("arm-a72"), crossbars=50, t_mvm_ns=500)
    check_never_worse(cim_instance(graph, latencies, hw.cim), warm_start, time_limit=2.0)


@pytest.mark.solver
def test_a_given_start_is_retimed_and_never_beaten_downward():
    rng = random.Random(3)
    inst = random_instance(rng, 30, edge_prob=0.1)
    on_host, order = random_decisions(inst, rng)
    given = delayed(inst, asap_schedule(inst, on_host, order), rng)
    placed = solve(inst, solver="highs", formulation="faithful", time_limit=0.2, threads=1,
                   starts=[given])  # fmt: skip
    assert placed.schedule.makespan <= retime(inst, given).makespan * (1 + 1e-12)
    assert placed.verification.ok
