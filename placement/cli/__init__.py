"""The ``placement`` command: one module per subcommand, shared options in ``common``.

Every failure the user can cause prints one line ``placement: error: ...`` on
stderr and exits 1 (2 for command-line usage errors); nothing is written to an
output file unless the whole command succeeded. Handlers import the pipelines they
run when they run, so ``placement --help`` does not load Pyomo, ONNX Runtime or
torch-mlir.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from placement.cli import bench, export, nests, presets, profile, report, solve, sweep
from placement.cli.common import EXIT_ERROR, EXIT_INTERRUPTED, package_version
from placement.errors import PlacementError

#: Subcommands in the order ``placement --help`` lists them.
COMMANDS = (solve, profile, nests, presets, sweep, bench, export, report)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placement`` command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except PlacementError as exc:
        print(f"placement: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("placement: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement",
        description="Optimal placement of ML workloads on a host CPU + compute-in-memory (CIM)"
        " accelerator or processing-in-memory (PIM) cores.",
    )
    parser.add_argument("--version", action="version", version=f"placement {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        spec = command.COMMAND
        parser_of_command = sub.add_parser(
            spec.name,
            help=spec.help,
            description=spec.description,
            epilog=spec.epilog,
            formatter_class=spec.formatter_class,
        )
        command.add_arguments(parser_of_command)
        parser_of_command.set_defaults(handler=command.run)
    return parser
