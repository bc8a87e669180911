"""The PIM pipeline's solve: the Eq.-9-optimal placement of loop nests, verified, and the
threshold rule beside it for every core count.

``solve(instance)`` builds the loop-nest model (``placement.models.pim_loopnest.build``),
solves it with any MIP backend (HiGHS by default) and recomputes the decisions' Eq. 9 independently
(``placement.pim.verifier``); a placement that fails verification is an error, never a
result. ``solve_for_cores`` adds the paper's threshold rule (``placement.pim.rules``)
and its own Eq. 9 for each PIM core count, as ``placement solve --target pim`` shows;
with ``compare=True`` also the optimum at every granularity (Table 5's comparison).

At basic-block granularity a placement decides per block (``PimPlacement.on_block``);
``on_pim`` then says where each nest's body blocks (its memory accesses) run.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import pyomo.environ as pyo

from placement.devices.pim import AUTO_COPY, HybridTime, resolve_copy, speedup
from placement.errors import PlacementError
from placement.models.common import solve_in_seconds
from placement.models.pim_loopnest.basic_blocks import block_decisions
from placement.models.pim_loopnest.build import (
    BASIC_BLOCK,
    GRANULARITIES,
    build_pim_model,
    check_mode,
    extract_decisions,
)
from placement.models.pim_loopnest.copy_terms import chosen_residents
from placement.pim.instance import PimInstance
from placement.pim.rules import RuleDecision, rule_placement
from placement.pim.verifier import (
    PimVerification,
    block_crossings,
    evaluate_placement,
    verify_pim,
)
from placement.solvers.base import DEFAULT_REL_GAP, SolveOptions, SolveResult, SolveStatus
from placement.solvers.registry import get_backend


@dataclass
class PimPlacement:
    instance: PimInstance
    copy: str
    granularity: str
    result: SolveResult  # objective and bound in seconds
    on_pim: dict[str, bool] | None  # None when the solver found no solution
    hybrid: HybridTime | None  # recomputed by the verifier from the decisions
    verification: PimVerification | None
    on_block: dict[str, bool] | None = None  # basic-block granularity: block id -> PIM
    # partitioned copy with banks too small for every weight: the weights the optimum
    # keeps there (None: every weight that fits, or another accounting)
    resident: frozenset[str] | None = None

    @property
    def split_nests(self) -> list[str]:
        """Basic-block granularity: the nests with blocks on both sides."""
        if self.on_block is None:
            return []
        blocks = self.instance.nest_blocks
        return [n.id for n in self.instance.nests
                if len({self.on_block[b] for b in blocks[n.id].ids}) > 1]  # fmt: skip

    @property
    def crossings(self) -> tuple[int, int] | None:
        """Basic-block granularity: (transitions between nests, inside nests)."""
        return None if self.on_block is None else block_crossings(self.instance, self.on_block)

    @property
    def cpu_only(self) -> float:
        return self.instance.cpu_only

    @property
    def speedup(self) -> float | None:
        return None if self.hybrid is None else speedup(self.cpu_only, self.hybrid.total)

    def to_json(self) -> dict[str, Any]:
        s = self.speedup
        return {
            "copy": self.copy,
            "memory": self.instance.spec.memory,
            "granularity": self.granularity,
            "n_cores": self.instance.n_cores,
            "nests": len(self.instance.nests),
            "result": self.result.to_json(),
            "cpu_only": self.cpu_only,
            "hybrid": None if self.hybrid is None else self.hybrid.to_json(),
            "speedup": None if s is None or math.isinf(s) else s,
            "decisions": None
            if self.on_pim is None
            else {k: ("pim" if v else "host") for k, v in self.on_pim.items()},
            "verification": None if self.verification is None else self.verification.to_json(),
            "resident": None if self.resident is None else sorted(self.resident),
        } | self._block_json()

    def _block_json(self) -> dict[str, Any]:
        if self.granularity != BASIC_BLOCK:
            return {}
        crossings = self.crossings
        return {
            "block_decisions": None
            if self.on_block is None
            else {k: ("pim" if v else "host") for k, v in self.on_block.items()},
            "split_nests": self.split_nests,
            "crossings": None
            if crossings is None
            else {"between_nests": crossings[0], "inside_nests": crossings[1]},
        }


def solve(
    instance: PimInstance,
    *,
    copy: str | None = None,
    granularity: str | None = None,
    model: pyo.ConcreteModel | None = None,
    solver: str = "highs",
    time_limit: float | None = None,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = None,
    tee: bool | list[TextIO] = False,
) -> PimPlacement:
    """Minimum-Eq.-9 placement of ``instance`` (best found under a time limit), verified.

    ``copy``: the copy accounting (default ``auto``: the hardware's memory architecture,
    :func:`placement.devices.pim.resolve_copy`); ``granularity``: loop (default),
    operator or basic-block. ``model`` may be a model from ``build_model`` that the
    caller extended: it is solved as built, and a ``copy`` or ``granularity`` that
    contradicts how it was built is an error. The verifier checks Eq. 9 of the returned
    decisions. ``solver``: any MIP backend of ``placement.solvers.registry`` ("highs",
    "scip", "cbc", "gurobi").
    """
    if model is not None:
        copy, granularity = _model_options(model, instance, copy, granularity)
    check_mode(copy or AUTO_COPY, granularity or "loop")
    copy = resolve_copy(copy or AUTO_COPY, instance.spec)
    granularity = granularity or "loop"
    options = SolveOptions(time_limit=time_limit, rel_gap=rel_gap, threads=threads, tee=tee)
    options.check()
    backend = get_backend(solver, mip=True)
    tick = time.perf_counter()
    if model is None:
        model = build_pim_model(instance, copy=copy, granularity=granularity)
    build_seconds = time.perf_counter() - tick
    result = solve_in_seconds(
        model, backend, options, what="PIM", item="nest", build_seconds=build_seconds
    )
    if not result.status.has_solution:
        return PimPlacement(instance, copy, granularity, result, None, None, None)

    on_pim = extract_decisions(model)
    on_block = block_decisions(model) if granularity == BASIC_BLOCK else None
    decided = on_pim if on_block is None else on_block  # what the verifier checks
    resident = chosen_residents(model)
    assert result.objective is not None
    claimed = result.objective
    if result.status == SolveStatus.TIME_LIMIT:
        # An incumbent's continuous switch/copy variables may sit above their minimum;
        # the decisions' own Eq. 9 is then what it achieves.
        check = verify_pim(
            instance, decided, copy=copy, granularity=granularity, resident=resident
        )
        if check.recomputed is not None and check.recomputed.total < claimed:
            claimed = check.recomputed.total
            result = dataclasses.replace(
                result,
                objective=claimed,
                message=f"{result.message}; incumbent lowered to its decisions' Eq. 9".lstrip("; "),
            )
    verification = verify_pim(
        instance, decided, copy=copy, granularity=granularity, claimed=claimed,
        resident=resident,
    )  # fmt: skip
    verification.raise_if_failed()
    return PimPlacement(
        instance, copy, granularity, result, on_pim, verification.recomputed, verification,
        on_block, resident,
    )  # fmt: skip


def _model_options(
    model: pyo.ConcreteModel, instance: PimInstance, copy: str | None, granularity: str | None
) -> tuple[str, str]:
    """The copy accounting and granularity ``model`` was built with; asked-for values that
    contradict them are an error (the model is solved as built)."""
    built_copy = getattr(model, "copy_mode", None)
    built_granularity = getattr(model, "granularity", None)
    if built_copy is None or built_granularity is None:
        raise PlacementError(
            "the model was not built by placement.pim.build_model (no copy_mode or"
            " granularity): build it with pim.build_model(instance, ...) and extend that"
        )
    if copy is not None and resolve_copy(copy, instance.spec) != built_copy:
        raise PlacementError(
            f"copy={copy!r} contradicts the model, built with copy accounting"
            f" {built_copy!r}: leave copy out to solve the model as built"
        )
    if granularity is not None and granularity != built_granularity:
        raise PlacementError(
            f"granularity={granularity!r} contradicts the model, built at"
            f" {built_granularity!r} granularity: leave it out to solve the model as built"
        )
    return built_copy, built_granularity


@dataclass
class CoreResult:
    """Everything decided for one PIM core count."""

    cores: int
    rule: dict[str, RuleDecision]  # nest id -> decision, program order
    rule_hybrid: HybridTime  # Eq. 9 of the rule's placement (same copy accounting)
    placement: PimPlacement  # the Eq.-9-optimal placement (verified)
    # compare=True: the optimum at every granularity (the one above included)
    by_granularity: dict[str, PimPlacement] | None = None

    @property
    def rule_speedup(self) -> float:
        return speedup(self.placement.cpu_only, self.rule_hybrid.total)

    @property
    def rule_on_pim(self) -> list[str]:
        return [k for k, d in self.rule.items() if d.on_pim]

    @property
    def model_on_pim(self) -> list[str] | None:
        if self.placement.on_pim is None:
            return None
        return [k for k, v in self.placement.on_pim.items() if v]


def solve_for_cores(
    instance: PimInstance,
    cores: Sequence[int],
    copy: str = AUTO_COPY,
    granularity: str = "loop",
    allow_estimates: bool = False,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    rel_gap: float = DEFAULT_REL_GAP,
    threads: int | None = None,
    tee: bool | list[TextIO] = False,
    progress: Callable[[int], None] | None = None,
    compare: bool = False,
) -> list[CoreResult]:
    """Rule and optimal placement for every core count in ``cores`` (in the order given).

    The rule is per nest at any ``granularity`` (the paper's rule); its placement is
    evaluated with the same ``copy`` accounting as the model, so the two compare.
    ``compare``: also solve every other granularity (``CoreResult.by_granularity``; the
    instance needs its basic blocks).
    """
    check_mode(copy, granularity)
    copy = resolve_copy(copy, instance.spec)
    if not cores:
        raise PlacementError("no PIM core counts given")
    out: list[CoreResult] = []
    for n in cores:
        if progress is not None:
            progress(n)
        at_n = instance.with_cores(n)
        rule = rule_placement(at_n, allow_estimates=allow_estimates)
        rule_hybrid = evaluate_placement(at_n, {k: d.on_pim for k, d in rule.items()}, copy=copy)
        by: dict[str, PimPlacement] = {}
        for gran in [granularity, *(g for g in GRANULARITIES if compare and g != granularity)]:
            by[gran] = solve(
                at_n, copy=copy, granularity=gran, solver=solver, time_limit=time_limit,
                rel_gap=rel_gap, threads=threads, tee=tee,
            )  # fmt: skip
        ordered = {g: by[g] for g in GRANULARITIES if g in by} if compare else None
        out.append(CoreResult(n, rule, rule_hybrid, by[granularity], ordered))
    return out
