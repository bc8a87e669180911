"""Per-operator host latencies measured with ONNX Runtime (CPU, sequential).

Measuring
---------
One session (CPUExecutionProvider, ``ORT_SEQUENTIAL``, ``intra_op_threads``
intra-op threads, one inter-op thread, the requested graph optimization level)
runs the model on deterministic random inputs ``warmup + runs`` times with
ORT's profiler on. The trace holds one ``model_run`` event per run; kernel
events (``cat == "Node"``) are assigned to the run whose window starts last
before them, and the first ``warmup`` runs are dropped. Per run, every kernel's
time is split over original nodes (below); a node's latency is the median over
the measured runs of its per-run time, and ``kernel_total`` is defined as the
sum of these medians. The median of the per-run kernel sums is recorded as
``metadata["median_run_kernel_seconds"]``. Before ORT sees the model, every
node gets its :func:`~placement.onnx_names.node_names` name, so ORT's derived
kernel names start from the names the rest of the tool uses (this also lets ORT
load models with duplicate node names, which it otherwise rejects).

Caveat, measured with onnxruntime 1.31 on x86: the profiler costs ~9 µs of wall
time per executed kernel, ~3-4 µs of which fall inside the kernel's own reported
duration (shape strings, memory statistics). Kernels of a few µs are therefore
overstated; ``metadata["median_run_wall_seconds"]`` beside
:func:`plain_inference_seconds` shows the overhead for a given model.

Attribution
-----------
Kernels of ORT's optimized graph are mapped back to the original nodes by the
attribution rule (version ``ort-groups/1``) described and implemented in
:mod:`placement.profiling.ort.attribution`; the trace is read by
:mod:`placement.profiling.ort.trace`.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from placement.errors import PlacementError
from placement.io import file_sha256
from placement.onnxfile import node_names, read_onnx
from placement.profiling.host import host_description
from placement.profiling.host_profile import HostProfile
from placement.profiling.ort.attribution import ATTRIBUTION_RULE_VERSION, attribute, tensor_shapes
from placement.profiling.ort.trace import (
    add_event_shapes,
    event_shares,
    per_node_times,
    split_runs,
)

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


# --------------------------------------------------------------------------- public API


def profile_model(
    path: str | Path,
    *,
    runs: int = 20,
    warmup: int = 5,
    intra_op_threads: int = 1,
    optimization: str = "all",
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> HostProfile:
    """Measure every original node's host latency (median over ``runs``, in seconds)."""
    _check_options(runs, warmup, intra_op_threads, optimization, seed)
    path = Path(path)
    model = read_onnx(path)
    sha = file_sha256(path)
    names = node_names(model.graph)
    if not names:
        raise PlacementError(f"{path}: the model has no operators to profile")
    for node, name in zip(model.graph.node, names, strict=True):
        node.name = name  # ORT derives kernel names from these
    shapes = tensor_shapes(model)
    events, optimized, wall = _profiled_runs(
        model, path, runs, warmup, intra_op_threads, optimization, seed, progress
    )
    measured = split_runs(events, warmup, runs, path)
    add_event_shapes(shapes, optimized.graph, measured[0])
    attribution = attribute(model.graph, optimized.graph, shapes)
    charge = event_shares(attribution, measured)
    per_run, run_totals = per_node_times(names, charge, measured)

    latencies = {name: statistics.median(run[name] for run in per_run) for name in names}
    kernel_total = math.fsum(latencies.values())
    metadata = _metadata(
        optimization=optimization,
        intra_op_threads=intra_op_threads,
        runs=runs,
        warmup=warmup,
        seed=seed,
        kernel_total=kernel_total,
        run_totals=run_totals,
        wall=wall,
    )
    metadata["kernels"] = {
        k: {n: round(f, 12) for n, f in shares.items()} for k, shares in charge.items()
    }
    return HostProfile(
        latencies=latencies,
        model_sha256=sha,
        model_path=str(path),
        metadata=metadata,
        kernel_total=kernel_total,
        notes=dict(attribution.notes),
    )


def plain_inference_seconds(
    path: str | Path,
    *,
    runs: int = 20,
    warmup: int = 5,
    intra_op_threads: int = 1,
    optimization: str = "all",
    seed: int = 0,
) -> list[float]:
    """Wall-clock seconds of each of ``runs`` plain runs (no profiler), after ``warmup`` runs."""
    _check_options(runs, warmup, intra_op_threads, optimization, seed)
    path = Path(path)
    model = read_onnx(path)
    with tempfile.TemporaryDirectory(prefix="placement-plain-") as tmp:
        session = _create_session(
            model, _session_options(intra_op_threads, optimization), path, tmp
        )
        feeds = _random_inputs(session, seed, path)
        for _ in range(warmup):
            _run(session, feeds, path)
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            _run(session, feeds, path)
            seconds.append(time.perf_counter() - start)
    return seconds


# --------------------------------------------------------------------------- session


