"""Exact decomposition at cut operators (``placement.cim.decompose``).

Oracles: networkx reachability for the cuts; the brute force over every placement as
the block solver and on the whole instance (no MIP involved); the monolithic model's
optimum on instances too big for the brute force; the verifier on every assembled
placement.
"""

from __future__ import annotations

import random

import networkx as nx
import pytest
from oracles import (
    block_structured_instance,
    brute_force_makespan,
    median_price,
    random_cost,
    random_instance,
    with_energy,
)

from placement.cim.decompose import decompose
from placement.cim.frontier import (
    CIM,
    ENTRY,
    EXIT,
    HOST,
    Frontier,
    block_instance,
    cut_operators,
    split,
)
from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.list_scheduling import heuristic_schedule
from placement.cim.pipeline import AUTO_DECOMPOSE_MIN_OPERATORS, solve
from placement.cim.schedule import (
    CrossbarCost,
    all_host_schedule,
    asap_schedule,
    priced_makespan,
)
from placement.cim.verifier import verify_cim
from placement.errors import PlacementError
from placement.solvers.base import SolveStatus


def exact_block_solver(sub: CimInstance, limit: float | None, starts=(), price=None):
    """The brute force as block solver: the optimum, proven (bound == its value); with a
    price, of the makespan + price x crossbars."""
    best, on_host, order = brute_force_makespan(sub, price=price or 0.0)
    return asap_schedule(sub, on_host, order), best


def heuristic_block_solver(sub: CimInstance, limit: float | None, starts=(), price=None):
    """A block solver that proves nothing: the heuristic, bound 0."""
    return heuristic_schedule(sub), 0.0


def cuts_by_definition(instance: CimInstance) -> list[str]:
    """Operators comparable with every other one and jumped over by no edge that some
    placement pays a transfer on (one with a transfer and an end the accelerator runs)."""
    g = instance.graph

    def may_run_on_cim(v: str) -> bool:
        op = instance.by_name[v]
        return op.supported and op.crossbars <= instance.crossbar_budget

    paid = [(e.src, e.dst) for e in instance.edges
            if e.t_transfer > 0 and (may_run_on_cim(e.src) or may_run_on_cim(e.dst))]
    cuts = []
    for v in g.nodes:
        anc, desc = nx.ancestors(g, v), nx.descendants(g, v)
        if len(anc) + len(desc) != len(g) - 1:
            continue
        if any(u in anc and w in desc for u, w in paid):
            continue
        cuts.append(v)
    return cuts


def with_host_only_skips(instance: CimInstance, rng: random.Random) -> CimInstance:
    """``instance`` with four skip edges (with transfers), most from a host-only operator
    into a later host-only one, as YOLO's backbone activations feed its neck's Concats,
    the others between any two operators (these still couple what they jump over)."""
    order = list(nx.topological_sort(instance.graph))
    host_only = [v for v in order if not instance.by_name[v].supported]
    edges = list(instance.edges)
    known = {(e.src, e.dst) for e in edges}
    for _ in range(4):
        pool = host_only if len(host_only) >= 2 and rng.random() < 0.75 else order
        u, w = sorted(rng.sample(pool, 2), key=order.index)
        if (u, w) not in known:
            edges.append(CimEdge(u, w, rng.uniform(0.0, 2e-3)))
            known.add((u, w))
    return CimInstance.build(instance.operators, edges, instance.crossbar_budget)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(12))
def test_cuts_match_their_definition(seed):
    rng = random.Random(seed)
    inst = (block_structured_instance(rng, 4) if seed % 2
            else random_instance(rng, 9, edge_prob=0.5))  # fmt: skip
    assert sorted(cut_operators(inst)) == sorted(cuts_by_definition(inst))


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(12))
def test_cuts_with_skip_edges_match_their_definition(seed):
    rng = random.Random(700 + seed)
    inst = with_host_only_skips(block_structured_instance(rng, 4, cim_prob=0.5), rng)
    assert sorted(cut_operators(inst)) == sorted(cuts_by_definition(inst))


