"""placement.io: atomic writes leave no partial file and give outputs the permissions the
umask asks for, as any other program's outputs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from placement.errors import PlacementError
from placement.io import replacing, write_json_atomic, write_text_atomic


@pytest.fixture
def umask():
    """Set the process umask for one test (and put the old one back)."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.unit
@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002, 0o027])
def test_written_files_follow_the_umask(tmp_path, umask, mask):
    umask(mask)
    write_text_atomic(tmp_path / "a.txt", "text\n", "a test file")
    write_json_atomic(tmp_path / "b.json", {"x": 1})
    with replacing(tmp_path / "c.lp", suffix=".lp") as tmp:
        assert tmp.name.endswith(".lp") and tmp.name.startswith(".c.lp.")
        tmp.write_text("model")
    for name in ("a.txt", "b.json", "c.lp"):
        assert mode(tmp_path / name) == 0o666 & ~mask, name


@pytest.mark.unit
def test_replacing_an_existing_file_gives_it_the_umask_mode(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "out.json"
    target.write_text("{}")
    target.chmod(0o600)
    write_json_atomic(target, {"new": True})
    assert target.read_text() == '{\n  "new": true\n}\n'
    assert mode(target) == 0o644


@pytest.mark.unit
def test_a_failed_write_leaves_neither_the_file_nor_a_temporary(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PlacementError, match="cannot write a test file"):
        write_text_atomic(tmp_path / "missing" / "out.txt", "x", "a test file")
    assert list(tmp_path.iterdir()) == []
