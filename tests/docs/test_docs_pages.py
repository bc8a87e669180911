"""The documentation's generated page, its build helpers (``docs/_ext``) and the facts
it copies from elsewhere.

``docs/presets.md`` must be what ``docs/_ext/presets_page.py`` makes of the preset files
today; the docstring converter (``docs/_ext/rst_docstrings.py``) must turn the
reStructuredText the package writes into the Markdown the site renders; the layer table of
``docs/architecture.md`` must be pyproject's import contract; the README's links must
reach files (GitHub renders them; the site does not include the README). The site itself
is built by CI (``mkdocs build --strict``, ``.ci/run``).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXT = Path(__file__).resolve().parents[2] / "docs" / "_ext"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_ext_{name}", EXT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


presets_page = _load("presets_page")
rst = _load("rst_docstrings")


def _known(*paths: str):
    return lambda target: next((p for p in paths if p.endswith(target.lstrip("."))), None)


@pytest.mark.unit
def test_presets_page_is_generated_from_the_preset_files():
    assert presets_page.PAGE.read_text(encoding="utf-8") == presets_page.render(), (
        "docs/presets.md is stale: run python docs/_ext/presets_page.py"
    )


@pytest.mark.unit
def test_presets_page_shows_every_key_with_its_source_or_the_gap():
    text = "[pim]\n# B_rd and B_wb: Section 5.1\nread_gbps = 16.754\nwriteback_gbps = 16.754\n\n"
    text += "cores = 32   # N_core: Table 2\n"
    text += "             # (the paper sweeps 32/64/128)\nsigma = 0.4\n"
    lines = presets_page.render_file(text)
    assert "B_rd and B_wb: Section 5.1" in lines
    assert "| `read_gbps` | `16.754` | *the comment above* |" in lines
    assert "| `writeback_gbps` | `16.754` | *the comment above* |" in lines
    assert "| `cores` | `32` | N_core: Table 2 (the paper sweeps 32/64/128) |" in lines
    assert "| `sigma` | `0.4` | *no source given in the file* |" in lines


@pytest.mark.unit
def test_roles_become_optional_cross_references_and_stale_ones_warn(caplog):
    resolve = _known("placement.devices.pim.t_pim", "placement.models.pim_loopnest.copy_terms")
    out = rst.convert_roles(
        "See :func:`~placement.devices.pim.t_pim` and :mod:`.copy_terms`, "
        ":class:`pyomo.environ.ConcreteModel`, :func:`gone`.", resolve, "here"
    )
    assert '<autoref identifier="placement.devices.pim.t_pim" optional><code>t_pim</code>' in out
    assert 'identifier="placement.models.pim_loopnest.copy_terms" optional><code>copy_terms<' in out
    assert 'identifier="pyomo.environ.ConcreteModel"' in out  # another package: not checked
    assert ":func:" not in out and ":mod:" not in out
    assert [r.getMessage() for r in caplog.records] == [
        "here: the reference 'gone' names no object of the package"
    ]


@pytest.mark.unit
def test_simple_table_becomes_a_pipe_table_with_wrapped_rows_merged():
    table = [
        "=========  ==================",
        "``m.V``    operators",
        "``m.t_a,``  the data, as",
        "           immutable Params",
        "``m.t_b``",
        "``m.a_long_name``",
        "=========  ==================",
    ]
    assert rst.convert_tables(table) == [
        "|  |  |",
        "|---|---|",
        "| ``m.V`` | operators |",
        "| ``m.t_a,`` ``m.t_b`` ``m.a_long_name`` | the data, as immutable Params |",
    ]


@pytest.mark.unit
def test_literal_blocks_lists_and_definitions_get_markdown_indentation():
    text = [
        "Formats::",
        "",
        "    a,b",
        "    1,2",
        "",
        "* item",
        "  continued",
        "",
        "  - nested",
        "    continued",
        "",
        "``exact`` (a term)",
        "    its definition",
        "    goes on",
    ]
    assert rst.convert_blocks(text) == [
        "Formats:",
        "",
        "```text",
        "a,b",
        "1,2",
        "```",
        "",
        "* item",
        "    continued",
        "",
        "    - nested",
        "        continued",
        "",
        "``exact`` (a term)",
        ":   its definition",
        "    goes on",
    ]


@pytest.mark.unit
def test_architecture_page_lists_the_layers_of_the_import_contract():
    root = EXT.parents[1]
    contract = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [
        c["layers"] for c in contract["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    want = [{p.strip().removeprefix("placement.") for p in row.split("|")} for row in layers]
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[2] for line in section.splitlines() if line.startswith("| ")][1:]
    assert [set(re.findall(r"`(\w+)`", row)) for row in rows] == want


@pytest.mark.unit
def test_readme_links_point_at_files_of_the_repository():
    root = EXT.parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert any(t.startswith("docs/") for t in targets)
    assert [t for t in targets if "://" not in t and not (root / t).exists()] == []