@pytest.mark.unit
def test_a_skip_edge_between_host_only_operators_keeps_the_cut():
    """a -> c never pays its transfer (neither end runs on the accelerator), and the path
    through b orders them: b splits the schedule exactly."""
    ops = [CimOperator("a", 1.0), CimOperator("b", 1.0, 0.5, 1), CimOperator("c", 1.0)]
    edges = [CimEdge("a", "b", 0.1), CimEdge("b", "c", 0.1), CimEdge("a", "c", 5.0)]
    assert cut_operators(CimInstance.build(ops, edges, 3)) == ["a", "b", "c"]
    # with a budget too small for b, a -> b -> c is host-only too: every operator a cut
    ops[1] = CimOperator("b", 1.0, 0.5, 4)
    assert cut_operators(CimInstance.build(ops, edges, 3)) == ["a", "b", "c"]


@pytest.mark.unit
def test_a_skip_edge_over_an_operator_makes_it_no_cut():
    ops = [CimOperator(v, 1.0, 0.5, 1) for v in "abc"]
    edges = [CimEdge("a", "b", 0.1), CimEdge("b", "c", 0.1), CimEdge("a", "c", 5.0)]
    inst = CimInstance.build(ops, edges, 3)
    # b is comparable with a and c, but a -> c jumps over it: its transfer couples a and c.
    assert cut_operators(inst) == ["a", "c"]


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_blocks_partition_the_operators_between_their_cuts(seed):
    inst = block_structured_instance(random.Random(seed), 5)
    blocks, cuts = split(inst)
    assert len(blocks) == len(cuts) + 1
    names = [v for b in blocks for v in b.operators] + cuts
    assert sorted(names) == sorted(op.name for op in inst.operators)
    g = inst.graph
    for block in blocks:
        for v in block.operators:
            if block.entry is not None:
                assert v in nx.descendants(g, block.entry)
            if block.exit is not None:
                assert v in nx.ancestors(g, block.exit)


@pytest.mark.unit
def test_a_block_instance_carries_the_cut_transfers_and_devices():
    ops = [CimOperator("a", 1.0, 0.5, 2), CimOperator("x", 2.0, 0.1, 1),
           CimOperator("b", 1.0)]  # fmt: skip
    edges = [CimEdge("a", "x", 0.25), CimEdge("x", "b", 0.5), CimEdge("a", "b", 0.75)]
    inst = CimInstance.build(ops, edges, 3)
    blocks, cuts = split(inst)
    assert cuts == ["a", "b"] and blocks[1].operators == ("x",)
    sub = block_instance(inst, blocks[1], CIM, HOST, 1)
    assert {(e.src, e.dst): e.t_transfer for e in sub.edges} == {
        (ENTRY, "x"): 0.25, ("x", EXIT): 0.5, (ENTRY, EXIT): 0.75}
    assert sub.by_name[ENTRY].supported and sub.by_name[ENTRY].crossbars == 0
    assert not sub.by_name[EXIT].supported
    assert sub.crossbar_budget == 1


