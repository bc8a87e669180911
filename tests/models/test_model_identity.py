"""The fast CIM builder builds the very model the plain Pyomo statement of each family did.

``tests/cim_reference.py`` keeps the families as written before the fast builder
(component indexing and operator overloading in every row). On random DAGs, fork-join
graphs, edge cases (zero latencies and transfers, equal host and accelerator times, a
coefficient of exactly one model unit, a tight upper bound that zeroes per-pair big-Ms)
and the block instances a decomposition solves, every formulation and every family is
built both ways and compared three ways: the same components in the same order, every
row's expression tree node by node (node classes, variables by name, constants by type
and exact value), and the LP and MPS files byte for byte.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyomo.environ as pyo
import pytest
from cim_reference import reference_model
from oracles import random_instance
from pyomo.core.expr.numeric_expr import MonomialTermExpression

from placement.cim.frontier import CIM, HOST, block_instance, split
from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.list_scheduling import heuristic_schedule
from placement.models.cim_makespan.build import FAMILY_BUILDERS, FORMULATIONS, build_cim_model

ALL_FAMILIES = tuple(FAMILY_BUILDERS)


def tree(expr) -> object:
    """An expression as nested tuples: node classes, variables and params by name,
    numbers by type and repr (so 1 and 1.0, 0.0 and -0.0 differ)."""
    if expr is None or isinstance(expr, (bool, int, float)):
        return (type(expr).__name__, repr(expr))
    if expr.is_expression_type():
        return (type(expr).__name__, tuple(tree(a) for a in expr.args))
    if expr.is_variable_type():
        return ("var", expr.name)
    if expr.is_parameter_type():
        return ("param", expr.name, repr(pyo.value(expr)))
    return ("other", type(expr).__name__, str(expr))


def rows(model: pyo.ConcreteModel) -> list[tuple]:
    """Every constraint of ``model`` in order: component, index, active, tree."""
    return [
        (con.parent_component().name, con.index(), con.active, tree(con.expr))
        for con in model.component_data_objects(pyo.Constraint)
    ]


def components(model: pyo.ConcreteModel) -> list[tuple[str, str, int]]:
    return [(c.name, c.ctype.__name__, len(c) if c.is_indexed() else 1)
            for c in model.component_objects(descend_into=False)]  # fmt: skip


def written(model: pyo.ConcreteModel, path: Path) -> bytes:
    model.write(str(path), io_options={"symbolic_solver_labels": True})
    return path.read_bytes()


def assert_identical(inst: CimInstance, families, upper_bound, tmp_path: Path) -> None:
    new = build_cim_model(inst, families=families, upper_bound=upper_bound)
    old = reference_model(inst, families, upper_bound=upper_bound)
    assert components(new) == components(old)
    new_rows, old_rows = rows(new), rows(old)
    assert len(new_rows) == len(old_rows)
    for a, b in zip(new_rows, old_rows, strict=True):
        assert a == b
    for suffix in (".lp", ".mps"):
        assert written(new, tmp_path / f"new{suffix}") == written(old, tmp_path / f"old{suffix}")


def edge_cases() -> CimInstance:
    """Zero and equal latencies, a free transfer, and latencies of exactly one model unit."""
    unit = 1e-8  # big-M below is 3.0003e-4 s: the model unit is 1e-8 s
    ops = [
        CimOperator("a", unit),  # T_host = 1 model unit: x * 1 is x itself
        CimOperator("b", 0.0, 0.0, 1),  # all zero
        CimOperator("c", 1e-4, 1e-4, 2),  # T_host == T_acc: x's coefficients cancel
        CimOperator("d", 1e-4, unit, 1),  # T_acc = 1 unit
        CimOperator("e", 0.0),  # zero host latency, host only
        CimOperator("f", 1e-4, 5e-5, 3),
    ]
    edges = [
        CimEdge("a", "b", 0.0),  # free transfer: z * 0 vanishes
        CimEdge("a", "c", unit),
        CimEdge("a", "d", 1e-7),
        CimEdge("b", "e", 2e-6),
        CimEdge("c", "e", 0.0),
        CimEdge("d", "f", 3e-6),
        CimEdge("e", "f", 1e-6),
    ]
    return CimInstance.build(ops, edges, 3)


def fork_join(seed: int, blocks: int, width: int) -> CimInstance:
    """Chained fork-join blocks (the shape of benchmarks/cim_scale.py), some host-only."""
    rng = random.Random(seed)
    ops, edges = [CimOperator("src", rng.uniform(1e-5, 1e-3))], []
    last = "src"
    for b in range(blocks):
        ends = []
        for k in range(width):
            prev = last
            for j in range(rng.randint(1, 3)):
                name = f"b{b}_{k}_{j}"
                t = rng.uniform(1e-5, 1e-3)
                if rng.random() < 0.5:
                    ops.append(CimOperator(name, t, t * rng.uniform(0.1, 1.5), rng.randint(1, 4)))
                else:
                    ops.append(CimOperator(name, t))
                edges.append(CimEdge(prev, name, t * rng.uniform(0.0, 0.3)))
                prev = name
            ends.append(prev)
        join = f"join{b}"
        ops.append(CimOperator(join, rng.uniform(1e-5, 1e-3)))
        edges.extend(CimEdge(e, join, 1e-5) for e in ends)
        last = join
    return CimInstance.build(ops, edges, 12)


def instances() -> list[tuple[str, CimInstance]]:
    out = [("edge cases", edge_cases())]
    out += [(f"random {s}", random_instance(random.Random(900 + s), 4 + s % 5, edge_prob=0.3))
            for s in range(6)]  # fmt: skip
    out += [(f"fork-join {s}", fork_join(s, 3 + s, 2 + s)) for s in range(3)]
    return out


def block_instances() -> list[tuple[str, CimInstance]]:
    """What a decomposition solves: each block, its ends on each device."""
    inst = fork_join(7, 4, 3)
    blocks, _ = split(inst)
    out = []
    for k, block in enumerate(blocks):
        if not block.operators:
            continue
        for entry_on, exit_on in ((HOST, HOST), (CIM, HOST), (HOST, CIM)):
            entry = None if block.entry is None else entry_on
            exit_ = None if block.exit is None else exit_on
            out.append((f"block {k} {entry}/{exit_}",
                        block_instance(inst, block, entry, exit_, inst.crossbar_budget)))
    return out


CASES = instances() + block_instances()


@pytest.mark.unit
@pytest.mark.parametrize("name,inst", CASES, ids=[c[0] for c in CASES])
def test_every_formulation_builds_the_reference_model(name, inst, tmp_path):
    ub = heuristic_schedule(inst, max_evals=20).makespan
    for families in FORMULATIONS.values():
        assert_identical(inst, families, ub if "window_big_m" in families else None, tmp_path)
    # every family at once, with the heuristic's bound and with a tight one (many
    # per-pair big-Ms of zero)
    for bound in (ub, 0.3 * ub):
        assert_identical(inst, ALL_FAMILIES, bound, tmp_path)


@pytest.mark.unit
def test_the_comparison_tells_close_expressions_apart():
    """What the trees compare: the last bit of a coefficient, 1 vs 1.0, x vs 1.0 * x."""
    m = pyo.ConcreteModel()
    m.x, m.y = pyo.Var(), pyo.Var()
    c = 0.1 + 0.2
    assert tree(m.x * c + m.y) == tree(m.x * c + m.y)
    assert tree(m.x * c + m.y) != tree(m.x * (c * (1 + 2**-52)) + m.y)
    assert tree(m.x + 1) != tree(m.x + 1.0)
    assert tree(m.x + m.y) != tree(MonomialTermExpression((1.0, m.x)) + m.y)
    assert tree(m.x >= m.y) != tree(m.y <= m.x - 0.0 * m.y)
