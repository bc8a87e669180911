"""The CPU + CIM machine: its typed description, presets and files (CIM paper, Table II).

Files name their units in the keys (``t_mvm_ns``, ``bus_gbps``); they are
converted once, here, to seconds and bytes per second (1 GB/s = 1e9 B/s).
A user file may start from a preset with ``base = "arm-a72"`` and override
only some keys; without ``base`` every key must be present
(``placement.hardware.base``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.hardware.base import (
    HostSpec,
    description_builder,
    load_description,
    preset_names,
    spec_fields,
)


@dataclass(frozen=True)
class CimSpec:
    crossbars: int  # C (Eq. 14)
    crossbar_rows: int  # M (Eq. 1)
    crossbar_cols: int  # N (Eq. 1)
    t_mvm: float  # seconds per MVM (Eq. 2)
    bus_bandwidth: float  # B_shared, bytes/s (Eq. 4)
    internal_bandwidth: float  # B_cim, bytes/s (Eq. 3)
    elem_bytes: int  # b_elem (Eqs. 3-4)


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
        return {
            "name": self.name,
            "source": self.source,
            "host": self.host.to_json(),
            "cim": {
                "crossbars": c.crossbars,
                "crossbar_rows": c.crossbar_rows,
                "crossbar_cols": c.crossbar_cols,
                "t_mvm_ns": c.t_mvm * 1e9,
                "bus_gbps": c.bus_bandwidth / 1e9,
                "internal_gbps": c.internal_bandwidth / 1e9,
                "elem_bytes": c.elem_bytes,
            },
        }


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
    return CimSpec(**spec_fields(table, CIM_KEYS, source, "cim"))
