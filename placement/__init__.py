"""placement: optimal placement of ML workloads on CPU + CIM and CPU + PIM machines.

The public API, for the CPU + compute-in-memory target::

    from placement import load_graph, load_hardware, profile_host, cim
    graph = load_graph("model.onnx")
    hardware = load_hardware("x86-ryzen", crossbars=50)
    instance = cim.build_instance(graph, profile_host(graph), hardware)
    model = cim.build_model(instance, formulation="bounded")   # a Pyomo model you may extend
    placement = cim.solve(instance)                            # always verified

and the same shape for processing-in-memory loop nests::

    from placement import load_hardware, pim
    profile = pim.profile("model.onnx")                        # lowered with torch-mlir, timed
    instance = pim.build_instance(profile, load_hardware("pim-icelake", cores=64))
    model = pim.build_model(instance, copy="exact")
    placement = pim.solve(instance)

Every user error is a :class:`~placement.errors.PlacementError` with a one-line message.
Names load on first use (PEP 562), so ``import placement`` is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["PlacementError", "cim", "load_graph", "load_hardware", "pim", "profile_host"]

# public name -> (module, attribute; None for the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "PlacementError": ("placement.errors", "PlacementError"),
    "load_graph": ("placement.graph", "load_graph"),
    "load_hardware": ("placement.hardware.loading", "load_hardware"),
    "profile_host": ("placement.profiling.ort.measure", "profile_host"),
    "cim": ("placement.cim", None),
    "pim": ("placement.pim", None),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'placement' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
