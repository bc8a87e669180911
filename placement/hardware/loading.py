"""One entry point for either machine: ``load_hardware(name_or_file, **overrides)``.

A preset named ``pim-*``, or a TOML file with a ``[pim]`` table or a ``pim-*`` base,
describes a CPU + PIM machine (:mod:`placement.hardware.pim`); anything else a CPU + CIM machine
(:mod:`placement.hardware.cim`). Overrides are given in file units (``crossbars=50``,
``t_mvm_ns=100``; ``cores=64``, ``t_sw_us=1``) and validated like the file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from placement.hardware.base import PIM_PRESET_PREFIX
from placement.hardware.cim import Hardware, with_overrides
from placement.hardware.cim import load_hardware as load_cim_hardware
from placement.hardware.pim import PimHardware, load_pim_hardware, with_pim_overrides

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_hardware(name_or_path: str | Path, **overrides: float | int) -> Hardware | PimHardware:
    """The machine of a preset or TOML file, with ``overrides`` (file units) applied."""
    if _is_pim(str(name_or_path)):
        return with_pim_overrides(load_pim_hardware(name_or_path), **overrides)
    return with_overrides(load_cim_hardware(name_or_path), **overrides)


def _is_pim(name_or_path: str) -> bool:
    if name_or_path.startswith(PIM_PRESET_PREFIX):
        return True
    path = Path(name_or_path)
    if path.suffix.lower() != ".toml" or not path.is_file():
        return False  # a preset name, or a missing file: the CIM loader says what is wrong
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # the CIM loader reports the unreadable file
    return "pim" in data or str(data.get("base", "")).startswith(PIM_PRESET_PREFIX)
