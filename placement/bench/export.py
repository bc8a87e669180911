"""Write a Pyomo model as an MPS or LP file, to take an instance to any other solver.

Names are symbolic (``host[conv1]``, ``order_uv[a,b]``; Pyomo replaces characters the
format does not allow), so a solution read back can be matched to operators. The CIM
model's times are in its own unit: multiply the file's objective by
``value(model.time_unit)`` for seconds (``placement export`` prints that unit and writes
it, with the instance's meaning, into a ``<file>.json`` sidecar).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyomo.environ as pyo

from placement.errors import PlacementError

FORMATS = {".mps": "mps", ".lp": "lp"}


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
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        model.write(str(tmp), format=fmt, io_options={"symbolic_solver_labels": True})
        os.replace(tmp, path)
    except OSError as exc:
        raise PlacementError(f"{path}: cannot write model ({exc.strerror or exc})") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
