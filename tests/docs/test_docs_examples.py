"""The examples of the documentation run as written, so they cannot rot.

A fenced block in ``README.md`` or ``docs/*.md`` preceded by the line
``<!-- test: run -->`` (``<!-- test: run slow -->`` for one that takes long) is run
here, in a temporary directory holding a copy of ``examples/`` and with this checkout's
package on ``PYTHONPATH``:

* ``python`` blocks: all the marked blocks of one page, in order, as one script (a page
  such as the tutorial builds on its earlier blocks);
* ``sh`` blocks: each block on its own, with ``bash -euo pipefail``.

A test fails when a block exits non-zero. The blocks must use the bundled examples and
finish in seconds (or be marked slow).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"^<!-- test: run( slow)? -->$")
FENCE = re.compile(r"^```(?P<lang>\w+)")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    slow: bool

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def marked_blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` marked runnable, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        mark = MARK.match(line.strip())
        if not mark:
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None:
            raise AssertionError(f"{page.name}:{i + 1}: a run mark not followed by a fence")
        end = next(k for k in range(i + 2, len(lines)) if lines[k].startswith("```"))
        code = "\n".join(lines[i + 2 : end]) + "\n"
        out.append(Block(page, i + 2, fence["lang"], code, bool(mark.group(1))))
    return out


ALL_BLOCKS = [b for page in PAGES for b in marked_blocks(page)]


def _param(name: str, blocks: list[Block]):
    slow = any(b.slow for b in blocks)
    return pytest.param(
        blocks, id=name, marks=pytest.mark.slow if slow else pytest.mark.integration
    )


def python_pages() -> list:
    by_page: dict[Path, list[Block]] = {}
    for b in ALL_BLOCKS:
        if b.lang == "python":
            by_page.setdefault(b.page, []).append(b)
    return [_param(str(p.relative_to(ROOT)), bs) for p, bs in by_page.items()]


def shell_blocks() -> list:
    return [_param(b.where, [b]) for b in ALL_BLOCKS if b.lang == "sh"]


def _run(cmd: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))  # fmt: skip
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)


@pytest.mark.unit
def test_marked_blocks_are_python_or_shell_and_some_exist():
    assert {b.lang for b in ALL_BLOCKS} <= {"python", "sh"}, {b.where: b.lang for b in ALL_BLOCKS}
    pages = {b.page.name for b in ALL_BLOCKS}
    assert {"README.md", "tutorial.md", "api.md", "getting-started.md"} <= pages


@pytest.mark.parametrize("blocks", python_pages())
def test_python_examples_run(blocks: list[Block], tmp_path: Path):
    script = tmp_path / "example.py"
    script.write_text("\n".join(f"# {b.where}\n{b.code}" for b in blocks), encoding="utf-8")
    done = _run([sys.executable, str(script)], tmp_path)
    assert done.returncode == 0, f"{blocks[0].page.name} failed:\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("blocks", shell_blocks())
def test_shell_examples_run(blocks: list[Block], tmp_path: Path):
    (block,) = blocks
    bindir = Path(sys.executable).parent  # the `placement` script of this environment
    script = tmp_path / "example.sh"
    script.write_text(f'export PATH="{bindir}:$PATH"\n{block.code}', encoding="utf-8")
    done = _run(["bash", "-euo", "pipefail", str(script)], tmp_path)
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}\n{done.stderr}"
