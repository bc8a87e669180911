"""``model_size`` counts what Pyomo's own ``get_vars_from_components`` counts."""

from __future__ import annotations

import random

import pyomo.environ as pyo
import pytest
from oracles import random_instance
from pyomo.core.base.constraint import Constraint
from pyomo.core.base.objective import Objective
from pyomo.util.vars_from_expressions import get_vars_from_components

from placement.cim.list_scheduling import heuristic_schedule
from placement.models.cim_makespan.build import FORMULATIONS, build_cim_model
from placement.solvers.base import ModelSize
from placement.solvers.contrib import model_size


def pyomo_size(model: pyo.Block) -> ModelSize:
    """The count by Pyomo's own walker (what model_size did before)."""
    seen = {}
    for ctype in (Constraint, Objective):
        for var in get_vars_from_components(model, ctype, include_fixed=False, active=True):
            seen[id(var)] = var
    rows = sum(1 for _ in model.component_data_objects(Constraint, active=True))
    return ModelSize(len(seen), sum(1 for v in seen.values() if v.is_binary()), rows)


@pytest.mark.unit
@pytest.mark.parametrize("seed", range(4))
def test_cim_models_counted_as_pyomo_counts(seed):
    inst = random_instance(random.Random(70 + seed), 6 + seed, edge_prob=0.3)
    ub = heuristic_schedule(inst, max_evals=10).makespan
    for families in FORMULATIONS.values():
        m = build_cim_model(inst, families=families, upper_bound=ub)
        assert model_size(m) == pyomo_size(m)


@pytest.mark.unit
def test_a_model_with_every_kind_of_node_counted_as_pyomo_counts():
    m = pyo.ConcreteModel()
    m.I = pyo.Set(initialize=range(6))
    m.x = pyo.Var(m.I, within=pyo.Binary)
    m.y = pyo.Var(m.I)
    m.only_in_dropped = pyo.Var()
    m.only_in_objective = pyo.Var(within=pyo.Binary)
    m.p = pyo.Param(mutable=True, initialize=2.0)
    m.x[0].fix(1)
    m.named = pyo.Expression(expr=m.y[1] * m.p + pyo.exp(m.y[2]))  # entered, not a leaf
    m.c1 = pyo.Constraint(expr=m.named + m.x[0] + 3 * m.x[1] <= 4)
    m.c2 = pyo.Constraint(expr=(0, m.x[2] * m.y[3], m.p))
    m.c3 = pyo.Constraint(expr=m.only_in_dropped >= 1)
    m.c3.deactivate()
    m.b = pyo.Block()
    m.b.c = pyo.Constraint(expr=m.y[4] == sum(m.x[i] for i in m.I))
    m.off = pyo.Block()
    m.off.c = pyo.Constraint(expr=m.y[5] >= 0)
    m.off.deactivate()
    m.obj = pyo.Objective(expr=m.y[1] + m.only_in_objective)
    m.obj2 = pyo.Objective(expr=m.y[5])
    m.obj2.deactivate()
    size = model_size(m)
    assert size == pyomo_size(m)
    # y1 y2 y3 y4, x1..x5, only_in_objective; x0 fixed; rows c1, c2, b.c
    assert size == ModelSize(variables=10, binaries=6, constraints=3)
