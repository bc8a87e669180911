"""The CPU + PIM target: loop nests of a lowered model on the host or on PIM cores.

Modules: ``instance`` (the nests, their host times, the PIM spec), ``times`` (measured
or simulated PIM times from a file, ``--pim-times``), ``rules`` (the Torch-PIM threshold
rule, nest and operator level), ``granularity`` (operator-level decisions), ``verifier``
(independent Eq. 9), ``pipeline`` (the optimal placement and the rule per core count),
``output`` (terminal and JSON output), ``calibration`` and ``calibration_output`` (the
rule's theta and sigma calibrated on a host's nests, Section 4.4: ``placement
calibrate``). Lowering and nest profiling live in
:mod:`placement.profiling.nest_measure`. The functions below are the public API; the
Pyomo model itself is ``placement.models.pim_loopnest``.
"""

from __future__ import annotations

from placement.models.pim_loopnest.build import build_pim_model
from placement.pim.instance import PimInstance, build_instance
from placement.pim.pipeline import CoreResult, PimPlacement, solve, solve_for_cores
from placement.pim.rules import operator_rule_placement, rule_placement
from placement.pim.times import PimTimes, load_pim_times
from placement.pim.verifier import (
    PimVerification,
    evaluate_blocks,
    evaluate_placement,
    verify_pim,
)
from placement.profiling.nest_measure import lower_model, profile_loops, profile_nests

__all__ = [
    "CoreResult", "PimInstance", "PimPlacement", "PimTimes", "PimVerification",
    "build_instance", "build_model", "evaluate", "evaluate_blocks", "load_pim_times",
    "loops", "lower", "operator_rule", "profile", "rule", "solve", "solve_for_cores",
    "verify",
]  # fmt: skip

build_model = build_pim_model
profile = profile_nests
lower = lower_model
loops = profile_loops
rule = rule_placement
operator_rule = operator_rule_placement
evaluate = evaluate_placement
verify = verify_pim