@pytest.mark.unit
@pytest.mark.parametrize("skips", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_combining_exact_blocks_gives_the_brute_force_optimum(seed, skips):
    """No MIP anywhere: blocks by brute force, the whole by brute force. With ``skips``,
    skip edges (with transfers) between host-only operators jump over cuts: the blocks,
    each solved without those edges, still combine to the optimum of the whole, which
    the brute force finds with every edge."""
    if skips:
        rng = random.Random(800 + seed)
        inst = with_host_only_skips(block_structured_instance(
            rng, 3, width=2, depth=2, cim_prob=0.5,
            budget_share=rng.choice([0.2, 0.4, 1.0])), rng)  # fmt: skip
    else:
        rng = random.Random(100 + seed)
        inst = block_structured_instance(rng, 3, width=2, depth=2,
                                         budget_share=rng.choice([0.0, 0.2, 0.4, 1.0]))  # fmt: skip
    best = brute_force_makespan(inst)[0]
    done = decompose(inst, exact_block_solver, rel_gap=0.0)
    assert done.ended == "optimal"
    assert done.schedule.makespan == pytest.approx(best, rel=1e-9)
    assert done.lower_bound == pytest.approx(best, rel=1e-9)
    assert verify_cim(inst, done.schedule).ok


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(4))
def test_an_instance_with_energies_decomposes_to_the_same_latency_optimum(seed):
    """Blocks are solved for latency; the energy model of the whole does not reach them."""
    rng = random.Random(300 + seed)
    inst = with_energy(block_structured_instance(rng, 3, width=2, depth=2), rng)
    done = decompose(inst, exact_block_solver, rel_gap=0.0)
    assert done.schedule.makespan == pytest.approx(brute_force_makespan(inst)[0], rel=1e-9)
    assert verify_cim(inst, done.schedule).ok


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_a_frontier_bounds_every_budget_from_the_counts_placements_can_use(seed):
    """Crossbar counts with gaps (3, 7, 12): a solve at one budget bounds f(r) up to the
    next count a placement can use; checked against the brute force at every r."""
    rng = random.Random(300 + seed)
    inst = block_structured_instance(rng, 2, width=3, depth=2, budget_share=1.0)
    ops = [CimOperator(op.name, op.t_host, op.t_acc, rng.choice([3, 7, 12]))
           if op.supported else op for op in inst.operators]  # fmt: skip
    inst = CimInstance.build(ops, inst.edges, sum(op.crossbars for op in ops))
    block = max(split(inst)[0], key=lambda b: len(b.operators))
    front = Frontier.start(inst, block, HOST, HOST)
    counts = {0}
    for v in block.operators:
        if inst.by_name[v].supported:
            counts |= {c + inst.by_name[v].crossbars for c in counts}
    assert front.sums == tuple(sorted(c for c in counts if c <= front.top))
    for budget in rng.sample(range(front.top + 1), 3):
        front.learn(budget, exact_block_solver, None)
    for room in range(front.top + 1):
        best = brute_force_makespan(block_instance(inst, block, HOST, HOST, room))[0]
        assert front.lower(room) <= best * (1 + 1e-9) <= front.upper(room) * (1 + 2e-9)
        assert front.snap(room) <= room and front.snap(room) in counts


@pytest.mark.unit
def test_blocks_whose_frontier_is_not_needed_are_solved_once():
    # Host-only cuts and a budget that fits everything: one solve per block, each with
    # all the block can use, and the two programs meet at once.
    inst = block_structured_instance(random.Random(5), 5, budget_share=1.0)
    cuts = set(split(inst)[1])
    ops = [CimOperator(op.name, op.t_host) if op.name in cuts else op for op in inst.operators]
    inst = CimInstance.build(ops, inst.edges, inst.crossbar_budget)
    done = decompose(inst, exact_block_solver, rel_gap=0.0)
    assert done.ended == "optimal" and done.rounds == 1
    assert done.solves == sum(1 for b in split(inst)[0] if b.operators)


@pytest.mark.unit
@pytest.mark.parametrize("ready_after", [0, 1, 3, 10**6])
def test_blocks_solved_here_until_the_workers_are_ready_then_by_them(ready_after):
    """Until ``ready()`` says the workers can start, a round's solves run here one by one;
    the rest of the round then goes to the batch. Wherever each solve ran, the rounds,
    solves, bound and placement are those of one process (the brute force here and in
    the batch), and the batch gets exactly the solves not made here."""
    inst = block_structured_instance(random.Random(11), 5, budget_share=0.4)
    alone = decompose(inst, exact_block_solver, rel_gap=0.0)
    here, batched = [0], [0]

    def ready() -> bool:  # the workers are ready once this many solves ran here
        return here[0] >= ready_after

    def counted(*task):
        here[0] += 1
        return exact_block_solver(*task)

    def batch(jobs):
        batched[0] += len(jobs)
        return [exact_block_solver(*job) for job in jobs]

    split_up = decompose(inst, counted, rel_gap=0.0, solve_batch=batch, parallel=2,
                         ready=ready)  # fmt: skip
    assert (split_up.rounds, split_up.solves) == (alone.rounds, alone.solves)
    assert split_up.lower_bound == alone.lower_bound
    assert split_up.schedule.on_host == alone.schedule.on_host
    assert split_up.schedule.makespan == alone.schedule.makespan
    assert here[0] + batched[0] == alone.solves
    assert here[0] == min(ready_after, alone.solves)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(6))
def test_unproven_blocks_still_give_a_valid_bound_and_placement(seed):
    inst = block_structured_instance(random.Random(200 + seed), 3, width=2, depth=2)
    best = brute_force_makespan(inst)[0]
    done = decompose(inst, heuristic_block_solver)
    assert done.lower_bound <= best * (1 + 1e-9)
    assert done.schedule.makespan >= best * (1 - 1e-9)
    assert verify_cim(inst, done.schedule).ok


