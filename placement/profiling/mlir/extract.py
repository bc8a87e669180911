"""Reading the loop nests out of a lowered module (Torch-PIM, Section 4.2).

:func:`tag_linalg_ops` tags every linalg op of the bufferized function before
:mod:`placement.profiling.mlir.lower` converts it to ``scf.parallel`` loops, which
inherit the tag in their location. :func:`extract_nests` then reads the loops: trip
counts, innermost work, dynamic body op counts, and the linalg op and ONNX node each
nest comes from.

Each outermost ``scf.parallel`` of the lowered function is one :class:`~placement.nests.LoopNest`.
Its operands are the memrefs loaded/stored inside it, resolved through view ops to the
allocation (``memref.alloc``, function argument or ``memref.get_global``) they live in.
:func:`control_tree` reads a nest's loops and the straight-line segments of their bodies,
from which :mod:`placement.blocks` derives the nest's basic blocks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from placement.blocks import Loop, Segment
from placement.errors import PlacementError
from placement.nests import LoopNest, NestOperand

try:  # torch-mlir is heavy; import errors surface as a PlacementError on first use
    from torch_mlir import ir
except ImportError:  # pragma: no cover - exercised only without the wheel
    ir = None  # type: ignore[assignment]

# Metadata prefix of the fused location that tags each linalg op before it becomes loops.
_TAG = "placement.linalg"
# Ops that only re-describe a buffer: operands resolve through them to the allocation.
_VIEW_OPS = frozenset(
    {
        "memref.subview",
        "memref.expand_shape",
        "memref.collapse_shape",
        "memref.cast",
        "memref.reinterpret_cast",
        "memref.transpose",
        "memref.view",
        "memref.memory_space_cast",
        "memref.assume_alignment",
    }
)
_ELEM_BYTES = {
    "f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1,
    "i1": 1, "index": 8, "ui8": 1, "si8": 1, "ui16": 2, "si16": 2, "ui32": 4, "si32": 4,
    "ui64": 8, "si64": 8, "complex<f32>": 8, "complex<f64>": 16,
}  # fmt: skip


def tag_linalg_ops(func_op: Any) -> list[str]:
    """Give each linalg op a fused location ``fused<"placement.linalg:<i>">[loc]``.

    convert-linalg-to-parallel-loops creates the loops at the op's location, so the tag
    survives on the scf.parallel (discardable attributes would not). Returns the op names.
    """
    names: list[str] = []
    for op in walk_operations(func_op):
        if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index"):
            with op.context:
                metadata = ir.StringAttr.get(f"{_TAG}:{len(names)}")
                op.location = ir.Location.fused([op.location], metadata)
            names.append(op.name)
    return names


def walk_operations(op: Any) -> Iterator[Any]:
    """Pre-order walk of the operations nested in ``op`` (not ``op`` itself)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                yield child
                yield from walk_operations(child)


def outermost_parallels(func_op: Any) -> Iterator[tuple[Any, int | None]]:
    """Outermost scf.parallel ops in program order, with the trip count of enclosing loops.

    The trip count is None when an enclosing loop has non-constant bounds.
    """

    def visit(op: Any, trips: int | None) -> Iterator[tuple[Any, int | None]]:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name == "scf.parallel":
                        yield child, trips
                    elif child.name == "scf.for":
                        try:
                            inner = None if trips is None else trips * _for_trips(child)
                        except DynamicBounds:
                            inner = None  # reported when a nest inside is counted
                        yield from visit(child, inner)
                    else:
                        yield from visit(child, trips)

    yield from visit(func_op, 1)


#: Loop operations a nest's outermost loop can be after optimization (optimize.py).
LOOP_OPS = frozenset({"scf.parallel", "scf.for", "scf.forall", "affine.for", "affine.parallel"})


def loc_tag(loc: Any) -> int | None:
    """The linalg tag index (:func:`tag_linalg_ops`) a location carries, or None."""
    return _loc_info(loc)[0]


def outermost_loops_by_tag(func_op: Any) -> dict[int, list[Any]]:
    """Per linalg tag, the outermost loops (of any kind, :data:`LOOP_OPS`) carrying it.

    A loop carrying a tag is not searched further (its inner loops come from the same
    linalg op); untagged ops (e.g. a user's enclosing loop) are searched through.
    """
    found: dict[int, list[Any]] = {}

    def visit(op: Any) -> None:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name in LOOP_OPS:
                        tag = loc_tag(child.location)
                        if tag is not None:
                            found.setdefault(tag, []).append(child)
                            continue
                    visit(child)

    visit(func_op)
    return found


