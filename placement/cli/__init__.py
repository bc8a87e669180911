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
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

#: Subcommands in the order ``placement --help`` lists them (modules of this package).
COMMAND_MODULES = (
    "solve", "profile", "calibrate", "nests", "presets", "sweep", "pareto", "bench", "export",
    "report",
)  # fmt: skip
EXIT_INTERRUPTED = 130  # Ctrl-C (the other exit codes: placement.cli.common)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placement`` command line; returns the exit code.

    Everything, the subcommands' imports included, runs inside the handlers below, so
    that Ctrl-C at any moment is one line, never a traceback."""
    from placement.io import INTERRUPTED

    INTERRUPTED.clear()
    restore = _catch_sigint(INTERRUPTED)
    try:
        from placement.cli.common import EXIT_ERROR
        from placement.errors import PlacementError

        try:
            args = build_parser().parse_args(argv)
            code = args.handler(args)
        except PlacementError as exc:
            print(f"placement: error: {exc}", file=sys.stderr)
            code = EXIT_ERROR
        # Interrupted but not reported (a library swallowed the KeyboardInterrupt): say so
        # below; a command that returned EXIT_INTERRUPTED has said it already.
        if code == EXIT_INTERRUPTED or not INTERRUPTED.is_set():
            return code
    except KeyboardInterrupt:
        pass
    except ImportError:  # a C extension that Ctrl-C cut short while it initialized
        if not INTERRUPTED.is_set():
            raise
    finally:
        restore()
        INTERRUPTED.clear()  # the command is over: later writes in this process go ahead
    print("placement: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def _catch_sigint(flag: threading.Event) -> Callable[[], None]:
    """Ctrl-C sets ``flag`` and raises KeyboardInterrupt, until the returned function
    puts the previous handler back (nothing is set off the main thread, or where SIGINT
    is ignored: a command started in the background stays so)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        return lambda: None

    def on_sigint(signum: int, frame: Any) -> None:
        flag.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    # None: the previous handler was not set from Python; the default is the nearest
    return lambda: signal.signal(signal.SIGINT, previous if previous is not None
                                 else signal.default_int_handler)


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