@pytest.mark.unit
def test_out_of_time_leaves_the_blocks_on_the_host_and_the_floor():
    inst = block_structured_instance(random.Random(7), 4)
    done = decompose(inst, exact_block_solver, left=lambda: 0.0)
    assert done.solves == 0 and done.ended == "out of time"
    blocks, _ = split(inst)
    assert all(done.schedule.on_host[v] for b in blocks for v in b.operators)  # cuts may move
    assert verify_cim(inst, done.schedule).ok
    assert 0.0 < done.lower_bound <= brute_force_makespan(inst)[0]


@pytest.mark.solver
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("solver", ["highs", "cpsat"])
def test_decomposition_equals_the_monolithic_optimum(seed, solver):
    rng = random.Random(300 + seed)
    inst = block_structured_instance(rng, 6, width=3, depth=3,
                                     budget_share=rng.choice([0.1, 0.3, 0.5]),
                                     transfer_range=(0.0, rng.choice([1e-3, 1e-2])))  # fmt: skip
    whole = solve(inst, method="monolithic", solver="highs", rel_gap=0.0)
    # CP-SAT rounds latencies down to its time unit: its proofs hold to about 1e-8.
    parts = solve(inst, method="decomposition", solver=solver, rel_gap=1e-7)
    assert whole.result.status == SolveStatus.OPTIMAL
    assert parts.schedule is not None and parts.verification.ok
    assert parts.schedule.makespan == pytest.approx(whole.schedule.makespan, rel=1e-6)
    assert parts.result.best_bound <= whole.schedule.makespan * (1 + 1e-6)
    assert parts.result.options["method"] == "decomposition"
    assert parts.result.options["blocks"] >= 2


@pytest.mark.unit
def test_a_large_block_goes_to_cpsat_alone_once_highs_has_missed_more(monkeypatch):
    """HiGHS first (CP-SAT taking over when its probe does not prove the block) until
    HiGHS has missed more of the block's solves than CP-SAT; then CP-SAT alone, for as
    long as it misses less. Blocks below the pair count, a solver asked for by name
    (not enabled) and solves that got no time change nothing."""
    from placement.cim import blockwise, priced

    monkeypatch.setattr(priced, "CPSAT_MIN_PAIRS", 2)
    big = random_instance(random.Random(5), 8, edge_prob=0.1)
    small = CimInstance.build([CimOperator("a", 1.0, 0.5, 1)], [], 1)
    assert len(big.parallel_pairs) >= 2
    large = blockwise._LargeBlocks(True)
    base = {"solver": "highs"}
    first, alone = blockwise.HIGHS_FIRST, blockwise.CPSAT

    def step(status):
        settings = large.plan(big, base)
        large.learn(big, settings, status)
        return settings["large_block"]

    assert step("optimal (HiGHS)") == first  # misses: HiGHS 0, CP-SAT 0
    assert step("time_limit (CP-SAT)") == first  # both missed: 1, 1
    assert step("optimal (CP-SAT)") == first  # the probe missed: 2, 1
    assert step(blockwise.NO_TIME) == alone  # no time: 2, 1
    assert step("time_limit (CP-SAT)") == alone  # 2, 2
    assert step("optimal (HiGHS)") == first  # a tie: HiGHS first again
    assert large.plan(small, base) == base
    assert blockwise._LargeBlocks(False).plan(big, base) == base


