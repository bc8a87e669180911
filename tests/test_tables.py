"""placement.tables: columns never run together, tables fit the width they are given, and
prose wraps on a terminal (only there)."""

from __future__ import annotations

import io
import os
import pty

import pytest

from placement.tables import (
    CUT,
    MIN_SHORTENED,
    WIDTH,
    for_terminal,
    shorten,
    text_table,
    wrapped,
)


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


@pytest.mark.unit
def test_long_prose_wraps_at_spaces_with_an_indented_continuation():
    line = "  host: C3 failed (simulated): BW_read <= theta 2.01 GB/s; " + "word " * 30
    out = list(wrapped(["short", line], width=60))
    assert out[0] == "short"
    assert all(len(x) <= 60 for x in out[1:])
    assert out[1].startswith("  host:") and all(x.startswith("    ") for x in out[2:])
    assert " ".join(x.strip() for x in out[1:]) == " ".join(line.split())  # nothing lost


@pytest.mark.unit
def test_a_word_longer_than_the_width_is_kept_whole():
    path = "/a/" + "b" * 120
    assert list(wrapped([f"wrote {path} now"], width=40)) == ["wrote", f"  {path}", "  now"]


@pytest.mark.unit
def test_lines_stay_whole_in_a_pipe_and_wrap_in_a_terminal():
    line = "x " * 80
    assert list(for_terminal([line], io.StringIO())) == [line]  # not a terminal
    primary, secondary = pty.openpty()
    try:
        with os.fdopen(secondary, "w", closefd=False) as tty:
            assert tty.isatty()
            out = list(for_terminal([line], tty))
    finally:
        os.close(primary)
        os.close(secondary)
    assert len(out) > 1 and all(len(x) <= max(WIDTH, 80) for x in out)
