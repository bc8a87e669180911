"""What runs where and when in one placement: the intervals of each device, in seconds.

The Gantt charts (:mod:`placement.plots.gantt`) draw them and the trace writer
(:mod:`placement.plots.trace`) writes them as Chrome trace events, so both show the same
schedule:

* CIM (:func:`cim_timeline`): every operator on ``host`` or ``cim`` at its scheduled start
  and finish, and on ``bus`` one transfer per data edge whose ends are on different
  devices, from the producer's finish for the edge's transfer time.
* PIM (:func:`pim_timeline`): the nests one after another in program order, each on
  ``host`` (its T_cpu) or ``pim`` (its operand copy, Eq. 8, then its T_pim), with a switch
  (T_sw) on the host at every host<->PIM transition and at the end when execution ends on
  PIM.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement.devices.pim import t_pim
from placement.errors import PlacementError
from placement.hardware.pim import PimSpec, pim_spec_from_table
from placement.nests import LoopNest
from placement.plots.common import PlotDataError, num
from placement.plots.pim import pim_result, placement_part


@dataclass(frozen=True)
class Interval:
    """One piece of work on one device, in seconds from the start of the inference."""

    device: str  # CIM: "host", "cim", "bus"; PIM: "host", "pim"
    kind: str  # CIM: "operator", "transfer"; PIM: "nest", "copy", "switch"
    name: str  # operator or nest id; "u->v" for a transfer; "copy:<id>", "switch@<id>"
    start: float
    finish: float


@dataclass(frozen=True)
class Timeline:
    """A placement's intervals and its length (makespan or T_hybrid), in seconds."""

    target: str  # "cim" or "pim"
    intervals: list[Interval]
    end: float
    timed_transfers: bool = True  # CIM: every transfer has its duration (else markers)
    pim_cores: int | None = None  # PIM: the core count of the placement shown

    def on(self, device: str, kind: str | None = None) -> list[Interval]:
        """The intervals on ``device`` (of ``kind``, if given), in timeline order."""
        return [i for i in self.intervals if i.device == device and kind in (None, i.kind)]


