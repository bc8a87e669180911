"""Running the ``placement`` command in-process, and what its errors must look like.

Shared by the tests of every subcommand (imported as plain pytest finds it: tests/ is on
the path, as for ``oracles``).
"""

from __future__ import annotations

from placement.cli import main


def run(capsys, *argv: object) -> tuple[int, str, str]:
    """``placement ARGV...`` in this process: (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    """Exit code 1, exactly one ``placement: error:`` line holding every fragment, no
    traceback."""
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("placement: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
