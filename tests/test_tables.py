"""placement.tables: columns never run together, and tables fit the width they are given."""

from __future__ import annotations

import pytest

from placement.tables import CUT, MIN_SHORTENED, shorten, text_table


@pytest.mark.unit
def test_columns_are_as_wide_as_their_widest_cell_two_blanks_apart():
    lines = text_table([["nest", "T_cpu", "BW"]],
                       [["n000", "6.39 us", "0.0301*"], ["n001", "17.1 ms", "3.4"]],
                       right=(1, 2))  # fmt: skip
    assert lines == [
        "nest    T_cpu       BW",
        "n000  6.39 us  0.0301*",
        "n001  17.1 ms      3.4",
    ]
    # a cell as wide as its column is still two blanks from the next (no "us0.0301")
    assert all("  " in ln.strip() for ln in lines)


@pytest.mark.unit
def test_a_name_column_is_shortened_in_the_middle_to_fit():
    name = "/model.24/m.2/very_long_branch_name/Conv_quant"
    rows = [[name, "QLinearGlobalAveragePool", "1.00"], ["short", "Add", "2.00"]]
    lines = text_table([["operator", "type", "T"]], rows, right=(2,), shrink=0, width=60)
    assert max(len(ln) for ln in lines) <= 60
    cut = lines[1].split("  ")[0]
    assert CUT in cut and cut.startswith("/model.24") and cut.endswith("Conv_quant")
    assert "QLinearGlobalAveragePool" in lines[1]  # other columns are never cut
    assert lines[2].startswith("short ")
    # never below MIN_SHORTENED, even if the table then stays wider
    narrow = text_table([["operator", "type", "T"]], rows[:1], shrink=0, width=10)
    assert len(narrow[1].split("  ")[0]) == MIN_SHORTENED


@pytest.mark.unit
def test_shorten_keeps_both_ends():
    assert shorten("b1_conv1_quant", 20) == "b1_conv1_quant"
    assert shorten("b1_conv1_quantized", 12) == "b1_co..tized"
    assert len(shorten("x" * 50, 12)) == 12


@pytest.mark.unit
def test_two_header_rows_and_a_ragged_row_is_refused():
    lines = text_table([["T_host", "xbars"], ["(us)", ""]], [["114.50", "1"]], right=(0, 1))
    assert lines == ["T_host  xbars", "  (us)", "114.50      1"]
    with pytest.raises(ValueError, match="2 cells"):
        text_table([["a", "b", "c"]], [["1", "2"]])
