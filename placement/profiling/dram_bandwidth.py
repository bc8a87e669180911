"""This host's DRAM read bandwidth ``B_cpu``, which scales Torch-PIM's rule C3.

Torch-PIM (Section 4.4) adopts ``theta = 2.0 GB/s``, "0.12 x B_cpu for the B_cpu =
16.754 GB/s of our platform", and carries it "to other platforms as that ratio". So
the threshold on a nest's read bandwidth follows the host that measured the nest:
``theta = theta_ratio x B_cpu`` with ``B_cpu`` measured here, on the profiling host,
by :func:`measure_dram_read` and stored in the nest profile
(:mod:`placement.profiling.nest_profile`).

Method (recorded with every measurement, ``method``):

* Kernel: NumPy's sum of a 64-bit integer array -- a STREAM-like read-only kernel:
  every byte read once, nothing written, vectorized. One thread (NumPy's reductions
  never start threads), because the nest profile is single-threaded: a nest's
  ``BW_read`` is what one core achieved, and theta compares it with what one core can
  achieve. (The paper's 16.754 GB/s is a one-core figure too: its host's eight DDR4
  channels per socket give about ten times that.)
* Buffer: ``max(4 x LLC, 128 MiB)``, at most 1 GiB, where LLC is the last-level
  cache sysfs lists (:func:`placement.profiling.cache_flush.llc_bytes`), so at most a
  quarter of it can be served by any cache. Filled with ones before timing: an untouched
  ``np.zeros`` buffer maps the kernel's shared zero page and "reads" at cache speed.
* Statistic: one untimed pass, then the median over ``repetitions`` timed passes;
  the spread is min..max of the passes. The machine's load while measuring is
  recorded (other processes' memory traffic lowers the figure).
* Check that it measures DRAM, not a cache or the kernel's own speed: the same kernel
  over half of the core's last private cache (the LL of
  :func:`placement.profiling.cache_geometry.host_cache_geometry`), repeated in
  batches. If that in-cache figure is not at least :data:`MIN_CACHE_RATIO` times the
  DRAM figure, the kernel may be limited by its instruction throughput rather than by
  DRAM: the record says so (``memory_bound: false``) and the figure is then a lower
  bound.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from placement.errors import PlacementError
from placement.profiling.cache_flush import FALLBACK_LLC_BYTES, llc_bytes
from placement.profiling.cache_geometry import host_cache_geometry
from placement.profiling.host import LoadProbe, cpu_model

MIB = 1 << 20
LLC_MULTIPLE = 4  # the buffer is at least this many times the last-level cache ...
MIN_BUFFER_BYTES = 128 * MIB  # ... and at least this ...
MAX_BUFFER_BYTES = 1024 * MIB  # ... and at most this (a VM may report a huge LLC)
DEFAULT_REPETITIONS = 11
IN_CACHE_BATCH_BYTES = 32 * MIB  # bytes read per timed batch of the in-cache check
MIN_CACHE_RATIO = 1.5  # in-cache / DRAM figure below which the kernel may not be DRAM-bound
KERNEL = "1-thread NumPy sum of an int64 array (np.add.reduce)"


@dataclass(frozen=True)
class DramReadBandwidth:
    """One measurement of the host's single-thread DRAM read bandwidth (module docstring)."""

    bytes_per_second: float  # B_cpu: median over the timed passes
    samples: tuple[float, ...]  # B/s of every timed pass
    buffer_bytes: int
    llc_bytes: int
    llc_source: str  # "sysfs" or the fallback's reason
    in_cache_bytes_per_second: float
    in_cache_buffer_bytes: int
    machine_load: dict[str, Any]
    date: str
    cpu: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cache_ratio(self) -> float:
        """In-cache figure over the DRAM figure (module docstring)."""
        return self.in_cache_bytes_per_second / self.bytes_per_second

    @property
    def memory_bound(self) -> bool:
        return self.cache_ratio >= MIN_CACHE_RATIO

    def method(self) -> str:
        return (
            f"{KERNEL} over {self.buffer_bytes / MIB:g} MiB"
            f" ({self.buffer_bytes / self.llc_bytes:.3g}x the {self.llc_bytes / MIB:g} MiB"
            f" last-level cache), median of {len(self.samples)} passes"
        )

    def to_json(self) -> dict[str, Any]:
        """The record a nest profile stores (``host_dram_read``)."""
        return {
            "gbps": self.bytes_per_second / 1e9,
            "min_gbps": min(self.samples) / 1e9,
            "max_gbps": max(self.samples) / 1e9,
            "samples_gbps": [s / 1e9 for s in self.samples],
            "statistic": "median",
            "method": self.method(),
            "kernel": KERNEL,
            "threads": 1,
            "buffer_bytes": self.buffer_bytes,
            "llc_bytes": self.llc_bytes,
            "llc_source": self.llc_source,
            "in_cache_gbps": self.in_cache_bytes_per_second / 1e9,
            "in_cache_buffer_bytes": self.in_cache_buffer_bytes,
            "memory_bound": self.memory_bound,
            "machine_load": self.machine_load,
            "date": self.date,
            "cpu": self.cpu,
            "notes": list(self.notes),
        }


