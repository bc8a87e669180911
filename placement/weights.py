"""Weights left in their files: large initializers as references, read by memory mapping.

Ingestion and profiling need a model's structure and the shapes of its weights, not
their values: ONNX Runtime reads the weights itself. Loading a single-file ONNX model
the usual way holds the file's bytes and then a parsed copy of every weight (twice the
file), and each ``SerializeToString`` for the checker, shape inference or ONNX Runtime
copies them again. So an initializer whose data exceeds :data:`INLINE_MAX_BYTES` is kept
in its file:

* in a single-file model, :func:`embedded_as_references` rewrites the protobuf on the
  wire level, without parsing the weights: each such initializer's ``raw_data`` becomes
  an ONNX external-data reference to the model file itself (``location`` = the file's
  name, ``offset`` and ``length`` of the bytes in it). The file is memory-mapped and only
  the field headers are read; what is parsed is the graph (51 KB and 138 KB for the
  12-layer GPT-2 and 32-layer LLaMA-style stacks of benchmarks/cim_transformers.py: their
  .onnx files, weights kept apart).
* a model with external data keeps its references (only tensors up to
  :data:`INLINE_MAX_BYTES` are read, so that shape inference sees small constants).

A symbolic link to a model in another directory is read as usual: ONNX Runtime refuses
external data that resolves outside the directory the model is named in.

:func:`tensor_array` gives a referenced tensor's values as a read-only memory-mapped
array (nothing copied), and ONNX Runtime, given the model's directory
(:func:`set_external_folder`), maps them itself. Smaller tensors (shape vectors, scales,
biases) stay in the protobuf, so shape inference and folding see exactly what a full
load gives them.

The protobuf wire format (field number and wire type in a varint key; a varint, 4 or 8
bytes, or a length-prefixed payload) is stable; only ``ModelProto.graph`` (field 7),
``GraphProto.initializer`` (5) and ``TensorProto`` fields (dims 1, data_type 2, raw_data
9, external_data 13, data_location 14) are looked into. Anything unexpected (a tensor
with typed data fields, a segment, external data already, a ``raw_data`` whose length
does not match its dims and type, a malformed file) is left as it is, so the protobuf
parser and the checker report it as they would for a full load.
"""

from __future__ import annotations

import math
import mmap
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import ExternalDataInfo, load_external_data_for_tensor

#: Tensors up to this many bytes stay in the protobuf; larger ones stay in their file.
INLINE_MAX_BYTES = 1 << 16

#: ONNX Runtime: where the external data of a model given as bytes is resolved.
ORT_EXTERNAL_FOLDER = "session.model_external_initializers_file_folder_path"

# Element types stored as whole bytes, little-endian (not strings, not 4-bit types).
_BYTE_TYPES = (
    "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "BOOL", "FLOAT16",
    "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
)  # fmt: skip
ITEMSIZE = {
    getattr(TensorProto, name): np.dtype(
        helper.tensor_dtype_to_np_dtype(getattr(TensorProto, name))
    ).itemsize
    for name in _BYTE_TYPES
}

# Field numbers of the protobuf messages looked into.
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_DIMS, _DATA_TYPE, _RAW_DATA, _EXTERNAL_DATA, _DATA_LOCATION = 1, 2, 9, 13, 14
# Any of these beside raw_data: not a plain raw tensor, left as it is.
_OTHER_DATA = {3, 4, 5, 6, 7, 10, 11, _EXTERNAL_DATA, _DATA_LOCATION}
_LENGTH_DELIMITED, _VARINT = 2, 0


class _Malformed(Exception):
    """The bytes are not what the wire format allows (the parser will say what)."""


def embedded_as_references(path: Path, min_bytes: int = INLINE_MAX_BYTES) -> bytes | None:
    """The serialized model of ``path`` with every initializer whose ``raw_data`` exceeds
    ``min_bytes`` turned into a reference to its bytes in ``path`` (module docstring);
    None when there is none (or the file is not valid protobuf: parse it as usual)."""
    with open(path, "rb") as fh:
        size = fh.seek(0, 2)
        if size <= min_bytes:
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if hasattr(mmap, "MADV_RANDOM"):  # no read-ahead: only the headers are read
                buf.madvise(mmap.MADV_RANDOM)
            try:
                return _split_model(buf, path.name, min_bytes)
            except _Malformed:
                return None


def _split_model(buf: mmap.mmap, location: str, min_bytes: int) -> bytes | None:
    def tensor(start: int, stop: int) -> bytes | None:
        return (
            _reference(buf, start, stop, location, min_bytes) if stop - start > min_bytes else None
        )

    def graph(start: int, stop: int) -> bytes | None:
        return _rewrite(buf, start, stop, _GRAPH_INITIALIZER, tensor)

    return _rewrite(buf, 0, len(buf), _MODEL_GRAPH, graph)


