"""Weights handed to the lowered program in the layout its products read.

torch-mlir (20261001) copies a constant weight into a weight-sized temporary on every
run in two cases, and the copy is a loop nest of the program:

* ``Gemm`` with ``transB=1`` (or ``transA=1``) against a weight, and ``Transpose`` of a
  weight feeding a product: a ``linalg.transpose`` of the weight into a temporary, then
  the product;
* ``MatMul`` of a rank-``r >= 3`` activation with a 2-D weight (every ``nn.Linear`` of a
  transformer exported with a batch dimension): the weight is broadcast over the batch
  (a ``linalg.generic`` copy to ``1 x K x N``), then a ``linalg.batch_matmul``.

A runtime does either once, when the model is loaded (ONNX Runtime pre-packs its
weights). So the lowering does too (:func:`fold_weight_layouts`): the weight argument
becomes the layout the product reads -- the transposed weight (``Transpose`` removed,
``transB``/``transA`` set to 0), or the weight with leading unit axes (same bytes, the
batch product reads it as it is) -- and the copy nest no longer exists. The values are
read from the model's file when the program runs, as every weight is
(:class:`WeightFile`, a transposed one read in blocks), so no second copy of a weight is
held. The ONNX nodes keep their names, so every remaining nest keeps its ONNX operator.

Not folded (recorded with the reason): a weight that other nodes also read in its file
layout when the fold would change it in place (a broadcast weight shared with another
consumer), and a ``MatMul`` whose activation has a batch axis larger than 1 (torch-mlir
broadcasts the weight over that batch whatever its layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from placement.errors import PlacementError

# A transposed weight is read in blocks of about this many bytes of the file.
READ_BLOCK_BYTES = 16 << 20


@dataclass(frozen=True)
class WeightFile:
    """A weight left in its file: the raw little-endian bytes of an array of ``dtype`` at
    ``offset`` of ``path`` (an ONNX model or its external data), handed to the program as
    an array of ``shape``.

    ``perm`` None: the file holds the argument's bytes in order (``shape`` may add unit
    axes to the file's). Otherwise the argument is the file's array (shape
    :attr:`stored_shape`) with its axes permuted as ``numpy.transpose(file, perm)``.
    """

    path: Path
    offset: int
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name
    perm: tuple[int, ...] | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def in_file_order(self) -> bool:
        """The argument's bytes are the file's, in order (a runner may read them as they are)."""
        return self.perm is None

    @property
    def stored_shape(self) -> tuple[int, ...]:
        """The shape of the array as it is in the file."""
        if self.perm is None:
            return self.shape
        stored = [0] * len(self.shape)
        for axis, source in enumerate(self.perm):
            stored[source] = self.shape[axis]
        return tuple(stored)

    def transposed(self, perm: tuple[int, ...]) -> WeightFile:
        """This weight as ``numpy.transpose(value, perm)`` (nothing is read)."""
        inner = self.perm if self.perm is not None else tuple(range(len(self.shape)))
        composed = tuple(inner[p] for p in perm)
        shape = tuple(self.shape[p] for p in perm)
        identity = composed == tuple(range(len(composed)))
        return WeightFile(self.path, self.offset, shape, self.dtype, None if identity else composed)

    def with_unit_axes(self, count: int) -> WeightFile:
        """This weight with ``count`` leading axes of size 1 (the same bytes)."""
        shape = (1,) * count + self.shape
        if self.perm is None:
            return WeightFile(self.path, self.offset, shape, self.dtype)
        perm = tuple(range(count)) + tuple(p + count for p in self.perm)
        return WeightFile(self.path, self.offset, shape, self.dtype, perm)

    def read(self, align: int = 64) -> np.ndarray:
        """The weight's values in a new ``align``-byte aligned array, read from the file
        (nothing is memory-mapped; a transposed weight is read a block at a time, so only
        this copy is resident)."""
        out = _aligned_empty(self.nbytes, align).view(self.dtype).reshape(self.shape)
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            if self.perm is None:
                self._fill(fh, memoryview(out.reshape(-1).view(np.uint8)))
                return out
            stored = self.stored_shape
            into_file_order = out.transpose(np.argsort(self.perm))  # indexed like the file
            row_bytes = int(np.prod(stored[1:], dtype=np.int64)) * np.dtype(self.dtype).itemsize
            rows = max(1, READ_BLOCK_BYTES // max(row_bytes, 1))
            block = np.empty(rows * row_bytes, dtype=np.uint8)
            for start in range(0, stored[0], rows):
                count = min(rows, stored[0] - start)
                chunk = block[: count * row_bytes]
                self._fill(fh, memoryview(chunk))
                into_file_order[start : start + count] = chunk.view(self.dtype).reshape(
                    (count, *stored[1:])
                )
        return out

    def _fill(self, fh: Any, buffer: memoryview) -> None:
        if fh.readinto(buffer) != len(buffer):
            raise PlacementError(f"{self.path}: weight data ends early (truncated file?)")


def _aligned_empty(nbytes: int, align: int) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = -raw.ctypes.data % align
    return raw[start : start + nbytes]


Weight = np.ndarray | WeightFile


def transposed(value: Weight, perm: tuple[int, ...]) -> Weight:
    if isinstance(value, WeightFile):
        return value.transposed(perm)
    return np.ascontiguousarray(np.transpose(value, perm))


def with_unit_axes(value: Weight, count: int) -> Weight:
    if isinstance(value, WeightFile):
        return value.with_unit_axes(count)
    return value.reshape((1,) * count + value.shape)


def fold_weight_layouts(graph: onnx.GraphProto, weights: dict[str, Weight]) -> list[dict[str, Any]]:
    """Fold the layout changes of weight arguments into the weights (module docstring).

    ``graph``: shapes inferred, its weights graph inputs whose values are ``weights``
    (both changed in place). Returns one record per product looked at: the node, the
    weight, what was done (``fold``) or why not (``not_folded``).
    """
    folds = _Folds(graph, weights)
    for node in list(graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Transpose":
            folds.transpose_node(node)
        elif node.op_type == "Gemm":
            folds.gemm(node)
        elif node.op_type == "MatMul":
            folds.matmul(node)
    folds.drop_unused()
    return folds.records


class _Folds:
    def __init__(self, graph: onnx.GraphProto, weights: dict[str, Weight]) -> None:
        self.graph = graph
        self.weights = weights
        self.records: list[dict[str, Any]] = []
        self.inputs = {value.name: value for value in graph.input}
        self.ranks = {
            value.name: _dims(value)
            for value in [*graph.input, *graph.value_info, *graph.output]
            if _dims(value) is not None
        }
        self.names = {value.name for value in [*graph.input, *graph.value_info, *graph.output]}
        self.names |= {out for node in graph.node for out in node.output}
        self.names |= {init.name for init in graph.initializer}
        self.outputs = {value.name for value in graph.output}

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        return [node for node in self.graph.node if name in node.input]

    def record(self, node: onnx.NodeProto, weight: str, **what: Any) -> None:
        self.records.append({"node": node.name, "op": node.op_type, "weight": weight, **what})

    def add_weight(self, name: str, value: Weight, like: str) -> None:
        """A new weight argument ``name`` holding ``value`` (type of the argument ``like``)."""
        elem = self.inputs[like].type.tensor_type.elem_type
        shape = list(value.shape)
        entry = onnx.helper.make_tensor_value_info(name, elem, shape)
        self.graph.input.append(entry)
        self.inputs[name] = self.graph.input[-1]  # append copied the message
        self.ranks[name] = shape
        self.names.add(name)
        self.weights[name] = value
        kept = [v for v in self.graph.value_info if v.name != name]  # now an argument
        if len(kept) != len(self.graph.value_info):
            del self.graph.value_info[:]
            self.graph.value_info.extend(kept)

    def fresh_name(self, base: str) -> str:
        name, index = base, 1
        while name in self.names:
            index += 1
            name = f"{base}#{index}"
        return name

    def transpose_node(self, node: onnx.NodeProto) -> None:
        source = node.input[0]
        if source not in self.weights or node.output[0] in self.outputs:
            return
        value = self.weights[source]
        perm = _perm_attribute(node, len(value.shape))
        self.graph.node.remove(node)
        self.add_weight(node.output[0], transposed(value, perm), like=source)
        self.record(node, source, fold="transposed at load", bytes=_nbytes(value))

    def gemm(self, node: onnx.NodeProto) -> None:
        for index, flag in ((0, "transA"), (1, "transB")):
            attribute = next((a for a in node.attribute if a.name == flag), None)
            source = node.input[index]
            if attribute is None or attribute.i == 0 or source not in self.weights:
                continue
            value = self.weights[source]
            name = self.fresh_name(f"{source}^T")
            self.add_weight(name, transposed(value, (1, 0)), like=source)
            node.input[index] = name
            attribute.i = 0
            self.record(node, source, fold=f"transposed at load ({flag}=1 -> 0)",
                        bytes=_nbytes(value))  # fmt: skip

    def matmul(self, node: onnx.NodeProto) -> None:
        for index in (0, 1):
            source, other = node.input[index], node.input[1 - index]
            if source not in self.weights or len(self.weights[source].shape) != 2:
                continue
            dims = self.ranks.get(other)
            if dims is None or len(dims) < 3:
                continue  # a 2-D product reads the weight as it is
            value = self.weights[source]
            if any(d != 1 for d in dims[:-2]):
                self.record(node, source, not_folded=f"the activation's batch {dims[:-2]} is"
                            " not 1: torch-mlir broadcasts the weight over it")  # fmt: skip
                continue
            readers = self.consumers(source)
            if readers != [node] or source in self.outputs:
                self.record(node, source, not_folded="the weight has other readers")
                continue
            widened = with_unit_axes(value, len(dims) - 2)
            self.weights[source] = widened
            shape = self.inputs[source].type.tensor_type.shape
            for _ in range(len(dims) - 2):
                shape.dim.insert(0, onnx.TensorShapeProto.Dimension(dim_value=1))
            self.ranks[source] = list(widened.shape)
            self.record(node, source, fold=f"unit batch axes added ({len(dims) - 2})",
                        bytes=_nbytes(value))  # fmt: skip

    def drop_unused(self) -> None:
        """Weights no node reads any more (all their readers now read a folded copy)."""
        read = {name for node in self.graph.node for name in node.input} | self.outputs
        unused = [name for name in self.weights if name not in read]
        for name in unused:
            del self.weights[name]
        if unused:
            kept = [v for v in self.graph.input if v.name not in set(unused)]
            del self.graph.input[:]
            self.graph.input.extend(kept)


def _dims(value: onnx.ValueInfoProto) -> list[int] | None:
    tensor_type = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
        return None
    dims = tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return [d.dim_value for d in dims]


def _perm_attribute(node: onnx.NodeProto, rank: int) -> tuple[int, ...]:
    for attribute in node.attribute:
        if attribute.name == "perm":
            return tuple(int(p) % rank for p in attribute.ints)
    return tuple(reversed(range(rank)))


def _nbytes(value: Weight) -> int:
    return int(value.nbytes)
