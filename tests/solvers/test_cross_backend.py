"""The same cases against every solver backend of ``placement.solvers.registry``.

Whichever backend runs, the CIM pipeline (``placement.cim.pipeline``) reaches the brute-force
optimum and verifies it, the PIM pipeline (``placement.pim.pipeline``) reaches its
brute-force optimum, and a failed solve is reported the same way. A backend that is not
installed here is skipped with its own reason (a failure where CI requires it:
``backend_helpers``), except in the error cases, whose fake solve needs no solver at all.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from functools import cache

import pytest
from backend_helpers import require_backend
from oracles import brute_force_makespan, random_instance
from pim_oracles import brute_force
from pim_oracles import random_instance as random_pim_instance

from placement.cim.instance import CimInstance
from placement.cim.pipeline import solve as solve_cim
from placement.errors import PlacementError
from placement.pim.pipeline import solve as solve_pim
from placement.solvers.base import ModelSize, SolveOptions, SolverError, SolveResult, SolveStatus
from placement.solvers.registry import BACKENDS, MIP_BACKENDS

#: Backends of the CIM problem: every MIP backend on the Pyomo model, CP-SAT on its own.
CIM_BACKENDS = (*MIP_BACKENDS, "cpsat")
#: Left to ``-m slow``: SCIP on the ten CIM instances takes seconds (as before: CP-SAT is
#: the default second opinion), and every Gurobi solve pays for its licence check.
SLOW_CIM = {"scip", "gurobi"}
SLOW_PIM = {"gurobi"}
CIM_SEEDS = range(100, 110)
PIM_SEEDS = range(4)
PIM_MODES = [(c, g) for c in ("upper_bound", "exact") for g in ("loop", "operator")]


def backends(names: tuple[str, ...], slow: Collection[str] = ()) -> list:
    """``names`` as parameters: a real solve is ``solver``, or ``slow`` for those in ``slow``."""
    return [
        pytest.param(n, id=n, marks=pytest.mark.slow if n in slow else pytest.mark.solver)
        for n in names
    ]


@cache
def cim_case(seed: int) -> tuple[CimInstance, float]:
    """A random CIM instance of 3..8 operators and its brute-force optimum (seconds)."""
    rng = random.Random(seed)
    inst = random_instance(rng, rng.randint(3, 8))
    return inst, brute_force_makespan(inst)[0]


@pytest.mark.unit
def test_every_registered_backend_is_covered():
    assert set(CIM_BACKENDS) == set(BACKENDS)  # a new backend joins every case below


# --- the CPU-only start, given to every backend ------------------------------------------


@pytest.mark.parametrize("name", backends(CIM_BACKENDS, SLOW_CIM))
def test_cpu_only_start_is_taken_by_every_backend(name):
    """Without a heuristic, every solve starts from the CPU-only schedule and reports no
    worse; HiGHS says whether it took the start (its log), the others take it silently."""
    require_backend(name)
    rng = random.Random(42)
    inst = random_instance(rng, 40, edge_prob=0.08)  # hundreds of parallel pairs
    out = solve_cim(inst, solver=name, formulation="faithful", warm_start=False, threads=1,
                    time_limit=1.0)  # fmt: skip
    assert out.schedule is not None and out.verification is not None and out.verification.ok
    assert out.schedule.makespan <= inst.cpu_only_latency * (1 + 1e-12)
    opts = out.result.options
    if name == "cpsat":  # its hint is the best of the heuristic's and the CPU-only schedule
        assert opts["start_from"] in ("heuristic", "CPU-only")
    else:
        assert opts["start_from"] == "CPU-only"
        assert opts["start_makespan"] == pytest.approx(inst.cpu_only_latency)
    if name == "highs":
        assert opts["start"] == "accepted"


# --- (a) CIM: the brute-force optimum, verified ------------------------------------------


@pytest.mark.parametrize("name", backends(CIM_BACKENDS, SLOW_CIM))
def test_cim_optimum_matches_brute_force(name):
    require_backend(name)
    for seed in CIM_SEEDS:
        inst, best = cim_case(seed)
        out = solve_cim(inst, solver=name, formulation="faithful", threads=1, time_limit=30)
        r = out.result
        assert r.status == SolveStatus.OPTIMAL, (seed, r.message)
        assert r.solver == name
        assert out.schedule is not None, seed
        assert out.verification is not None and out.verification.ok, (seed, out.verification)
        assert r.objective == pytest.approx(best, rel=1e-6), seed
        assert out.schedule.makespan == pytest.approx(best, rel=1e-6), seed
        if name == "cpsat":  # latencies rounded down: CP-SAT's bound stays a valid bound
            assert r.best_bound is not None and r.best_bound <= best * (1 + 1e-9), seed


@pytest.mark.parametrize("name", backends(MIP_BACKENDS, SLOW_CIM))
def test_auto_formulation_runs_on_every_mip_backend(name):
    """``placement bench --formulations auto`` with any MIP backend: the run path of bench
    (:func:`placement.bench.run.run_one`) resolves 'auto' and reaches the optimum."""
    from placement.bench.run import run_one

    require_backend(name)
    for seed in CIM_SEEDS[:3]:
        inst, best = cim_case(seed)
        out = run_one(inst, "auto", name, time_limit=30, threads=1)
        assert out.result.status == SolveStatus.OPTIMAL, (seed, out.result.message)
        assert out.result.options["formulation"] in ("bounded", "tightened"), seed
        assert out.verified and out.schedule is not None, seed
        assert out.schedule.makespan == pytest.approx(best, rel=1e-6), seed


# --- (b) PIM: the brute-force optimum in every mode --------------------------------------


@pytest.mark.parametrize("name", backends(MIP_BACKENDS, SLOW_PIM))
def test_pim_optimum_matches_brute_force(name):
    require_backend(name)
    for seed in PIM_SEEDS:
        inst = random_pim_instance(seed, 7)
        for copy, granularity in PIM_MODES:
            p = solve_pim(inst, solver=name, copy=copy, granularity=granularity)
            want, _ = brute_force(inst, copy, granularity)
            case = (seed, copy, granularity)
            assert p.result.status == SolveStatus.OPTIMAL, (case, p.result.message)
            assert p.result.solver == name
            assert p.verification is not None and p.verification.ok, case
            assert p.hybrid is not None
            assert p.hybrid.total == pytest.approx(want, rel=1e-6), case
            assert p.result.objective == pytest.approx(want, rel=1e-6), case


# --- (c) a failed solve is reported the same way, whichever backend ran -------------------


def fake_result(name: str, status: SolveStatus, message: str) -> SolveResult:
    """What a backend reports for a failed solve (model units; no objective, no bound)."""
    options = SolveOptions().recorded()
    if name == "cpsat":  # what the CP-SAT backend records besides the options
        options |= {"cpsat_status": "MODEL_INVALID", "worker_overhead_seconds": 0.0}
    return SolveResult(status, name, None, None, None, 0.0, 0.01, ModelSize(7, 3, 5),
                       message, options)  # fmt: skip


def fake_backend(monkeypatch, name: str, status: SolveStatus, message: str) -> SolveResult:
    """Make backend ``name`` report ``status``; installed or not, no solver runs."""
    raw = fake_result(name, status, message)
    backend = BACKENDS[name]
    monkeypatch.setattr(backend, "unavailable_reason", lambda: None)
    monkeypatch.setattr(backend, "solve", lambda model, options, *, start=None: raw)
    return raw


def check_solver_error(exc: SolverError, raw: SolveResult, what: str) -> None:
    assert isinstance(exc, PlacementError)
    assert str(exc) == f"the {what} model could not be solved: {raw.message}"
    r = exc.result  # the backend's result, times in seconds
    assert (r.status, r.solver, r.message, r.size) == (raw.status, raw.solver, raw.message,
                                                       raw.size)  # fmt: skip
    assert r.objective is None


@pytest.mark.unit
@pytest.mark.parametrize("name", CIM_BACKENDS)
def test_cim_solver_error_is_a_solver_error(monkeypatch, name):
    label = BACKENDS[name].label
    raw = fake_backend(monkeypatch, name, SolveStatus.ERROR, f"{label}: Solve error")
    inst, _ = cim_case(CIM_SEEDS[0])
    with pytest.raises(SolverError, match="^the CIM model could not be solved") as info:
        solve_cim(inst, solver=name, formulation="faithful", threads=1, time_limit=30)
    check_solver_error(info.value, raw, "CIM")


@pytest.mark.unit
@pytest.mark.parametrize("name", CIM_BACKENDS)
def test_cim_claimed_infeasibility_is_an_error(monkeypatch, name):
    label = BACKENDS[name].label
    fake_backend(monkeypatch, name, SolveStatus.INFEASIBLE, f"{label}: Infeasible")
    inst, _ = cim_case(CIM_SEEDS[0])
    with pytest.raises(PlacementError, match="infeasible.*always feasible") as info:
        solve_cim(inst, solver=name, formulation="faithful", threads=1, time_limit=30)
    assert str(info.value).startswith(f"{label} declared the CIM model infeasible ({label}: ")
    assert "placing every operator on the host is always feasible" in str(info.value)


@pytest.mark.unit
@pytest.mark.parametrize("name", MIP_BACKENDS)
def test_pim_solver_error_is_a_solver_error(monkeypatch, name):
    label = BACKENDS[name].label
    raw = fake_backend(monkeypatch, name, SolveStatus.ERROR, f"{label}: Solve error")
    with pytest.raises(SolverError, match="^the PIM model could not be solved") as info:
        solve_pim(random_pim_instance(PIM_SEEDS[0], 7), solver=name)
    check_solver_error(info.value, raw, "PIM")


@pytest.mark.unit
@pytest.mark.parametrize("name", MIP_BACKENDS)
def test_pim_claimed_infeasibility_is_an_error(monkeypatch, name):
    label = BACKENDS[name].label
    fake_backend(monkeypatch, name, SolveStatus.INFEASIBLE, f"{label}: Infeasible")
    with pytest.raises(PlacementError, match="infeasible.*always feasible") as info:
        solve_pim(random_pim_instance(PIM_SEEDS[0], 7), solver=name)
    assert str(info.value).startswith(f"{label} declared the PIM model infeasible ({label}: ")
    assert "placing every nest on the host is always feasible" in str(info.value)
