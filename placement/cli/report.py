"""``placement report SWEEP_DIR``: a finished sweep as an HTML or Markdown page.

Conventions of :mod:`placement.cli`: info on stderr (silenced by ``-q``), the result
(the page written and one line per figure) on stdout, user errors as one-line
:class:`~placement.errors.PlacementError`, the page written atomically.
"""

from __future__ import annotations

import argparse
import sys

from placement.cli.common import Command

COMMAND = Command(
    "report",
    help="turn a finished sweep directory into HTML and Markdown pages with figures",
    description="Render every figure a sweep's data allows (CIM Figs. 3-5, Torch-PIM Fig. 3"
    " and Table 4, Gantt charts) into SWEEP_DIR/figures/ as PNG and SVG, and write the"
    " page with the tables and the figures, as SWEEP_DIR/report.html and report.md (one"
    " page with -o or --format). Figures the data cannot support are listed with the"
    " reason; host mismatches, other CPUs and the profiles' own warnings are on the page"
    " and printed as warnings.",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sweep_dir", metavar="SWEEP_DIR", help="directory written by a sweep")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="one page to write, .html or .md (default: SWEEP_DIR/report.html and"
        " SWEEP_DIR/report.md)",
    )
    p.add_argument(
        "--format", choices=["html", "md"],
        help="write only this format (default: by the suffix of -o; without -o, both)",
    )  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")


def run(args: argparse.Namespace) -> int:
    from placement.cli.common import warn
    from placement.sweep.report import write_report

    if not args.quiet:
        print(f"rendering figures of {args.sweep_dir} ...", file=sys.stderr)
    report = write_report(args.sweep_dir, args.output, args.format)
    drawn = [f for f in report.figures if not f.skipped]
    pages = " and ".join(f"{path} ({fmt})" for path, fmt in report.pages)
    print(f"wrote {pages}, {len(drawn)} of {len(report.figures)} figures")
    for f in report.figures:
        if f.skipped:
            print(f"  not drawn: {f.name}: {f.skipped}")
        else:
            print(f"  {f.name}: {', '.join(str(p) for p in f.files)}")
    for text in report.warnings:  # also stated on the page
        warn(text)
    return 0
