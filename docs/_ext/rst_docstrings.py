"""Griffe extension: the package's reStructuredText docstrings, rendered as Markdown.

The package writes its docstrings in the reStructuredText that ``help()`` and Sphinx read
(roles such as ``:func:`x```, ``::`` literal blocks, simple tables, lists nested by two
spaces, definition lists); mkdocstrings renders Markdown. When griffe has loaded the
package, :class:`RstDocstrings` rewrites the constructs the package uses, in place:

* a role becomes an optional cross-reference: a link where the target is rendered on the
  site, code text otherwise. A role naming a ``placement`` object that does not exist is
  a warning (so ``mkdocs build --strict`` fails on a stale reference);
* ``text::`` and the indented block after it become ``text:`` and a fenced code block;
* a simple table (``====  ====`` borders) becomes a pipe table;
* list items and their continuation lines are re-indented by four spaces a level, as
  Python-Markdown nests them; a definition list (a line, then an indented body) becomes
  the ``def_list`` extension's ``term`` / ``:   body``.

Everything else (``literal``, ``*emphasis*``, bullet lists, headings underlined with
``---``) already means the same in both languages.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

try:
    import griffe
except ImportError:  # the docs extra is not installed: the converter alone still works
    griffe = None

_log = logging.getLogger("mkdocs.plugins.rst_docstrings")

ROLE = re.compile(
    r":(?:py:)?(?:func|class|mod|data|meth|attr|exc|obj|const):"
    r"`(?P<tilde>~?)(?P<target>[\w.]+?)(?P<call>\(\))?`"
)
BULLET = re.compile(r"^(?P<indent> *)(?P<marker>[-*+]|\d+[.)]|#\.) +(?P<text>\S.*)$")
TABLE_BORDER = re.compile(r"^ *=+( +=+)+ *$")

#: (target as written, the object the docstring belongs to) -> full path, or None
Resolver = Callable[[str], "str | None"]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# --- simple tables ---------------------------------------------------------------------------


def _columns(border: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"=+", border)]


def _cells(line: str, cols: list[tuple[int, int]]) -> list[str]:
    """The cells of a table line; the last column runs to the end of the line, and a word
    that runs across a column's start stays in the cell it started in."""
    cells = [""] * len(cols)
    k = 0
    for pos, char in enumerate(line):
        while (
            k + 1 < len(cols)
            and pos >= cols[k + 1][0]
            and (char == " " or pos == 0 or line[pos - 1] == " ")
        ):
            k += 1
        cells[k] += char
    return [c.strip() for c in cells]


