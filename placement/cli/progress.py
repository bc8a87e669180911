"""The progress of a solve on stderr: the time spent against the limit, the phase, and the
incumbent and bound as they improve (a :class:`~placement.solvers.base.SolveMonitor`).

On a terminal one line is redrawn in place twice a second, with a bar of the time used.
Elsewhere (a log, a pipe) a line is written at most every :data:`LOG_INTERVAL` seconds
when something changed (every :data:`LOG_HEARTBEAT` seconds otherwise), so a solve
shorter than that writes none. Nothing under ``-q``, nor with ``--solver-log`` (HiGHS's
own log says as much). The solver's callbacks only store numbers; the line is formatted
and written by a thread of its own, so the solve does not wait for the terminal.

The line goes to a duplicate of stderr's descriptor, taken before the solve starts:
Pyomo captures descriptors 1 and 2 while HiGHS runs, and would swallow it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from placement.solvers.base import gap_to_lower_bound
from placement.units import fmt_gap, fmt_time

#: Seconds between redraws on a terminal.
TTY_INTERVAL = 0.5
#: Least seconds between two lines in a log, and between two lines when nothing changed.
LOG_INTERVAL = 5.0
LOG_HEARTBEAT = 60.0
#: Characters of the bar of the time used (terminal only).
BAR = 20
PREFIX = "solving: "


class SolveProgress:
    """Watches one solve (use as a context manager around it)."""

    def __init__(
        self,
        limit: float | None,
        *,
        stream: TextIO | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        stream = stream if stream is not None else sys.stderr
        try:
            fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # e.g. a test's captured stream
            fd = None
        self._out: Any = stream
        self._owned = fd is not None  # our duplicate, closed at the end
        if fd is not None:
            self._out = open(os.dup(fd), "w", encoding="utf-8", errors="replace",
                                closefd=True)  # fmt: skip
        self.tty = stream.isatty() if tty is None else tty
        self.limit = limit
        self.clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self._phase = "starting"
        self._incumbent: float | None = None
        self._bound: float | None = None
        self._changes = 0  # state changes so far ...
        self._shown = -1  # ... and at the last line written (logs)
        self._last_line = self.started
        self._drawn = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ SolveMonitor

    def phase(self, name: str) -> None:
        with self._lock:
            self._phase = name
            self._changes += 1

    def improved(self, incumbent: float | None, bound: float | None) -> None:
        """Keep the best of each (valid lower bounds of one problem: the highest)."""
        with self._lock:
            if _finite(incumbent) and (self._incumbent is None or incumbent < self._incumbent):
                self._incumbent = incumbent
                self._changes += 1
            if _finite(bound) and (self._bound is None or bound > self._bound):
                self._bound = bound
                self._changes += 1

    def line(self, text: str) -> None:
        """A line of its own (the decomposition's rounds), above the progress line."""
        with self._lock:
            self._clear()
            self._write(text + "\n")
            if self.tty:
                self._draw()

    # ------------------------------------------------------------------ the line

    def text(self) -> str:
        """The progress line (without the bar)."""
        return PREFIX + ", ".join(self._parts(self.clock() - self.started))

    def _parts(self, elapsed: float) -> list[str]:
        limit = f" of {self.limit:g} s" if self.limit else ""
        parts = [f"{elapsed:.0f} s{limit}", self._phase]
        incumbent, bound = self._incumbent, self._bound
        if incumbent is not None:
            parts.append(f"best {fmt_time(incumbent, 4)}")
        if bound is not None:
            parts.append(f"bound {fmt_time(bound, 4)}")
        if incumbent is not None and bound is not None and incumbent > 0:
            parts.append(f"gap {fmt_gap(gap_to_lower_bound(incumbent, bound))}")
        return parts

    def _draw(self) -> None:
        elapsed = self.clock() - self.started
        parts = self._parts(elapsed)
        if self.limit:
            done = min(int(BAR * elapsed / self.limit), BAR)
            parts[0] += f" [{'#' * done}{'.' * (BAR - done)}]"
        width = shutil.get_terminal_size((100, 24)).columns
        self._write("\r" + (PREFIX + ", ".join(parts))[: max(width - 1, 10)] + "\x1b[K")
        self._drawn = True

    def _clear(self) -> None:
        if self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)
            self._out.flush()
        except (OSError, ValueError):  # a closed or broken stderr: stop drawing
            self._stop.set()

    def tick(self) -> None:
        """Redraw the line (terminal), or write it if it is time (log); the thread of
        :meth:`__enter__` calls this every :data:`TTY_INTERVAL` or every second."""
        with self._lock:
            if self.tty:
                self._draw()
                return
            now = self.clock()
            since = now - self._last_line
            if since >= LOG_INTERVAL and (self._changes != self._shown or since >= LOG_HEARTBEAT):
                self._write(self.text() + "\n")
                self._last_line, self._shown = now, self._changes

    def _run(self) -> None:
        interval = TTY_INTERVAL if self.tty else 1.0
        while not self._stop.wait(interval):
            self.tick()

    # ------------------------------------------------------------------ context

    def __enter__(self) -> SolveProgress:
        self.started = self._last_line = self.clock()
        self._thread = threading.Thread(target=self._run, name="solve-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            self._clear()
        if self._owned:
            with contextlib.suppress(OSError):
                self._out.close()


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def solve_progress(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """A :class:`SolveProgress` for the command's ``--time-limit``, or None (as a context)
    under ``-q`` or ``--solver-log``."""
    if getattr(args, "quiet", False) or getattr(args, "solver_log", False):
        return contextlib.nullcontext(None)
    return SolveProgress(args.time_limit)
