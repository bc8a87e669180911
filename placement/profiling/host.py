"""The machine a profile is measured on: what it is, and how busy it was while measuring."""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            info = fh.read()
    except OSError:
        info = ""
    for key in ("model name", "Model", "Hardware", "cpu model", "Processor"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", info, flags=re.MULTILINE)
        if match:
            return match.group(1).strip()
    return platform.processor() or platform.machine() or "unknown"


def host_description() -> dict[str, Any]:
    """``cpu``, ``machine`` (architecture), ``system`` and ``python`` of this host."""
    return {
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "system": platform.system(),
        "python": sys.version.split()[0],
    }


_MIN_LOAD_WINDOW_SECONDS = 0.25  # shorter measurements: /proc/stat's 10 ms ticks are too coarse


class LoadProbe:
    """The machine's load around a measurement: load averages and others' CPU use."""

    def __init__(self) -> None:
        self.cpus = os.cpu_count() or 1
        self.loadavg = _loadavg()
        self.cpu = _cpu_seconds()
        self.own = time.process_time()
        self.started = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        """``machine_load`` of the profile metadata: load averages before and after, per
        CPU, and the busy share of all CPUs that other processes used while measuring."""
        seconds = time.perf_counter() - self.started
        own = time.process_time() - self.own
        after, cpu = _loadavg(), _cpu_seconds()
        busy_others = None
        if self.cpu is not None and cpu is not None and seconds >= _MIN_LOAD_WINDOW_SECONDS:
            busy, total = cpu[0] - self.cpu[0], cpu[1] - self.cpu[1]
            if total > 0:
                busy_others = min(1.0, max(0.0, (busy - own) / total))
        return {
            "cpus": self.cpus,
            "loadavg_before": self.loadavg,
            "loadavg_after": after,
            "load_per_cpu_before": None if self.loadavg is None else self.loadavg / self.cpus,
            "load_per_cpu_after": None if after is None else after / self.cpus,
            "busy_others_per_cpu": busy_others,
            "measuring_seconds": seconds,
        }


def _loadavg() -> float | None:
    """The 1-minute load average, if the system has one."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _cpu_seconds() -> tuple[float, float] | None:
    """Busy and total CPU seconds of all CPUs since boot (Linux ``/proc/stat``), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return None
    if len(fields) < 5 or fields[0] != "cpu":
        return None
    try:
        # user nice system idle iowait irq softirq steal (guest time is inside user)
        values = [int(v) for v in fields[1:9]]
    except ValueError:
        return None
    total = sum(values)
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (total - idle) / ticks, total / ticks
