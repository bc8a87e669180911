"""The loops and body segments of every nest of a lowered program (basic-block granularity).

They are a property of the lowering, not of a measurement, so nest profiles do not
store them: a saved profile is matched with a fresh lowering of its model
(:func:`placement.profiling.nest_measure.profile_loops`).
"""

from __future__ import annotations

from typing import Any

from placement.blocks import Loop
from placement.errors import PlacementError
from placement.profiling.mlir.extract import DynamicBounds, control_trees
from placement.profiling.mlir.lower import find_func, new_context


def nest_loops(program: Any) -> dict[str, Loop]:
    """Per nest of a lowered program (as lowered, not optimized), its loops and segments."""
    from torch_mlir import ir  # loaded with the lowering, never by importing this module

    with new_context():
        module = ir.Module.parse(program.module_text)
        try:
            trees = control_trees(find_func(module, program.func_name))
        except DynamicBounds:
            raise PlacementError(
                f"{program.source}: a loop nest has non-constant bounds; its basic blocks"
                " cannot be counted"
            ) from None
    if len(trees) != len(program.nests):
        raise PlacementError(
            f"internal error: {len(trees)} loop nests in the lowered program, {len(program.nests)}"
            " extracted"
        )
    return {n.id: tree for n, tree in zip(program.nests, trees, strict=True)}
