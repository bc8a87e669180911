"""Nest markers in the MLIR program: ``enter(k)``/``exit(k)`` calls around each loop nest.

The timing run (:mod:`placement.profiling.nest_timing`) and the cache simulation
(:mod:`placement.profiling.simulated`) both mark the program the same way
(:func:`mark_program`): the calls go around the loops :func:`insert_nest_markers`
picks (the outermost ``scf.parallel`` of each nest, or, in an optimized program, the
outermost loop of any kind carrying the nest's tag), and the program's function gets a
C interface the JIT or a C driver can call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from placement.errors import PlacementError
from placement.profiling.mlir.extract import outermost_parallels, sole_loops
from placement.profiling.mlir.lower import find_func

if TYPE_CHECKING:
    from placement.profiling.mlir.lower import LoweredProgram


def mark_program(
    module: Any, program: LoweredProgram, enter: str, exit: str, *, entry: str | None = None
) -> None:
    """Mark every nest of ``program`` in ``module`` (its parsed ``module_text``) with calls to
    ``enter``/``exit``, where the timing run marks them (``program.markers_at``), and give
    the program's function a C interface (``llvm.emit_c_interface``), renamed ``entry``
    when given (a driver's own names cannot then clash with the program's)."""
    from torch_mlir import ir

    tags = program.nest_tags if program.markers_at == "tagged-loop" else None
    marked = insert_nest_markers(module, program.func_name, enter, exit, tags=tags)
    if marked != len(program.nests):
        raise PlacementError(
            f"internal error: {marked} nests marked, the program lists {len(program.nests)}"
        )
    function = find_func(module, program.func_name)
    with module.context:
        function.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        if entry is not None:
            function.attributes["sym_name"] = ir.StringAttr.get(entry)


def insert_nest_markers(
    module: Any, func_name: str, enter: str = "placement_nest_enter",
    exit: str = "placement_nest_exit", *, tags: Sequence[int | None] | None = None,
) -> int:  # fmt: skip
    """Wrap each nest of ``func_name`` in ``enter(i)``/``exit(i)`` calls; returns the count.

    ``i`` (i64) is the nest index, in the same program order as ``LoweredProgram.nests``.
    Without ``tags``, every outermost scf.parallel is a nest (the unoptimized module, as
    extracted). With ``tags`` (``LoweredProgram.nest_tags``), nest ``i`` is the outermost
    loop *of any kind* (scf.parallel or scf.for) whose location carries linalg tag
    ``tags[i]``: after an optimization (optimize.py) a nest's outermost loop may be an
    scf.for -- e.g. a GEMV after the (i, k, j) interchange, once canonicalize has dropped
    the unit ``i`` loop -- and marking its inner scf.parallel would time it once per ``k``.
    Every tag must name exactly one such loop (else a PlacementError: the optimized
    program no longer maps onto the nests). An optimized module records its nest tags in
    its ``placement.nest_tags`` attribute, which is used when ``tags`` is not given: any
    caller marking ``LoweredProgram.module_text`` marks the right loops.

    The callees are declared private with ``llvm.emit_c_interface`` so a JIT can resolve
    them through ``_mlir_ciface_<name>``.
    """
    from torch_mlir import ir
    from torch_mlir.dialects import arith, func

    with module.context, ir.Location.unknown():
        body = module.body
        i64 = ir.IntegerType.get_signless(64)
        first = body.operations[0] if len(body.operations) else None
        ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(body)
        for name in (enter, exit):
            decl = func.FuncOp(name, ([i64], []), visibility="private", ip=ip)
            decl.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
        target = find_func(module, func_name)
        if tags is None:
            tags = module_nest_tags(module)
        if tags is None:
            ops = [op for op, _trips in outermost_parallels(target)]
        else:
            ops = _loops_of_tags(target, tags, func_name)
        for count, op in enumerate(ops):
            with ir.InsertionPoint(op):
                index = arith.ConstantOp(i64, count).result
                func.CallOp([], ir.FlatSymbolRefAttr.get(enter), [index])
                call_exit = func.CallOp([], ir.FlatSymbolRefAttr.get(exit), [index])
            call_exit.operation.move_after(op)
    return len(ops)


def nest_loop_ops(module: Any, program: LoweredProgram) -> list[Any]:
    """The loop each nest of ``program`` is marked around in ``module`` (its parsed
    ``module_text``), in nest order: what :func:`mark_program` wraps."""
    function = find_func(module, program.func_name)
    tags = program.nest_tags if program.markers_at == "tagged-loop" else module_nest_tags(module)
    if tags is None:
        return [op for op, _trips in outermost_parallels(function)]
    return _loops_of_tags(function, tags, program.func_name)


NEST_TAGS_ATTR = "placement.nest_tags"


def set_module_nest_tags(module: Any, tags: Sequence[int | None]) -> None:
    """Record ``tags`` (-1 for a nest without a tag) on the module (see insert_nest_markers)."""
    from torch_mlir import ir

    with module.context:
        i64 = ir.IntegerType.get_signless(64)
        values = [ir.IntegerAttr.get(i64, -1 if t is None else t) for t in tags]
        module.operation.attributes[NEST_TAGS_ATTR] = ir.ArrayAttr.get(values)


def module_nest_tags(module: Any) -> list[int | None] | None:
    """The tags :func:`set_module_nest_tags` recorded, or None for an unoptimized module."""
    from torch_mlir import ir

    attrs = module.operation.attributes
    if NEST_TAGS_ATTR not in attrs:
        return None
    values = [ir.IntegerAttr(a).value for a in ir.ArrayAttr(attrs[NEST_TAGS_ATTR])]
    return [None if v < 0 else v for v in values]


def _loops_of_tags(func_op: Any, tags: Sequence[int | None], func_name: str) -> list[Any]:
    return sole_loops(func_op, tags, lambda index, what: (
        f"internal error: nest n{index:03d} (linalg op #{tags[index]}) maps to {what} in the"
        f" optimized @{func_name}; time this model with --host-times jit"))
