"""Running MLIR pass pipelines, and MLIR's errors as one readable line.

Every stage that runs passes (the lowering, the host optimization, the lowering to LLVM
for the JIT and for the cache simulation) reports a failure the same way: the first
``error:`` diagnostic of the MLIRError, as a one-line PlacementError.
"""

from __future__ import annotations

import re
from typing import Any

from placement.errors import PlacementError, first_line


def error_line(exc: BaseException) -> str:
    """The first meaningful line of an MLIRError (its first 'error:' diagnostic)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line.startswith("error:"):
            line = line[len("error:") :].strip()
            # Parsed text has no file name: '"-":2:23: msg' -> 'line 2:23: msg'.
            return re.sub(r'^"-":(\d+):(\d+):\s*', r"line \1:\2: ", line)
    return first_line(exc)


def run_passes(module: Any, pipeline: str, what: str) -> None:
    """Run ``pipeline`` on ``module``; a failure is ``PlacementError("<what> (<error>)")``."""
    from torch_mlir.passmanager import PassManager

    try:
        PassManager.parse(pipeline).run(module.operation)
    except Exception as exc:
        raise PlacementError(f"{what} ({error_line(exc)})") from None