@pytest.mark.solver
@pytest.mark.parametrize("probe", [0.0, 30.0])
@pytest.mark.parametrize("price", [None, "median"])
def test_a_large_block_solve_is_proven_by_highs_or_by_cpsat_after_it(probe, price, monkeypatch):
    """HiGHS first: a probe too short for it (0 s) leaves a budget solve to CP-SAT, which
    proves it, and ends a priced one (the decomposition prices that block by what the
    rest takes next); a long probe lets HiGHS prove it. Either way a bound below the
    brute-force optimum (at a budget, or priced), the status naming the solver that
    ended the solve."""
    from placement.cim import blockwise

    monkeypatch.setattr(blockwise, "PROBE_SECONDS", probe)
    inst = random_instance(random.Random(61), 7, edge_prob=0.25)
    if price == "median":
        price = median_price(inst)
    truth = brute_force_makespan(inst, price=price or 0.0)[0]
    settings = {"formulation": "tightened", "solver": "highs", "rel_gap": 1e-7, "threads": 1,
                "warm_start": None, "heuristic_pairs": 0, "cpsat_threads": None,
                "large_block": blockwise.HIGHS_FIRST}  # fmt: skip
    start = [all_host_schedule(inst)]  # with a start, no heuristic proves it first
    schedule, bound, _, status = blockwise.block_task(solve, inst, 30.0, start, settings, price)
    verify_cim(inst, schedule).raise_if_failed()
    value = schedule.makespan + (price or 0.0) * schedule.crossbars_used(inst)
    assert bound <= truth * (1 + 1e-7) and value >= truth * (1 - 1e-9)
    if probe == 0.0 and price:
        assert status == "not solved (HiGHS)"
        return
    assert value == pytest.approx(truth, rel=1e-6)
    assert status == ("optimal (CP-SAT)" if probe == 0.0 else "optimal (HiGHS)")


@pytest.mark.solver
def test_large_blocks_solved_by_cpsat_combine_to_the_monolithic_optimum(monkeypatch):
    """Every block with a parallel pair solved by CP-SAT (at budgets, priced, and priced by
    what the rest takes), over host-only skip edges too: the decomposition still finds
    the monolithic optimum, on instances where each kind of solve runs. A solver asked
    for by name solves every block itself."""
    from placement.cim import blockwise, priced

    monkeypatch.setattr(priced, "CPSAT_MIN_PAIRS", 1)
    monkeypatch.setattr(blockwise._LargeBlocks, "plan",
                        lambda self, sub, settings: (
                            {**settings, "large_block": blockwise.CPSAT}
                            if self.enabled and priced.cpsat_pays(sub) else settings))
    monkeypatch.setattr(blockwise._LargeBlocks, "highs_missed",
                        lambda self, sub: self.enabled and priced.cpsat_pays(sub))
    calls = []
    real = priced.solve_cpsat
    monkeypatch.setattr(priced, "solve_cpsat",
                        lambda *a, **k: calls.append(k.get("price")) or real(*a, **k))
    for seed in range(4):
        rng = random.Random(900 + seed)
        inst = with_host_only_skips(block_structured_instance(
            rng, 5, width=3, depth=3, cim_prob=0.5, budget_share=rng.choice([0.2, 0.4])), rng)
        whole = solve(inst, method="monolithic", solver="highs", rel_gap=0.0)
        parts = solve(inst, method="decomposition", solver="auto", rel_gap=1e-7)
        assert parts.schedule.makespan == pytest.approx(whole.schedule.makespan, rel=1e-6)
        assert parts.result.best_bound <= whole.schedule.makespan * (1 + 1e-6)
        before = len(calls)
        named = solve(inst, method="decomposition", solver="highs", rel_gap=1e-7)
        assert named.schedule.makespan == pytest.approx(whole.schedule.makespan, rel=1e-6)
        assert len(calls) == before, "a solver asked for by name let CP-SAT solve a block"
    assert any(isinstance(p, float) for p in calls), "no priced block went to CP-SAT"
    assert any(isinstance(p, CrossbarCost) for p in calls), "none priced by what the rest takes"


@pytest.mark.unit
def test_only_blocks_highs_has_not_proven_are_priced_by_what_the_rest_takes():
    from placement.cim import blockwise

    big = random_instance(random.Random(5), 9, edge_prob=0.0)  # 36 parallel pairs
    small = random_instance(random.Random(5), 3, edge_prob=1.0)  # none
    large = blockwise._LargeBlocks(True)
    settings = {"large_block": blockwise.HIGHS_FIRST}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blockwise, "cpsat_pays", lambda sub: len(sub.parallel_pairs) >= 10)
        assert not large.highs_missed(big)
        large.learn(big, settings, "optimal (HiGHS)")
        assert not large.highs_missed(big)
        large.learn(big, settings, "time_limit (CP-SAT)")  # the probe did not prove it
        assert large.highs_missed(big) and not large.highs_missed(small)
        assert not blockwise._LargeBlocks(False).highs_missed(big)