def dram_buffer_bytes(llc: int) -> int:
    """The buffer size for a last-level cache of ``llc`` bytes (module docstring)."""
    size = min(MAX_BUFFER_BYTES, max(MIN_BUFFER_BYTES, LLC_MULTIPLE * llc))
    return size - size % 64


def measure_dram_read(
    repetitions: int = DEFAULT_REPETITIONS, *, buffer_bytes: int | None = None
) -> DramReadBandwidth:
    """``B_cpu`` of this host as the module docstring describes. ``buffer_bytes``
    replaces the buffer size (a smaller buffer measures a cache: for tests only)."""
    if repetitions < 1:
        raise PlacementError(f"B_cpu: repetitions must be >= 1, got {repetitions}")
    notes: list[str] = []
    llc = llc_bytes()
    llc_source = "sysfs"
    if llc is None:
        llc, llc_source = FALLBACK_LLC_BYTES, "assumed: sysfs lists no cache"
    size = dram_buffer_bytes(llc) if buffer_bytes is None else buffer_bytes - buffer_bytes % 64
    if size < 64:
        raise PlacementError(f"B_cpu: the buffer must hold at least 64 bytes, got {buffer_bytes}")
    if size < LLC_MULTIPLE * llc:
        notes.append(
            f"the buffer is only {size / llc:.3g}x the last-level cache: part of it may be"
            " served by the cache"
        )
    private = host_cache_geometry(overrides="").ll.size
    in_cache = max(64, private // 2 - private // 2 % 64)
    probe = LoadProbe()
    samples = _passes(size, repetitions)
    cached = _passes(in_cache, repetitions, batch=max(1, IN_CACHE_BATCH_BYTES // in_cache))
    load = probe.stop()
    median, in_cache_median = statistics.median(samples), statistics.median(cached)
    if in_cache_median < MIN_CACHE_RATIO * median:
        notes.append(
            f"the kernel reads in cache only {in_cache_median / median:.2f}x as fast as from"
            f" DRAM (< {MIN_CACHE_RATIO:g}): it may be limited by its own speed, so B_cpu is"
            " a lower bound"
        )
    return DramReadBandwidth(
        bytes_per_second=median,
        samples=tuple(samples),
        buffer_bytes=size,
        llc_bytes=llc,
        llc_source=llc_source,
        in_cache_bytes_per_second=in_cache_median,
        in_cache_buffer_bytes=in_cache,
        machine_load=load,
        date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        cpu=cpu_model(),
        notes=tuple(notes),
    )


def _passes(nbytes: int, repetitions: int, *, batch: int = 1) -> list[float]:
    """Bytes per second of ``repetitions`` timed passes (each ``batch`` sums) over a
    buffer of ``nbytes``, after one untimed pass."""
    try:
        data = np.ones(nbytes // 8, dtype=np.int64)  # written: every page really mapped
    except MemoryError:
        raise PlacementError(
            f"B_cpu: cannot allocate the {nbytes / MIB:g} MiB buffer that measures the host's"
            " DRAM read bandwidth"
        ) from None
    np.add.reduce(data)  # the untimed pass
    rates = []
    for _ in range(repetitions):
        start = time.perf_counter()
        for _ in range(batch):
            np.add.reduce(data)
        seconds = time.perf_counter() - start
        if seconds > 0:
            rates.append(batch * data.nbytes / seconds)
    if not rates:
        raise PlacementError("B_cpu: the clock did not advance over any pass")
    return rates


def describe(record: dict[str, Any]) -> str:
    """One phrase for a stored record (``NestProfile.host_dram_read``)."""
    gbps = record.get("gbps")
    lo, hi = record.get("min_gbps"), record.get("max_gbps")
    spread = (
        f", passes {lo:.3g}-{hi:.3g} GB/s"
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float))
        else ""
    )
    method = record.get("method") or "method not recorded"
    bound = "" if record.get("memory_bound", True) else "; may not be DRAM-bound (a lower bound)"
    value = f"{gbps:.4g} GB/s" if isinstance(gbps, (int, float)) and math.isfinite(gbps) else "?"
    return f"{value} ({method}{spread}{bound})"
