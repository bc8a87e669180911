"""Numbers for people: times, bandwidths and byte counts with their units."""

from __future__ import annotations


def fmt_time(seconds: float) -> str:
    """3 significant digits in ns, us, ms or s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def fmt_bandwidth(bps: float) -> str:
    """Bytes per second in GB/s (1 GB = 1e9 B), 3 significant digits."""
    return f"{bps / 1e9:.3g} GB/s"


def fmt_bytes(n: float) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


def fmt_bytes_si(n: float) -> str:
    """A byte count in decimal units (1 GB = 1e9 B, as ``--memory-limit`` takes it):
    ``4.0 TB``, ``11.2 GB``, ``512 B``."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"
