"""Loop nests: the unit of PIM placement (Torch-PIM, Section 4.2), as plain data.

The MLIR lowering (``placement.profiling.mlir.lower``) produces these; the threshold
rule, the PIM device model and the PIM placement model consume them. Each
outermost ``scf.parallel`` of the bufferized program is one nest. Operands are
identified by the allocation they resolve to, so a buffer read and then
written in place is one buffer, moved once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from placement.errors import PlacementError

#: What a buffer holds for the program (:attr:`NestOperand.role`).
INPUT, WEIGHT, OUTPUT, CONSTANT, TEMPORARY = "input", "weight", "output", "constant", "temporary"
BUFFER_ROLES = (INPUT, WEIGHT, OUTPUT, CONSTANT, TEMPORARY)


@dataclass(frozen=True)
class NestOperand:
    buffer: str  # allocation id, unique within the program: "arg0", "alloc3", "global:w_fc"
    kind: str  # "argument" | "alloc" | "global"
    shape: tuple[int, ...]
    elem_type: str  # MLIR element type, e.g. "f32", "i8"
    nbytes: int
    read: bool
    written: bool
    # input | weight | output (function arguments, from the model's calling convention),
    # constant (a global), temporary (an allocation); "" in profiles written before the
    # field: see ``buffer_role``.
    role: str = ""

    @property
    def buffer_role(self) -> str:
        """:attr:`role`, or for older profiles what ``kind`` implies: an argument of unknown
        role counts as a model input (it may have been written by the host just before)."""
        if self.role:
            return self.role
        return {"alloc": TEMPORARY, "global": CONSTANT}.get(self.kind, INPUT)


@dataclass(frozen=True)
class LoopNest:
    id: str  # stable within a model: "n000", "n001", ... in program order
    index: int  # program order
    onnx_node: str  # originating ONNX node name (placement.onnxfile.node_names), "" if unknown
    onnx_op_type: str  # e.g. "Softmax"; "" if unknown
    linalg_op: str  # e.g. "linalg.generic", "linalg.matmul", "linalg.fill"
    n_iter: int  # iterations over the parallel dimensions (N_iter)
    n_total: int  # total innermost iterations incl. inner scf.for reductions (N_total)
    trip_count: int  # product of trip counts of enclosing loops (1 at top level)
    operands: tuple[NestOperand, ...]
    # Dynamic op counts per invocation (module docstring); {} when not measured.
    # Not hashed (a dict is not hashable), but compared.
    body_ops: dict[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.trip_count < 0:  # Eq. 8's bytes and every time scale with it
            raise PlacementError(f"nest {self.id!r}: trip count {self.trip_count} is negative")

    @property
    def fetch_bytes(self) -> int:
        """Bytes a PIM placement must bring in: each distinct buffer read, per invocation."""
        return sum(op.nbytes for op in self.operands if op.read) * self.trip_count

    @property
    def flush_bytes(self) -> int:
        """Bytes a PIM placement must write back: each distinct buffer written, per invocation."""
        return sum(op.nbytes for op in self.operands if op.written) * self.trip_count

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fetch_bytes"] = self.fetch_bytes
        data["flush_bytes"] = self.flush_bytes
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoopNest:
        operands = tuple(
            NestOperand(**{**op, "shape": tuple(op["shape"])}) for op in data["operands"]
        )
        fields = {
            k: v
            for k, v in data.items()
            if k not in ("operands", "fetch_bytes", "flush_bytes", "body_ops")
        }
        raw_ops = data.get("body_ops") or {}  # absent in profiles written before the field
        if not isinstance(raw_ops, dict):
            raise TypeError(f"'body_ops' must be an object of op name -> count, got {raw_ops!r}")
        body_ops = {}
        for name, count in raw_ops.items():
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"'body_ops' count of {name!r} must be a whole number >= 0")
            body_ops[str(name)] = count
        return cls(**fields, operands=operands, body_ops=body_ops)
