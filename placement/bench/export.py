"""Write a Pyomo model as an MPS or LP file, to take an instance to any other solver.

Names are symbolic (``host[conv1]``, ``order_uv[a,b]``; Pyomo replaces characters the
format does not allow), so a solution read back can be matched to operators. The CIM
model's times are in its own unit: multiply the file's objective by
``value(model.time_unit)`` for seconds (``placement export`` prints that unit and writes
it, with the instance's meaning, into a ``<file>.json`` sidecar).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyomo.environ as pyo
from pyomo.opt import ProblemFormat

from placement.cim.instance import CimInstance
from placement.cim.pipeline import build_model, resolve_formulation
from placement.errors import PlacementError
from placement.io import replacing, write_json_atomic
from placement.solvers.base import ModelSize
from placement.solvers.contrib import model_size

FORMATS = {".mps": ProblemFormat.mps, ".lp": ProblemFormat.cpxlp}


def write_model(model: pyo.Block, path: str | Path) -> Path:
    """Write ``model`` to ``path``; the format follows the suffix (.mps or .lp).

    Written to a temporary name and renamed, so a failure leaves no half file.
    """
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise PlacementError(
            f"{path}: unknown model format {path.suffix!r}; use .mps or .lp"
        )
    if path.parent and not path.parent.exists():
        raise PlacementError(f"{path}: directory {path.parent} does not exist")
    try:
        with replacing(path, suffix=path.suffix) as tmp:
            # The format as Pyomo names it: the string "lp" would make it warn that the
            # file name does not match "its" format (cpxlp).
            model.write(str(tmp), format=fmt, io_options={"symbolic_solver_labels": True})
    except OSError as exc:
        raise PlacementError(f"{path}: cannot write model ({exc.strerror or exc})") from None
    return path


@dataclass
class ExportedModel:
    path: Path
    sidecar: Path  # ``<file>.json``: what the file's variables and units mean
    formulation: str  # the one written ("auto" resolved)
    time_unit: float  # seconds per model time unit
    size: ModelSize


def export_model(
    instance: CimInstance,
    formulation: str,
    path: str | Path,
    *,
    model_path: str,
    hardware: dict[str, Any],
    host: dict[str, Any] | None = None,
) -> ExportedModel:
    """The CIM ILP of ``instance`` (``formulation`` as for ``placement solve``; the sidecar
    names the one "auto" stood for) written to
    ``path`` (.mps or .lp), with the ``<file>.json`` sidecar that says what it means;
    ``host``: where the host latencies came from (``HostLatencySource.to_json()``)."""
    path = Path(path)
    formulation = resolve_formulation(instance, formulation)
    model = build_model(instance, formulation)
    write_model(model, path)
    unit = pyo.value(model.time_unit)
    size = model_size(model)
    sidecar = path.with_name(path.name + ".json")
    write_json_atomic(sidecar, {
        "model": model_path,
        "formulation": formulation,
        "time_unit_seconds": unit,
        "objective": "makespan T in time units (x time_unit_seconds = seconds)",
        "variables": {"host[v]": "1 = operator v on the host CPU, 0 = on CIM",
                      "start[v]": "start time", "finish[v]": "finish time",
                      "transfer[u,v]": "1 = u and v on different devices",
                      "order[u,v]": "1 = u before v on the host (parallel pairs)"},
        "hardware": hardware,
        **({"host": host} if host is not None else {}),
        "size": {"variables": size.variables, "binaries": size.binaries,
                 "constraints": size.constraints},
        "operators": len(instance.operators),
        "parallel_pairs": len(instance.parallel_pairs),
    }, "the model's description")
    return ExportedModel(path, sidecar, formulation, unit, size)
