"""What a sweep covers: the swept keys and their values, checked, as a :class:`Grid`.

The keys a target may sweep, and which are whole numbers, come from its adapter
(:mod:`placement.sweep.targets`); this module parses and checks the values
(``--set KEY=V1,V2,...`` and the convenience flags) and expands the cartesian product.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from placement.errors import PlacementError, repeated
from placement.sweep.targets import TARGETS, Number, get_target


def known_keys(target: str) -> list[str]:
    """The keys a grid may sweep for ``target``, in file units."""
    return get_target(target).keys()


def check_key(target: str, key: str) -> str:
    """``key`` when ``target`` may sweep it; else a one-line PlacementError naming the known."""
    keys = known_keys(target)
    if key not in keys:
        raise PlacementError(
            f"unknown {target.upper()} spec field {key!r} in the grid (known: {', '.join(keys)})"
        )
    return key


def parse_values(target: str, key: str, text: str) -> tuple[Number, ...]:
    """'25,50,100' -> (25, 50, 100) for ``key``: positive numbers, whole where the key is.

    A value given twice is an error naming it: it would be the same point twice, and
    dropping it silently would leave a grid other than the one asked for.
    """
    check_key(target, key)
    integral = get_target(target).is_integral(key)
    kind = "positive whole numbers" if integral else "positive numbers"
    if not isinstance(text, str) or not text.strip():
        raise PlacementError(f"grid value for {key!r} is empty: expected comma-separated {kind}")
    out: list[Number] = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not part or not math.isfinite(value) or value <= 0:
            raise PlacementError(
                f"grid value {part!r} for {key!r} in {text!r}: expected comma-separated {kind}"
            )
        if integral:
            if value != int(value):
                raise PlacementError(
                    f"grid value {part!r} for {key!r}: must be a whole number (in {text!r})"
                )
            value = int(value)
        out.append(value)
    twice = repeated(out)
    if twice:
        raise PlacementError(
            f"grid value {', '.join(f'{v:g}' for v in twice)} for {key!r} is given twice in"
            f" {text!r}: give each value once"
        )
    return tuple(out)


def parse_setting(target: str, text: str) -> tuple[str, tuple[Number, ...]]:
    """``KEY=V1,V2,...`` (the ``--set`` syntax)."""
    key, sep, values = str(text).partition("=")
    if not sep or not key.strip():
        raise PlacementError(f"--set {text!r}: expected KEY=V1,V2,... (e.g. crossbars=25,50)")
    key = key.strip().replace("-", "_")
    return key, parse_values(target, key, values)


@dataclass(frozen=True)
class Grid:
    """What to sweep: hardware descriptions x values of each key (keys in the order given)."""

    target: str
    hardware: tuple[str, ...]  # preset names or TOML files, as given
    parameters: tuple[tuple[str, tuple[Number, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise PlacementError(f"unknown target {self.target!r}")
        if not self.hardware:
            raise PlacementError("the grid has no hardware")
        keys = [k for k, _ in self.parameters]
        for key, values in self.parameters:
            check_key(self.target, key)
            if not values:
                raise PlacementError(f"grid value for {key!r} is empty")
            if keys.count(key) > 1:
                raise PlacementError(f"{key!r} is swept twice; give its values once")
        get_target(self.target).check_keys(keys)

    @property
    def keys(self) -> list[str]:
        """The swept keys, in the order given."""
        return [k for k, _ in self.parameters]

    def combinations(self) -> list[dict[str, Number]]:
        """Every combination of the swept values (one empty dict when nothing is swept)."""
        return [
            dict(zip(self.keys, combo, strict=True))
            for combo in itertools.product(*(values for _, values in self.parameters))
        ]

    @property
    def size_per_model(self) -> int:
        """The number of points per model."""
        return len(self.hardware) * math.prod(len(v) for _, v in self.parameters)

    def to_json(self) -> dict[str, Any]:
        """The grid as recorded in the manifest."""
        return {
            "hardware": list(self.hardware),
            "parameters": {k: list(v) for k, v in self.parameters},
        }


def build_grid(target: str, hardware: Sequence[str], settings: Sequence[tuple[str, str]]) -> Grid:
    """A grid from ``(key, 'v1,v2,...')`` pairs (``--set`` and the convenience flags)."""
    params = []
    for key, text in settings:
        key = key.strip().replace("-", "_")
        params.append((key, parse_values(target, key, text)))
    return Grid(target, tuple(hardware), tuple(params))


def load_grid_hardware(grid: Grid) -> list[Any]:
    """The :class:`~placement.hardware.cim.Hardware` /
    :class:`~placement.hardware.pim.PimHardware` of each grid entry; names must differ."""
    target = get_target(grid.target)
    out = [target.load_hardware(h) for h in grid.hardware]
    names = [h.name for h in out]
    for name in names:
        if names.count(name) > 1:
            raise PlacementError(
                f"two hardware descriptions are named {name!r}: give each a distinct 'name'"
            )
    return out
