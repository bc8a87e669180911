"""``placement nests``: the loop nests the MLIR lowering materializes (the PIM decision units)."""

from __future__ import annotations

import argparse
import time

from placement.cli.common import Command, check_output_file, info, lowered_line

NESTS_FORMAT = "placement-nests"
NESTS_VERSION = 1


COMMAND = Command(
    "nests",
    help="list the loop nests the MLIR lowering materializes (the PIM decision units)",
    description="Lower an ONNX (or linalg-level .mlir) model with torch-mlir to bufferized"
    " parallel loops and print one row per loop nest.",
)


def add_arguments(nests: argparse.ArgumentParser) -> None:
    nests.add_argument("model", help="ONNX file with static shapes, or .mlir at linalg level")
    nests.add_argument("--json", metavar="FILE", help="write the nests as JSON")
    nests.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    from placement.io import write_json_atomic
    from placement.pim.output import nest_table
    from placement.profiling.nest_measure import lower_model, model_sha256

    if args.json:
        check_output_file(args.json, "--json")
    sha = model_sha256(args.model)  # a missing file fails before torch-mlir is loaded
    started = time.perf_counter()
    program = lower_model(args.model)
    info(args, lowered_line(args.model, program, time.perf_counter() - started))
    for line in nest_table(program.nests):
        print(line)
    if args.json:
        document = {
            "format": NESTS_FORMAT,
            "version": NESTS_VERSION,
            "model": {"path": str(args.model), "sha256": sha, "source_kind": program.source_kind},
            "nests": [n.to_json() for n in program.nests],
        }
        write_json_atomic(args.json, document)
        info(args, f"wrote {args.json}")
    return 0