@pytest.mark.solver
def test_a_block_priced_by_the_count_is_solved_by_cpsat():
    """Whatever the plan for the block, a cost by the count goes to CP-SAT (the only
    solver that takes it): the brute-force optimum of T + cost(crossbars)."""
    from placement.cim import blockwise

    inst = random_instance(random.Random(62), 7, edge_prob=0.25)
    cost = random_cost(random.Random(1), inst)
    truth = brute_force_makespan(inst, price=cost)[0]
    settings = {"formulation": "tightened", "solver": "highs", "rel_gap": 1e-7, "threads": 1,
                "warm_start": None, "heuristic_pairs": 0, "cpsat_threads": None}  # fmt: skip
    schedule, bound, _, status = blockwise.block_task(
        solve, inst, 30.0, [all_host_schedule(inst)], settings, cost)
    verify_cim(inst, schedule).raise_if_failed()
    assert priced_makespan(inst, schedule, cost) == pytest.approx(truth, rel=1e-6)
    assert bound <= truth * (1 + 1e-7) and status == "optimal (CP-SAT)"


@pytest.mark.integration
def test_block_solves_in_workers_and_on_dask_give_what_one_process_gives(monkeypatch):
    """Two spawned workers and a two-worker Dask cluster: the same rounds, solves, bound
    and placement as in this process (the blocks of a round are independent; one solver
    thread everywhere, no time limit), which is the monolithic optimum. The workers are
    started at once and waited for, so that every block solve runs in them."""
    distributed = pytest.importorskip("distributed")
    from placement.cim import blockwise

    monkeypatch.setattr(blockwise, "WORKERS_AFTER", 0.0)
    rng = random.Random(77)
    inst = block_structured_instance(rng, 8, width=3, depth=2, budget_share=0.3)
    whole = solve(inst, method="monolithic", solver="highs", rel_gap=0.0)
    same = {"method": "decomposition", "solver": "highs", "rel_gap": 1e-7, "threads": 1}
    alone = solve(inst, **same)
    pooled = solve(inst, **same, workers=2)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:  # fmt: skip
        dask = solve(inst, **same, scheduler=cluster.scheduler_address)
    assert alone.result.status == SolveStatus.OPTIMAL
    assert alone.schedule.makespan == pytest.approx(whole.schedule.makespan, rel=1e-6)
    for other in (pooled, dask):
        assert other.verification.ok
        assert other.schedule.on_host == alone.schedule.on_host
        assert other.schedule.makespan == alone.schedule.makespan
        assert other.result.best_bound == alone.result.best_bound
        for key in ("rounds", "block_solves", "priced_block_solves", "blocks"):
            assert other.result.options[key] == alone.result.options[key]
    assert pooled.result.options["workers"] == 2 and "2 worker processes" in pooled.result.message
    solves = alone.result.options["block_solves"]
    assert pooled.result.options["block_solves_in_workers"] == solves
    assert dask.result.options["block_solves_in_workers"] == solves
    assert dask.result.options["scheduler"] == cluster.scheduler_address
    assert "on the Dask cluster" in dask.result.message


@pytest.mark.solver
def test_a_decomposition_done_before_the_workers_are_due_starts_none(monkeypatch):
    """Workers start only after WORKERS_AFTER seconds of decomposition: one that ends
    sooner solves every block here and leaves no process behind."""
    import multiprocessing

    from placement.cim import blockwise

    monkeypatch.setattr(blockwise, "WORKERS_AFTER", 3600.0)
    inst = block_structured_instance(random.Random(3), 6, width=3, depth=2, budget_share=0.3)
    before = set(multiprocessing.active_children())  # another test's, if any
    placed = solve(inst, method="decomposition", solver="highs", rel_gap=1e-7, workers=2)
    assert placed.result.status == SolveStatus.OPTIMAL
    assert placed.result.options["block_solves_in_workers"] == 0
    assert "0 of them in 2 worker processes" in placed.result.message
    assert set(multiprocessing.active_children()) <= before


@pytest.mark.unit
@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "all"])
def test_workers_must_be_a_positive_integer(workers):
    inst = block_structured_instance(random.Random(1), 2)
    with pytest.raises(PlacementError, match="workers must be a positive integer or 'auto'"):
        solve(inst, workers=workers)


