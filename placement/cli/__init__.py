"""The ``placement`` command: one module per subcommand, shared options in ``common``.

Every failure the user can cause prints one line ``placement: error: ...`` on
stderr and exits 1 (2 for command-line usage errors); nothing is written to an
output file unless the whole command succeeded. Handlers import the pipelines they
run when they run, so ``placement --help`` does not load Pyomo, ONNX Runtime or
torch-mlir.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Subcommands in the order ``placement --help`` lists them (modules of this package).
COMMAND_MODULES = ("solve", "profile", "nests", "presets", "sweep", "bench", "export", "report")
EXIT_INTERRUPTED = 130  # Ctrl-C (the other exit codes: placement.cli.common)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placement`` command line; returns the exit code.

    Everything, the subcommands' imports included, runs inside the handlers below, so
    that Ctrl-C at any moment is one line, never a traceback."""
    try:
        from placement.cli.common import EXIT_ERROR
        from placement.errors import PlacementError

        try:
            args = build_parser().parse_args(argv)
            return args.handler(args)
        except PlacementError as exc:
            print(f"placement: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
    except KeyboardInterrupt:
        pass
    except ImportError as exc:  # a C extension interrupted while it initialized
        if not _interrupted(exc):
            raise
    print("placement: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by a KeyboardInterrupt (an import it cut short)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="placement",
        description="Optimal placement of ML workloads on a host CPU + compute-in-memory (CIM)"
        " accelerator or processing-in-memory (PIM) cores.",
    )
    from placement.cli.common import package_version

    parser.add_argument("--version", action="version", version=f"placement {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        command = importlib.import_module(f"placement.cli.{name}")
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
