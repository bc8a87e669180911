"""Bitset reachability and the segment structure of the CIM bounds, against networkx."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from oracles import random_instance

from placement.models.cim_makespan.structure import bits_of, reachability, structure

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