@pytest.mark.solver
def test_auto_workers_are_the_usable_cpus_for_a_decomposition_and_none_for_a_whole_model():
    from placement.solvers.workers import auto_workers

    small = block_structured_instance(random.Random(1), 4)
    assert "workers" not in solve(small, workers="auto").result.options  # whole: no blocks
    inst = block_structured_instance(random.Random(3), 6, width=3, depth=2, budget_share=0.3)
    one = solve(inst, method="decomposition", solver="highs", rel_gap=1e-7, threads=1)
    auto = solve(inst, method="decomposition", solver="highs", rel_gap=1e-7, threads=1,
                 workers="auto")  # fmt: skip
    assert auto.result.options["workers"] == auto_workers()
    assert auto.schedule.makespan == one.schedule.makespan
    assert auto.result.best_bound == one.result.best_bound


@pytest.mark.solver
def test_cuts_on_the_accelerator_are_chosen_when_they_pay():
    # Two blocks joined at m, much faster on CIM; the transfers around it are small.
    ops = [CimOperator("a", 1e-3), CimOperator("x", 4e-3, 1e-3, 1),
           CimOperator("m", 9e-3, 1e-4, 2), CimOperator("y", 4e-3, 1e-3, 1),
           CimOperator("z", 3e-3), CimOperator("b", 1e-3)]  # fmt: skip
    edges = [CimEdge("a", "x", 1e-4), CimEdge("a", "m", 1e-4), CimEdge("x", "m", 1e-4),
             CimEdge("m", "y", 1e-4), CimEdge("m", "z", 1e-4), CimEdge("y", "b", 1e-4),
             CimEdge("z", "b", 1e-4)]  # fmt: skip
    inst = CimInstance.build(ops, edges, 3)
    placed = solve(inst, method="decomposition", rel_gap=0.0)
    assert placed.schedule.on_host["m"] is False
    assert placed.schedule.makespan == pytest.approx(brute_force_makespan(inst)[0], rel=1e-9)


@pytest.mark.solver
def test_auto_solves_small_graphs_whole_and_records_the_method():
    inst = block_structured_instance(random.Random(1), 4)
    assert len(inst.operators) < AUTO_DECOMPOSE_MIN_OPERATORS
    placed = solve(inst)
    assert placed.result.options["method"] == "monolithic"


@pytest.mark.solver
def test_a_model_of_your_own_is_not_decomposed():
    from placement.cim.pipeline import build_model

    inst = block_structured_instance(random.Random(2), 3)
    with pytest.raises(PlacementError, match="solved whole"):
        solve(inst, model=build_model(inst, "bounded"), method="decomposition")
    with pytest.raises(PlacementError, match="unknown method"):
        solve(inst, method="blocks")


@pytest.mark.solver
def test_a_queued_block_solve_gets_only_the_time_left_when_it_starts():
    """A round's block solves queue for the workers; each is limited by the round's
    deadline as it starts (``finish_by``), not by the share it was handed: past the
    deadline it is no solve, before it the solver gets at most what is left."""
    import time

    from placement.cim.blockwise import NO_TIME, block_task
    from placement.cim.schedule import all_host_schedule

    inst = random_instance(random.Random(5), 8, edge_prob=0.3)
    start = all_host_schedule(inst)
    settings = {"formulation": "tightened", "solver": "highs", "rel_gap": 1e-6,
                "threads": 1, "warm_start": None, "heuristic_pairs": 100}  # fmt: skip
    schedule, bound, _, status = block_task(solve, inst, 30.0, [start], settings,
                                            finish_by=time.time() - 1.0)  # fmt: skip
    assert status == NO_TIME and schedule.makespan == start.makespan and bound == 0.0
    limits = []

    def noted(*args, time_limit=None, **kwargs):  # the pipeline's solve, its limit noted
        limits.append(time_limit)
        return solve(*args, time_limit=time_limit, **kwargs)

    schedule, _, _, status = block_task(noted, inst, 30.0, [start], settings,
                                        finish_by=time.time() + 5.0)  # fmt: skip
    verify_cim(inst, schedule).raise_if_failed()
    assert len(limits) == 1 and limits[0] <= 5.0
    assert status == "optimal"
