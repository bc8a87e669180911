"""Where the host latencies come from, and whether that is the host the hardware describes.

``T_host,v`` is either measured (an ONNX Runtime profile, whose metadata names the
machine and CPU it ran on) or modelled (hardware whose ``[host]`` table sets
``latency = "model"``: :mod:`placement.devices.host`, an estimate). A profile measured
on one kind of CPU used with hardware that describes another (x86 latencies with the
``arm-a72`` preset) silently gives the wrong host: the speed-ups are then those of the
measuring machine, and host-dependent conclusions can come out reversed.

:func:`host_latency_source` is the one place that decides this (architectures are
compared by family, x86 vs ARM, :func:`arch_family`). Every command and document uses
it: ``solve`` and ``export`` (a warning), ``sweep`` (a warning per model and hardware,
the rows' ``host_latencies``/``host_mismatch`` columns, the ``host`` section of each
schedule document), ``bench`` (a warning per network and hardware, row columns),
``report`` (a table, a warning) and the figures' captions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from placement.errors import PlacementError
from placement.hardware.base import (
    HOST_LATENCY_SOURCES,
    HostSpec,
    host_spec_from_table,
    preset_names,
)

#: The host model's name, as documents and captions give it.
HOST_MODEL_NAME = "roofline host model (placement.devices.host)"


def arch_family(arch: str) -> str:
    """``"arm"`` or ``"x86"`` for the usual spellings (aarch64, arm64, armv7l; x86_64,
    amd64, i686), else the architecture itself, lower-cased."""
    arch = arch.strip().lower()
    if arch.startswith(("arm", "aarch")):
        return "arm"
    if arch in ("x86_64", "amd64", "x64", "x86", "i386", "i486", "i586", "i686"):
        return "x86"
    return arch


def cpu_model_key(name: str) -> str:
    """A CPU's model name reduced for comparison: lower case, without trademarks, notes in
    parentheses, the clock, core counts and the words CPU and Processor ("AMD Ryzen 9 3900X
    12-Core Processor" and the preset's "AMD Ryzen 9 3900X (1 core)" are one model; "AMD
    EPYC" is another)."""
    text = re.sub(r"\([^)]*\)", " ", name.lower())
    text = re.sub(r"@.*$", " ", text)
    text = re.sub(r"\b\d+-core\b|\bprocessor\b|\bcpu\b", " ", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class HostLatencySource:
    """Where one instance's host latencies come from, against the hardware's host."""

    hardware: str  # the hardware's name
    host: HostSpec  # the hardware's host
    measured_machine: str | None = None  # profile metadata "machine" (None: model, unknown)
    measured_cpu: str | None = None  # profile metadata "cpu"

    @property
    def latencies(self) -> str:
        """``"measured"`` or ``"model"``."""
        return self.host.latency

    @property
    def estimate(self) -> bool:
        """True when the latencies are the host model's estimate, not a measurement."""
        return self.host.modelled

    @property
    def mismatch(self) -> bool:
        """True when the profile was measured on another architecture family than the
        hardware's host (never for modelled latencies)."""
        return (
            not self.estimate
            and bool(self.measured_machine)
            and arch_family(str(self.measured_machine)) != arch_family(self.host.arch)
        )

    @property
    def same_cpu(self) -> bool | None:
        """Whether the profile's CPU is the model the hardware's host names (compared by
        :func:`cpu_model_key`); None when unknown (modelled, or no CPU recorded)."""
        if self.estimate or not self.measured_cpu:
            return None
        return cpu_model_key(self.measured_cpu) == cpu_model_key(self.host.name)

    @property
    def detail(self) -> str:
        """Where the latencies come from, e.g. "measured on x86_64 (Intel Xeon)",
        "modelled for ARM Cortex-A72 (estimate)", "measured on x86_64 but the hardware
        describes aarch64: mismatch" (the ``host_latencies`` column of sweeps)."""
        if self.estimate:
            return f"modelled for {self.host.name} (estimate)"
        if not self.measured_machine:
            return "measured (machine unknown)"
        if self.mismatch:
            return (
                f"measured on {self.measured_machine} but the hardware describes"
                f" {self.host.arch}: mismatch"
            )
        cpu = f" ({self.measured_cpu})" if self.measured_cpu else ""
        return f"measured on {self.measured_machine}{cpu}"

    @property
    def label(self) -> str:
        """:attr:`detail` as a caption: "host latencies measured on ..."."""
        return f"host latencies {self.detail}"

    @property
    def warning(self) -> str | None:
        """The mismatch as one sentence (without the ``placement: warning:`` prefix)."""
        if not self.mismatch:
            return None
        alternative = f"{self.hardware}-model"
        fix = (
            f"use preset {alternative}" if alternative in preset_names()
            else 'set host.latency = "model"'
        )  # fmt: skip
        return (
            f"host latencies were measured on {self.measured_machine}, but hardware"
            f" '{self.hardware}' describes another host: {self.host.name}, {self.host.arch};"
            " speed-ups are then the measuring machine's (profile on that host, or"
            f" {fix} for modelled latencies, an estimate)"
        )

    def to_json(self) -> dict[str, Any]:
        """The ``host`` section of result documents."""
        measured = not self.estimate
        return {
            "latencies": self.latencies,
            "estimate": self.estimate,
            "measured_on": (
                {"machine": self.measured_machine, "cpu": self.measured_cpu} if measured else None
            ),
            "model": None if measured else HOST_MODEL_NAME,
            "hardware": self.hardware,
            "hardware_host": {"name": self.host.name, "arch": self.host.arch},
            "measured_arch": self.measured_machine if measured else None,
            "hardware_arch": self.host.arch,
            "mismatch": self.mismatch,
            "label": self.label,
        }


def host_latency_source(
    hardware: str, host: HostSpec, profile_metadata: Mapping[str, Any] | None = None
) -> HostLatencySource:
    """Where the latencies of an instance on ``host`` (of hardware ``hardware``) come from;
    ``profile_metadata``: the host profile's metadata (unused with modelled latencies)."""
    meta = profile_metadata or {}
    machine = meta.get("machine") if not host.modelled else None
    cpu = meta.get("cpu") if not host.modelled else None
    return HostLatencySource(
        hardware, host, str(machine) if machine else None, str(cpu) if cpu else None
    )


def host_from_json(doc: Any) -> HostSpec | None:
    """The host of a hardware document's ``host`` table (a result, a sweep manifest), or
    None when it is not one; older documents without ``latency`` read as measured."""
    if not isinstance(doc, Mapping):
        return None
    try:
        return host_spec_from_table(dict(doc), "hardware document")
    except PlacementError:
        name, arch = doc.get("name"), doc.get("arch")
        if not isinstance(name, str) or not isinstance(arch, str):
            return None
        latency = doc.get("latency")
        return HostSpec(name, arch, latency if latency in HOST_LATENCY_SOURCES else "measured")
