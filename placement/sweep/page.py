"""The report page of a sweep, as HTML or Markdown, from what :mod:`placement.sweep.report`
has gathered (:class:`PageContent`): the manifest's lines, the tables and the figures.

The HTML page is self-contained (PNG images embedded, SVGs linked, no external scripts,
styles or fonts); the Markdown page links the figure files.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

Table = list[list[str]]  # a header row, then the rows

POINTS_NOTE = (
    "Rounded for reading; every column (point ids, where the host latencies came from,"
    " busy times) with exact values is in points.csv and points.json."
)


@dataclass
class FigureOutcome:
    name: str  # file stem under figures/
    title: str
    files: list[Path] = field(default_factory=list)
    skipped: str | None = None  # why it was not drawn


@dataclass(frozen=True)
class PageContent:
    """Everything a report page shows, already as text."""

    title: str
    manifest: list[tuple[str, str]]  # (key, value) lines of the sweep's manifest
    hosts: Table  # where the host latencies came from, per model and hardware
    # (label, sentence): host mismatches, other CPUs, the profiles' own warnings; shown
    # above the host table
    warnings: Sequence[tuple[str, str]]
    summary: Table  # per model and hardware
    unproven: Table  # points not proven optimal (header only: none)
    figures: Sequence[FigureOutcome]
    points: Table  # every point
    table4: Table | None = None  # PIM only: offloaded nests per operator
    table4_note: str | None = None  # PIM only: why Table 4 could not be drawn
    pim: bool = False


def html_page(page: PageContent, out: Path) -> str:
    """The page as HTML, figure links relative to ``out`` (where it will be written)."""
    e = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{e(page.title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:0.85em;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "th{background:#eee}td:first-child,th:first-child{text-align:left}"
        "figure{margin:1.5em 0}img{max-width:100%}.skip{color:#a00}"
        ".wide{overflow-x:auto;max-width:100%}</style>",
        "</head><body>",
        f"<h1>{e(page.title)}</h1>",
        "<dl>",
        *(f"<dt><b>{e(k)}</b></dt><dd>{e(v)}</dd>" for k, v in page.manifest),
        "</dl>",
        "<h2>Host latencies</h2>",
        *(f'<p class="skip"><b>{e(label)}:</b> {e(w)}</p>' for label, w in page.warnings),
        _html_table(page.hosts),
        "<h2>Summary per model and hardware</h2>",
        _html_table(page.summary),
        "<h2>Points not proven optimal</h2>",
        _html_table(page.unproven) if len(page.unproven) > 1 else "<p>None: every solved point"
        " was proven optimal.</p>",
        "<h2>Figures</h2>",
    ]
    for f in page.figures:
        if f.skipped:
            parts.append(f'<p class="skip">Not drawn: {e(f.title)} &mdash; {e(f.skipped)}</p>')
            continue
        png, svg = _files(f)
        parts.append(f'<figure id="{e(f.name)}">')
        if png is not None:  # embedded: the page stays readable when moved on its own
            data = base64.b64encode(png.read_bytes()).decode("ascii")
            parts.append(
                f'<img src="data:image/png;base64,{data}" alt="{e(f.title)}"'
                f' data-file="{e(_rel(png, out))}">'
            )
        links = " | ".join(f'<a href="{e(_rel(p, out))}">{e(p.name)}</a>' for p in (png, svg) if p)
        parts.append(f"<figcaption>{e(f.title)} ({links})</figcaption></figure>")
    if page.pim:
        parts.append("<h2>Offloaded loop nests per operator (Table 4)</h2>")
        parts.append(
            _html_table(page.table4)
            if page.table4
            else f'<p class="skip">{e(page.table4_note or "")}</p>'
        )
    parts += ["<h2>All points</h2>", f"<p>{e(POINTS_NOTE)}</p>", _html_table(page.points),
              "</body></html>", ""]
    return "\n".join(parts)


def markdown_page(page: PageContent, out: Path) -> str:
    """The page as Markdown, figure links relative to ``out``."""
    lines = [f"# {page.title}", ""]
    lines += [f"- **{k}**: {v}" for k, v in page.manifest]
    lines += ["", "## Host latencies", ""]
    for label, w in page.warnings:  # a paragraph each
        lines += [f"**{label}:** {w}", ""]
    lines += _md_table(page.hosts)
    lines += ["", "## Summary per model and hardware", "", *_md_table(page.summary)]
    lines += ["", "## Points not proven optimal", ""]
    lines += (_md_table(page.unproven) if len(page.unproven) > 1
              else ["None: every solved point was proven optimal."])  # fmt: skip
    lines += ["", "## Figures", ""]
    for f in page.figures:
        if f.skipped:
            lines += [f"*Not drawn: {f.title} — {f.skipped}*", ""]
            continue
        png, svg = _files(f)
        if png is not None:
            lines.append(f"![{f.title}]({_rel(png, out)})")
        link = f" ([SVG]({_rel(svg, out)}))" if svg is not None else ""
        lines += ["", f"*{f.title}*{link}", ""]
    if page.pim:
        lines += ["## Offloaded loop nests per operator (Table 4)", ""]
        lines += _md_table(page.table4) if page.table4 else [f"*{page.table4_note}*"]
        lines.append("")
    lines += ["## All points", "", POINTS_NOTE, "", *_md_table(page.points), ""]
    return "\n".join(lines)


def _files(figure: FigureOutcome) -> tuple[Path | None, Path | None]:
    """The figure's PNG and SVG files (None where it has none)."""
    png = next((p for p in figure.files if p.suffix == ".png"), None)
    svg = next((p for p in figure.files if p.suffix == ".svg"), None)
    return png, svg


def _rel(path: Path, page: Path) -> str:
    return Path(os.path.relpath(path.resolve(), page.resolve().parent)).as_posix()


def _html_table(rows: Sequence[Sequence[str]]) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in rows[0])
    body = "\n".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    # in a box that scrolls sideways: a wide table (every point) never widens the page
    return (f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>\n{body}\n'
            "</tbody></table></div>")


def _md_table(rows: Sequence[Sequence[str]]) -> list[str]:
    def esc(c: str) -> str:
        return c.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(c) for c in rows[0]) + " |"]
    out.append("|" + "---|" * len(rows[0]))
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows[1:]]
    return out
