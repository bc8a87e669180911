"""Measured or simulated PIM times per nest (``--pim-times FILE``), replacing the analytical
T_pim of :mod:`placement.devices.pim` for the nests the file names.

A user with a PIM simulator (the paper's PIMProf/Sniper, Section 5.1) or a real PIM system
gives, per loop nest and PIM core count, the nest's PIM execution time in seconds over all
its invocations (its trip count, like ``T_cpu``): compute, memory and synchronization on the
PIM side, without the operand copies (Eq. 8) and the host/PIM switches (``N_region * T_sw``),
which Eq. 9 adds as for the analytical model.

Formats (nest ids as ``placement nests MODEL`` lists them):

* CSV: a header with ``nest_id``, ``cores`` and ``t_pim_s`` (any order, case-insensitive;
  other columns are ignored), one row per nest and core count::

      nest_id,cores,t_pim_s
      n005,32,1.25e-05
      n005,64,7.1e-06

* JSON: ``{"n005": {"32": 1.25e-05, "64": 7.1e-06}, ...}``, or wrapped with a free-text
  description of where the times come from, shown beside every result, and optionally
  the memory architecture of the device they were measured or simulated on (``shared``
  or ``partitioned``; a file for another architecture than the hardware's is refused):
  ``{"source": "PIMProf/Sniper, 1 GHz in-order cores", "memory": "shared",
  "pim_times": {...}}``.

Rules: every time is a finite number >= 0; core counts are positive whole numbers; a nest
and core count appear once. A nest the file names must have a time for every core count
solved (``--pim-cores``), else the run stops before anything is measured. Nests the file
does not name keep the analytical model; the report says which nests came from where
(``#`` after the nest id in the table, ``t_pim_source`` per nest in the JSON). Rule C1 keeps
the analytical lower bound ``T_pim_min``: the rule decides from host-side information only,
as the paper's does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placement.errors import PlacementError
from placement.hardware.pim import MEMORY_ARCHITECTURES
from placement.io import (
    check_known_nests,
    csv_records,
    nonnegative_value,
    parse_json,
    read_table_file,
)

KIND = "PIM times"
TIME = "a time in seconds"
FILE_SOURCE = "file"  # a nest's T_pim from the file
MODEL_SOURCE = "analytical model"  # ... from placement.devices.pim


@dataclass(frozen=True)
class PimTimes:
    """PIM times per nest and core count, loaded from ``path``; ``source`` is the file's own
    description of where they come from (JSON ``"source"``), None when it gives none."""

    path: str
    times: Mapping[str, Mapping[int, float]]
    source: str | None = None
    memory: str | None = None  # the device's memory architecture, when the file says

    def check_memory(self, memory: str | None) -> None:
        """The file's times are for a device of the hardware's memory architecture."""
        if self.memory is not None and memory is not None and self.memory != memory:
            raise PlacementError(
                f"{self.path}: its PIM times are for a {self.memory}-memory device, the PIM"
                f" hardware is {memory}: use times of this device, or hardware of theirs"
            )

    @property
    def label(self) -> str:
        """``FILE (measured or simulated: <source>)`` for reports."""
        what = "measured or simulated" + (f": {self.source}" if self.source else "")
        return f"{self.path} ({what})"

    def check_cores(self, cores: Iterable[int]) -> None:
        """Every nest of the file has a time for every core count in ``cores``."""
        for nid, by_cores in self.times.items():
            missing = [c for c in cores if c not in by_cores]
            if missing:
                given = ", ".join(map(str, sorted(by_cores)))
                raise PlacementError(
                    f"{self.path}: nest {nid!r} has no T_pim for N_core"
                    f" {', '.join(map(str, missing))} (the file gives {given}); add those"
                    " rows or solve only for the core counts the file has (--pim-cores)"
                )

    def check_nests(self, nest_ids: Iterable[str]) -> None:
        """Every nest of the file is a nest of the model."""
        check_known_nests(self.times, list(nest_ids), Path(self.path))

    def check(
        self, memory: str | None, cores: Iterable[int], nest_ids: Iterable[str] | None = None
    ) -> None:
        """The file fits what it is used with: the model's nests (when known: a run checks
        them once the model is lowered or its profile loaded), every core count solved,
        the hardware's memory architecture."""
        if nest_ids is not None:
            self.check_nests(nest_ids)
        self.check_cores(cores)
        self.check_memory(memory)

    def at(self, cores: int) -> dict[str, float]:
        """Nest id -> T_pim on ``cores`` cores, for the nests the file names."""
        self.check_cores([cores])
        return {nid: by_cores[cores] for nid, by_cores in self.times.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "source": self.source,
            "memory": self.memory,
            "times": {
                nid: {str(c): t for c, t in sorted(by.items())} for nid, by in self.times.items()
            },
        }


