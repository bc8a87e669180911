"""Write ``docs/presets.md`` from the preset files: every key, its value and its source.

The preset files (``placement/hardware/presets/*.toml``) name the source of every
constant in comments beside it; this renders them as tables, per preset and TOML table,
with the file's block comments as paragraphs between them, and puts each preset's line
from ``placement presets`` (the values it resolves to) on top. A test
(``tests/docs/test_docs_pages.py``) fails when the page is stale; regenerate with

    python docs/_ext/presets_page.py
"""

from __future__ import annotations

import re
import sys
from importlib import resources
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "presets.md"
KEY_LINE = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*=\s*(?P<value>.*?)\s*(?:#\s?(?P<note>.*))?$")

HEADER = """\
# Hardware preset reference

Generated from `placement/hardware/presets/*.toml` by `python docs/_ext/presets_page.py`
(a test fails when this page and the files disagree). Each preset starts with its line of
`placement presets`, the values it resolves to; then every key as the file writes it, in
the file's units, with the source the file gives beside it and the file's comments between
the tables. A preset with `base =` inherits every key it does not set. What the keys mean:
[Hardware](hardware.md), the [CIM guide](cim.md) and the [PIM guide](pim.md).
"""


def _value_cell(raw: str) -> str:
    # A string value keeps its quotes (as in the file); a value never holds a pipe.
    return f"`{raw}`"


def _source_cell(raw: str, note: str) -> str:
    """The file's comment; a number without one is marked, so the gap shows."""
    if note:
        return _escape(note)
    return "" if raw.startswith('"') else "*no source given in the file*"


#: The source cell of a key that has no comment of its own, under a comment block.
ABOVE = "*the comment above*"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_file(text: str) -> list[str]:
    """The tables and paragraphs of one preset file (module docstring)."""
    out: list[str] = []
    rows: list[list[str]] = []
    note: list[str] = []
    under_note = False  # the keys since the last blank line follow a comment block

    def flush_note() -> None:
        if note:
            out.extend(["", " ".join(note)])
            note.clear()

    def flush_rows() -> None:
        if rows:
            out.extend(["", "| key | value | source, as the file gives it |", "|---|---|---|"])
            out.extend(f"| `{k}` | {_value_cell(v)} | {_source_cell(v, n)} |" for k, v, n in rows)
            rows.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            flush_rows()
            flush_note()
            under_note = False
        elif stripped.startswith("[") and stripped.endswith("]"):
            flush_rows()
            flush_note()
            out.extend(["", f"### `{stripped}`"])
        elif stripped.startswith("#"):
            comment = stripped.lstrip("#").strip()
            if line.startswith((" ", "\t")) and rows:  # a key's comment, continued
                rows[-1][2] = f"{rows[-1][2]} {comment}".strip()
            else:
                flush_rows()
                note.append(comment)
                under_note = True
        else:
            m = KEY_LINE.match(stripped)
            if m is None:
                raise ValueError(f"cannot read preset line {line!r}")
            flush_note()
            own = (m["note"] or "").strip()
            numeric = not m["value"].startswith('"')
            rows.append([m["key"], m["value"], own or (ABOVE if under_note and numeric else "")])
    flush_rows()
    flush_note()
    return out


def render() -> str:
    """The whole page."""
    from placement.hardware.base import preset_names
    from placement.hardware.cim import load_hardware
    from placement.hardware.pim import load_pim_hardware, pim_preset_names

    folder = resources.files("placement.hardware") / "presets"
    out = [HEADER.rstrip("\n")]
    for kind, names, load, flag in (
        ("CPU + CIM", preset_names(), load_hardware, "--hardware"),
        ("CPU + PIM", pim_preset_names(), load_pim_hardware, "--pim-hardware"),
    ):
        out.extend(["", f"## {kind} presets (`{flag}`)"])
        for name in names:
            hw = load(name)
            out.extend(["", f"### {name}", ""])
            out.append(f"`placement presets`: {hw.description}; {_escape(hw.describe())}")
            body = render_file((folder / f"{name}.toml").read_text(encoding="utf-8"))
            out.extend(line.replace("### `[", "#### `[") for line in body)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if argv[1:] == ["--check"]:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != page:
            print(f"{PAGE} is stale: run python docs/_ext/presets_page.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
