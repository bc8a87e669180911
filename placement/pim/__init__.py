"""The CPU + PIM target: loop nests of a lowered model on the host or on PIM cores.

Modules: ``instance`` (the nests, their host times, the PIM spec), ``times`` (measured
or simulated PIM times from a file, ``--pim-times``), ``pipeline``
(lowering, nest profiling, counters), ``rules`` (the Torch-PIM threshold rule, nest and
operator level), ``verify`` (independent Eq. 9), ``solve`` (the optimal placement and
the rule per core count), ``report`` (terminal and JSON output). The functions below
are the public API; the Pyomo model itself is ``placement.models.pim``.
"""

from __future__ import annotations

from typing import Any

from placement.hardware.pim import PimHardware, PimSpec
from placement.models.pim import build_pim_model
from placement.pim import pipeline
from placement.pim.instance import PimInstance
from placement.pim.rules import operator_rule_placement, rule_placement
from placement.pim.solve import CoreResult, PimPlacement, solve, solve_for_cores
from placement.pim.times import PimTimes, load_pim_times
from placement.pim.verify import (
    PimVerification,
    evaluate_blocks,
    evaluate_placement,
    verify_pim,
)

__all__ = [
    "CoreResult", "PimInstance", "PimPlacement", "PimTimes", "PimVerification",
    "build_model", "evaluate", "evaluate_blocks", "instance", "load_pim_times", "loops",
    "lower", "operator_rule", "profile", "rule", "solve", "solve_for_cores", "verify",
]  # fmt: skip


def instance(
    profile: Any,
    hardware: PimHardware | PimSpec,
    cores: int | None = None,
    pim_times: PimTimes | None = None,
    blocks: Any = None,
) -> PimInstance:
    """The nests of ``profile`` (a nest profile) on ``hardware`` with ``cores`` PIM cores
    (default: the hardware's); ``pim_times`` (:func:`load_pim_times`) replace the
    analytical T_pim of the nests they name; ``blocks`` (``loops(model, profile)``) for
    basic-block granularity."""
    spec = hardware.pim if isinstance(hardware, PimHardware) else hardware
    return pipeline.instance(profile, spec, cores, pim_times, blocks)


build_model = build_pim_model
profile = pipeline.profile_nests
lower = pipeline.lower_model
loops = pipeline.profile_loops
rule = rule_placement
operator_rule = operator_rule_placement
evaluate = evaluate_placement
verify = verify_pim
