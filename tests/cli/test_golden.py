"""Golden outputs of the ``placement`` command, captured before a behaviour-preserving
restructuring: every case of ``tests/golden/cases.py`` is run again through the real CLI
and compared with ``tests/golden/expected/`` (times, dates and versions masked; floats to
a relative 1e-9). Regenerate the golden files ONLY for a deliberate behaviour change:
``python tests/golden/regenerate.py`` (see its docstring).
"""

from __future__ import annotations

import re

import pytest
from golden import cases


@pytest.mark.parametrize("case", cases.CASES, ids=cases.CASE_NAMES)
@pytest.mark.integration
def test_cli_output_matches_golden(case: cases.Case, tmp_path) -> None:
    meta, expected = cases.load_outcome(case.name)
    assert meta["args"] == list(case.args), (
        "the command of this case changed since the golden files were written;"
        " regenerate it with python tests/golden/regenerate.py " + case.name
    )
    actual = cases.run_case(case, tmp_path)
    problems = cases.differences(expected, actual)
    if problems:
        pytest.fail(f"placement {' '.join(case.args)}\n" + "\n".join(problems), pytrace=False)


@pytest.mark.unit
def test_every_golden_directory_belongs_to_a_case() -> None:
    on_disk = {p.name for p in cases.EXPECTED.iterdir() if p.is_dir()}
    assert on_disk == set(cases.CASE_NAMES)


@pytest.mark.unit
def test_the_comparison_catches_differences() -> None:
    """The comparers themselves: masked keys ignored, tolerance 1e-9, anything else caught."""
    base = cases.Outcome(0, "a\n", "", {"x.json": '{"v": 1.0, "solve_seconds": 3}'})

    def with_json(text: str) -> cases.Outcome:
        return cases.Outcome(0, "a\n", "", {"x.json": text})

    assert not cases.differences(base, with_json('{"v": 1.0000000000001, "solve_seconds": 3}'))
    assert cases.differences(base, with_json('{"v": 1.001, "solve_seconds": 3}'))
    assert cases.differences(base, with_json('{"v": 1, "solve_seconds": 3}'))  # int vs float
    assert cases.differences(base, with_json('{"v": 1.0}'))  # a key less
    assert cases.differences(base, cases.Outcome(1, "a\n", "", base.files))
    assert cases.differences(base, cases.Outcome(0, "b\n", "", base.files))
    masked = cases.mask_file("x.json", '{"solve_seconds": 0.5, "n": [{"created": "today"}]}')
    assert masked == cases.mask_file("x.json", '{"solve_seconds": 9, "n": [{"created": "now"}]}')
    assert cases.mask_text("solve 0.03 s (build 0.01 s)") == "solve <T> s (build <T> s)"

    def lp(text: str) -> cases.Outcome:
        return cases.Outcome(0, "", "", {"m.lp": text})

    assert not cases.differences(
        lp("c1:\n+1 x\n<= -4950.0\n"), lp("c1:\n+1 x\n<= -4949.999999999999\n")
    )
    assert cases.differences(lp("c1:\n+1 x\n<= -4950.0\n"), lp("c1:\n+1 y\n<= -4950.0\n"))
    assert cases.differences(lp("c1:\n+1 x\n<= -4950.0\n"), lp("c1:\n+1 x\n<= -4950.1\n"))


@pytest.mark.unit
def test_every_table_of_the_wide_cases_fits_their_terminal() -> None:
    """Table lines (cells two blanks apart) of the cases run at 100 columns fit in 100
    columns; prose lines may be longer (the terminal wraps them)."""
    wide = [c for c in cases.CASES if c.columns > 80]
    assert {c.name for c in wide} >= {"cim-solve-details", "pim-solve"}
    for case in wide:
        _, outcome = cases.load_outcome(case.name)
        rows = [ln for ln in outcome.stdout.splitlines() if re.search(r"\S  +\S", ln.strip())]
        assert len(rows) > 10, case.name  # the tables are there
        too_wide = [ln for ln in rows if len(ln) > case.columns]
        assert not too_wide, f"{case.name}: {too_wide[:3]}"
