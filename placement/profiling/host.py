"""The machine a profile is measured on, as every profile file records it."""

from __future__ import annotations

import platform
import re
import sys
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
