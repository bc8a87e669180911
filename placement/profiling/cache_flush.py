"""Cache state of a host measurement: warm (repeated runs) or cold (last-level cache flushed).

``warm``: runs follow each other back to back, so whatever the previous run left in the
caches (weights, activations) is still there -- the state of a model run in a tight loop.
``cold``: before every run (warm-up runs included) a buffer larger than the last-level
cache is read and written once (one byte per 64-byte line), which evicts the model's data:
the state of an inference whose weights were pushed out by other work in between.

The buffer size is ``max(64 MiB, 2 x LLC)`` with the LLC size read from sysfs
(``/sys/devices/system/cpu/cpu0/cache/index*/size`` of the highest level); when sysfs has
no cache information, 2 x 32 MiB is assumed. Both the ONNX Runtime profiler
(:mod:`placement.profiling.ort.measure`) and the loop-nest timer
(:mod:`placement.profiling.nest_timing`) take ``cache="warm"|"cold"`` and record it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from placement.errors import PlacementError

CACHE_STATES = ("warm", "cold")
DEFAULT_CACHE = "warm"
MIN_FLUSH_BYTES = 64 << 20
FALLBACK_LLC_BYTES = 32 << 20
_LINE = 64
_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def check_cache(cache: str) -> str:
    if cache not in CACHE_STATES:
        raise PlacementError(f"cache state must be 'warm' or 'cold', got {cache!r}")
    return cache


def llc_bytes(sysfs: Path = _SYSFS) -> int | None:
    """Size of the last-level cache in bytes (the highest level sysfs lists), or None."""
    best: tuple[int, int] | None = None
    try:
        entries = sorted(sysfs.glob("index*"))
    except OSError:
        return None
    for entry in entries:
        try:
            level = int((entry / "level").read_text().strip())
            kind = (entry / "type").read_text().strip()
            size = _parse_size((entry / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        if best is None or level > best[0] or (level == best[0] and size > best[1]):
            best = (level, size)
    return None if best is None else best[1]


def _parse_size(text: str) -> int | None:
    match = re.fullmatch(r"(\d+)\s*([KMG]?)B?", text, flags=re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(match.group(1)) * scale


def flush_bytes(llc: int | None = None) -> int:
    """Size of the buffer a cold run touches: twice the LLC, at least 64 MiB."""
    llc = llc_bytes() if llc is None else llc
    return max(MIN_FLUSH_BYTES, 2 * (llc or FALLBACK_LLC_BYTES))


class CacheFlusher:
    """Evicts the caches by touching a buffer larger than the LLC (``flush()``)."""

    def __init__(self, nbytes: int | None = None) -> None:
        self.llc = llc_bytes()
        self.nbytes = flush_bytes(self.llc) if nbytes is None else int(nbytes)
        self._buffer = np.ones(self.nbytes, dtype=np.uint8)  # touched: pages are mapped
        self._lines = self._buffer[::_LINE]
        self.flushes = 0
        self.seconds = 0.0

    def flush(self) -> None:
        start = time.perf_counter()
        self._lines += 1  # reads and writes one byte of every line: evicts, leaves lines dirty
        self.seconds += time.perf_counter() - start
        self.flushes += 1

    def metadata(self) -> dict[str, Any]:
        return {
            "cache": "cold",
            "cache_flush_bytes": self.nbytes,
            "llc_bytes": self.llc,
            "cache_flush_rule": "max(64 MiB, 2 x LLC from sysfs) touched before every run",
            "cache_flush_mean_seconds": self.seconds / self.flushes if self.flushes else None,
        }


def make_flusher(cache: str) -> CacheFlusher | None:
    """A flusher for ``cache="cold"``, None for ``"warm"``."""
    return CacheFlusher() if check_cache(cache) == "cold" else None


def cache_metadata(flusher: CacheFlusher | None) -> dict[str, Any]:
    return {"cache": "warm"} if flusher is None else flusher.metadata()
