"""What every test module shares: the helper modules on ``sys.path``, and one kind per test.

The tests mirror the package (``tests/cim/`` tests ``placement/cim/``, ...) and have no
``__init__.py``: pytest imports each test module by its basename ("prepend" import mode),
so basenames must be unique across the whole tree. Helper modules live at the top of
``tests/`` and are imported by name from any directory: ``oracles``, ``pim_oracles``,
``onnx_builders`` and the ``golden`` package. A few test modules also import helpers
from another test module; their directories are listed in :data:`IMPORTED_TEST_DIRS`.

Every test carries exactly one of the :data:`KINDS` markers (registered in
``pyproject.toml``); collection fails, naming the tests, when one has none or several.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

#: Directories of test modules that other test modules import helpers from:
#: ``plots/test_plots.py`` (sweep builders, used by ``sweep/test_report.py``) and
#: ``models/test_cim_model.py`` (the hand-counted fork, used by
#: ``solvers/test_highs_backend.py``).
IMPORTED_TEST_DIRS = (TESTS / "plots", TESTS / "models")

for _path in (TESTS, *IMPORTED_TEST_DIRS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

#: The kinds of test; every test carries exactly one (``addopts`` excludes ``slow``).
KINDS = ("unit", "solver", "integration", "slow")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects anything: check every test
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wrong = []
    for item in items:
        kinds = sorted({m.name for m in item.iter_markers() if m.name in KINDS})
        if len(kinds) != 1:
            wrong.append(f"  {item.nodeid}: {', '.join(kinds) if kinds else 'none'}")
    if wrong:
        raise pytest.UsageError(
            f"every test must carry exactly one of the markers {', '.join(KINDS)}"
            f" (see tests/conftest.py); {len(wrong)} test(s) do not:\n" + "\n".join(wrong)
        )
