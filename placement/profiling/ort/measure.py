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

Attribution rule (version ``ort-groups/1``)
-------------------------------------------
ORT profiles the *optimized* graph, saved via
``SessionOptions.optimized_model_filepath``. Kernels are mapped back to original
nodes by forming groups (union-find over original and optimized nodes); a
group's kernel time is split among its original nodes. A tensor of the original
graph *survives* if its name occurs in the optimized graph, else it *vanished*.
The steps run in this order; each only adds nodes to groups:

1. *Homes.* An optimized node whose name, or the name left after stripping ORT
   decorations one at a time (``fused `` prefix, ``_token_<N>``, ``_nchwc``,
   ``/<...>Fusion`` suffixes), equals an original node name joins that node
   (a stripped name is ignored if an optimized node carries it exactly: that
   original still runs as itself). If the name instead equals an original
   *tensor* name (the NCHWc pass names kernels ``<output>_nchwc``), the home is
   the nearest node of the kernel's op family (Conv for FusedConv, QLinearConv,
   nchwc Conv) upstream of that tensor along single-consumer tensors, else its
   producer: the name was taken after activations had been fused in.
2. *Produced tensors, homed kernels.* A homed kernel that outputs a surviving
   original tensor joins that tensor's producer (looking through eliminated
   Identity/Dropout), unless the producer has another home.
3. *Epilogue fusion*, in topological order: a node not yet with a kernel joins
   the producer of its first input that vanished, has it as only consumer and
   is not a graph output (activations, BatchNorm, Add, QuantizeLinear are fused
   into their producer). DequantizeLinear is left to step 5.
4. *Produced tensors, other kernels*: as step 2 for kernels without a home;
   output layout kernels (``ReorderOutput``, trailing ``Transpose``) and
   pattern fusions named by ORT (``LayerNormalization``...) land here.
5. *Prologue fusion*, in reverse topological order: a node still without a
   kernel whose outputs all vanished joins its first consumer that has one
   (DequantizeLinear into QLinear ops, Transpose into FusedMatMul, the bias Add
   of a fused Gelu).
6. *Inserted kernels* still without an original node (``ReorderInput``,
   leading ``Transpose``, ``Cast``, the ``<dq>/duplicated`` copies ORT makes of
   a DequantizeLinear shared by several consumers...) join, in reverse graph
   order, the group of their first consumer kernel, else of their first
   input's producer. A kernel still unrelated, or a profiled name absent from the saved graph, is
   charged like the nearest mapped kernel (graph order, resp. run order), and
   the nodes that receive it get a note. No time is dropped.
7. *Split.* A group's time is divided among its original nodes in proportion
   to a work estimate: MACs for Conv/ConvTranspose/Gemm/MatMul (and integer /
   QLinear forms), output elements otherwise (1 if unknown), 0 for
   Identity/Dropout and, in groups of several nodes, for Quantize/Dequantize
   and view ops (Reshape, Flatten, Squeeze, Unsqueeze) that are not a kernel's
   home; equal shares if all are 0. Nodes get a note naming the kernels and
   their share.
8. *Removed nodes* (no kernel in their group) get 0.0 and a note: Constant,
   constant folding (all inputs constant; ``Shape``/``Size`` of a static shape
   counts as constant), Identity/Dropout elimination, or other optimization.

With optimization ``"disable"`` every kernel is its original node (step 1,
exact names), so the mapping is 1:1; the one transformer ORT runs even then
(duplicating shared DequantizeLinear nodes of QDQ models) adds kernels that step
6 charges to their consumer. Per run, the per-node times sum to the run's
summed kernel time (checked to 1e-9 relative).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from placement.errors import PlacementError
from placement.io import file_sha256
from placement.onnxfile import NONDETERMINISTIC_OPS, node_names, read_onnx
from placement.profiling.host import host_description
from placement.profiling.host_profile import HostProfile

ATTRIBUTION_RULE_VERSION = "ort-groups/1"

OPTIMIZATION_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}

