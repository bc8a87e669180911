"""Evaluated profiles of ``pim_paper_verdicts.py``: the rule and the model per workload.

A :class:`Run` is one workload, size and host-time source, read from the cache of
``pim_paper_verdicts.py`` and recomputed with the ``placement.pim`` API: the threshold
rule (C1-C4) and the Eq.-9 optimum on the ``pim-icelake`` preset at 32/64/128 cores,
Eq. 8 copies. The ``ort`` source is derived from the compiled profile exactly as
``--host-times ort`` measures it. :class:`Cell` and :class:`Row` are the table's cells.

Verdict tolerances (stated once, used by every numeric row): a number "holds" within
15 % of the paper's (``REL_TOL``) or, for percentages of time, within the points the row
names; a speed-up trend (rising, flat, peaking) is the claim's "shape".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from pim_verdict_jobs import CORES, Job, fig_size

from placement.hardware.pim import load_pim_hardware
from placement.pim.instance import build_instance as pim_instance
from placement.pim.pipeline import solve_for_cores
from placement.pim.rules import RuleDecision
from placement.profiling.nest_profile import NestProfile
from placement.profiling.ort.apportion import apportion_ort

HOLDS, SHAPE, DIFFERS, NA = "holds", "shape only", "differs", "n/a"
REL_TOL = 0.15
HW = load_pim_hardware("pim-icelake")
THETA = HW.pim.theta
TRANSCENDENTAL = ("math.exp", "math.erf", "math.tanh", "math.log", "math.powf", "math.sin",
                  "math.cos", "math.atan")  # fmt: skip
STREAMING = ("ew_add", "copy", "scale", "zeroing", "relu")
TRANSCENDENTALS = ("silu", "gelu", "tanh")
OPERATORS = (*STREAMING, *TRANSCENDENTALS, "softmax", "layernorm", "rmsnorm", "mac", "gemv",
             "matmul", "depthwise_conv")  # fmt: skip
C_T45 = 32  # Tables 4 and 5: the paper does not say; the preset's core count



class Missing(Exception):
    """A profile the claim needs is not in the cache (its job failed or was skipped)."""


@dataclass
class Cell:
    value: str
    verdict: str
    why: str = ""


@dataclass
class Row:
    key: str
    group: str
    claim: str
    paper: str
    required: bool
    cells: dict[str, Cell] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "group": self.group, "claim": self.claim, "paper": self.paper,
                "required": self.required,
                "cells": {s: vars(c) for s, c in self.cells.items()}}  # fmt: skip


# --------------------------------------------------------------------------- evaluated profiles


def ort_times(compiled: NestProfile) -> NestProfile:
    """The ``ort`` profile of a compiled one: ONNX Runtime's operator times split over the
    operator's nests by their compiled shares (what ``--host-times ort`` measures)."""
    jit_s = compiled.metadata["host_times_detail"]["jit_seconds"]
    ops = compiled.metadata["onnxruntime"]["operator_seconds"]
    t_cpu, _ = apportion_ort(compiled.nests, jit_s, ops)
    return replace(compiled, t_cpu=t_cpu, host_times="ort")


class Run:
    """One workload, size and host-time source: the rule and the model at every core count."""

    def __init__(self, workload: str, n: int, source: str, profile: NestProfile) -> None:
        self.workload, self.n, self.source, self.profile = workload, n, source, profile
        self.instance = pim_instance(profile, HW)
        self.nests = {x.id: x for x in profile.nests}
        # The paper's Eq. 8 copies, as the paper compares (the product default is the
        # preset's memory architecture, which pim_llm_decode.py shows beside it).
        self.results = {r.cores: r for r in solve_for_cores(self.instance, CORES,
                                                            copy="upper_bound")}  # fmt: skip
        self.cpu_only = self.instance.cpu_only

    def rule(self, c: int) -> dict[str, RuleDecision]:
        return self.results[c].rule

    def on(self, c: int) -> list[str]:
        return self.results[c].rule_on_pim

    def model_on(self, c: int) -> list[str]:
        return self.results[c].model_on_pim or []

    def speedup(self, c: int) -> float:
        return self.results[c].rule_speedup

    def model_speedup(self, c: int) -> float:
        return self.results[c].placement.speedup or math.nan

    def share(self, ids: Iterable[str]) -> float:
        """The nests' share of CPU-only time."""
        return math.fsum(self.profile.t_cpu[i] for i in ids) / self.cpu_only

    def stage(self, c: int, nid: str) -> str:
        """'pim', 'stage 1' (C1 or C2 failed) or 'stage 2' (both passed, C3 and C4 not)."""
        d = self.rule(c)[nid]
        if d.on_pim:
            return "pim"
        return "stage 1" if any(x.passed is False for x in d.conditions[:2]) else "stage 2"

    def cond(self, c: int, nid: str, name: str) -> Any:
        return next((x for x in self.rule(c)[nid].conditions if x.name == name), None)

    def bw(self, nid: str) -> float | None:
        c3 = self.cond(CORES[0], nid, "C3")
        return None if c3 is None else c3.value

    def of(self, linalg: str) -> list[str]:
        return [i for i, x in self.nests.items() if x.linalg_op == linalg]

    def transcendental(self) -> list[str]:
        return [i for i, x in self.nests.items() if any(op in x.body_ops for op in TRANSCENDENTAL)]


@cache
def _compiled(workload: str, n: int) -> NestProfile:
    path = Job(workload, n, "compiled").profile_path
    if not path.exists():
        raise Missing(f"no profile {path.name}")
    return NestProfile.load(path)


@cache
def run(workload: str, n: int, source: str) -> Run:
    if source == "ort":
        return Run(workload, n, source, ort_times(_compiled(workload, n)))
    if source == "compiled":
        return Run(workload, n, source, _compiled(workload, n))
    path = Job(workload, n, source).profile_path
    if not path.exists():
        raise Missing(f"no profile {path.name}")
    return Run(workload, n, source, NestProfile.load(path))


def fig(workload: str, source: str) -> Run:
    """The workload at its Fig. 3 size for ``source``."""
    return run(workload, fig_size(workload, source)[0], source)


# --------------------------------------------------------------------------- formatting


def x(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.2f}x"


def pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def gbs(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e9:.3g} GB/s"


def per_core(values: Iterable[Any]) -> str:
    return "/".join(map(str, values))


def close(ours: float, paper: float, tol: float = REL_TOL) -> bool:
    return abs(ours - paper) <= tol * abs(paper)


def copy_reason(r: Run, c: int = 128) -> str:
    """Why speed-ups are low: the copies (Eq. 8) against the host time of the same bytes."""
    h = r.results[c].rule_hybrid
    on = r.on(c)
    if not on:
        return "nothing offloaded"
    moved = sum(r.nests[i].fetch_bytes + r.nests[i].flush_bytes for i in on)
    rate = moved / math.fsum(r.profile.t_cpu[i] for i in on)
    return (f"Eq. 8 copies = {pct(h.copy / r.cpu_only)} of CPU-only at {c}: the host runs the"
            f" offloaded nests at {gbs(rate)} of operand bytes, Eq. 8 moves them at"
            f" {gbs(HW.pim.read_bandwidth)} (paper: 7.1 %, i.e. a host at 1.19 GB/s)")


def decision(r: Run, c: int, nid: str) -> str:
    d = r.rule(c)[nid]
    return d.reason.split(";")[0] if d.on_pim else d.summary


