"""Nest markers as C functions: a tiny shared library built once with the system C compiler.

The JIT code calls ``placement_nest_enter(k)`` / ``placement_nest_exit(k)`` around nest
``k`` (through their ``_mlir_ciface_`` wrappers). As ctypes callbacks into Python these
cost about 0.6 µs per pair; as the C functions below, resolved with
``ExecutionEngine.register_runtime`` to their addresses, about 50 ns
(shared/notes/pim-host-baseline.md, section 3). Each reads ``CLOCK_MONOTONIC`` and
accumulates per nest into global arrays that Python reads back with ctypes.

The library is compiled with ``gcc -O2 -shared -fPIC`` (the compiler name can be changed
with ``$PLACEMENT_MARKER_CC`` or the ``compiler`` argument) into
``$XDG_CACHE_HOME/placement/markers/`` (default ``~/.cache/placement/markers``), named
by the SHA-256 of its source, compiler and flags, so it is built once per machine and
rebuilt when the source changes. Without a working compiler :func:`load_c_markers`
raises :class:`MarkersUnavailable` with a one-line reason naming the Debian package
``gcc``; the timer then falls back to Python callbacks and says so.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_NESTS = 1 << 16  # nests per program the counter arrays hold (plus the calibration slot)
COMPILER_ENV = "PLACEMENT_MARKER_CC"
DEFAULT_COMPILER = "gcc"
FLAGS = ("-O2", "-shared", "-fPIC")

SOURCE = r"""
/* placement nest markers (placement.profiling.nest_markers); see that module. */
#include <stdint.h>
#include <time.h>

#define PLACEMENT_MAX_NESTS @SLOTS@
int64_t placement_acc[PLACEMENT_MAX_NESTS];
int64_t placement_calls[PLACEMENT_MAX_NESTS];
int64_t placement_start[PLACEMENT_MAX_NESTS];

static inline int64_t placement_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + (int64_t)ts.tv_nsec;
}

void _mlir_ciface_placement_nest_enter(int64_t k) {
  placement_start[k] = placement_now_ns();
}

void _mlir_ciface_placement_nest_exit(int64_t k) {
  placement_acc[k] += placement_now_ns() - placement_start[k];
  placement_calls[k] += 1;
}

void placement_reset(int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    placement_acc[k] = 0;
    placement_calls[k] = 0;
  }
}
""".replace("@SLOTS@", str(MAX_NESTS + 1))

_MARKER = ctypes.CFUNCTYPE(None, ctypes.c_int64)
_LOADED: dict[Path, MarkerLibrary] = {}


class MarkersUnavailable(Exception):
    """The C markers cannot be built or loaded; ``reason`` is one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class MarkerLibrary:
    """The loaded library: marker function pointers and the per-nest counter arrays."""

    path: Path
    enter: Any  # ctypes function pointer (CFUNCTYPE(None, c_int64)) to the C function
    exit: Any
    acc: Any  # (c_int64 * slots): nanoseconds per nest
    calls: Any  # (c_int64 * slots): completed enter/exit pairs per nest
    reset: Any  # reset(n): zero the first n slots
    compiler: str

    def zero(self, count: int) -> None:
        self.reset(ctypes.c_int64(count))


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/placement/markers`` (default ``~/.cache/placement/markers``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "placement" / "markers"


def compiler_name(compiler: str | None = None) -> str:
    return compiler or os.environ.get(COMPILER_ENV) or DEFAULT_COMPILER


def library_path(compiler: str | None = None, directory: Path | None = None) -> Path:
    """Where the library built from SOURCE with ``compiler`` is cached."""
    cc = compiler_name(compiler)
    key = hashlib.sha256("\0".join((SOURCE, cc, *FLAGS)).encode()).hexdigest()[:16]
    return (directory or cache_dir()) / f"placement_markers_{key}.so"


def load_c_markers(compiler: str | None = None, directory: Path | None = None) -> MarkerLibrary:
    """The C marker library, built on first use; raises MarkersUnavailable with the reason."""
    cc = compiler_name(compiler)
    path = library_path(cc, directory)
    if path in _LOADED:
        return _LOADED[path]
    if not path.exists():
        _build(cc, path)
    try:
        lib = ctypes.CDLL(str(path))
        slots = MAX_NESTS + 1
        library = MarkerLibrary(
            path=path,
            enter=_function_pointer(lib._mlir_ciface_placement_nest_enter),
            exit=_function_pointer(lib._mlir_ciface_placement_nest_exit),
            acc=(ctypes.c_int64 * slots).in_dll(lib, "placement_acc"),
            calls=(ctypes.c_int64 * slots).in_dll(lib, "placement_calls"),
            reset=lib.placement_reset,
            compiler=cc,
        )
    except (OSError, AttributeError, ValueError) as exc:
        raise MarkersUnavailable(f"cannot load the C marker library {path} ({exc})") from None
    library.reset.argtypes = [ctypes.c_int64]
    library.reset.restype = None
    _LOADED[path] = library
    return library


def _function_pointer(symbol: Any) -> Any:
    """A ctypes function pointer to the C function itself (no Python in between)."""
    return _MARKER(ctypes.cast(symbol, ctypes.c_void_p).value)


def _build(cc: str, path: Path) -> None:
    exe = shutil.which(cc)
    if exe is None:
        raise MarkersUnavailable(
            f"C compiler {cc!r} not found; install the Debian package gcc"
            " (apt-get install gcc) for nanosecond nest markers"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MarkersUnavailable(
            f"cannot create the cache directory {path.parent} ({exc})"
        ) from None
    with tempfile.TemporaryDirectory(prefix="placement-markers-") as tmp:
        source = Path(tmp) / "placement_markers.c"
        source.write_text(SOURCE)
        built = Path(tmp) / "placement_markers.so"
        try:
            result = subprocess.run(
                [exe, *FLAGS, "-o", str(built), str(source)],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MarkersUnavailable(f"C compiler {cc!r} failed to run ({exc})") from None
        if result.returncode != 0 or not built.exists():
            first = next((ln for ln in result.stderr.splitlines() if ln.strip()), "no output")
            raise MarkersUnavailable(
                f"C compiler {cc!r} could not build the marker library ({first.strip()});"
                " install the Debian package gcc"
            )
        # Atomic: another process may be building the same file at the same time.
        staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        shutil.copyfile(built, staged)
        os.replace(staged, path)