def _rows(lines: list[str], cols: list[tuple[int, int]]) -> list[list[str]]:
    """Table rows; a row with an empty first cell continues the row above (the
    reStructuredText rule), and so does a row with only a first cell (a list of names
    wrapped over several lines, which reStructuredText would read as rows of their own)."""
    rows: list[list[str]] = []
    for line in lines:
        cells = _cells(line, cols)
        if not any(cells):
            continue
        if rows and (not cells[0] or not any(cells[1:])):
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def convert_tables(lines: list[str]) -> list[str]:
    """Simple tables (a ``=`` border, rows, optionally a border under header rows, a
    closing border) as pipe tables; a table without a header gets an empty one, since a
    pipe table needs one."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not TABLE_BORDER.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        cols = _columns(lines[i])
        borders = [i]
        j = i + 1
        while j < len(lines):
            if TABLE_BORDER.match(lines[j]):
                borders.append(j)
                if len(borders) == 3 or j + 1 >= len(lines) or not lines[j + 1].strip():
                    break
            j += 1
        if len(borders) < 2:  # a line of = signs, not a table
            out.append(lines[i])
            i += 1
            continue
        segments = [lines[a + 1 : b] for a, b in zip(borders, borders[1:], strict=False)]
        header = _rows(segments[0], cols)[0] if len(segments) == 2 else [""] * len(cols)
        body = _rows(segments[-1], cols) if segments else []
        pad = " " * _indent(lines[i])
        out.append(pad + "| " + " | ".join(header) + " |")
        out.append(pad + "|" + "---|" * len(cols))
        out.extend(pad + "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in body)
        i = j + 1
    return out


# --- blocks: literal blocks, lists, definition lists ------------------------------------------


def convert_blocks(lines: list[str]) -> list[str]:
    """Literal blocks fenced; lists and definition lists indented as Python-Markdown nests.

    ``stack`` holds, per open list item or definition, the column its content starts at
    in the docstring and the column it must start at in Markdown."""
    out: list[str] = []
    stack: list[tuple[int, int]] = []
    i = 0
    prev_blank = True
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            out.append("")
            prev_blank = True
            i += 1
            continue
        ind = _indent(line)
        while stack and ind < stack[-1][0]:
            stack.pop()
        md = stack[-1][1] if stack else 0
        bullet = BULLET.match(line)
        text = line.strip()
        if text.endswith("::"):
            if text != "::":
                out.append(" " * md + text[:-1])
            i = _literal_block(lines, i + 1, ind, md, out)
            prev_blank = True
            continue
        if bullet:
            marker = bullet["marker"]
            out.append(" " * md + marker + " " + bullet["text"])
            stack.append((ind + len(marker) + 1, md + 4))
        elif prev_blank and _starts_definition(lines, i, ind):
            out.append(" " * md + text)
            body = _indent(lines[i + 1])
            out.append(" " * md + ":   " + lines[i + 1].strip())
            stack.append((body, md + 4))
            i += 1
        else:
            out.append(" " * md + text)
        prev_blank = False
        i += 1
    return out


def _starts_definition(lines: list[str], i: int, ind: int) -> bool:
    """A term: the next line is more indented and not a list item or a table."""
    if i + 1 >= len(lines) or not lines[i + 1].strip():
        return False
    nxt = lines[i + 1]
    return _indent(nxt) > ind and not BULLET.match(nxt) and not nxt.lstrip().startswith("|")


def _literal_block(lines: list[str], i: int, ind: int, md: int, out: list[str]) -> int:
    """Fence the block indented under a ``::`` paragraph; return the line after it."""
    block: list[str] = []
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > ind):
        block.append(lines[i])
        i += 1
    while block and not block[-1].strip():
        block.pop()
    while block and not block[0].strip():
        block.pop(0)
    code = [b for b in block if b.strip()]
    if not code:
        return i
    strip = min(_indent(b) for b in code)
    pad = " " * md
    out.append("")
    out.append(pad + "```text")
    out.extend(pad + b[strip:] if b.strip() else "" for b in block)
    out.append(pad + "```")
    out.append("")
    return i


# --- roles ------------------------------------------------------------------------------------


def convert_roles(text: str, resolve: Resolver, where: str) -> str:
    """Roles outside fenced code as optional cross-references (``<autoref optional>``)."""
    parts = re.split(r"(^ *```.*?^ *```)", text, flags=re.S | re.M)

    def role(m: re.Match[str]) -> str:
        target = m["target"]
        full = resolve(target)
        if full is None:
            if target.startswith(("placement.", ".")) or "." not in target:
                _log.warning("%s: the reference %r names no object of the package", where, target)
            full = target.lstrip(".")
        shown = target.rsplit(".", 1)[-1] if m["tilde"] else target.lstrip(".")
        shown += m["call"] or ""
        return f'<autoref identifier="{full}" optional><code>{shown}</code></autoref>'

    return "".join(p if k % 2 else ROLE.sub(role, p) for k, p in enumerate(parts))


def rst_to_markdown(text: str, resolve: Resolver, where: str = "") -> str:
    """One docstring, converted (module docstring)."""
    lines = convert_tables(text.splitlines())
    lines = convert_blocks(lines)
    return convert_roles("\n".join(lines), resolve, where)


# --- the extension ----------------------------------------------------------------------------


def _resolver(obj: Any, package: Any) -> Resolver:
    """Sphinx's lookup, roughly: a dotted name from the package down; a bare or relative
    name in the object's scope, then in each enclosing one."""

    def exists(path: str) -> bool:
        try:
            package.modules_collection.get_member(path)
        except Exception:  # griffe raises several kinds for a path that is not there
            return False
        return True

    def resolve(target: str) -> str | None:
        name = target.lstrip(".")
        if not target.startswith(".") and "." in target and not target.startswith("placement"):
            return target  # another package's object: not checked
        if target.startswith("placement") and exists(target):
            return target
        scope: Any | None = obj
        while scope is not None:
            candidate = f"{scope.path}.{name}"
            if exists(candidate):
                return candidate
            scope = scope.parent
        return None

    return resolve


if griffe is not None:

    class RstDocstrings(griffe.Extension):
        """Converts every docstring of a loaded package (see the module docstring)."""

        def on_package(self, *, pkg: Any, loader: Any, **kwargs: object) -> None:
            self._convert(pkg, pkg)

        def _convert(self, obj: Any, package: Any) -> None:
            if obj.docstring is not None:
                obj.docstring.value = rst_to_markdown(
                    obj.docstring.value, _resolver(obj, package), obj.path
                )
            for member in obj.members.values():
                if not member.is_alias:
                    self._convert(member, package)  # type: ignore[arg-type]
