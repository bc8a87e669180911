"""Numbers for people: times, energies, bandwidths and byte counts with their units."""

from __future__ import annotations


def fmt_time(seconds: float, digits: int = 3) -> str:
    """``digits`` significant digits in ns, us, ms or s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g} {unit}"
    return f"{seconds / 1e-9:.{digits}g} ns"


def fmt_energy(joules: float, digits: int = 3) -> str:
    """``digits`` significant digits in nJ, uJ, mJ or J."""
    for unit, scale in (("J", 1.0), ("mJ", 1e-3), ("uJ", 1e-6)):
        if abs(joules) >= scale:
            return f"{joules / scale:.{digits}g} {unit}"
    return f"{joules / 1e-9:.{digits}g} nJ"


def fmt_rate(per_second: float, digits: int = 3) -> str:
    """Frames per second, ``digits`` significant digits ("1.23e+03" avoided: "1230")."""
    return f"{per_second:.{digits}g}" if per_second < 10 ** digits else f"{per_second:.0f}"


def fmt_bandwidth(bps: float) -> str:
    """Bytes per second in GB/s (1 GB = 1e9 B), 3 significant digits."""
    return f"{bps / 1e9:.3g} GB/s"


def fmt_bytes(n: float) -> str:
    """A byte count in B, KiB, MiB or GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


#: Relative gaps below this are the float noise of a solver's arithmetic, shown as 0. A
#: chosen threshold, far above that noise (a solver's gap of a proven optimum can be
#: 5e-13: tests/sweep/test_report.py), far below any gap worth reporting (0.001 %).
GAP_NOISE = 1e-9


def fmt_gap(gap: float | None) -> str:
    """A relative gap in %, 3 significant digits ("1.72%"); "0%" below :data:`GAP_NOISE`,
    "n/a" when unknown. Exact values stay in the JSON documents."""
    if gap is None:
        return "n/a"
    return "0%" if abs(gap) < GAP_NOISE else f"{gap * 100:.3g}%"


def time_scale(seconds: float) -> tuple[float, str, int]:
    """(factor, unit, decimals) to show times up to ``seconds`` in one unit: us with 2
    decimals below 100 ms, else ms with 3 (10 ns or 1 us resolution)."""
    if abs(seconds) < 0.1:
        return 1e6, "us", 2
    return 1e3, "ms", 3


def fmt_bytes_si(n: float) -> str:
    """A byte count in decimal units (1 GB = 1e9 B, as ``--memory-limit`` takes it):
    ``4.0 TB``, ``11.2 GB``, ``512 B``."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"