def cim_timeline(
    placement_json: Mapping[str, Any], edges: Iterable[Sequence[Any]] | None = None
) -> Timeline:
    """The timeline of a CIM placement document (CimPlacement.to_json(), or its
    ``schedule`` part). ``edges``: (src, dst) or (src, dst, t_transfer_s), default the
    document's own ``edges``; an edge without its transfer time is a transfer of zero
    duration at the producer's finish (``timed_transfers`` is then False)."""
    sched = placement_json.get("schedule", placement_json)
    ops = sched.get("operators") if isinstance(sched, Mapping) else None
    if not isinstance(ops, Mapping) or not ops:
        raise PlotDataError("Gantt chart: the placement has no schedule (no solution found?)")
    try:
        times = {
            str(v): (d.get("device") == "host", float(d["start"]), float(d["finish"]))
            for v, d in ops.items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PlotDataError(f"Gantt chart: malformed schedule ({exc!r})") from None
    intervals = [
        Interval("host" if on_host else "cim", "operator", v, s, f)
        for v, (on_host, s, f) in times.items()
    ]
    if edges is None:
        edges = placement_json.get("edges") or []
    timed = True
    for e in edges:
        e = list(e.values()) if isinstance(e, Mapping) else list(e)
        u, v = str(e[0]), str(e[1])
        if u not in times or v not in times or times[u][0] == times[v][0]:
            continue
        t = float(e[2]) if len(e) > 2 and e[2] is not None else None
        timed &= t is not None
        begin = times[u][2]
        intervals.append(Interval("bus", "transfer", f"{u}->{v}", begin, begin + (t or 0.0)))
    end = num(sched, "makespan") or max(f for _, _, f in times.values())
    return Timeline("cim", intervals, end, timed_transfers=timed)


def pim_timeline(document: Mapping[str, Any], cores: int | None = None) -> Timeline:
    """The timeline of one core count (``cores``, default the first) of a PIM document
    (the JSON of ``solve --target pim --json``: per-nest data, the hardware, each core
    count's decisions). PIM times are the document's per-nest ``t_pim`` at that core count,
    else the analytical model's; copy times are Eq. 8's, scaled to the placement's T_copy
    under exact copy accounting."""
    nests = document.get("nests")
    if not isinstance(nests, list) or not nests or not isinstance(nests[0], Mapping):
        raise PlotDataError(
            "PIM Gantt chart: the document has no per-nest data (needs the full JSON of"
            " `solve --target pim --json`, not a bare placement)"
        )
    placement = placement_part(pim_result(document, cores))
    decisions = placement.get("decisions")
    if not isinstance(decisions, Mapping):
        raise PlotDataError("PIM Gantt chart: the placement has no decisions (no solution?)")
    n_cores = int(num(placement, "n_cores") or num(pim_result(document, cores), "n_cores") or 0)
    spec = pim_spec(document.get("hardware"))
    try:
        known = {f.name for f in dataclasses.fields(LoopNest)} | {"fetch_bytes", "flush_bytes"}
        loops = [LoopNest.from_json({k: v for k, v in n.items() if k in known}) for n in nests]
        t_cpu = {str(n["id"]): float(n["t_cpu"]) for n in nests}
        key = str(n_cores or spec.cores)
        t_pim_doc = {
            str(n["id"]): float(n["t_pim"][key])
            for n in nests
            if isinstance(n.get("t_pim"), Mapping) and key in n["t_pim"]
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise PlotDataError(f"PIM Gantt chart: malformed nest data ({exc!r})") from None
    hybrid = placement.get("hybrid") if isinstance(placement.get("hybrid"), Mapping) else {}
    on_pim = {k for k, v in decisions.items() if v == "pim"}
    copy_s = {
        n.id: n.fetch_bytes / spec.read_bandwidth + n.flush_bytes / spec.writeback_bandwidth
        for n in loops
        if n.id in on_pim
    }
    total_copy = math.fsum(copy_s.values())
    if num(hybrid, "copy") is not None and total_copy > 0:
        factor = (num(hybrid, "copy") or 0.0) / total_copy  # exact accounting: < 1
        copy_s = {k: v * factor for k, v in copy_s.items()}

    intervals: list[Interval] = []
    t, on = 0.0, False
    for n in loops:
        here = n.id in on_pim
        if here != on:
            intervals.append(Interval("host", "switch", f"switch@{n.id}", t, t + spec.t_sw))
            t += spec.t_sw
            on = here
        if here:
            c = copy_s.get(n.id, 0.0)
            intervals.append(Interval("pim", "copy", f"copy:{n.id}", t, t + c))
            t += c
            d = t_pim_doc[n.id] if n.id in t_pim_doc else t_pim(n, spec, n_cores or None)
            intervals.append(Interval("pim", "nest", n.id, t, t + d))
        else:
            d = t_cpu[n.id]
            intervals.append(Interval("host", "nest", n.id, t, t + d))
        t += d
    if on:  # execution ends on the host
        intervals.append(Interval("host", "switch", "switch@end", t, t + spec.t_sw))
        t += spec.t_sw
    return Timeline("pim", intervals, t, pim_cores=n_cores or spec.cores)


def sub_lanes(intervals: Sequence[tuple[str, float, float]]) -> dict[str, int]:
    """Greedy interval colouring of (name, start, finish): overlapping intervals get
    different lanes, numbered from 0 (one device's parallel work, side by side)."""
    lanes: list[float] = []  # end of the last interval in each lane
    out: dict[str, int] = {}
    for name, s, f in sorted(intervals, key=lambda i: (i[1], i[2], i[0])):
        for k, end in enumerate(lanes):
            if s >= end - 1e-15:
                lanes[k] = f
                out[name] = k
                break
        else:
            lanes.append(f)
            out[name] = len(lanes) - 1
    return out


def pim_spec(hardware: Any) -> PimSpec:
    """PimSpec from a document's ``hardware`` (file units), validated as a hardware file's
    ``[pim]`` table is; the preset default without one. A bad table: a PlotDataError."""
    values = hardware.get("pim") if isinstance(hardware, Mapping) else None
    if not isinstance(values, Mapping):
        return PimSpec()
    name = hardware.get("name")
    source = f"hardware {name!r}" if isinstance(name, str) and name else "hardware"
    try:
        return pim_spec_from_table(values, source)
    except PlacementError as exc:
        raise PlotDataError(f"PIM Gantt chart: bad hardware in the document ({exc})") from None
