"""The cache geometry a callgrind simulation uses: the host's, from sysfs, or overridden.

:func:`host_cache_geometry` reads CPU 0's caches from sysfs: the I1 and D1 caches and,
as "LL", the largest cache private to that CPU (the cache whose misses Torch-PIM's
``OFFCORE_REQUESTS.ALL_DATA_RD`` counts; :mod:`placement.profiling.simulated` says
why). ``PLACEMENT_SIM_CACHES="D1=48K,12,64 LL=1280K,20,64"`` (any of I1, D1, LL; size
with an optional K/M/G suffix, associativity, line bytes) overrides any of them.
Valgrind needs a power-of-two set count: a sysfs cache without one gets its set count
rounded down (recorded in ``notes``). Where sysfs says nothing, the paper's host's
caches (Table 2) are used.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from placement.errors import PlacementError

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
ENV_CACHES = "PLACEMENT_SIM_CACHES"


@dataclass(frozen=True)
class Cache:
    """One simulated cache: ``size`` bytes, ``assoc`` ways, ``line`` bytes per line."""

    size: int
    assoc: int
    line: int

    @property
    def sets(self) -> int:
        return self.size // (self.assoc * self.line)

    def check(self, name: str) -> None:
        """Valgrind's constraints, as a one-line error naming the cache."""
        if min(self.size, self.assoc, self.line) < 1:
            raise PlacementError(f"cache {name}: size, associativity and line must be positive")
        if self.line & (self.line - 1) or self.line < 16:
            raise PlacementError(f"cache {name}: line size {self.line} B is not a power of two")
        sets = self.size / (self.assoc * self.line)
        if sets != int(sets) or int(sets) & (int(sets) - 1):
            raise PlacementError(
                f"cache {name}: {self.size} B / ({self.assoc} ways x {self.line} B) ="
                f" {sets:g} sets, not a power of two (valgrind needs one)"
            )

    def option(self) -> str:
        return f"{self.size},{self.assoc},{self.line}"

    def describe(self) -> str:
        size = f"{self.size >> 20} MiB" if self.size % (1 << 20) == 0 else f"{self.size >> 10} KiB"
        return f"{size} {self.assoc}-way {self.line} B lines"

    def to_json(self) -> dict[str, int]:
        return {"size": self.size, "assoc": self.assoc, "line": self.line, "sets": self.sets}


# The paper's host (Table 2, Xeon Gold 6330 / Ice Lake-SP): 32 kB L1I, 48 kB L1D,
# 1.25 MB L2 per core (20-way, 1024 sets). Used where sysfs says nothing.
DEFAULT_I1 = Cache(32 << 10, 8, 64)
DEFAULT_D1 = Cache(48 << 10, 12, 64)
DEFAULT_LL = Cache(1280 << 10, 20, 64)


@dataclass(frozen=True)
class CacheGeometry:
    """The three caches callgrind simulates, where each came from, and what was adjusted."""

    i1: Cache
    d1: Cache
    ll: Cache
    ll_level: str  # e.g. "L2 (private to cpu0)"
    source: str  # "sysfs", "defaults (Ice Lake-SP, Table 2)", "... + PLACEMENT_SIM_CACHES"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def check(self) -> None:
        for name, cache in (("I1", self.i1), ("D1", self.d1), ("LL", self.ll)):
            cache.check(name)

    def options(self) -> list[str]:
        return [f"--I1={self.i1.option()}", f"--D1={self.d1.option()}", f"--LL={self.ll.option()}"]

    def describe(self) -> str:
        return f"D1 {self.d1.describe()}, LL = {self.ll_level} {self.ll.describe()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "I1": self.i1.to_json(),
            "D1": self.d1.to_json(),
            "LL": self.ll.to_json(),
            "ll_level": self.ll_level,
            "source": self.source,
            "notes": list(self.notes),
        }


