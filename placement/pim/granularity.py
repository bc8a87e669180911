"""What a PIM solve reports per granularity: crossings, split nests, and Table 5's comparison.

Torch-PIM's Table 5 compares basic-block and operator granularity with loop granularity:
how ``T_pim``, ``T_copy`` (and ``T_cpu``) change, in percent of the end-to-end time at
loop granularity, and how many crossings (host<->PIM transitions, ``N_region``) each
placement has. :func:`comparison_lines` prints the same for the model's optimum at each
granularity (``solve --compare-granularities``), :func:`comparison_json` the same data
for the result document. The paper's entries are its threshold rule's placements at each
granularity; these are optima, so a finer granularity is never worse here (every loop
placement is a basic-block placement, every operator placement a loop placement).

At basic-block granularity a nest can be *split* (blocks on both sides); the table shows
it as ``split``, :func:`split_lines` says which blocks run where, and
:func:`crossing_lines` how many transitions fall between nests and inside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from placement.models.pim_loopnest.build import BASIC_BLOCK
from placement.pim.pipeline import CoreResult, PimPlacement
from placement.units import fmt_time

LOOP = "loop"


def model_place(placement: PimPlacement, nest_id: str, split: set[str]) -> str:
    """The model's decision for a nest as the table shows it: pim, host or split
    (``split``: the placement's :attr:`~placement.pim.pipeline.PimPlacement.split_nests`)."""
    if placement.on_pim is None:
        return "-"
    if nest_id in split:
        return "split"
    return "pim" if placement.on_pim[nest_id] else "host"


def crossing_lines(results: Sequence[CoreResult]) -> list[str]:
    """Basic-block granularity: the optimum's transitions between and inside nests."""
    parts = []
    for r in results:
        crossings = r.placement.crossings
        if crossings is not None:
            parts.append(f"N={r.cores}: {crossings[0]} between nests + {crossings[1]} inside")
    if not parts:
        return []
    return ["crossings (host<->PIM transitions, N_region) of the model's placement: "
            + "; ".join(parts)]  # fmt: skip


def split_lines(results: Sequence[CoreResult]) -> list[str]:
    """Per split nest and core count, which of its blocks run on PIM."""
    lines = []
    for r in results:
        p = r.placement
        if p.on_block is None:
            continue
        blocks = p.instance.nest_blocks
        for nid in p.split_nests:
            nb = blocks[nid]
            on = [f"{b.id.split('.')[-1]} ({b.kind})" for b in nb.blocks if p.on_block[b.id]]
            share = sum(s for b, s in zip(nb.blocks, nb.shares, strict=True) if p.on_block[b.id])
            lines.append(
                f"  N={r.cores} {nid} split: on PIM {', '.join(on)}, {share:.1%} of the nest's"
                " ops; the rest on the host"
            )
    return ["nests split across host and PIM (basic-block granularity):", *lines] if lines else []


def granularity_note(granularity: str) -> str:
    """How block times are obtained (appended to the Eq. 9 legend at basic-block)."""
    if granularity != BASIC_BLOCK:
        return ""
    return (
        "; block times: each nest's T_cpu and T_pim split over its basic blocks by their"
        " dynamic MLIR op counts (estimated, not measured)"
    )


def _deltas(p: PimPlacement, loop: PimPlacement) -> dict[str, Any] | None:
    """Table 5's differences of ``p`` from ``loop``, in seconds and in % of loop's T_hybrid."""
    h, base = p.hybrid, loop.hybrid
    if h is None or base is None:
        return None
    diff = {
        "host": h.host - base.host,
        "pim": h.pim - base.pim,
        "copy": h.copy - base.copy,
        "switch": h.switch - base.switch,
        "total": h.total - base.total,
        "crossings": h.n_region - base.n_region,
    }
    scale = base.total
    percent = {k: (None if scale <= 0 else 100.0 * v / scale)
               for k, v in diff.items() if k != "crossings"}  # fmt: skip
    return {"seconds": {k: v for k, v in diff.items() if k != "crossings"},
            "percent_of_loop": percent, "crossings": diff["crossings"]}  # fmt: skip


def comparison_json(result: CoreResult) -> dict[str, Any] | None:
    """Every granularity's placement document and its differences from loop granularity."""
    by = result.by_granularity
    if by is None:
        return None
    loop = by[LOOP]
    return {
        g: p.to_json() | {"vs_loop": _deltas(p, loop)} for g, p in by.items()
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"


def comparison_lines(results: Sequence[CoreResult]) -> list[str]:
    """Table 5 for the model: per core count and granularity, T_hybrid, crossings and the
    differences from loop granularity in % of its T_hybrid."""
    if not any(r.by_granularity for r in results):
        return []
    lines = [
        "granularities compared (the model's optimum at each; differences in % of T_hybrid"
        " at loop granularity, as Table 5):",
        f"{'N_core':>6}  {'granularity':<12}{'T_hybrid':>10}{'crossings':>11}{'dT_host':>9}"
        f"{'dT_pim':>9}{'dT_copy':>9}{'dT_sw':>9}{'Total':>9}{'split':>7}",
    ]
    for r in results:
        by = r.by_granularity or {}
        for g, p in by.items():
            d = _deltas(p, by[LOOP])
            if p.hybrid is None or d is None:
                lines.append(f"{r.cores:>6}  {g:<12}{'no solution':>10}")
                continue
            pct = d["percent_of_loop"]
            cells = ["-"] * 5 if g == LOOP else [
                _pct(pct[k]) for k in ("host", "pim", "copy", "switch", "total")
            ]
            split = str(len(p.split_nests)) if g == BASIC_BLOCK else "-"
            lines.append(
                f"{r.cores:>6}  {g:<12}{fmt_time(p.hybrid.total):>10}{p.hybrid.n_region:>11}"
                + "".join(f"{c:>9}" for c in cells)
                + f"{split:>7}"
            )
    lines.append(
        "crossings: host<->PIM transitions (N_region); split: nests with blocks on both sides"
    )
    return lines


def blocks_json(instance: Any) -> dict[str, Any] | None:
    """Every nest's basic blocks (ids, kinds, executions, op counts, shares) and edges."""
    if getattr(instance, "blocks", None) is None:
        return None
    return {nid: nb.to_json() for nid, nb in instance.nest_blocks.items()}
