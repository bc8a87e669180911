"""The energy of a CIM placement, part by part, and where each part's numbers come from.

The numbers are the instance's (:mod:`placement.cim.instance`, from the energy model of
:mod:`placement.devices.cim_energy`): E5 per host operator, E1 and E2 per CIM operator,
E3 per edge between devices and the static power E4 over the makespan. Which parts are
measured, modelled or estimated: the accelerator's side is always *modelled* (published
component energies); the host's is *measured* when the host profile carries a RAPL
power (:mod:`placement.profiling.rapl`) and the latencies were measured, else an
*estimate* (a published power figure times the host latencies, themselves measured or
the host model's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement.cim.instance import CimInstance
from placement.hardware.base import HOST_POWER_KEY
from placement.hardware.cim import Hardware
from placement.profiling.rapl import measured_power


@dataclass(frozen=True)
class EnergyBreakdown:
    """Joules of one inference, part by part."""

    host: float  # E5 over the host operators
    crossbars: float  # E1 over the CIM operators: crossbar reads, DACs, ADCs
    internal: float  # E2 over the CIM operators: the internal bus
    bus: float  # E3 over the edges between devices: the shared bus
    static: float  # E4 x makespan: the crossbars' leakage

    @property
    def accelerator(self) -> float:
        return self.crossbars + self.internal + self.bus + self.static

    @property
    def total(self) -> float:
        return math.fsum((self.host, self.crossbars, self.internal, self.bus, self.static))

    def to_json(self) -> dict[str, float]:
        return {
            "total_j": self.total, "host_j": self.host, "crossbars_j": self.crossbars,
            "internal_bus_j": self.internal, "shared_bus_j": self.bus, "static_j": self.static,
        }  # fmt: skip


def placement_energy(
    instance: CimInstance, on_host: Mapping[str, bool], makespan: float
) -> EnergyBreakdown | None:
    """The energy of a placement (devices ``on_host``, ``makespan`` seconds); None when
    the instance has no energy model."""
    if not instance.has_energy:
        return None
    ops = instance.operators
    host = math.fsum(op.e_host or 0.0 for op in ops if on_host[op.name])
    cim = [op for op in ops if not on_host[op.name]]
    bus = math.fsum(e.e_transfer or 0.0 for e in instance.edges
                    if on_host[e.src] != on_host[e.dst])  # fmt: skip
    return EnergyBreakdown(
        host=host,
        crossbars=math.fsum(op.e_mvm or 0.0 for op in cim),
        internal=math.fsum(op.e_internal or 0.0 for op in cim),
        bus=bus,
        static=(instance.p_static or 0.0) * makespan,
    )


@dataclass(frozen=True)
class EnergySource:
    """Where the energy numbers of a placement on some hardware come from."""

    host_power_w: float
    host_measured: bool  # True: RAPL power and measured latencies
    host: str  # how the host's part is obtained, for people
    accelerator: str  # how the accelerator's part is obtained, for people

    @property
    def summary(self) -> str:
        """"host measured" / "host estimated", "CIM modelled"."""
        return f"host {'measured' if self.host_measured else 'estimated'}, CIM modelled"

    def to_json(self) -> dict[str, Any]:
        return {
            "host_power_w": self.host_power_w,
            "host": "measured" if self.host_measured else "estimate",
            "host_detail": self.host,
            "accelerator": "modelled",
            "accelerator_detail": self.accelerator,
        }


def host_power(hw: Hardware, profile_meta: Mapping[str, Any] | None) -> float | None:
    """Watts of the host side of the energy model: a RAPL power measured with the
    profile's latencies, else the hardware's ``active_power_w`` (None: neither)."""
    measured = None if hw.host.modelled else measured_power(dict(profile_meta or {}))
    return measured[0] if measured is not None else hw.host.active_power


def energy_source(hw: Hardware, profile_meta: Mapping[str, Any] | None) -> EnergySource | None:
    """Where the energy of placements on ``hw`` comes from; None without an energy model
    (no ``[cim]`` energy constants or no host power)."""
    power = host_power(hw, profile_meta)
    if hw.cim.energy is None or power is None:
        return None
    measured = None if hw.host.modelled else measured_power(dict(profile_meta or {}))
    latencies = "modelled host latencies" if hw.host.modelled else "measured host latencies"
    if measured is not None:
        host = f"measured: {measured[0]:.3g} W above idle ({measured[1]}) x {latencies}"
    else:
        host = (f"estimate: {power:g} W ({hw.name}'s {HOST_POWER_KEY}, a published figure)"
                f" x {latencies}")  # fmt: skip
    accelerator = ("modelled: published component energies (the hardware's [cim] energy"
                   " constants; placement.devices.cim_energy)")  # fmt: skip
    return EnergySource(power, measured is not None, host, accelerator)