def parse_size(text: str) -> int:
    """'48K' -> 49152, '2M' / '2MiB' -> 2097152, '65536' -> 65536."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(match.group(1)) * scale


def parse_cache(text: str) -> Cache:
    """``SIZE,ASSOC,LINE`` (valgrind's syntax; SIZE may carry K/M/G) as a :class:`Cache`."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3:
        raise PlacementError(f"cache {text!r}: expected SIZE,ASSOC,LINE (e.g. 2M,16,64)")
    try:
        return Cache(parse_size(parts[0]), int(parts[1]), int(parts[2]))
    except ValueError:
        raise PlacementError(f"cache {text!r}: expected SIZE,ASSOC,LINE (e.g. 2M,16,64)") from None


def parse_overrides(text: str) -> dict[str, Cache]:
    """``"D1=48K,12,64 LL=2M,16,64"`` (space or ';' separated) -> {"d1": ..., "ll": ...}."""
    out: dict[str, Cache] = {}
    for item in re.split(r"[;\s]+", text.strip()):
        if not item:
            continue
        name, sep, value = item.partition("=")
        key = name.strip().lower()
        if not sep or key not in ("i1", "d1", "ll"):
            raise PlacementError(f"{ENV_CACHES}: {item!r}: expected I1=, D1= or LL=SIZE,ASSOC,LINE")
        out[key] = parse_cache(value)
    return out


def _sysfs_caches(root: Path) -> list[dict[str, Any]]:
    caches = []
    for index in sorted(root.glob("index*")):

        def read(name: str, index: Path = index) -> str | None:
            try:
                return (index / name).read_text().strip()
            except OSError:
                return None

        try:
            entry = {
                "level": int(read("level") or 0),
                "type": read("type") or "",
                "size": parse_size(read("size") or ""),
                "assoc": int(read("ways_of_associativity") or 0),
                "line": int(read("coherency_line_size") or 0),
                "shared": read("shared_cpu_list"),
            }
        except ValueError:
            continue
        if entry["level"] and entry["size"] and entry["assoc"] and entry["line"]:
            caches.append(entry)
    return caches


def _pow2_sets(cache: Cache, name: str, notes: list[str]) -> Cache:
    sets = cache.size // (cache.assoc * cache.line)
    if sets >= 1 and not sets & (sets - 1) and sets * cache.assoc * cache.line == cache.size:
        return cache
    fixed_sets = 1 << max(0, int(math.log2(max(1, sets))))
    fixed = replace(cache, size=fixed_sets * cache.assoc * cache.line)
    notes.append(
        f"{name}: {cache.describe()} has {cache.size / (cache.assoc * cache.line):g} sets;"
        f" simulated with {fixed_sets} sets ({fixed.describe()})"
    )
    return fixed


def host_cache_geometry(root: Path = SYSFS_CACHE, overrides: str | None = None) -> CacheGeometry:
    """This host's L1i, L1d and last private cache from sysfs (defaults where missing),
    then the overrides (``overrides``, else the environment variable ``PLACEMENT_SIM_CACHES``)."""
    notes: list[str] = []
    caches = _sysfs_caches(root)
    i1 = d1 = ll = None
    ll_level = "L2 (default)"
    for c in caches:
        cache = Cache(c["size"], c["assoc"], c["line"])
        if c["level"] == 1 and c["type"] == "Instruction":
            i1 = _pow2_sets(cache, "I1", notes)
        elif c["level"] == 1 and c["type"] in ("Data", "Unified"):
            d1 = _pow2_sets(cache, "D1", notes)
    cpu = root.parent.name.removeprefix("cpu")
    outer = [c for c in caches if c["level"] >= 2 and c["type"] in ("Unified", "Data")]
    private = [c for c in outer if c["shared"] in (None, cpu)]
    if private or outer:
        pick = max(private or outer, key=lambda c: c["level"])
        if not private:
            pick = min(outer, key=lambda c: c["level"])
        ll = _pow2_sets(Cache(pick["size"], pick["assoc"], pick["line"]), "LL", notes)
        shared = pick["shared"]
        how = f"private to cpu{cpu}" if shared in (None, cpu) else f"shared by cpus {shared}"
        ll_level = f"L{pick['level']} ({how})"
    source = "sysfs" if caches else "defaults (Ice Lake-SP, Torch-PIM Table 2)"
    if caches and (i1 is None or d1 is None or ll is None):
        source = "sysfs + defaults"
    geometry = CacheGeometry(
        i1 or DEFAULT_I1, d1 or DEFAULT_D1, ll or DEFAULT_LL,
        ll_level if ll is not None else "L2 (default: Ice Lake-SP)", source, tuple(notes),
    )  # fmt: skip
    text = os.environ.get(ENV_CACHES, "") if overrides is None else overrides
    if text.strip():
        geometry = with_overrides(geometry, parse_overrides(text), f"{source} + {ENV_CACHES}")
    geometry.check()
    return geometry


def with_overrides(
    geometry: CacheGeometry, caches: Mapping[str, Cache], source: str = "override"
) -> CacheGeometry:
    """``geometry`` with some of its caches replaced (keys ``i1``, ``d1``, ``ll``)."""
    out = replace(
        geometry,
        i1=caches.get("i1", geometry.i1),
        d1=caches.get("d1", geometry.d1),
        ll=caches.get("ll", geometry.ll),
        source=source,
    )
    if "ll" in caches:
        out = replace(out, ll_level="LL (given)")
    out.check()
    return out
