"""Inputs that try to do more than describe a model: .mlir programs that reach outside
themselves, ONNX files whose external data lives outside their directory.

The .mlir programs call ``getpid`` where an attack would call ``system``: were a check
to let one through, running it has no effect. Every program is valid MLIR (the tests
assert the policy's message, not a parse error) and would lower without the policy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import TensorProto, helper
from onnx_builders import const, model, tensor

_MAIN = """\
func.func @main(%a: tensor<64xf32>{args}) -> tensor<64xf32>{attrs} {{
{body}  %e = tensor.empty() : tensor<64xf32>
  %s = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel"]{generic}}}
      ins(%a : tensor<64xf32>) outs(%e : tensor<64xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %r = arith.addf %x, %x : f32
    linalg.yield %r : f32
  }} -> tensor<64xf32>
  return %s : tensor<64xf32>
}}
"""


def program(
    top: str = "", body: str = "", *, args: str = "", attrs: str = "", generic: str = "",
    module_attrs: str = "",
) -> str:  # fmt: skip
    """A small linalg-on-tensors program (64 doubled floats) with pieces added: ``top``
    before @main, ``body`` at the start of @main, extra ``args``, @main's ``attrs``,
    attributes of its linalg.generic, attributes of the module."""
    main = _MAIN.format(
        args=args, attrs=f" attributes {{{attrs}}}" if attrs else "", body=body,
        generic=f", {generic}" if generic else "",
    )  # fmt: skip
    text = f"{top}{main}"
    if module_attrs:
        text = f"module attributes {{{module_attrs}}} {{\n{text}}}\n"
    return "#map = affine_map<(d0) -> (d0)>\n" + text


CALL_GETPID = "  %pid = func.call @getpid() : () -> i32\n"

# name -> (program, a fragment of the one-line refusal)
HOSTILE_MLIR: dict[str, tuple[str, str]] = {
    "external func.func": (
        program("func.func private @getpid() -> i32\n", CALL_GETPID),
        "func.func @getpid has no body: external functions are not accepted",
    ),
    "external func.func declared after its call": (
        program(body=CALL_GETPID) + "func.func private @getpid() -> i32\n",
        "func.call @getpid calls a function this file does not define",
    ),
    "llvm.func and llvm.call": (
        program("llvm.func @getpid() -> i32\n", "  %pid = llvm.call @getpid() : () -> i32\n"),
        "operation llvm.func is not accepted",
    ),
    "inline assembly": (
        program(body='  llvm.inline_asm has_side_effects "nop", "" : () -> ()\n'),
        "operation llvm.inline_asm is not accepted",
    ),
    "func.constant and call_indirect": (
        program(
            "func.func private @helper() -> i32 {\n  %c = arith.constant 1 : i32\n"
            "  return %c : i32\n}\n",
            "  %f = func.constant @helper : () -> i32\n"
            "  %r0 = func.call_indirect %f() : () -> i32\n",
        ),
        "operation func.constant is not accepted",
    ),
    "memref.global": (
        program("memref.global \"private\" @g : memref<1024xf32> = uninitialized\n"),
        "operation memref.global is not accepted",
    ),
    "memref.alloc": (
        program(body="  %m = memref.alloc() : memref<64xf32>\n"),
        "operation memref.alloc is not accepted",
    ),
    "gpu module": (
        program("gpu.module @kernels {\n}\n"),
        "operation gpu.module is not accepted",
    ),
    "async region": (
        program(body="  %t = async.execute {\n    async.yield\n  }\n"),
        "operation async.execute is not accepted",
    ),
    "transform script": (
        program(
            "transform.named_sequence @__transform_main(%root: !transform.any_op"
            " {transform.readonly}) {\n  transform.yield\n}\n",
            module_attrs="transform.with_named_sequence",
        ),
        "operation transform.named_sequence is not accepted",
    ),
    "nested module": (
        program("module @inner {\n  func.func private @getpid() -> i32\n}\n"),
        "a nested builtin.module is not accepted",
    ),
    "unrealized cast": (
        program(body="  %u = builtin.unrealized_conversion_cast %a : tensor<64xf32> to i64\n"),
        "operation builtin.unrealized_conversion_cast is not accepted",
    ),
    "llvm.emit_c_interface": (
        program(attrs="llvm.emit_c_interface"),
        "attribute 'llvm.emit_c_interface' on func.func is not accepted",
    ),
    "passthrough": (
        program(attrs="passthrough = [\"noinline\"]"),
        "attribute 'passthrough' on func.func is not accepted",
    ),
    "llvm argument attribute": (
        program(args=", %b: tensor<64xf32> {llvm.noalias}"),
        "attribute 'llvm.noalias' on func.func is not accepted",
    ),
    "bufferize.result on an input": (
        program(args=", %b: tensor<64xf32> {bufferize.result}"),
        "attribute 'bufferize.result' on func.func is not accepted",
    ),
    "the profiler's nest tags": (
        program(module_attrs="placement.nest_tags = [0]"),
        "attribute 'placement.nest_tags' on builtin.module is not accepted",
    ),
    "linalg library call": (
        program(generic='library_call = "getpid"'),
        "attribute 'library_call' on linalg.generic is not accepted",
    ),
    "the profiler's marker name": (
        program("func.func private @placement_nest_enter(%i: i64) {\n  return\n}\n"),
        "the name @placement_nest_enter is reserved",
    ),
    "a pointer argument": (
        program(args=", %p: !llvm.ptr"),
        "func.func takes an argument of type !llvm.ptr",
    ),
    "a memref argument": (
        program(args=", %m: memref<64xf32>"),
        "func.func takes an argument of type memref<64xf32>",
    ),
    "a vector value": (
        program(body="  %v = arith.constant dense<1.0> : vector<4xf32>\n"),
        "arith.constant makes a value of type vector<4xf32>",
    ),
    "a tensor larger than any memory": (
        program(body="  %big = tensor.empty() : tensor<1125899906842624xf32>\n"),
        "tensor.empty makes a tensor<1125899906842624xf32> of 4.5 PB, more than this"
        " machine's",
    ),
}

# A private helper with a body, called from @main: the file's own code, accepted.
OWN_HELPER = program(
    "func.func private @helper(%x: f32) -> f32 {\n  %y = arith.mulf %x, %x : f32\n"
    "  return %y : f32\n}\n",
    "  %c = arith.constant 2.0 : f32\n  %h = func.call @helper(%c) : (f32) -> f32\n",
)


def external_data_model(
    directory: Path, location: str, data_file: Path | None = None, *, in_constant: bool = False
) -> Path:
    """``directory/model.onnx``: Y = X @ W with the 4x4 weight W stored externally at
    ``location`` (relative to the model, as ONNX resolves it), as an initializer or (with
    ``in_constant``) as the value of a Constant node; the 64 bytes of W are written to
    ``data_file`` when given."""
    w = const("W", np.arange(16).reshape(4, 4))
    if data_file is not None:
        data_file.parent.mkdir(parents=True, exist_ok=True)
        data_file.write_bytes(w.raw_data)
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    w.external_data.add(key="length", value="64")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")]
    if in_constant:
        nodes.insert(0, helper.make_node("Constant", [], ["W"], name="w", value=w))
    proto = model(nodes, [tensor("X", [1, 4])], [tensor("Y", [1, 4])], [] if in_constant else [w])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "model.onnx"
    path.write_bytes(proto.SerializeToString())  # onnx.save would touch the location
    return path
