"""The CPU + CIM machine: its typed description, presets and files (CIM paper, Table II).

Files name their units in the keys (``t_mvm_ns``, ``bus_gbps``); they are
converted once, here, to seconds and bytes per second (1 GB/s = 1e9 B/s).
A user file may start from a preset with ``base = "arm-a72"`` and override
only some keys; without ``base`` every key must be present
(``placement.hardware.base``).

The energy model's constants (:data:`CIM_ENERGY_KEYS`, :mod:`placement.devices.cim_energy`;
not in the paper) are optional as a group: all of them or none. Without them a result
states no energy, and an energy objective is refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.hardware.base import (
    HostSpec,
    check_file_value,
    description_builder,
    load_description,
    preset_names,
    reject_unknown_keys,
    spec_fields,
)


@dataclass(frozen=True)
class CimEnergySpec:
    """Constants of the accelerator's energy model (:mod:`placement.devices.cim_energy`), SI."""

    e_dac: float  # J per DAC conversion: one crossbar row, one input bit-slice
    e_adc: float  # J per ADC conversion: one crossbar column, one input bit-slice, one weight slice
    e_cell: float  # J per cell read: one weight slice of one weight, one input bit-slice
    dac_bits: int  # input bits converted per DAC conversion
    cell_bits: int  # weight bits stored per RRAM cell
    e_internal: float  # J per byte over the CIM internal bus (the loads and stores of Eq. 3)
    e_bus: float  # J per byte over the shared CPU-CIM bus (Eq. 4)
    p_static: float  # W per crossbar, drawn over the whole makespan


@dataclass(frozen=True)
class CimSpec:
    crossbars: int  # C (Eq. 14)
    crossbar_rows: int  # M (Eq. 1)
    crossbar_cols: int  # N (Eq. 1)
    t_mvm: float  # seconds per MVM (Eq. 2)
    bus_bandwidth: float  # B_shared, bytes/s (Eq. 4)
    internal_bandwidth: float  # B_cim, bytes/s (Eq. 3)
    elem_bytes: int  # b_elem (Eqs. 3-4)
    energy: CimEnergySpec | None = None  # the energy model's constants, when the file has them


@dataclass(frozen=True)
class Hardware:
    name: str
    description: str
    host: HostSpec
    cim: CimSpec
    source: str  # preset name or file path, for messages and result metadata

    def describe(self) -> str:
        c = self.cim
        return (
            f"{self.name}: {c.crossbars} crossbars of {c.crossbar_rows}x{c.crossbar_cols}, "
            f"T_mvm {c.t_mvm * 1e9:g} ns, bus {c.bus_bandwidth / 1e9:g} GB/s, "
            f"CIM internal {c.internal_bandwidth / 1e9:g} GB/s, {c.elem_bytes} B/element"
            + (f"; host latencies modelled for {self.host.name} (estimate)" if self.host.modelled
               else "")
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        c = self.cim
        cim = {
            "crossbars": c.crossbars,
            "crossbar_rows": c.crossbar_rows,
            "crossbar_cols": c.crossbar_cols,
            "t_mvm_ns": c.t_mvm * 1e9,
            "bus_gbps": c.bus_bandwidth / 1e9,
            "internal_gbps": c.internal_bandwidth / 1e9,
            "elem_bytes": c.elem_bytes,
        }
        if c.energy is not None:
            cim |= energy_to_file_units(c.energy)
        return {"name": self.name, "source": self.source, "host": self.host.to_json(), "cim": cim}


# File key -> (CimSpec field, converter to SI, must be an integer)
CIM_KEYS: dict[str, tuple[str, float, bool]] = {
    "crossbars": ("crossbars", 1.0, True),
    "crossbar_rows": ("crossbar_rows", 1.0, True),
    "crossbar_cols": ("crossbar_cols", 1.0, True),
    "t_mvm_ns": ("t_mvm", 1e-9, False),
    "bus_gbps": ("bus_bandwidth", 1e9, False),
    "internal_gbps": ("internal_bandwidth", 1e9, False),
    "elem_bytes": ("elem_bytes", 1.0, True),
}
# The energy model's keys (CimEnergySpec fields), in the same form; optional as a group.
CIM_ENERGY_KEYS: dict[str, tuple[str, float, bool]] = {
    "e_dac_pj": ("e_dac", 1e-12, False),
    "e_adc_pj": ("e_adc", 1e-12, False),
    "e_cell_pj": ("e_cell", 1e-12, False),
    "dac_bits": ("dac_bits", 1.0, True),
    "cell_bits": ("cell_bits", 1.0, True),
    "e_internal_pj_per_byte": ("e_internal", 1e-12, False),
    "e_bus_pj_per_byte": ("e_bus", 1e-12, False),
    "p_static_mw_per_crossbar": ("p_static", 1e-3, False),
}


def load_hardware(name_or_path: str | Path) -> Hardware:
    """Load a preset by name, or a TOML file by path."""
    return load_description(
        name_or_path, presets=preset_names(), what="hardware", device="cim",
        build=description_builder(Hardware, "cim", _cim_from_table),
    )  # fmt: skip


def with_overrides(hw: Hardware, **cim_values: float | int | None) -> Hardware:
    """Apply CLI overrides given in file units (t_mvm_ns=..., bus_gbps=...); None means keep."""
    values = {k: v for k, v in cim_values.items() if v is not None}
    if not values:
        return hw
    raw = hw.to_json()["cim"] | values
    cim = _cim_from_table(raw, "command-line option")
    return dataclasses.replace(hw, cim=cim)


def _cim_from_table(table: dict[str, Any], source: str) -> CimSpec:
    latency = {k: v for k, v in table.items() if k not in CIM_ENERGY_KEYS}
    energy = {k: v for k, v in table.items() if k in CIM_ENERGY_KEYS}
    reject_unknown_keys(latency, {*CIM_KEYS, *CIM_ENERGY_KEYS}, source, "cim.")
    spec = CimSpec(**spec_fields(latency, CIM_KEYS, source, "cim"))
    if not energy:
        return spec
    missing = [k for k in CIM_ENERGY_KEYS if k not in energy]
    if missing:
        raise PlacementError(
            f"{source}: missing key 'cim.{missing[0]}' (the energy model's constants are all"
            f" given or none: {', '.join(CIM_ENERGY_KEYS)})"
        )
    fields: dict[str, Any] = {}
    for key, (field, scale, integral) in CIM_ENERGY_KEYS.items():
        value = energy[key]
        if integral:
            check_file_value(value, f"cim.{key}", True, source)
            fields[field] = int(value)
        else:  # an energy or a power may be zero (a term left out on purpose)
            check_file_value(value, f"cim.{key}", False, source, allow_zero=True)
            fields[field] = float(value) * scale
    return dataclasses.replace(spec, energy=CimEnergySpec(**fields))


def energy_to_file_units(energy: CimEnergySpec) -> dict[str, float | int]:
    """The energy constants as a file gives them (12 significant digits, as the host
    model's: no 0.41666999999999994 after the round trip through SI units)."""
    out: dict[str, float | int] = {}
    for key, (field, scale, integral) in CIM_ENERGY_KEYS.items():
        value = getattr(energy, field)
        out[key] = int(value) if integral else float(f"{value / scale:.12g}")
    return out
