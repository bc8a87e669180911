"""Attribution of ONNX Runtime kernels to the original ONNX nodes.

:func:`attribute` maps every kernel of ORT's optimized graph to fractions of
original nodes by the rule below; :func:`placement.profiling.ort.measure.profile_model`
charges the measured kernel times with it.

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

import heapq
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import onnx

from placement.onnxfile import NONDETERMINISTIC_OPS

ATTRIBUTION_RULE_VERSION = "ort-groups/1"

# Ops ORT may remove without executing anything.
_NO_WORK = frozenset({"Identity", "Dropout"})
# Ops whose work vanishes into the kernel they are fused with (scale folding, views).
_FREE_WHEN_FUSED = frozenset(
    {"QuantizeLinear", "DequantizeLinear", "Reshape", "Flatten", "Squeeze", "Unsqueeze"}
)
# Ops ORT fuses into their consumer (QDQ: DequantizeLinear -> op -> QuantizeLinear).
_PROLOGUE_ONLY = frozenset({"DequantizeLinear"})


# --------------------------------------------------------------------------- shapes


def tensor_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
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


def elements(shape: Sequence[int | None] | None) -> int | None:
    """Element count of a fully static ``shape``; ``None`` if unknown or dynamic."""
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    return math.prod(shape)  # type: ignore[arg-type]


def _work(node: onnx.NodeProto, shapes: dict[str, list[int | None]]) -> float:
    """Work estimate used to split a fused kernel: MACs for matrix ops, else output elements."""
    op = node.op_type
    if op in _NO_WORK:
        return 0.0
    inputs = list(node.input)
    out = elements(shapes.get(node.output[0])) if node.output else None

    def shape(i: int) -> list[int | None] | None:
        return shapes.get(inputs[i]) if i < len(inputs) and inputs[i] else None

    macs: int | None = None
    if op in ("Conv", "ConvInteger", "QLinearConv"):
        weight = shape(3 if op == "QLinearConv" else 1)
        per_output = elements(weight[1:]) if weight else None
        macs = out * per_output if out is not None and per_output is not None else None
    elif op == "ConvTranspose":
        weight, data = shape(1), elements(shape(0))
        per_input = elements(weight[1:]) if weight else None
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
    total = [elements(shapes.get(t)) for t in node.output if t]
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

    ``original`` must already carry :func:`~placement.onnxfile.node_names` names on its nodes.
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
            near = nearest_index(j, mapped)
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
            folded = elements(shapes.get(node.input[0])) is not None
        else:
            folded = all(t in const_tensors for t in node.input if t)
        if folded:
            constant[i] = True
            const_tensors.update(t for t in node.output if t)
    return constant


def nearest_index(pos: int, ok: Sequence[bool]) -> int | None:
    """Closest index with ``ok`` set, the earlier one on ties; ``None`` if there is none."""
    for dist in range(1, len(ok)):
        for cand in (pos - dist, pos + dist):
            if 0 <= cand < len(ok) and ok[cand]:
                return cand
    return None