def load_pim_times(path: str | Path) -> PimTimes:
    """The PIM times of a CSV or JSON file (module docstring); one line naming the file and
    the line or nest for any fault. Nest ids are checked against a model later
    (:meth:`PimTimes.check_nests`)."""
    path = Path(path)
    text, is_json = read_table_file(path, KIND)
    times, source, memory = (
        _parse_json(text, path) if is_json else (_parse_csv(text, path), None, None)
    )
    if not times:
        raise PlacementError(f"{path}: no PIM times in the file")
    return PimTimes(str(path), times, source, memory)


def _parse_csv(text: str, path: Path) -> dict[str, dict[int, float]]:
    table: dict[str, dict[int, float]] = {}
    for line_no, row in csv_records(text, path, KIND, ("nest_id", "cores", "t_pim_s")):
        where = f"{path}: line {line_no}"
        nid = row["nest_id"].strip()
        if not nid:
            raise PlacementError(f"{where}: empty nest_id")
        cores = _cores(row["cores"], f"{where}, nest {nid!r}")
        by_cores = table.setdefault(nid, {})
        if cores in by_cores:
            raise PlacementError(f"{where}: nest {nid!r} at {cores} cores appears twice")
        by_cores[cores] = nonnegative_value(
            row["t_pim_s"], f"{where}, nest {nid!r}, {cores} cores, column t_pim_s", TIME
        )
    return table


def _parse_json(
    text: str, path: Path
) -> tuple[dict[str, dict[int, float]], str | None, str | None]:
    data = parse_json(text, path, "PIM times file", "time")
    expected = f"{path}: expected an object of nest id -> {{core count: seconds}}"
    if not isinstance(data, dict):
        raise PlacementError(expected)
    source = memory = None
    if "pim_times" in data:
        unknown = sorted(set(data) - {"pim_times", "source", "memory"})
        if unknown:
            raise PlacementError(
                f"{path}: unknown key {unknown[0]!r} (allowed beside 'pim_times': 'source',"
                " 'memory')"
            )
        source = data.get("source")
        if source is not None and not isinstance(source, str):
            raise PlacementError(f"{path}: 'source' must be a string, got {source!r}")
        memory = data.get("memory")
        if memory is not None and memory not in MEMORY_ARCHITECTURES:
            raise PlacementError(
                f"{path}: 'memory' must be one of {', '.join(MEMORY_ARCHITECTURES)}, got"
                f" {memory!r}"
            )
        data = data["pim_times"]
        if not isinstance(data, dict):
            raise PlacementError(expected)
    table: dict[str, dict[int, float]] = {}
    for nid, by_cores in data.items():
        if not isinstance(by_cores, dict):
            raise PlacementError(
                f"{path}: nest {nid!r}: expected an object of core count -> seconds,"
                f" got {by_cores!r}"
            )
        if not by_cores:
            raise PlacementError(f"{path}: nest {nid!r}: no core counts")
        table[nid] = {}
        for key, value in by_cores.items():
            cores = _cores(key, f"{path}: nest {nid!r}")
            if cores in table[nid]:
                raise PlacementError(f"{path}: nest {nid!r} at {cores} cores appears twice")
            where = f"{path}: nest {nid!r}, {cores} cores"
            table[nid][cores] = nonnegative_value(value, where, TIME)
    return table, source, memory


def _cores(text: Any, where: str) -> int:
    raw = str(text).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise PlacementError(f"{where}: cores must be a positive whole number, got {raw!r}")
    return int(raw)

