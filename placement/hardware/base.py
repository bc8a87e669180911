"""What every hardware description shares: the host, presets, TOML files with ``base =``.

A hardware file names its units in the keys (``t_mvm_ns``, ``bus_gbps``, ``t_sw_us``);
each target's module (``placement.hardware.cim``, ``placement.hardware.pim``) converts
them once, to seconds and bytes per second (1 GB/s = 1e9 B/s). A user file may start
from a preset with ``base = "arm-a72"`` and override only some keys; without ``base``
every key must be present. Presets live in ``placement/hardware/presets/``; files named
``pim-*.toml`` describe CPU + PIM machines, the others CPU + CIM machines.

The ``[host]`` table names the host CPU (``name``, ``arch``) and says where the host
latencies ``T_host,v`` come from: ``latency = "measured"`` (the default: an ONNX
Runtime profile) or ``latency = "model"`` (the analytical roofline host model of
:mod:`placement.devices.host`, an estimate; no profiling). The model's constants
(:data:`HOST_MODEL_KEYS`) are optional as a group: all of them or none, and
``latency = "model"`` needs them. ``active_power_w`` (CIM hardware, optional) is the power
the host core draws above idle while it runs an operator: the host side of the energy
model (:mod:`placement.devices.cim_energy`), an estimate times the host latencies.
"""

from __future__ import annotations

import math
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeVar

from placement.errors import PlacementError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


#: Where the host latencies T_host,v come from (``[host] latency``).
HOST_LATENCY_SOURCES = ("measured", "model")

# Host model constants: file key -> (HostModelSpec field, factor to SI, is a fraction in (0, 1])
HOST_MODEL_KEYS: dict[str, tuple[str, float, bool]] = {
    "clock_ghz": ("clock", 1e9, False),
    "fp32_macs_per_cycle": ("fp32_macs_per_cycle", 1.0, False),
    "int8_macs_per_cycle": ("int8_macs_per_cycle", 1.0, False),
    "memory_gbps": ("memory_bandwidth", 1e9, False),
    "overhead_us": ("overhead", 1e-6, False),
    "eff_dense_conv": ("eff_dense_conv", 1.0, True),
    "eff_grouped_conv": ("eff_grouped_conv", 1.0, True),
    "eff_matmul": ("eff_matmul", 1.0, True),
    "eff_memory": ("eff_memory", 1.0, True),
}


@dataclass(frozen=True)
class HostModelSpec:
    """Constants of the analytical host model (:mod:`placement.devices.host`), SI units."""

    clock: float  # Hz, the clock the core sustains under load
    fp32_macs_per_cycle: float  # peak fp32 multiply-accumulates per cycle (one core)
    int8_macs_per_cycle: float  # peak int8 multiply-accumulates per cycle (one core)
    memory_bandwidth: float  # sustained single-core memory bandwidth, B/s
    overhead: float  # fixed cost per operator (kernel dispatch), s
    eff_dense_conv: float  # fraction of the peak MAC rate a dense convolution reaches
    eff_grouped_conv: float  # ... a grouped or depthwise convolution
    eff_matmul: float  # ... a MatMul / Gemm
    eff_memory: float  # fraction of the memory bandwidth any operator's bytes move at

    def to_file_units(self) -> dict[str, float]:
        """The constants as a file gives them (12 significant digits: no 17.499999999999996
        for 17.5 after the round trip through SI units)."""
        return {
            key: float(f"{getattr(self, f) / scale:.12g}")
            for key, (f, scale, _) in HOST_MODEL_KEYS.items()
        }


@dataclass(frozen=True)
class HostSpec:
    name: str
    arch: str  # "x86_64" or "aarch64": where host latencies should have been measured
    latency: str = "measured"  # where T_host,v comes from: HOST_LATENCY_SOURCES
    model: HostModelSpec | None = None  # the host model's constants, when the file has them
    # W the host core draws above idle while it runs an operator (energy model; CIM only)
    active_power: float | None = None

    @property
    def modelled(self) -> bool:
        """True when T_host,v comes from the host model (an estimate), not a profile."""
        return self.latency == "model"

    def to_json(self) -> dict[str, Any]:
        """The ``[host]`` table in file units (what ``base =`` merges and results record)."""
        doc: dict[str, Any] = {"name": self.name, "arch": self.arch}
        if self.model is not None or self.latency != "measured":
            doc["latency"] = self.latency
        if self.model is not None:
            doc |= self.model.to_file_units()
        if self.active_power is not None:
            doc[HOST_POWER_KEY] = float(f"{self.active_power:.12g}")
        return doc

    def identity(self) -> dict[str, Any]:
        """What of the host changes results: with measured latencies the name, the
        architecture and the active power (the host model's constants are then unused),
        else everything."""
        if self.modelled:
            return self.to_json()
        doc: dict[str, Any] = {"name": self.name, "arch": self.arch}
        if self.active_power is not None:
            doc[HOST_POWER_KEY] = self.to_json()[HOST_POWER_KEY]
        return doc


_HOST_KEYS = ("name", "arch")
#: The ``[host]`` key of the host's active power (W), the host side of the energy model.
HOST_POWER_KEY = "active_power_w"


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
    return data, host_spec_from_table(host_table, source, device), device_table


