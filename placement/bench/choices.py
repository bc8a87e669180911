"""What ``placement bench`` accepts: its grids, formulations and solver modes.

Plain names only, without importing a solver, Pyomo or ONNX Runtime: the command
line's parser reads them, and ``placement --help`` should not load those."""

from __future__ import annotations

from placement.solvers import names
from placement.solvers.names import MIP_BACKENDS

PAPER_CROSSBARS: tuple[int, ...] = (25, 50, 100, 200)
PAPER_T_MVM_NS: tuple[float, ...] = (50.0, 100.0, 500.0, 1000.0)
GRIDS: dict[str, tuple[tuple[int | None, float | None], ...]] = {
    "paper": tuple((c, t) for c in PAPER_CROSSBARS for t in PAPER_T_MVM_NS),
    "single": ((None, None),),  # the preset's own crossbars and MVM latency
}
FORMULATION_NAMES = (*names.FORMULATION_NAMES, "auto")
MIP_MODES = MIP_BACKENDS
CP_MODES = ("cpsat", "cpsat+highs")
PRODUCT_MODE = "auto"  # placement solve's defaults: formulation, solver and method auto
MODES = (*MIP_MODES, *CP_MODES, PRODUCT_MODE)
