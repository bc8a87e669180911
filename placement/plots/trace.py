"""A placement's schedule as Chrome trace-event JSON, for Perfetto, chrome://tracing and
the other viewers of the PyTorch profiler's traces.

The file is the JSON object form of the Trace Event Format: ``traceEvents`` and
``displayTimeUnit``, plus ``otherData`` (what was placed, the makespan or T_hybrid, the
CPU-only latency). Each device is a process of its own, named and ordered by metadata
events (``process_name``, ``process_sort_index``): ``host CPU``, ``CIM`` and ``bus`` for
CIM, ``host CPU`` and ``PIM`` for PIM. Work is a complete event (``"ph": "X"``) with
``ts`` and ``dur`` in microseconds (the format's unit), its category the interval's kind
(``operator``, ``transfer``, ``nest``, ``copy``, ``switch``) and its exact start and
finish in seconds under ``args``. A device that runs several things at once (CIM
operators on separate crossbars, transfers out of one producer) has one thread per
parallel lane ("lane 1", "lane 2", ...), since the events of one thread must nest; the
host and PIM of a PIM placement run one thing at a time and have one lane.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.io import check_output_file, write_text_atomic
from placement.plots.timeline import Timeline, sub_lanes

#: Device -> (process id, process name), in the order the viewer lists them.
DEVICES = {
    "cim": {"host": (1, "host CPU"), "cim": (2, "CIM"), "bus": (3, "bus")},
    "pim": {"host": (1, "host CPU"), "pim": (2, "PIM")},
}
_MICROSECONDS = 1e6


def check_trace_path(path: str | Path, flag: str = "--trace") -> Path:
    """``path`` if a trace can be written there (a .json file in an existing directory),
    else a one-line PlacementError naming ``flag``; checked before any work."""
    out = Path(path)
    where = f"{flag} {out}"
    if out.suffix.lower() != ".json":
        raise PlacementError(f"{where}: a trace is written as .json")
    return check_output_file(out, where)


def chrome_trace(timeline: Timeline, other: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The trace-event document of ``timeline`` (module docstring); ``other``: extra
    entries for ``otherData`` (model, hardware, CPU-only latency...)."""
    devices = DEVICES[timeline.target]
    events: list[dict[str, Any]] = []
    for device, (pid, name) in devices.items():
        events.append(_meta("process_name", pid, None, {"name": name}))
        events.append(_meta("process_sort_index", pid, None, {"sort_index": pid}))
        intervals = timeline.on(device)
        lanes = sub_lanes([(i.name, i.start, i.finish) for i in intervals])
        for lane in range(max(lanes.values(), default=0) + 1):
            events.append(_meta("thread_name", pid, lane + 1, {"name": f"lane {lane + 1}"}))
        for i in sorted(intervals, key=lambda i: (i.start, i.finish, i.name)):
            events.append({
                "name": i.name, "cat": i.kind, "ph": "X", "pid": pid, "tid": lanes[i.name] + 1,
                "ts": i.start * _MICROSECONDS,
                "dur": max(i.finish - i.start, 0.0) * _MICROSECONDS,
                "args": {"device": device, "start_s": i.start, "finish_s": i.finish},
            })  # fmt: skip
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "target": timeline.target,
            "end_us": timeline.end * _MICROSECONDS,
            **({"pim_cores": timeline.pim_cores} if timeline.pim_cores else {}),
            **dict(other or {}),
        },
    }


def write_trace(
    path: str | Path, timeline: Timeline, other: Mapping[str, Any] | None = None
) -> Path:
    """Write :func:`chrome_trace` of ``timeline`` to ``path`` atomically."""
    text = json.dumps(chrome_trace(timeline, other), indent=1, allow_nan=False) + "\n"
    write_text_atomic(Path(path), text, "the trace")
    return Path(path)


def _meta(name: str, pid: int, tid: int | None, args: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "ph": "M", "pid": pid, "args": args}
    if tid is not None:
        event["tid"] = tid
    return event