def host_spec_from_table(table: dict[str, Any], source: str, device: str = "cim") -> HostSpec:
    """A validated :class:`HostSpec` from a ``[host]`` table in file units; ``device``:
    the kind of machine (only ``cim`` machines may model their host latencies)."""
    allowed = {*_HOST_KEYS, "latency", *HOST_MODEL_KEYS, HOST_POWER_KEY}
    reject_unknown_keys(table, allowed, source, "host.")
    if HOST_POWER_KEY in table and device != "cim":
        raise PlacementError(
            f"{source}: 'host.{HOST_POWER_KEY}' is for CIM hardware (its energy model)"
        )
    for key in _HOST_KEYS:
        if not isinstance(table.get(key), str) or not table[key]:
            raise PlacementError(f"{source}: missing or empty key 'host.{key}'")
    latency = table.get("latency", "measured")
    if latency not in HOST_LATENCY_SOURCES:
        raise PlacementError(
            f"{source}: 'host.latency' must be \"measured\" (an ONNX Runtime profile) or"
            f" \"model\" (the analytical host model), got {latency!r}"
        )
    if latency == "model" and device != "cim":
        raise PlacementError(
            f"{source}: 'host.latency' = \"model\" is for CIM hardware; {device.upper()} host"
            " times come from the nest profile"
        )
    given = [k for k in HOST_MODEL_KEYS if k in table]
    model = None
    if given or latency == "model":
        missing = [k for k in HOST_MODEL_KEYS if k not in table]
        if missing:
            why = (
                'host.latency = "model" needs the host model constants'
                if latency == "model"
                else "the host model constants are all given or none"
            )
            raise PlacementError(
                f"{source}: missing key 'host.{missing[0]}' ({why}: {', '.join(HOST_MODEL_KEYS)})"
            )
        fields: dict[str, float] = {}
        for key, (field, scale, fraction) in HOST_MODEL_KEYS.items():
            value = table[key]
            check_file_value(value, f"host.{key}", False, source)
            if fraction and value > 1:
                raise PlacementError(
                    f"{source}: 'host.{key}' is a fraction of the peak, at most 1, got {value!r}"
                )
            fields[field] = float(value) * scale
        model = HostModelSpec(**fields)
    power = None
    if HOST_POWER_KEY in table:
        check_file_value(table[HOST_POWER_KEY], f"host.{HOST_POWER_KEY}", False, source)
        power = float(table[HOST_POWER_KEY])
    return HostSpec(name=table["name"], arch=table["arch"], latency=latency, model=model,
                    active_power=power)  # fmt: skip


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


# --------------------------------------------------------------------------- loading


T = TypeVar("T")
#: (top-level table, host, the device's table, source) -> the typed description
Build = Callable[[dict[str, Any], HostSpec, dict[str, Any], str], T]


def load_description(
    name_or_path: str | Path, *, presets: list[str], what: str, device: str, build: Build[T]
) -> T:
    """A preset by name, or a TOML file by path (``base =`` resolved), built by ``build``.

    ``what`` names the kind in messages ("hardware", "PIM hardware"); ``device`` is the
    table the kind needs (``cim``, ``pim``).
    """

    def parse(text: str, source: str, seen: tuple[str, ...]) -> T:
        data, host, table = parse_hardware_tables(
            text, source, seen, device=device,
            load_base=lambda name, seen: parse(*read_hardware_source(name, presets, what), seen),
        )  # fmt: skip
        return build(data, host, table, source)

    text, source = read_hardware_source(str(name_or_path), presets, what)
    return parse(text, source, ())


def description_builder(
    make: Callable[..., T], device: str, spec: Callable[[dict[str, Any], str], Any]
) -> Build[T]:
    """The ``build`` of :func:`load_description` for a description class ``make`` whose
    ``device`` field holds ``spec(table, source)``."""

    def build(data: dict[str, Any], host: HostSpec, table: dict[str, Any], source: str) -> T:
        return make(
            name=str(data.get("name") or Path(source).stem),
            description=str(data.get("description", "")),
            host=host,
            source=source,
            **{device: spec(table, source)},
        )

    return build


def check_file_value(
    value: Any, key: str, integral: bool, where: str, shown: Any = None, allow_zero: bool = False
) -> None:
    """A positive finite number (or zero, with ``allow_zero``), whole where required;
    ``key`` as in the file (``cim.x``).

    ``shown`` is the value in file units for the message when ``value`` is not.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlacementError(f"{where}: '{key}' must be a number, got {value!r}")
    shown = value if shown is None else shown
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        what = "non-negative" if allow_zero else "positive"
        raise PlacementError(f"{where}: '{key}' must be {what}, got {shown!r}")
    if integral and value != int(value):
        raise PlacementError(f"{where}: '{key}' must be a whole number, got {shown!r}")


def spec_fields(
    table: dict[str, Any],
    keys: dict[str, tuple[str, float, bool]],
    source: str,
    device: str,
    optional: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """Dataclass fields in SI units from a ``[device]`` table in file units.

    ``keys``: file key -> (field, factor to SI, must be a whole number). Unknown keys and
    missing ones (other than ``optional``) are refused, every value checked.
    """
    reject_unknown_keys(table, set(keys), source, f"{device}.")
    fields: dict[str, Any] = {}
    for key, (field, scale, integral) in keys.items():
        if key not in table:
            if key in optional:
                continue
            raise PlacementError(f"{source}: missing key '{device}.{key}'")
        value = table[key]
        check_file_value(value, f"{device}.{key}", integral, source)
        fields[field] = int(value) if integral else float(value) * scale
    return fields
