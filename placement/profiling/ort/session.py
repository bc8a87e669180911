"""ONNX Runtime sessions as the profiler runs them: options, loading, inputs, one run.

One intra-op thread pool of the size asked, sequential execution, ORT's own log off
stderr; a model is handed over with its large weights as references ONNX Runtime maps
from their files (:mod:`placement.weights`); inputs are deterministic random tensors
of each input's type and static shape; every failure is one line naming the model.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from placement.errors import PlacementError
from placement.weights import set_external_folder

OPTIMIZATION_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}

_MAX_PROTO_BYTES = 1_800_000_000  # below protobuf's 2 GiB limit for in-memory models

_NUMPY_TYPES: dict[str, Any] = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(uint8)": np.uint8,
    "tensor(int8)": np.int8,
    "tensor(uint16)": np.uint16,
    "tensor(int16)": np.int16,
    "tensor(uint32)": np.uint32,
    "tensor(int32)": np.int32,
    "tensor(uint64)": np.uint64,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
}


def session_options(threads: int, optimization: str) -> ort.SessionOptions:
    """Sequential execution on ``threads`` intra-op threads at ``optimization`` level."""
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = OPTIMIZATION_LEVELS[optimization]
    # Keep ORT's log off stderr (NCHWc save warning, EndProfiling noise after a failed
    # load): every failure still raises and becomes a one-line PlacementError.
    options.log_severity_level = 4
    return options


def create_session(
    model: onnx.ModelProto, options: ort.SessionOptions, path: Path, tmp: str
) -> ort.InferenceSession:
    """A CPU session of ``model`` (read from ``path``; ``tmp``: a directory for a copy)."""
    if model.ByteSize() < _MAX_PROTO_BYTES:
        source: str | bytes = model.SerializeToString()  # large weights are references
        set_external_folder(options, path)
    else:  # too big for one protobuf message: hand ORT a file with external weights
        source = os.path.join(tmp, "model.onnx")
        onnx.save(model, source, save_as_external_data=True, location="model.data")
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises several pybind types (Fail, InvalidGraph, ...)
        raise PlacementError(
            f"{path}: ONNX Runtime cannot load the model ({ort_message(exc)})"
        ) from None


def run_session(session: ort.InferenceSession, feeds: dict[str, np.ndarray], path: Path) -> None:
    """One run; a failure is a one-line PlacementError naming ``path``."""
    run_outputs(session, None, feeds, path)


def run_outputs(
    session: ort.InferenceSession, names: list[str] | None, feeds: dict[str, np.ndarray],
    path: Path,
) -> list[Any]:  # fmt: skip
    """One run returning the outputs ``names`` (None: all); a failure is a one-line
    PlacementError naming ``path``."""
    try:
        return session.run(names, feeds)
    except Exception as exc:
        raise PlacementError(
            f"{path}: ONNX Runtime failed to run the model ({ort_message(exc)})"
        ) from None


def ort_message(exc: BaseException) -> str:
    """ORT's first line, without the error-code banner and C++ source location."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    # "[ONNXRuntimeError] : 10 : INVALID_GRAPH : message" -> "INVALID_GRAPH: message"
    match = re.match(r"\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*(\w+)\s*:\s*(.*)", text)
    if match:
        text = f"{match.group(1)}: {match.group(2)}"
    # "FAIL: /src/model.cc:256 onnxruntime::Model::Model(<signature>) message" -> "FAIL: message"
    location = re.search(r"\S+\.(?:cc|cpp|h):\d+ ", text)
    if location:
        rest, depth = text[location.end() :], 0
        for pos, char in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char == ")" and depth == 0:
                text = text[: location.start()] + rest[pos + 1 :].strip()
                break
    return text


def random_inputs(session: ort.InferenceSession, seed: int, path: Path) -> dict[str, np.ndarray]:
    """Deterministic random feeds matching each input's dtype and static shape."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        dtype = _NUMPY_TYPES.get(arg.type)
        if dtype is None:
            raise PlacementError(
                f"{path}: input {arg.name!r} has type {arg.type}, which the profiler cannot feed"
            )
        shape = list(arg.shape) if arg.shape is not None else None
        if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
            raise PlacementError(
                f"{path}: input {arg.name!r} has a dynamic shape {shape}; "
                "export the model with static input shapes"
            )
        if dtype == np.bool_:
            value = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(size=shape).astype(dtype)
        elif np.dtype(dtype).itemsize == 1:  # 8-bit activations: use the full range
            info = np.iinfo(dtype)
            value = rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
        else:  # wider integers are usually indices or ids: 0/1 are always valid
            value = rng.integers(0, 2, size=shape).astype(dtype)
        feeds[arg.name] = value
    return feeds
