"""``placement presets``: the hardware presets shipped with the package (CPU + CIM machines
for ``--hardware``, then CPU + PIM machines for ``--target pim --pim-hardware``)."""

from __future__ import annotations

import argparse

from placement.cli.common import Command

COMMAND = Command("presets", help="list the hardware presets")


def add_arguments(presets: argparse.ArgumentParser) -> None:
    """``placement presets`` has no options."""


def run(args: argparse.Namespace) -> int:
    from placement.hardware.base import default_preset_for, preset_names
    from placement.hardware.cim import load_hardware
    from placement.hardware.pim import DEFAULT_PIM_PRESET, load_pim_hardware, pim_preset_names

    default = default_preset_for()
    for name in preset_names():
        hw = load_hardware(name)
        mark = "  (default on this machine)" if name == default else ""
        print(f"{name}{mark}\n    {hw.description}\n    {hw.describe()}")
    for name in pim_preset_names():
        pim = load_pim_hardware(name)
        mark = ", the default" if name == DEFAULT_PIM_PRESET else ""
        print(f"{name}  (--target pim{mark})\n    {pim.description}\n    {pim.describe()}")
    return 0
