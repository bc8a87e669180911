"""The package's shape: the public API, no private names across modules, the layers."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

import placement

ROOT = Path(placement.__file__).resolve().parent


@pytest.mark.unit
def test_public_api_is_pinned():
    assert placement.__all__ == [
        "PlacementError", "cim", "load_graph", "load_hardware", "pim", "profile_host",
    ]  # fmt: skip
    for name in placement.__all__:
        assert getattr(placement, name) is not None
    assert set(dir(placement)) >= set(placement.__all__)
    with pytest.raises(AttributeError):
        placement.no_such_name  # noqa: B018


@pytest.mark.unit
def test_target_apis_are_functions_and_no_function_shares_a_module_name():
    import pkgutil

    from placement import cim, pim

    for api in (cim, pim):
        for name in api.__all__:
            assert hasattr(api, name), name
        modules = {m.name for m in pkgutil.iter_modules(api.__path__)}
        assert not modules & set(api.__all__), (api.__name__, modules & set(api.__all__))
    for fn in (cim.build_instance, cim.build_model, cim.solve, cim.verify, pim.build_instance,
               pim.build_model, pim.solve, pim.profile, pim.rule, pim.verify):
        assert callable(fn) and not isinstance(fn, type(placement)), fn


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.unit
def test_no_private_name_is_imported_from_another_module():
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("placement"):
                offenders += [
                    f"{path.relative_to(ROOT)}: {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    assert not offenders, offenders


@pytest.mark.integration  # lint-imports in a subprocess
def test_layers_and_no_cycles(tmp_path):
    """The import-linter contracts of pyproject.toml (layers, acyclic siblings)."""
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    out = subprocess.run(
        [lint, "--config", str(ROOT.parent / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, cwd=ROOT.parent,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "2 kept, 0 broken" in out.stdout
