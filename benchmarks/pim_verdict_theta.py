"""Which theta the required C3 verdicts of ``pim_paper_verdicts.py`` need, per host-time source.

Seven required verdict classes are decided by C3 alone once a nest passes stage 1 and
fails C4: four want nests offloaded (``theta < BW_read``: streaming nests, GEMV, the
GPT-J-6B and LLaMA-7B projections), three want them kept on the host (``theta >=
BW_read``: transcendental nests, the square matmul, the bulk depthwise convolution).
This module does not change the rule: it asks, from the same simulated bandwidths, for
which theta all seven would hold, and -- where none does -- which theta satisfies the
most (each class counts once, whatever its number of nests). The paper's answer on its
host is an interval around its theta = 2.0 GB/s; an empty window on ours says that no
recalibration of theta (Section 4.4's sweep) reproduces all seven verdicts on this host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pim_verdict_jobs import CORES
from pim_verdict_runs import STREAMING, THETA, TRANSCENDENTALS, Missing, Run, fig, gbs

OFFLOAD, KEEP = "offload", "keep"


@dataclass(frozen=True)
class Need:
    """One nest of a required class: where its class wants it and its C3 bandwidth."""

    cls: str  # the class's row key, e.g. "T1"
    label: str  # "silu n000"
    want: str  # OFFLOAD | KEEP
    bw: float | None  # None: stage 1 or C4 decides at every core count, theta cannot
    fixed: bool | None  # when bw is None: does the nest end where its class wants it?


def _need(cls: str, r: Run, nid: str, want: str) -> Need:
    label = f"{r.workload} {nid}"
    stage1 = [r.stage(c, nid) == "stage 1" for c in CORES]
    c4 = [not s1 and bool(r.cond(c, nid, "C4") and r.cond(c, nid, "C4").passed)
          for c, s1 in zip(CORES, stage1, strict=True)]  # fmt: skip
    if want == OFFLOAD:
        if any(stage1):  # C1 or C2 keeps it on the host at some core count: theta cannot help
            return Need(cls, label, want, None, False)
        if all(c4):
            return Need(cls, label, want, None, True)
    else:
        if any(c4):  # C4 offloads it at some core count whatever theta is
            return Need(cls, label, want, None, False)
        if all(stage1):
            return Need(cls, label, want, None, True)
    return Need(cls, label, want, r.bw(nid), None)


def needs(src: str) -> list[Need]:
    out: list[Need] = []
    for w in STREAMING:
        r = fig(w, src)
        out += [_need("S1", r, i, OFFLOAD) for i in r.nests]
    for w in TRANSCENDENTALS:
        r = fig(w, src)
        out += [_need("T1", r, i, KEEP) for i in r.transcendental()]
    r = fig("matmul", src)
    out += [_need("G1", r, i, KEEP) for i in r.of("linalg.matmul")]
    r = fig("gemv", src)
    out += [_need("G3", r, i, OFFLOAD) for i in r.of("linalg.matmul")]
    r = fig("depthwise_conv", src)
    out += [_need("G9", r, i, KEEP) for i in r.of("linalg.depthwise_conv_2d_nchw_chw")]
    for key, w in (("J1", "gptj_layer"), ("M1", "llama_layer")):
        r = fig(w, src)
        out += [_need(key, r, i, OFFLOAD) for i in r.of("linalg.matmul")]
    return out


def classes_holding(ns: list[Need], theta: float) -> set[str]:
    """The classes all of whose nests end where they want at ``theta``."""
    bad = set()
    for n in ns:
        ok = n.fixed if n.bw is None else (n.bw > theta) == (n.want == OFFLOAD)
        if not ok:
            bad.add(n.cls)
    return {n.cls for n in ns} - bad


def window_line(src: str) -> str:
    """One line: the theta window of ``src`` (or why there is none) and the best theta."""
    try:
        ns = needs(src)
    except Missing as exc:
        return f"{src}: theta window not computed ({exc})"
    classes = sorted({n.cls for n in ns})
    keep = [n for n in ns if n.want == KEEP and n.bw is not None]
    off = [n for n in ns if n.want == OFFLOAD and n.bw is not None]
    lo = max(keep, key=lambda n: n.bw, default=None)  # theta >= lo.bw keeps every KEEP nest
    hi = min(off, key=lambda n: n.bw, default=None)  # theta < hi.bw offloads every OFFLOAD nest
    lo_bw, hi_bw = (lo.bw if lo else 0.0), (hi.bw if hi else math.inf)
    fixed_bad = sorted({n.cls for n in ns if n.bw is None and not n.fixed})
    bounds = f"keeping needs theta >= {gbs(lo_bw)} ({lo.label})" if lo else "no KEEP bound"
    bounds += f", offloading needs theta < {gbs(hi_bw)} ({hi.label})" if hi else ""
    if lo_bw < hi_bw and not fixed_bad:
        head = f"window [{gbs(lo_bw)}, {gbs(hi_bw)}) holds all {len(classes)} classes"
    elif lo_bw < hi_bw:
        head = (
            f"window [{gbs(lo_bw)}, {gbs(hi_bw)}), but {', '.join(fixed_bad)} differ at any theta"
        )
    else:
        head = "no theta holds all of them"
    # The best theta: C3 is strict (BW > theta), so every theta in [cut, next cut) decides
    # like the cut itself: 0 and the nests' bandwidths are all the candidates there are.
    candidates = [0.0, *sorted({n.bw for n in ns if n.bw is not None} | {THETA})]
    best = max(candidates, key=lambda t: (len(classes_holding(ns, t)), -abs(t - THETA)))
    held = sorted(classes_holding(ns, best))
    at_paper = sorted(classes_holding(ns, THETA))
    return (
        f"{src}: {head}: {bounds}; at theta {gbs(THETA)} {len(at_paper)} of {len(classes)}"
        f" hold ({', '.join(at_paper)}); the best theta, {gbs(best)}, holds {len(held)}"
        f" ({', '.join(held)})"
    )