def sole_loops(
    func_op: Any, tags: Sequence[int | None], error: Callable[[int, str], str]
) -> list[Any]:
    """Per tag, the one outermost loop carrying it (:func:`outermost_loops_by_tag`); a tag
    with no loop or several raises PlacementError(``error(index, what was found)``)."""
    loops = outermost_loops_by_tag(func_op)
    out = []
    for index, tag in enumerate(tags):
        found = loops.get(tag, []) if tag is not None else []
        if len(found) != 1:
            raise PlacementError(error(index, "no loop" if not found else f"{len(found)} loops"))
        out.append(found[0])
    return out


def _constant_index(value: Any) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation if hasattr(owner, "operation") else owner
    if owner.name not in ("arith.constant",):
        return None
    attr = owner.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


class DynamicBounds(Exception):
    """A loop bound is not a constant (e.g. triangular loops): iterations cannot be counted."""


def _trip(lower: Any, upper: Any, step: Any) -> int:
    lb, ub, st = _constant_index(lower), _constant_index(upper), _constant_index(step)
    if lb is None or ub is None or st is None or st <= 0:
        raise DynamicBounds
    return max(0, -(-(ub - lb) // st))


def _for_trips(op: Any) -> int:
    operands = op.operands
    return _trip(operands[0], operands[1], operands[2])


def parallel_trips(op: Any) -> int:
    """Iterations of the scf.parallel ``op`` itself (product over its dimensions)."""
    operands = list(op.operands)
    rank = len(op.regions[0].blocks[0].arguments)
    lbs, ubs, steps = operands[:rank], operands[rank : 2 * rank], operands[2 * rank : 3 * rank]
    return math.prod(_trip(lb, ub, st) for lb, ub, st in zip(lbs, ubs, steps, strict=True))


def inner_work(op: Any) -> int:
    """Innermost iterations of one iteration of ``op``'s body (sibling loops add up)."""
    total = 0
    found = False
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if child.name == "scf.for":
                    total += _for_trips(child) * inner_work(child)
                    found = True
                elif child.name == "scf.parallel":
                    total += parallel_trips(child) * inner_work(child)
                    found = True
                elif len(child.regions):
                    inner = inner_work(child)
                    if inner > 1:
                        total += inner
                        found = True
    return total if found else 1


# Loop and index bookkeeping left out of LoopNest.body_ops (see placement.nests).
_BOOKKEEPING_OPS = frozenset(
    {
        "scf.yield",
        "scf.reduce",
        "scf.reduce.return",
        "scf.condition",
        "arith.constant",
        "arith.index_cast",
        "arith.index_castui",
        "memref.dim",
    }
)


def _is_bookkeeping(op: Any) -> bool:
    name = op.name
    if name in _BOOKKEEPING_OPS or name in _VIEW_OPS or name.startswith("affine."):
        return True
    results = list(op.results)
    return bool(results) and all(isinstance(r.type, ir.IndexType) for r in results)


def _count_ops(ops: Any, times: int, counts: dict[str, int]) -> None:
    """Add to ``counts`` the ops of ``ops`` (one block), each executed ``times`` times.

    The same recursion as :func:`inner_work`: an inner scf.for / scf.parallel
    multiplies by its trip count, sibling loops add up. Other region ops (the
    reduction region of ``scf.reduce``, ``scf.execute_region`` ...) run once per
    execution of the op holding them.
    """
    for op in ops:
        op = op.operation
        name = op.name
        if name == "scf.for":
            _count_regions(op, times * _for_trips(op), counts)
        elif name == "scf.parallel":
            _count_regions(op, times * parallel_trips(op), counts)
        elif name == "scf.if":
            # One branch runs per execution and which one is not known statically:
            # count the branch with more ops (an upper estimate), plus the branch itself.
            counts[name] = counts.get(name, 0) + times
            branches = []
            for region in op.regions:
                branch: dict[str, int] = {}
                for block in region.blocks:
                    _count_ops(block.operations, times, branch)
                branches.append(branch)
            heaviest = max(branches, key=lambda c: sum(c.values()), default={})
            for key, value in heaviest.items():
                counts[key] = counts.get(key, 0) + value
        else:
            if not _is_bookkeeping(op):
                counts[name] = counts.get(name, 0) + times
            if len(op.regions):
                _count_regions(op, times, counts)


def _count_regions(op: Any, times: int, counts: dict[str, int]) -> None:
    for region in op.regions:
        for block in region.blocks:
            _count_ops(block.operations, times, counts)


def count_body_ops(op: Any) -> dict[str, int]:
    """Dynamic op counts of one invocation of the outermost scf.parallel ``op``."""
    counts: dict[str, int] = {}
    _count_regions(op, parallel_trips(op), counts)
    return dict(sorted(counts.items()))


# Terminators of scf bodies: convert-scf-to-cf replaces them by the branches that
# placement.blocks counts.
_BODY_TERMINATORS = frozenset({"scf.yield", "scf.reduce.return"})
_NOT_ACCESSES = _VIEW_OPS | {"memref.dim", "memref.dealloc", "memref.extract_strided_metadata"}


def control_tree(op: Any) -> Loop:
    """The loops of the nest whose outermost loop is ``op`` (scf.parallel or scf.for).

    An scf.parallel of rank ``p`` becomes ``p`` nested loops (convert-scf-to-cf lowers it
    so); each loop's body is split into segments at its inner loops. Raises DynamicBounds
    for a loop whose bounds are not constants.
    """
    if op.name == "scf.parallel":
        operands = list(op.operands)
        rank = len(op.regions[0].blocks[0].arguments)
        trips = [
            _trip(operands[d], operands[rank + d], operands[2 * rank + d]) for d in range(rank)
        ]
    else:
        trips = [_for_trips(op)]
    segments, inner = _segments(op.regions[0].blocks[0].operations)
    loop = Loop(trips[-1], segments, inner)
    empty = (Segment(0, False), Segment(0, False))
    for outer in reversed(trips[:-1]):
        loop = Loop(outer, empty, (loop,))
    return loop


def _segments(ops: Any) -> tuple[tuple[Segment, ...], tuple[Loop, ...]]:
    segments: list[Segment] = []
    inner: list[Loop] = []
    count, memory = 0, False
    for child in ops:
        child = child.operation
        if child.name in ("scf.for", "scf.parallel"):
            segments.append(Segment(count, memory))
            inner.append(control_tree(child))
            count, memory = 0, False
            continue
        ops_here, touches = _static_ops(child)
        count += ops_here
        memory |= touches
    segments.append(Segment(count, memory))
    return tuple(segments), tuple(inner)


def _static_ops(op: Any) -> tuple[int, bool]:
    """(ops, accesses memory) of ``op`` and everything nested in it, terminators excluded.

    ``scf.reduce`` (the terminator of an scf.parallel body) counts only what its
    reduction regions hold."""
    name = op.name
    count = 0 if name in _BODY_TERMINATORS or name == "scf.reduce" else 1
    memory = name not in _NOT_ACCESSES and any(
        isinstance(v.type, ir.MemRefType) for v in op.operands
    )
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                n, m = _static_ops(child.operation)
                count += n
                memory |= m
    return count, memory


def control_trees(func_op: Any) -> list[Loop]:
    """:func:`control_tree` of every outermost scf.parallel of ``func_op``, in program order."""
    return [control_tree(op) for op, _trips in outermost_parallels(func_op)]


def _loc_info(loc: Any) -> tuple[int | None, str]:
    """(linalg tag index, first name found) from a possibly fused/nested location."""
    tag: int | None = None
    name = ""
    stack = [loc]
    while stack:
        current = stack.pop(0)
        if isinstance(current, ir.FusedLoc):
            metadata = current.metadata  # a plain Attribute: downcast by hand
            text = ir.StringAttr(metadata).value if _is_string_attr(metadata) else ""
            if text.startswith(_TAG + ":") and tag is None:
                tag = int(text.split(":", 1)[1])
            stack.extend(current.locations)
        elif isinstance(current, ir.NameLoc):
            if not name:
                name = current.name_str
        elif isinstance(current, ir.CallSiteLoc):
            stack.append(current.callee)
    return tag, name


def _is_string_attr(attr: Any) -> bool:
    try:
        ir.StringAttr(attr)
    except (ValueError, TypeError):
        return False
    return True


def extract_nests(
    func_op: Any, linalg_ops: list[str], op_types: dict[str, str], path: Path
) -> list[LoopNest]:
    """One :class:`~placement.nests.LoopNest` per outermost scf.parallel of ``func_op``.

    ``linalg_ops`` are the names returned by :func:`tag_linalg_ops`, ``op_types`` maps
    ONNX node names to op types (empty for ``.mlir`` input); ``path`` names the model in
    errors.
    """
    buffers = _Buffers(func_op)
    nests = []
    for index, (op, trips) in enumerate(outermost_parallels(func_op)):
        tag, name = _loc_info(op.location)
        try:
            if trips is None:
                raise DynamicBounds
            n_iter = parallel_trips(op)
            n_total = n_iter * inner_work(op)
            body_ops = count_body_ops(op)
        except DynamicBounds:
            what = f"node {name!r} ({op_types[name]})" if name in op_types else "a loop nest"
            raise PlacementError(
                f"{path}: {what} lowers to loops with non-constant bounds; "
                "its iterations cannot be counted"
            ) from None
        accesses: dict[str, list[bool]] = {}
        for inner in walk_operations(op):
            for key, read, written in buffers.accesses(inner):
                flags = accesses.setdefault(key, [False, False])
                flags[0] |= read
                flags[1] |= written
        operands = tuple(
            NestOperand(**buffers.describe(key), read=flags[0], written=flags[1])
            for key, flags in accesses.items()
        )
        nests.append(
            LoopNest(
                id=f"n{index:03d}",
                index=index,
                onnx_node=name if (not op_types or name in op_types) else "",
                onnx_op_type=op_types.get(name, ""),
                linalg_op=linalg_ops[tag] if tag is not None and tag < len(linalg_ops) else "",
                n_iter=n_iter,
                n_total=n_total,
                trip_count=trips,
                operands=operands,
                body_ops=body_ops,
            )
        )
    return nests


class _Buffers:
    """Resolves memref values to the allocation they live in and names allocations."""

    def __init__(self, func_op: Any) -> None:
        self._arg_owner = func_op.regions[0].blocks[0]
        self._names: dict[Any, str] = {}  # allocation op -> "allocN"
        self._info: dict[str, dict[str, Any]] = {}
        self._count = 0
        for op in walk_operations(func_op):
            if op.name in ("memref.alloc", "memref.alloca"):
                self._names[op] = f"alloc{self._count}"
                self._count += 1
        self._allocs = list(self._names)

    def accesses(self, op: Any) -> list[tuple[str, bool, bool]]:
        name = op.name
        if name in _VIEW_OPS or name in ("memref.dim", "memref.dealloc"):
            return []
        if name == "memref.load":
            return [(self._resolve(op.operands[0]), True, False)]
        if name == "memref.store":
            return [(self._resolve(op.operands[1]), False, True)]
        if name == "memref.copy":
            return [(self._resolve(op.operands[0]), True, False),
                    (self._resolve(op.operands[1]), False, True)]  # fmt: skip
        # Anything else touching a memref (calls, atomics): count it as read and written.
        return [
            (self._resolve(value), True, True)
            for value in op.operands
            if isinstance(value.type, ir.MemRefType)
        ]

    def describe(self, key: str) -> dict[str, Any]:
        return self._info[key]

    def _resolve(self, value: Any) -> str:
        while True:
            owner = value.owner
            if isinstance(owner, ir.Block):
                if owner == self._arg_owner:
                    key, kind = f"arg{ir.BlockArgument(value).arg_number}", "argument"
                else:
                    key, kind = f"blockarg:{value.get_name()}", "alloc"
                break
            owner = owner.operation
            if owner.name in _VIEW_OPS:
                value = owner.operands[0]
                continue
            if owner.name in ("memref.alloc", "memref.alloca"):
                key, kind = self._alloc_name(owner), "alloc"
            elif owner.name == "memref.get_global":
                symbol = ir.FlatSymbolRefAttr(owner.attributes["name"]).value
                key, kind = f"global:{symbol}", "global"
            else:
                key, kind = f"{owner.name}:{value.get_name()}", "alloc"
            break
        if key not in self._info:
            memref = ir.MemRefType(value.type)
            elem = str(memref.element_type)
            shape = tuple(memref.shape)
            size = _ELEM_BYTES.get(elem)
            if size is None:
                width = getattr(memref.element_type, "width", 8)
                size = max(1, (width + 7) // 8)
            self._info[key] = {
                "buffer": key,
                "kind": kind,
                "shape": shape,
                "elem_type": elem,
                "nbytes": math.prod(shape) * size,
            }
        return key

    def _alloc_name(self, op: Any) -> str:
        for candidate, name in self._names.items():
            if candidate == op:
                return name
        return f"alloc?{len(self._names)}"
