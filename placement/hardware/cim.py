"""Typed hardware descriptions and the preset / TOML files they come from.

Files name their units in the keys (``t_mvm_ns``, ``bus_gbps``); they are
converted once, here, to seconds and bytes per second (1 GB/s = 1e9 B/s).
A user file may start from a preset with ``base = "arm-a72"`` and override
only some keys; without ``base`` every key must be present.
"""

from __future__ import annotations

import dataclasses
import math
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from placement.errors import PlacementError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class HostSpec:
    name: str
    arch: str  # "x86_64" or "aarch64": where host latencies should have been measured


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
        )

    def to_json(self) -> dict[str, Any]:
        c = self.cim
        return {
            "name": self.name,
            "source": self.source,
            "host": dataclasses.asdict(self.host),
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
_CIM_KEYS: dict[str, tuple[str, float, bool]] = {
    "crossbars": ("crossbars", 1.0, True),
    "crossbar_rows": ("crossbar_rows", 1.0, True),
    "crossbar_cols": ("crossbar_cols", 1.0, True),
    "t_mvm_ns": ("t_mvm", 1e-9, False),
    "bus_gbps": ("bus_bandwidth", 1e9, False),
    "internal_gbps": ("internal_bandwidth", 1e9, False),
    "elem_bytes": ("elem_bytes", 1.0, True),
}
_HOST_KEYS = ("name", "arch")


#: Preset files named ``pim-*.toml`` describe CPU + PIM machines (``placement.hardware.pim``).
PIM_PRESET_PREFIX = "pim-"


def preset_names(*, pim: bool = False) -> list[str]:
    """The CPU + CIM presets, or with ``pim=True`` the CPU + PIM ones (``pim-*.toml``)."""
    folder = resources.files("placement.hardware") / "presets"
    return sorted(
        p.name[: -len(".toml")]
        for p in folder.iterdir()
        if p.name.endswith(".toml") and p.name.startswith(PIM_PRESET_PREFIX) == pim
    )


def default_preset_for(arch: str | None = None) -> str:
    """The preset whose host matches ``arch`` (default: this machine)."""
    arch = (arch or platform.machine()).lower()
    return "arm-a72" if arch in ("aarch64", "arm64") or arch.startswith("arm") else "x86-ryzen"


def load_hardware(name_or_path: str | Path) -> Hardware:
    """Load a preset by name, or a TOML file by path."""
    text, source = _read_source(str(name_or_path))
    return _parse(text, source, seen=())


def with_overrides(hw: Hardware, **cim_values: float | int | None) -> Hardware:
    """Apply CLI overrides given in file units (t_mvm_ns=..., bus_gbps=...); None means keep."""
    values = {k: v for k, v in cim_values.items() if v is not None}
    if not values:
        return hw
    raw = hw.to_json()["cim"] | values
    cim = _cim_from_table(raw, "command-line option")
    return dataclasses.replace(hw, cim=cim)


def _read_source(name_or_path: str) -> tuple[str, str]:
    return read_hardware_source(name_or_path, preset_names(), "hardware")


def _parse(text: str, source: str, seen: tuple[str, ...]) -> Hardware:
    data, host, cim_table = parse_hardware_tables(
        text, source, seen, device="cim", load_base=lambda n, s: _parse(*_read_source(n), s)
    )
    return Hardware(
        name=str(data.get("name") or Path(source).stem),
        description=str(data.get("description", "")),
        host=host,
        cim=_cim_from_table(cim_table, source),
        source=source,
    )


def _cim_from_table(table: dict[str, Any], source: str) -> CimSpec:
    reject_unknown_keys(table, set(_CIM_KEYS), source, "cim.")
    fields: dict[str, Any] = {}
    for key, (field, scale, integral) in _CIM_KEYS.items():
        if key not in table:
            raise PlacementError(f"{source}: missing key 'cim.{key}'")
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlacementError(f"{source}: 'cim.{key}' must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise PlacementError(f"{source}: 'cim.{key}' must be positive, got {value!r}")
        if integral:
            if value != int(value):
                raise PlacementError(f"{source}: 'cim.{key}' must be a whole number, got {value!r}")
            fields[field] = int(value)
        else:
            fields[field] = float(value) * scale
    return CimSpec(**fields)


# ------------------------------------------------- file mechanics shared with pim_hardware


class _HardwareLike(Protocol):
    """What a ``base =`` file must offer to be extended (Hardware, PimHardware)."""

    @property
    def description(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


def read_hardware_source(name_or_path: str, presets: list[str], what: str) -> tuple[str, str]:
    """(TOML text, source) of a preset in ``presets`` by name, or of a file by path.

    ``what`` names the kind in messages ("hardware", "PIM hardware").
    """
    if name_or_path in presets:
        folder = resources.files("placement.hardware") / "presets"
        return (folder / f"{name_or_path}.toml").read_text(), name_or_path
    path = Path(name_or_path)
    if not path.exists():
        known = ", ".join(presets)
        raise PlacementError(
            f"{what} {name_or_path!r}: neither a preset ({known}) nor an existing TOML file"
        )
    try:
        return path.read_text(), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise PlacementError(f"{path}: cannot read {what} file ({exc})") from None


def parse_hardware_tables(
    text: str,
    source: str,
    seen: tuple[str, ...],
    *,
    device: str,
    load_base: Callable[[str, tuple[str, ...]], _HardwareLike],
) -> tuple[dict[str, Any], HostSpec, dict[str, Any]]:
    """Decode a hardware TOML file: (top-level table, host, ``[device]`` table).

    A ``base = "<preset or file>"`` is loaded with ``load_base(name, seen)`` (so it is
    validated on its own) and the file's keys override it; ``seen`` stops cycles.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlacementError(f"{source}: not valid TOML ({exc})") from None
    if "base" in data:
        base_name = data["base"]
        if base_name in seen or base_name == source:
            raise PlacementError(f"{source}: 'base' refers back to itself ({base_name!r})")
        base = load_base(str(base_name), seen + (source,))
        merged = base.to_json()
        merged["description"] = base.description
        merged["name"] = Path(source).stem  # a derived file is not the preset itself
        data = _merge(merged, data)
        data.pop("base", None)
    reject_unknown_keys(data, {"name", "description", "host", device, "source"}, source, "")
    host_table = _table(data, "host", source)
    device_table = _table(data, device, source)
    reject_unknown_keys(host_table, set(_HOST_KEYS), source, "host.")
    for key in _HOST_KEYS:
        if not isinstance(host_table.get(key), str) or not host_table[key]:
            raise PlacementError(f"{source}: missing or empty key 'host.{key}'")
    return data, HostSpec(name=host_table["name"], arch=host_table["arch"]), device_table


def reject_unknown_keys(table: dict[str, Any], allowed: set[str], source: str, prefix: str) -> None:
    """Refuse a key not in ``allowed`` (a typo must not be silently ignored)."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise PlacementError(
            f"{source}: unknown key '{prefix}{unknown[0]}' (allowed: {', '.join(sorted(allowed))})"
        )


def _table(data: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    table = data.get(key)
    if not isinstance(table, dict):
        raise PlacementError(f"{source}: missing table [{key}]")
    return table


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