def _profiled_runs(
    model: onnx.ModelProto,
    path: Path,
    runs: int,
    warmup: int,
    threads: int,
    optimization: str,
    seed: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[dict[str, Any]], onnx.ModelProto, list[float]]:
    """Run with ORT's profiler on; return the trace, the optimized graph and run wall times."""
    with tempfile.TemporaryDirectory(prefix="placement-profile-") as tmp:
        options = _session_options(threads, optimization)
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "ort_profile")
        optimized_path = os.path.join(tmp, "optimized.onnx")
        options.optimized_model_filepath = optimized_path
        # Keep the saved graph small: only its structure is needed, not the weights.
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", "optimized.data"
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
        session = _create_session(model, options, path, tmp)
        feeds = _random_inputs(session, seed, path)
        for _ in range(warmup):
            _run(session, feeds, path)
        wall: list[float] = []
        for i in range(runs):
            start = time.perf_counter()
            _run(session, feeds, path)
            wall.append(time.perf_counter() - start)
            if progress is not None:
                progress(i + 1, runs)
        trace_file = session.end_profiling()
        del session  # release ORT's handles before the directory goes
        try:
            with open(trace_file, encoding="utf-8") as fh:
                events = json.load(fh)
            optimized = onnx.load(optimized_path, load_external_data=False)
        except (OSError, ValueError) as exc:
            raise PlacementError(
                f"{path}: ONNX Runtime left no usable trace or optimized graph ({exc})"
            ) from None
    return events, optimized, wall


def _check_options(runs: int, warmup: int, threads: int, optimization: str, seed: int) -> None:
    if optimization not in OPTIMIZATION_LEVELS:
        raise PlacementError(
            f"unknown optimization level {optimization!r}; "
            f"choose one of {', '.join(OPTIMIZATION_LEVELS)}"
        )
    for label, value, low in (
        ("runs", runs, 1),
        ("warmup", warmup, 0),
        ("intra-op threads", threads, 1),
        ("seed", seed, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise PlacementError(f"{label} must be an integer >= {low}, got {value!r}")


def _session_options(threads: int, optimization: str) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = OPTIMIZATION_LEVELS[optimization]
    # Keep ORT's log off stderr (NCHWc save warning, EndProfiling noise after a failed
    # load): every failure still raises and becomes a one-line PlacementError.
    options.log_severity_level = 4
    return options


def _create_session(
    model: onnx.ModelProto, options: ort.SessionOptions, path: Path, tmp: str
) -> ort.InferenceSession:
    if model.ByteSize() < _MAX_PROTO_BYTES:
        source: str | bytes = model.SerializeToString()
    else:  # too big for one protobuf message: hand ORT a file with external weights
        source = os.path.join(tmp, "model.onnx")
        onnx.save(model, source, save_as_external_data=True, location="model.data")
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises several pybind types (Fail, InvalidGraph, ...)
        raise PlacementError(
            f"{path}: ONNX Runtime cannot load the model ({_ort_message(exc)})"
        ) from None


def _run(session: ort.InferenceSession, feeds: dict[str, np.ndarray], path: Path) -> None:
    try:
        session.run(None, feeds)
    except Exception as exc:
        raise PlacementError(
            f"{path}: ONNX Runtime failed to run the model ({_ort_message(exc)})"
        ) from None


def _ort_message(exc: BaseException) -> str:
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


def _random_inputs(session: ort.InferenceSession, seed: int, path: Path) -> dict[str, np.ndarray]:
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


# --------------------------------------------------------------------------- metadata


def _metadata(
    *,
    optimization: str,
    intra_op_threads: int,
    runs: int,
    warmup: int,
    seed: int,
    kernel_total: float,
    run_totals: list[float],
    wall: list[float],
) -> dict[str, Any]:
    return {
        "onnxruntime_version": ort.__version__,
        "onnx_version": onnx.__version__,
        "execution_provider": "CPUExecutionProvider",
        "execution_mode": "sequential",
        "optimization": optimization,
        "intra_op_threads": intra_op_threads,
        "inter_op_threads": 1,
        "runs": runs,
        "warmup": warmup,
        "seed": seed,
        "statistic": "median over runs per node; kernel_total = sum of node medians",
        **host_description(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "kernel_seconds": kernel_total,
        "median_run_kernel_seconds": statistics.median(run_totals),
        "run_kernel_seconds": run_totals,
        # Wall time of a profiled run; compare with plain_inference_seconds for the overhead.
        "median_run_wall_seconds": statistics.median(wall),
        "attribution_rule": ATTRIBUTION_RULE_VERSION,
    }


def profile_host(model: Any, **options: Any) -> HostProfile:
    """Per-operator host latencies of ``model`` (a path, or a graph from ``load_graph``)
    measured now with ONNX Runtime; ``options`` as for :func:`profile_model`."""
    return profile_model(getattr(model, "path", model), **options)
