"""The host's measured power, from the RAPL energy counters Linux exposes in powercap.

Where the kernel exposes Intel or AMD RAPL (Running Average Power Limit) through the
powercap framework, every package zone ``/sys/class/powercap/intel-rapl:<n>`` has a
``name`` (``package-<n>``), a cumulative ``energy_uj`` counter in microjoules and the
``max_energy_range_uj`` at which it wraps. Reading ``energy_uj`` needs root on kernels
patched for CVE-2020-8694; a machine without the files, or without the permission, has
no measured power, and the energy model then uses the hardware's published figure
(``[host] active_power_w``, an estimate; :mod:`placement.devices.cim_energy`).

What is measured (:class:`EnergyMeter`): the package energy while the profiler's runs
execute, less the idle power (measured over a short sleep just before) times the same
wall time, divided by the seconds the runs took: the power the model's runs add to the
package, as the energy model wants it (power above idle times the operator latencies).
It is the whole package's: whatever else runs on the machine meanwhile is in it too, and
the profile says how busy the machine was (``machine_load``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POWERCAP = Path("/sys/class/powercap")
#: Seconds of sleep over which the idle package power is measured.
IDLE_SECONDS = 0.5
#: The profile metadata key of a measured power.
METADATA_KEY = "host_power"
_PACKAGE_ZONE = re.compile(r"^intel-rapl:\d+$")  # top-level zones only, not core/uncore


@dataclass(frozen=True)
class Zone:
    """One package zone: its name and counter files."""

    name: str
    energy: Path
    wrap_uj: int  # the counter restarts from 0 after this many microjoules


def package_zones(root: Path = POWERCAP) -> tuple[list[Zone], str | None]:
    """The readable RAPL package zones under ``root``, or ([], why there are none)."""
    if not root.is_dir():
        return [], f"{root} does not exist (no powercap framework)"
    zones = []
    for path in sorted(p for p in root.iterdir() if _PACKAGE_ZONE.match(p.name)):
        try:
            name = (path / "name").read_text().strip()
            wrap = int((path / "max_energy_range_uj").read_text())
            int((path / "energy_uj").read_text())
        except PermissionError:
            return [], f"{path / 'energy_uj'} is not readable (RAPL counters need root)"
        except (OSError, ValueError):
            continue
        if name.startswith("package"):
            zones.append(Zone(name, path / "energy_uj", wrap))
    if not zones:
        return [], f"no RAPL package zone under {root}"
    return zones, None


@dataclass(frozen=True)
class PowerMeasurement:
    """The package power the runs added, and how it was found (watts, seconds)."""

    active_w: float  # (energy during the runs - idle power x their wall time) / busy seconds
    idle_w: float
    busy_seconds: float
    wall_seconds: float
    zones: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": "RAPL (powercap), package zones " + ", ".join(self.zones),
            "active_w": self.active_w,
            "idle_w": self.idle_w,
            "busy_seconds": self.busy_seconds,
            "wall_seconds": self.wall_seconds,
        }


class EnergyMeter:
    """Package energy between two moments; :meth:`open` gives None where RAPL is absent."""

    def __init__(self, zones: Sequence[Zone]) -> None:
        self.zones = list(zones)
        self.idle_w = 0.0
        self._start: tuple[float, list[int]] | None = None

    @classmethod
    def open(cls, root: Path = POWERCAP) -> EnergyMeter | None:
        zones, _why = package_zones(root)
        return cls(zones) if zones else None

    def read(self) -> list[int]:
        return [int(z.energy.read_text()) for z in self.zones]

    def joules(self, before: Sequence[int], after: Sequence[int]) -> float:
        """Energy between two readings, counting one wrap of each counter."""
        total = 0
        for zone, a, b in zip(self.zones, before, after, strict=True):
            total += b - a if b >= a else b + zone.wrap_uj - a
        return total * 1e-6

    def start(self, idle_seconds: float = IDLE_SECONDS) -> None:
        """Measure the idle power over ``idle_seconds`` of sleep, then start counting."""
        t0, e0 = time.perf_counter(), self.read()
        time.sleep(idle_seconds)
        t1, e1 = time.perf_counter(), self.read()
        self.idle_w = self.joules(e0, e1) / (t1 - t0)
        self._start = (t1, e1)

    def stop(self, busy_seconds: float) -> PowerMeasurement | None:
        """The power the runs of ``busy_seconds`` added since :meth:`start` (None when
        nothing ran)."""
        if self._start is None or busy_seconds <= 0:
            return None
        t0, e0 = self._start
        t1, e1 = time.perf_counter(), self.read()
        wall = t1 - t0
        active = max(0.0, (self.joules(e0, e1) - self.idle_w * wall) / busy_seconds)
        return PowerMeasurement(active, self.idle_w, busy_seconds, wall,
                                tuple(z.name for z in self.zones))  # fmt: skip


def measured_power(metadata: Any) -> tuple[float, str] | None:
    """(watts, source) of a host profile's measured power, None when it has none."""
    if not isinstance(metadata, dict):
        return None
    entry = metadata.get(METADATA_KEY)
    if not isinstance(entry, dict):
        return None
    try:
        watts = float(entry["active_w"])
    except (KeyError, TypeError, ValueError):
        return None
    return watts, str(entry.get("source", "RAPL"))
