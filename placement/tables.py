"""Plain-text tables for the terminal: every column as wide as its widest cell, two
spaces between columns (so that cells never run together), text left-aligned and numbers
right-aligned.

Every table the command line prints goes through :func:`text_table`, which keeps it
within :data:`WIDTH` columns by shortening, in the middle, the cells of the one column it
may shorten (names): both ends of a name stay readable (``b1_conv1..quant``).
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import TextIO

#: The terminal width every table is made to fit.
WIDTH = 100
GAP = "  "
#: A shortened column keeps at least this many characters.
MIN_SHORTENED = 12
CUT = ".."


def shorten(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (:data:`CUT`)."""
    if len(text) <= width:
        return text
    if width <= len(CUT):
        return text[:width]
    keep = width - len(CUT)
    head = (keep + 1) // 2
    return text[:head] + CUT + text[len(text) - (keep - head):]


def text_table(
    header: Sequence[Sequence[str]],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    shrink: int | None = None,
    width: int = WIDTH,
    indent: str = "",
) -> list[str]:
    """The lines of a table: ``header`` is one or more header rows, ``rows`` the body
    (every row as many cells as the first header row); ``right`` the indices of
    right-aligned columns; ``shrink`` the index of the column whose cells are shortened
    (not below :data:`MIN_SHORTENED`) when a line would pass ``width``. Lines carry no
    trailing blanks."""
    ncols = len(header[0]) if header else len(rows[0]) if rows else 0
    table = [list(r) for r in (*header, *rows)]
    for r in table:
        if len(r) != ncols:
            raise ValueError(f"a table row has {len(r)} cells, the table {ncols} columns")
    widths = [max((len(r[i]) for r in table), default=0) for i in range(ncols)]
    total = len(indent) + sum(widths) + len(GAP) * max(ncols - 1, 0)
    if shrink is not None and total > width:
        fitted = max(widths[shrink] - (total - width), MIN_SHORTENED)
        for r in table[len(header):]:
            r[shrink] = shorten(r[shrink], fitted)
        widths[shrink] = max(len(r[shrink]) for r in table)

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return (indent + GAP.join(parts)).rstrip()

    return [line(r) for r in table]


def wrapped(lines: Iterable[str], width: int = WIDTH) -> Iterator[str]:
    """``lines`` for a terminal of ``width`` columns: a line longer than that (prose: a
    table is already made to fit) is broken at spaces, its continuation indented two
    columns more than its start; words and paths are never split."""
    for line in lines:
        if len(line) <= width:
            yield line
            continue
        indent = line[: len(line) - len(line.lstrip(" "))]
        pieces = textwrap.wrap(line, width, subsequent_indent=indent + "  ",
                               break_long_words=False, break_on_hyphens=False)  # fmt: skip
        yield from pieces or [line]  # a line of blanks only: kept as it is


def for_terminal(lines: Iterable[str], stream: TextIO | None = None) -> Iterator[str]:
    """``lines`` as ``stream`` (default stdout) should get them: wrapped to the terminal's
    width when it is a terminal (at least :data:`WIDTH`: tables fit that), whole when it is
    a pipe or a file, so that scripts and ``grep`` see one line per statement."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return iter(lines)
    return wrapped(lines, max(WIDTH, shutil.get_terminal_size().columns))
