"""``placement presets``: the hardware presets shipped with the package."""

from __future__ import annotations

import argparse

from placement.cli.common import Command

COMMAND = Command("presets", help="list the hardware presets")


def add_arguments(presets: argparse.ArgumentParser) -> None:
    """``placement presets`` has no options."""


def run(args: argparse.Namespace) -> int:
    from placement.hardware.base import default_preset_for, preset_names
    from placement.hardware.cim import load_hardware

    default = default_preset_for()
    for name in preset_names():
        hw = load_hardware(name)
        mark = "  (default on this machine)" if name == default else ""
        print(f"{name}{mark}\n    {hw.description}\n    {hw.describe()}")
    return 0
