"""Bitset reachability and the segment structure of the CIM bounds, against networkx."""

from __future__ import annotations

import math
import random

import networkx as nx
import pytest
from oracles import random_instance

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.schedule import asap_schedule
from placement.models.cim_makespan.structure import (
    bits_of,
    host_idle_windows,
    reachability,
    structure,
)

pytestmark = pytest.mark.unit
SEEDS = range(40)


def instance(seed: int):
    rng = random.Random(seed)
    return random_instance(rng, rng.randint(2, 40), edge_prob=rng.choice((0.05, 0.2, 0.5)))


@pytest.mark.parametrize("seed", SEEDS)
def test_bitset_reachability_equals_networkx(seed):
    inst = instance(seed)
    order = list(nx.topological_sort(inst.graph))
    anc, desc = reachability(inst.graph, order)
    for v in order:
        assert {order[i] for i in bits_of(anc[v])} == nx.ancestors(inst.graph, v)
        assert {order[i] for i in bits_of(desc[v])} == nx.descendants(inst.graph, v)


@pytest.mark.parametrize("seed", SEEDS)
def test_parallel_pairs_are_the_pairs_without_a_path(seed):
    inst = instance(seed)
    closure = nx.transitive_closure_dag(inst.graph)
    names = [op.name for op in inst.operators]
    expected = [(u, v) for i, u in enumerate(names) for v in names[i + 1 :]
                if v not in closure.succ[u] and u not in closure.succ[v]]  # fmt: skip
    assert inst.parallel_pairs == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_segments_between_bottlenecks(seed):
    inst = instance(seed)
    g = inst.graph
    st = structure(inst, 1.0)
    anc = {v: nx.ancestors(g, v) for v in g}
    desc = {v: nx.descendants(g, v) for v in g}
    bottlenecks = [v for v in st["order"] if len(anc[v]) + len(desc[v]) == len(g) - 1]
    assert st["bottleneck_pairs"] == list(zip(bottlenecks, bottlenecks[1:], strict=False))
    for u, w in st["bottleneck_pairs"]:
        assert set(st["between"][u, w]) == desc[u] & anc[w]
    for v in g:
        p, before = st["before"][v]
        q, after = st["after"][v]
        earlier = [b for b in bottlenecks if b in anc[v]]
        later = [b for b in bottlenecks if b in desc[v]]
        assert p == (earlier[-1] if earlier else None)
        assert q == (later[0] if later else None)
        assert set(before) == (anc[v] if p is None else anc[v] & desc[p])
        assert set(after) == (desc[v] if q is None else desc[v] & anc[q])
        # the head bound is at least the host work no placement avoids among the ancestors
        forced = sum(inst.by_name[a].t_host for a in anc[v] if not inst.by_name[a].supported)
        assert st["head"][v] >= forced * (1 - 1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_host_idle_rows_hold_on_every_schedule(seed):
    """Every row of :func:`host_idle_windows` holds on earliest-start schedules of random
    assignments and host sequences (any budget)."""
    rng = random.Random(1000 + seed)
    inst = random_instance(rng, rng.randint(2, 14), edge_prob=rng.choice((0.1, 0.3, 0.6)))
    st = structure(inst, 1.0)
    ops = inst.by_name
    t_host = {v: ops[v].t_host for v in ops}
    t_fast = {v: min(ops[v].t_host, math.inf if ops[v].t_acc is None else ops[v].t_acc)
              for v in ops}  # fmt: skip
    forced = {v: not ops[v].supported for v in ops}
    windows = host_idle_windows(t_host, t_fast, forced, st["head"], st["tail"])
    for _ in range(60):
        on_host = {v: not ops[v].supported or rng.random() < 0.5 for v in ops}
        order = _random_topological_order(inst.graph, rng)
        schedule = asap_schedule(inst, on_host, [v for v in order if on_host[v]])
        work = sum(t_host[v] for v in ops if on_host[v])
        for a, b in windows:
            busy = sum(min(t_host[v], max(a - st["head"][v], 0) + max(b - st["tail"][v], 0))
                       for v in ops if on_host[v])  # fmt: skip
            row = work - busy + a + b
            assert schedule.makespan >= row * (1 - 1e-9) - 1e-15, (a, b)


def test_host_idle_rows_see_the_wait_for_an_offloaded_first_operator():
    """a (host 1, CIM 0.2) -> b (host only, 1): with a offloaded the host waits 0.2 first,
    which the row for a start window of 0.2 charges (the host-serial row: 1)."""
    inst = CimInstance.build([CimOperator("a", 1.0, 0.2, 1), CimOperator("b", 1.0)],
                             [CimEdge("a", "b", 0.0)], 1)  # fmt: skip
    st = structure(inst, 1.0)
    windows = host_idle_windows({"a": 1.0, "b": 1.0}, {"a": 0.2, "b": 1.0},
                                {"a": False, "b": True}, st["head"], st["tail"])  # fmt: skip
    assert (0.2, 0.0) in windows
    assert all(a + b <= 1.2 + 1e-12 for a, b in windows)  # the longest path at 0.2
    busy_b = min(1.0, max(0.2 - st["head"]["b"], 0.0) + max(0.0 - st["tail"]["b"], 0.0))
    assert 1.0 - busy_b + 0.2 == pytest.approx(1.2)
    assert asap_schedule(inst, {"a": False, "b": True}, ["b"]).makespan == pytest.approx(1.2)


def test_host_idle_windows_keep_the_rows_small():
    """At most 12 lengths per side, 2 at 50,000 operators; none on an empty graph."""
    names = [f"v{i}" for i in range(50_000)]
    one = dict.fromkeys(names, 1.0)
    spread = {v: float(i) for i, v in enumerate(names)}
    forced = dict.fromkeys(names, False)
    assert len(host_idle_windows(one, one, forced, spread, spread)) <= 3 * 3 - 1
    small = names[:100]
    windows = host_idle_windows({v: 1.0 for v in small}, {v: 1.0 for v in small},
                                {v: False for v in small}, spread, spread)  # fmt: skip
    assert 0 < len(windows) <= 13 * 13 - 1
    assert host_idle_windows({}, {}, {}, {}, {}) == []


def _random_topological_order(graph: nx.DiGraph, rng: random.Random) -> list[str]:
    indegree = {v: graph.in_degree(v) for v in graph}
    ready = [v for v, d in indegree.items() if d == 0]
    order = []
    while ready:
        v = ready.pop(rng.randrange(len(ready)))
        order.append(v)
        for w in graph.successors(v):
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return order
