"""Reading ONNX Runtime's profiler trace (the JSON list of events it writes).

The trace holds one ``model_run`` event (``cat == "Session"``) per run and one
``<kernel>_kernel_time`` event (``cat == "Node"``, duration in µs) per executed
kernel. Kernel events are assigned to the run whose window starts last before
them and the warmup runs are dropped (:func:`split_runs`); each profiled kernel
name gets its shares of original nodes from an
:class:`~placement.profiling.ort.attribution.Attribution` (:func:`event_shares`),
and per run the kernel seconds are charged to original nodes
(:func:`per_node_times`). Output shapes recorded in the events fill shapes ONNX
shape inference missed (:func:`add_event_shapes`).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import onnx

from placement.errors import PlacementError
from placement.profiling.ort.attribution import Attribution, elements, nearest_index

_KERNEL_SUFFIX = "_kernel_time"


def split_runs(
    events: Sequence[dict[str, Any]], warmup: int, runs: int, path: Path
) -> list[list[dict[str, Any]]]:
    """Kernel events per measured run, using the ``model_run`` windows of the trace."""
    starts = sorted(
        e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    if len(starts) != warmup + runs:
        raise PlacementError(
            f"{path}: ONNX Runtime's trace has {len(starts)} runs, expected {warmup + runs}"
        )
    per_run: list[list[dict[str, Any]]] = [[] for _ in starts]
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith(_KERNEL_SUFFIX):
            continue
        index = bisect.bisect_right(starts, event["ts"]) - 1
        if index >= 0:
            per_run[index].append(event)
    measured = per_run[warmup:]
    for run in measured:
        run.sort(key=lambda e: e["ts"])
    return measured


def _kernel_seconds(run: Iterable[dict[str, Any]]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for event in run:
        name = event["name"][: -len(_KERNEL_SUFFIX)]
        seconds[name] = seconds.get(name, 0.0) + event["dur"] * 1e-6  # trace is in µs
    return seconds


def per_node_times(
    names: Sequence[str],
    charge: dict[str, dict[str, float]],
    measured: list[list[dict[str, Any]]],
) -> tuple[list[dict[str, float]], list[float]]:
    """Per measured run: seconds per original node, and the run's summed kernel time."""
    per_run: list[dict[str, float]] = []
    totals: list[float] = []
    for run in measured:
        times = dict.fromkeys(names, 0.0)
        kernels = _kernel_seconds(run)
        for kernel, seconds in kernels.items():
            for node, fraction in charge[kernel].items():
                times[node] += seconds * fraction
        total = math.fsum(kernels.values())
        _check_total(math.fsum(times.values()), total)
        per_run.append(times)
        totals.append(total)
    return per_run, totals


def _check_total(charged: float, total: float) -> None:
    if not math.isclose(charged, total, rel_tol=1e-9, abs_tol=1e-15):
        raise AssertionError(f"attribution lost time: {charged!r} s charged of {total!r} s")


def event_shares(
    attribution: Attribution, measured: list[list[dict[str, Any]]]
) -> dict[str, dict[str, float]]:
    """Shares for every profiled kernel name, including names missing from the saved graph."""
    by_name = {node_name: shares for node_name, shares in attribution.kernels.items() if node_name}
    unnamed = {op: list(kernels) for op, kernels in attribution.unnamed.items()}
    charge: dict[str, dict[str, float]] = {}
    order: list[str] = []
    ops: dict[str, str] = {}
    for run in measured:
        for event in run:
            name = event["name"][: -len(_KERNEL_SUFFIX)]
            if name not in ops:
                order.append(name)
                ops[name] = str(event.get("args", {}).get("op_name", ""))
    for name in order:
        if name in by_name:
            charge[name] = by_name[name]
        elif unnamed.get(ops[name]) and re.fullmatch(rf"{re.escape(ops[name])}_\d+", name):
            # ORT shows unnamed nodes as <OpType>_<index>; take them in graph order.
            charge[name] = unnamed[ops[name]].pop(0)
    # Names absent from the saved graph: charge like the nearest mapped kernel in run order.
    mapped = [name in charge for name in order]
    for pos, name in enumerate(order):
        if mapped[pos]:
            continue
        nearest = nearest_index(pos, mapped)
        if nearest is None:
            charge[name] = attribution.any_shares()
        else:
            charge[name] = charge[order[nearest]]
        for node in charge[name]:
            attribution.add_note(
                node, f"also charged unmapped kernel '{name}' (nearest in run order)"
            )
    return charge


def add_event_shapes(
    shapes: dict[str, list[int | None]], optimized: onnx.GraphProto, run: list[dict[str, Any]]
) -> None:
    """Fill shapes ONNX inference missed (e.g. com.microsoft ops) from ORT's trace."""
    outputs = {n.name: list(n.output) for n in optimized.node if n.name}
    for event in run:
        names = outputs.get(event["name"][: -len(_KERNEL_SUFFIX)], [])
        for tensor, entry in zip(
            names, event.get("args", {}).get("output_type_shape", []), strict=False
        ):
            if tensor and elements(shapes.get(tensor)) is None and isinstance(entry, dict):
                dims = next(iter(entry.values()), None)
                if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
                    shapes[tensor] = dims