# Ops ORT may remove without executing anything.
_NO_WORK = frozenset({"Identity", "Dropout"})
# Ops whose work vanishes into the kernel they are fused with (scale folding, views).
_FREE_WHEN_FUSED = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "Reshape", "Flatten", "Squeeze", "Unsqueeze"}
)
# Ops ORT fuses into their consumer (QDQ: DequantizeLinear -> op -> QuantizeLinear).
_PROLOGUE_ONLY = frozenset({"DequantizeLinear"})
_KERNEL_SUFFIX = "_kernel_time"
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
    shapes = _tensor_shapes(model)
    events, optimized, wall = _profiled_runs(
        model, path, runs, warmup, intra_op_threads, optimization, seed, progress
    )
    measured = _split_runs(events, warmup, runs, path)
    _add_event_shapes(shapes, optimized.graph, measured[0])
    attribution = attribute(model.graph, optimized.graph, shapes)
    charge = _event_shares(attribution, measured)
    per_run, run_totals = _per_node_times(names, charge, measured)

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


# --------------------------------------------------------------------------- trace


def _split_runs(
    events: Sequence[dict[str, Any]], warmup: int, runs: int, path: Path
) -> list[list[dict[str, Any]]]:
    """Kernel events per measured run, using the ``model_run`` windows of the trace."""
    starts = sorted(
        e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    if len(starts) != warmup + runs:
        raise PlacementError(
            f"{path}: ONNX Runtime's trace has {len(starts)} runs, expected {warmup + runs}"
        )
    per_run: list[list[dict[str, Any]]] = [[] for _ in starts]
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith(_KERNEL_SUFFIX):
            continue
        index = int(np.searchsorted(starts, event["ts"], side="right")) - 1
        if index >= 0:
            per_run[index].append(event)
    measured = per_run[warmup:]
    for run in measured:
        run.sort(key=lambda e: e["ts"])
    return measured


def _kernel_seconds(run: Iterable[dict[str, Any]]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for event in run:
        name = event["name"][: -len(_KERNEL_SUFFIX)]
        seconds[name] = seconds.get(name, 0.0) + event["dur"] * 1e-6  # trace is in µs
    return seconds


def _per_node_times(
    names: Sequence[str],
    charge: dict[str, dict[str, float]],
    measured: list[list[dict[str, Any]]],
) -> tuple[list[dict[str, float]], list[float]]:
    """Per measured run: seconds per original node, and the run's summed kernel time."""
    per_run: list[dict[str, float]] = []
    totals: list[float] = []
    for run in measured:
        times = dict.fromkeys(names, 0.0)
        kernels = _kernel_seconds(run)
        for kernel, seconds in kernels.items():
            for node, fraction in charge[kernel].items():
                times[node] += seconds * fraction
        total = math.fsum(kernels.values())
        _check_total(math.fsum(times.values()), total)
        per_run.append(times)
        totals.append(total)
    return per_run, totals


def _check_total(charged: float, total: float) -> None:
    if not math.isclose(charged, total, rel_tol=1e-9, abs_tol=1e-15):
        raise AssertionError(f"attribution lost time: {charged!r} s charged of {total!r} s")


def _event_shares(
    attribution: Attribution, measured: list[list[dict[str, Any]]]
) -> dict[str, dict[str, float]]:
    """Shares for every profiled kernel name, including names missing from the saved graph."""
    by_name = {node_name: shares for node_name, shares in attribution.kernels.items() if node_name}
    unnamed = {op: list(kernels) for op, kernels in attribution.unnamed.items()}
    charge: dict[str, dict[str, float]] = {}
    order: list[str] = []
    ops: dict[str, str] = {}
    for run in measured:
        for event in run:
            name = event["name"][: -len(_KERNEL_SUFFIX)]
            if name not in ops:
                order.append(name)
                ops[name] = str(event.get("args", {}).get("op_name", ""))
    for name in order:
        if name in by_name:
            charge[name] = by_name[name]
        elif unnamed.get(ops[name]) and re.fullmatch(rf"{re.escape(ops[name])}_\d+", name):
            # ORT shows unnamed nodes as <OpType>_<index>; take them in graph order.
            charge[name] = unnamed[ops[name]].pop(0)
    # Names absent from the saved graph: charge like the nearest mapped kernel in run order.
    mapped = [name in charge for name in order]
    for pos, name in enumerate(order):
        if mapped[pos]:
            continue
        nearest = _nearest(pos, mapped)
        if nearest is None:
            charge[name] = attribution.any_shares()
        else:
            charge[name] = charge[order[nearest]]
        for node in charge[name]:
            attribution.add_note(
                node, f"also charged unmapped kernel '{name}' (nearest in run order)"
            )
    return charge


def _nearest(pos: int, ok: Sequence[bool]) -> int | None:
    """Closest index with ``ok`` set, the earlier one on ties; ``None`` if there is none."""
    for dist in range(1, len(ok)):
        for cand in (pos - dist, pos + dist):
            if 0 <= cand < len(ok) and ok[cand]:
                return cand
    return None


# --------------------------------------------------------------------------- shapes


def _tensor_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Static shapes of the original graph's tensors, as far as ONNX shape inference knows."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # unknown domains or >2 GiB: fall back to what the file declares
        inferred = model
    graph = inferred.graph
    shapes: dict[str, list[int | None]] = {}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            shapes[info.name] = [
                d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim
            ]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def _add_event_shapes(
    shapes: dict[str, list[int | None]], optimized: onnx.GraphProto, run: list[dict[str, Any]]
) -> None:
    """Fill shapes ONNX inference missed (e.g. com.microsoft ops) from ORT's trace."""
    outputs = {n.name: list(n.output) for n in optimized.node if n.name}
    for event in run:
        names = outputs.get(event["name"][: -len(_KERNEL_SUFFIX)], [])
        for tensor, entry in zip(
            names, event.get("args", {}).get("output_type_shape", []), strict=False
        ):
            if tensor and _elements(shapes.get(tensor)) is None and isinstance(entry, dict):
                dims = next(iter(entry.values()), None)
                if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
                    shapes[tensor] = dims


def _elements(shape: Sequence[int | None] | None) -> int | None:
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    return math.prod(shape)  # type: ignore[arg-type]


def _work(node: onnx.NodeProto, shapes: dict[str, list[int | None]]) -> float:
    """Work estimate used to split a fused kernel: MACs for matrix ops, else output elements."""
    op = node.op_type
    if op in _NO_WORK:
        return 0.0
    inputs = list(node.input)
    out = _elements(shapes.get(node.output[0])) if node.output else None

    def shape(i: int) -> list[int | None] | None:
        return shapes.get(inputs[i]) if i < len(inputs) and inputs[i] else None

    macs: int | None = None
    if op in ("Conv", "ConvInteger", "QLinearConv"):
        weight = shape(3 if op == "QLinearConv" else 1)
        per_output = _elements(weight[1:]) if weight else None
        macs = out * per_output if out is not None and per_output is not None else None
    elif op == "ConvTranspose":
        weight, data = shape(1), _elements(shape(0))
        per_input = _elements(weight[1:]) if weight else None
        macs = data * per_input if data is not None and per_input is not None else None
    elif op in ("Gemm", "QGemm"):
        a = shape(0)
        trans_a = any(a_.name == "transA" and a_.i for a_ in node.attribute)
        k = (a[0] if trans_a else a[-1]) if a and len(a) == 2 else None
        macs = out * k if out is not None and k is not None else None
    elif op in ("MatMul", "MatMulInteger", "QLinearMatMul", "FusedMatMul"):
        a = shape(0)
        k = a[-1] if a else None
        macs = out * k if out is not None and k is not None else None
    if macs is not None:
        return float(macs)
    total = [_elements(shapes.get(t)) for t in node.output if t]
    known = [e for e in total if e is not None]
    return float(sum(known)) if known else 1.0


# --------------------------------------------------------------------------- attribution


@dataclass
class Attribution:
    """Result of mapping optimized-graph kernels back to original nodes."""

    kernels: dict[str, dict[str, float]]  # optimized node name -> {original node: fraction}
    unnamed: dict[str, list[dict[str, float]]]  # op type -> shares of unnamed kernels, in order
    notes: dict[str, str] = field(default_factory=dict)

    def any_shares(self) -> dict[str, float]:
        for shares in [*self.kernels.values(), *(s for v in self.unnamed.values() for s in v)]:
            return shares
        raise AssertionError("no kernels to charge")

    def add_note(self, node: str, text: str) -> None:
        self.notes[node] = f"{self.notes[node]}; {text}" if node in self.notes else text


def _name_candidates(name: str) -> list[str]:
    """``name`` and the names left after stripping ORT's decorations one at a time."""
    candidates = [name]
    current = name
    while True:
        stripped = current
        for pattern in (r"^fused ", r"_token_\d+$", r"_nchwc$", r"/[\w.]*Fusion[\w.]*/?$"):
            stripped = re.sub(pattern, "", current)
            if stripped != current:
                break
        if stripped == current or not stripped:
            return candidates
        candidates.append(stripped)
        current = stripped


def _family(op_type: str) -> str:
    # FusedConv, QLinearConv, nchwc Conv -> Conv; QGemm, FusedGemm -> Gemm
    return re.sub(r"^(Fused|QLinear|Q(?=[A-Z]))", "", op_type)


def attribute(
    original: onnx.GraphProto,
    optimized: onnx.GraphProto,
    shapes: dict[str, list[int | None]] | None = None,
) -> Attribution:
    """Map each optimized node to fractions of original nodes (rules in the module docstring).

    ``original`` must already carry :func:`node_names` names on its nodes.
    """
    return _Grouping(original, optimized, shapes or {}).result()


class _Grouping:
    """Union-find over original nodes ``[0, n)`` and optimized nodes ``[n, n + m)``."""

    def __init__(
        self,
        original: onnx.GraphProto,
        optimized: onnx.GraphProto,
        shapes: dict[str, list[int | None]],
    ) -> None:
        self.orig = list(original.node)
        self.opt = list(optimized.node)
        self.n = len(self.orig)
        self.shapes = shapes
        self.names = [node.name for node in self.orig]
        self.by_name = {name: i for i, name in enumerate(self.names)}
        self.producer, self.consumers = _dataflow(self.orig)
        self.graph_outputs = {o.name for o in original.output}
        self.order = _topological_order(self.orig, self.producer)
        self.position = {i: k for k, i in enumerate(self.order)}
        self.constant = _constant_nodes(original, self.orig, self.order, shapes)
        self.opt_producer, self.opt_consumers = _dataflow(self.opt)
        self.opt_tensors = {t.name for t in optimized.initializer}
        self.opt_tensors.update(i.name for i in optimized.input)
        self.opt_tensors.update(self.opt_producer, self.opt_consumers)
        self.opt_exact = {node.name for node in self.opt if node.name}

        size = self.n + len(self.opt)
        self.parent = list(range(size))
        # Per group root: contains an optimized node / an original node / a rule-1 home.
        self.has_kernel = [k >= self.n for k in range(size)]
        self.has_orig = [k < self.n for k in range(size)]
        self.homed = [False] * size
        self.fallback: set[int] = set()  # optimized nodes placed by the nearest-kernel fallback
        self.homes: set[int] = set()  # original nodes named by some kernel (step 1)

        self._homes()
        self._produced_tensors(homed=True)
        self._epilogue()
        self._produced_tensors(homed=False)
        self._prologue()
        self._inserted_kernels()

    # union-find ------------------------------------------------------------------
    def find(self, k: int) -> int:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        root, child = min(ra, rb), max(ra, rb)  # smallest index as root: deterministic
        self.parent[child] = root
        self.has_kernel[root] = self.has_kernel[ra] or self.has_kernel[rb]
        self.has_orig[root] = self.has_orig[ra] or self.has_orig[rb]
        self.homed[root] = self.homed[ra] or self.homed[rb]

    def kernel_group(self, k: int) -> bool:
        return self.has_kernel[self.find(k)]

    def orig_group(self, k: int) -> bool:
        return self.has_orig[self.find(k)]

    # helpers ---------------------------------------------------------------------
    def survives(self, tensor: str) -> bool:
        return tensor in self.opt_tensors

    def resolve(self, i: int) -> int:
        """Producer of a tensor, looking through eliminated Identity/Dropout nodes."""
        seen: set[int] = set()
        while self.orig[i].op_type in _NO_WORK and not self.kernel_group(i) and i not in seen:
            seen.add(i)
            source = self.orig[i].input[0] if self.orig[i].input else ""
            if source not in self.producer:
                break
            i = self.producer[source]
        return i

    def walk_to_family(self, i: int, op_type: str) -> int:
        """Nearest node of ``op_type``'s family upstream of ``i`` along single-consumer tensors."""
        family, current = _family(op_type), i
        for _ in range(8):
            if _family(self.orig[current].op_type) == family:
                return current
            step = next((t for t in self.orig[current].input if t in self.producer), None)
            if step is None or len(self.consumers.get(step, [])) != 1:
                break
            current = self.producer[step]
        return i

    def home_of(self, node: onnx.NodeProto) -> int | None:
        if not node.name:
            return None
        for cand in _name_candidates(node.name):
            if cand in self.by_name:
                if cand != node.name and cand in self.opt_exact:
                    continue  # that original node still runs under its own name
                return self.by_name[cand]
            if cand in self.producer:
                return self.walk_to_family(self.producer[cand], node.op_type)
        return None

    # steps (numbered as in the module docstring) -----------------------------
    def _homes(self) -> None:  # step 1
        for j, node in enumerate(self.opt):
            home = self.home_of(node)
            if home is not None:
                self.homes.add(home)
                self.join(self.n + j, home)
                self.homed[self.find(home)] = True

    def _produced_tensors(self, homed: bool) -> None:  # steps 2 and 4
        for j, node in enumerate(self.opt):
            if homed != self.homed[self.find(self.n + j)]:
                continue
            tensor = next((t for t in node.output if t in self.producer), None)
            if tensor is None:
                continue
            a, b = self.find(self.n + j), self.find(self.resolve(self.producer[tensor]))
            if not (self.homed[a] and self.homed[b]):
                self.join(a, b)

    def _skip(self, i: int) -> bool:
        return self.kernel_group(i) or self.constant[i] or self.orig[i].op_type in _NO_WORK

    def _epilogue(self) -> None:  # step 3
        for i in self.order:
            if self._skip(i) or self.orig[i].op_type in _PROLOGUE_ONLY:
                continue
            for t in self.orig[i].input:
                if (
                    t in self.producer
                    and not self.survives(t)
                    and self.consumers.get(t) == [i]
                    and t not in self.graph_outputs
                ):
                    p = self.resolve(self.producer[t])
                    if not self.constant[p]:
                        self.join(i, p)
                        break

    def _prologue(self) -> None:  # step 5
        for i in reversed(self.order):
            if self._skip(i):
                continue
            outs = [t for t in self.orig[i].output if t]
            if not outs or any(self.survives(t) for t in outs):
                continue
            users = {c for t in outs for c in self.consumers.get(t, [])}
            target = next(
                (c for c in sorted(users, key=self.position.__getitem__) if self.kernel_group(c)),
                None,
            )
            if target is not None:
                self.join(i, target)

    def _inserted_kernels(self) -> None:  # step 6
        n = self.n
        for j in reversed(range(len(self.opt))):
            if self.orig_group(n + j):
                continue
            node = self.opt[j]
            users = sorted({c for t in node.output if t for c in self.opt_consumers.get(t, [])})
            target = next((n + c for c in users if self.orig_group(n + c)), None)
            if target is None:
                sources = [self.opt_producer[t] for t in node.input if t in self.opt_producer]
                target = next((n + s for s in sources if self.orig_group(n + s)), None)
            if target is not None:
                self.join(n + j, target)
        mapped = [self.orig_group(n + j) for j in range(len(self.opt))]
        for j, ok in enumerate(mapped):
            if ok:
                continue
            near = _nearest(j, mapped)
            if near is None:
                raise AssertionError("no optimized kernel relates to the original graph")
            self.join(n + j, n + near)
            self.fallback.add(j)

    # result ----------------------------------------------------------------------
    def result(self) -> Attribution:  # steps 7 and 8
        members: dict[int, list[int]] = {}
        for i in range(self.n):
            members.setdefault(self.find(i), []).append(i)
        kernels_of: dict[int, list[int]] = {}
        for j in range(len(self.opt)):
            kernels_of.setdefault(self.find(self.n + j), []).append(j)

        attribution = Attribution(kernels={}, unnamed={})
        for root, js in kernels_of.items():
            group = members[root]
            weights = [_work(self.orig[i], self.shapes) for i in group]
            if len(group) > 1:  # a fused Q/DQ or view costs ~nothing, unless it is the kernel
                weights = [
                    0.0 if self.orig[i].op_type in _FREE_WHEN_FUSED and i not in self.homes else w
                    for i, w in zip(group, weights, strict=True)
                ]
            total = math.fsum(weights)
            if total <= 0:
                weights, total = [1.0] * len(group), float(len(group))
            shares = {self.names[i]: w / total for i, w in zip(group, weights, strict=True)}
            for j in js:
                if self.opt[j].name:
                    attribution.kernels[self.opt[j].name] = shares
                else:
                    attribution.unnamed.setdefault(self.opt[j].op_type, []).append(shares)
            self._group_notes(attribution, group, js, shares)

        for i in range(self.n):
            if self.kernel_group(i):
                continue
            node = self.orig[i]
            if node.op_type == "Constant":
                text = "Constant: ORT keeps it as an initializer (no kernel)"
            elif self.constant[i]:
                text = "removed by ORT constant folding (all inputs are constant)"
            elif node.op_type in _NO_WORK:
                text = f"removed by ORT ({node.op_type} elimination)"
            else:
                text = "removed by ORT graph optimization (no kernel executes it)"
            attribution.add_note(self.names[i], text)
        return attribution

    def _group_notes(
        self, attribution: Attribution, group: list[int], js: list[int], shares: dict[str, float]
    ) -> None:
        names = self.names
        if len(group) == 1 and all(self.opt[j].name == names[group[0]] for j in js):
            return  # the node ran as itself: nothing to say
        kernels = [f"{self.opt[j].op_type} '{self.opt[j].name}'" for j in js]
        listed = " + ".join(kernels[:4]) + (f" + {len(js) - 4} more" if len(js) > 4 else "")
        for i in group:
            if len(group) == 1:
                text = f"runs as {listed}"
            else:
                others = [names[x] for x in group if x != i]
                shown = ", ".join(others[:5]) + (
                    f" (+{len(others) - 5})" if len(others) > 5 else ""
                )
                text = (
                    f"fused into {listed} with {shown}; "
                    f"{100 * shares[names[i]]:.1f}% of its time by work estimate"
                )
            attribution.add_note(names[i], text)
        for j in js:
            if j in self.fallback:
                for i in group:
                    attribution.add_note(
                        names[i],
                        f"also charged kernel '{self.opt[j].name or self.opt[j].op_type}' "
                        "(not relatable; nearest in ORT's graph order)",
                    )


def _dataflow(
    nodes: Sequence[onnx.NodeProto],
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Producer index of each tensor and consumer indices (in node order) of each tensor."""
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for t in node.output:
            if t:
                producer[t] = i
        for t in dict.fromkeys(node.input):
            if t:
                consumers.setdefault(t, []).append(i)
    return producer, consumers


def _topological_order(nodes: Sequence[onnx.NodeProto], producer: dict[str, int]) -> list[int]:
    """Kahn's order, smallest index first (files are not always sorted)."""
    import heapq

    deps = [{producer[t] for t in n.input if t in producer} - {i} for i, n in enumerate(nodes)]
    users: list[list[int]] = [[] for _ in nodes]
    for i, d in enumerate(deps):
        for p in d:
            users[p].append(i)
    pending = [len(d) for d in deps]
    heap = [i for i, c in enumerate(pending) if c == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        i = heapq.heappop(heap)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(heap, u)
    if len(order) < len(nodes):  # a cycle (invalid model): keep file order for the rest
        order += [i for i in range(len(nodes)) if i not in set(order)]
    return order


def _constant_nodes(
    graph: onnx.GraphProto,
    nodes: Sequence[onnx.NodeProto],
    order: Sequence[int],
    shapes: dict[str, list[int | None]],
) -> list[bool]:
    """Nodes ORT can constant-fold: all inputs constant (initializers that are not graph inputs,
    outputs of constant nodes), or Shape/Size of a statically shaped tensor."""
    graph_inputs = {i.name for i in graph.input}
    const_tensors = {t.name for t in graph.initializer if t.name not in graph_inputs}
    constant = [False] * len(nodes)
    for i in order:
        node = nodes[i]
        if node.op_type in NONDETERMINISTIC_OPS or any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
            for a in node.attribute
        ):
            continue
        if node.op_type in ("Shape", "Size") and node.input:
            folded = _elements(shapes.get(node.input[0])) is not None
        else:
            folded = all(t in const_tensors for t in node.input if t)
        if folded:
            constant[i] = True
            const_tensors.update(t for t in node.output if t)
    return constant


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
