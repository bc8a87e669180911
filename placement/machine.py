"""What this machine has: the memory a process may still use; and how a child process
started here ends with its parent.

``MemAvailable`` of ``/proc/meminfo``, or less where a cgroup (a container) allows less.
Both the check that a model file fits before it is read (:mod:`placement.onnxfile`) and
the estimate of what a run needs (:mod:`placement.profiling.memory`) compare against it.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

_MEMINFO = Path("/proc/meminfo")
# (limit file, usage file) of cgroup v2 and v1, as a container sees its own cgroup.
_CGROUP_FILES = (
    (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current")),
    (
        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ),
)


def available_memory() -> tuple[int, str] | None:
    """(bytes available now, what they are), or None where Linux's figures are missing."""
    found: tuple[int, str] | None = None
    try:
        for line in _MEMINFO.read_text(encoding="ascii", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key == "MemAvailable" and value.split() and value.split()[0].isdigit():
                found = (int(value.split()[0]) * 1024, "the available memory")
    except OSError:
        pass
    for limit_file, usage_file in _CGROUP_FILES:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is None or usage is None:
            continue
        room = max(limit - usage, 0)
        if found is None or room < found[0]:
            found = (room, "the memory this cgroup may still use")
        break
    return found


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def end_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the thread that started it ends (the
    parent-death signal); a no-op elsewhere. Run in a child before it executes (the
    ``preexec_fn`` of ``subprocess``) so that a killed parent leaves no child running."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
