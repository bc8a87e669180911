"""Which solver backends a test may use: skipped when not installed, except where CI
requires them.

``PLACEMENT_REQUIRE_SOLVERS`` (comma-separated backend names, or ``all``) turns the skip
of a named backend into a failure: CI installs every backend whose licence allows small
models (HiGHS, SCIP, CBC, CP-SAT, Gurobi's size-limited pip licence) and sets it, so a
backend that is broken as installed fails the run instead of being skipped.
"""

from __future__ import annotations

import os

import pytest

from placement.solvers.registry import BACKENDS

REQUIRE_VARIABLE = "PLACEMENT_REQUIRE_SOLVERS"


def required_backends() -> set[str]:
    """The backends ``PLACEMENT_REQUIRE_SOLVERS`` names (``all``: every registered one)."""
    names = {n.strip() for n in os.environ.get(REQUIRE_VARIABLE, "").split(",") if n.strip()}
    return set(BACKENDS) if "all" in names else names


def require_backend(name: str) -> None:
    """Skip unless backend ``name`` is usable here; fail instead when it is required."""
    reason = BACKENDS[name].unavailable_reason()
    if reason is None:
        return
    if name in required_backends():
        pytest.fail(f"{name} is required ({REQUIRE_VARIABLE}) but not usable: {reason}")
    pytest.skip(f"{name} not installed: {reason}")