def _rewrite(
    buf: mmap.mmap, begin: int, end: int, number: int, change: Callable[[int, int], bytes | None]
) -> bytes | None:
    """The message at ``buf[begin:end]`` with each length-delimited field ``number``
    replaced by what ``change(start, stop)`` of its payload gives (None: kept as it is);
    None if no field changed."""
    pieces: list[bytes] = []
    changed = False
    for field, wire, key, start, stop in _fields(buf, begin, end):
        payload = change(start, stop) if field == number and wire == _LENGTH_DELIMITED else None
        if payload is None:
            pieces.append(buf[key:stop])
        else:
            pieces.append(_delimited(number, payload))
            changed = True
    return b"".join(pieces) if changed else None


def _reference(buf: mmap.mmap, begin: int, end: int, location: str, min_bytes: int):
    """The TensorProto at ``buf[begin:end]`` with its raw_data as a reference, or None."""
    kept: list[bytes] = []
    raw: tuple[int, int] | None = None
    dims: list[int] = []
    data_type = None
    for number, wire, key, start, stop in _fields(buf, begin, end):
        if number in _OTHER_DATA:
            return None
        if number == _RAW_DATA and wire == _LENGTH_DELIMITED:
            raw = (start, stop)  # the last occurrence wins, as when parsing
            continue
        if number == _DATA_TYPE and wire == _VARINT:
            data_type = _varint(buf, start)[0]
        elif number == _DIMS and wire == _VARINT:
            dims.append(_varint(buf, start)[0])
        elif number == _DIMS and wire == _LENGTH_DELIMITED:  # packed
            pos = start
            while pos < stop:
                dim, pos = _varint(buf, pos)
                dims.append(dim)
        kept.append(buf[key:stop])
    if raw is None or raw[1] - raw[0] <= min_bytes or data_type not in ITEMSIZE:
        return None
    if math.prod(dims) * ITEMSIZE[data_type] != raw[1] - raw[0]:
        return None  # inconsistent: to_array and ONNX Runtime report it as usual
    entries = {"location": location, "offset": str(raw[0]), "length": str(raw[1] - raw[0])}
    for name, value in entries.items():
        entry = _delimited(1, name.encode()) + _delimited(2, value.encode())
        kept.append(_delimited(_EXTERNAL_DATA, entry))
    kept.append(_encode_varint(_DATA_LOCATION << 3 | _VARINT) + _encode_varint(1))
    return b"".join(kept)


def _fields(buf: mmap.mmap, begin: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of its key, start of its value, end) of each field
    of the message at ``buf[begin:end]``; a length-delimited value starts after its length."""
    pos = begin
    while pos < end:
        key, start = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            stop = _varint(buf, start)[1]
        elif wire == 1:
            stop = start + 8
        elif wire == 5:
            stop = start + 4
        elif wire == _LENGTH_DELIMITED:
            length, start = _varint(buf, start)
            stop = start + length
        else:  # groups: not in ONNX's messages
            raise _Malformed
        if number == 0 or stop > end:
            raise _Malformed
        yield number, wire, pos, start, stop
        pos = stop


def _varint(buf: mmap.mmap, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Malformed
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _LENGTH_DELIMITED) + _encode_varint(len(payload)) + payload


def is_reference(tensor: onnx.TensorProto) -> bool:
    """Whether the tensor's data is in a file (ONNX external data), not in the protobuf."""
    return tensor.data_location == TensorProto.EXTERNAL


def tensor_array(tensor: onnx.TensorProto, base_dir: Path | None) -> np.ndarray:
    """The tensor's values; for a reference (external data resolved against ``base_dir``)
    a read-only memory-mapped view of its file, not a copy."""
    if not is_reference(tensor):
        return numpy_helper.to_array(tensor)
    base = Path(base_dir) if base_dir is not None else Path()
    info = ExternalDataInfo(tensor)
    shape = tuple(int(d) for d in tensor.dims)
    itemsize = ITEMSIZE.get(tensor.data_type)
    length = info.length
    plain = itemsize is not None and sys.byteorder == "little" and math.prod(shape) > 0
    if plain and (length is None or length == math.prod(shape) * itemsize):
        dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
        offset = int(info.offset or 0)
        return np.asarray(np.memmap(base / info.location, dtype, "r", offset, shape))
    copy = onnx.TensorProto()  # strings, 4-bit types, big-endian hosts: ONNX's own reader
    copy.CopyFrom(tensor)
    inline(copy, base)
    return numpy_helper.to_array(copy)


def inline(tensor: onnx.TensorProto, base_dir: Path) -> None:
    """Read a reference's data into the protobuf, in place, as a full load does."""
    load_external_data_for_tensor(tensor, str(base_dir))
    tensor.data_location = TensorProto.DEFAULT
    del tensor.external_data[:]


def set_external_folder(options: Any, path: Path) -> None:
    """Let an ONNX Runtime session given the model as bytes (``options``: its
    SessionOptions) find the external data of the model file ``path``."""
    options.add_session_config_entry(ORT_EXTERNAL_FOLDER, str(Path(path).absolute().parent))
