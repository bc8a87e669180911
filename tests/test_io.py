"""Where outputs may go (placement.io): one line naming the flag and the reason, before any
work, for a file in place of a directory, a missing parent, a special filesystem; and
undoing what a failed command created. Atomic writes leave no partial file and give
outputs the permissions the umask asks for, as any other program's outputs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from placement.errors import PlacementError, repeated
from placement.io import (
    check_output_dir,
    check_output_file,
    missing_dirs,
    remove_created,
    replacing,
    special_filesystem,
    write_json_atomic,
    write_text_atomic,
)

pytestmark = pytest.mark.unit

HAS_PROC = Path("/proc/self/mounts").exists()
needs_proc = pytest.mark.skipif(not HAS_PROC, reason="no /proc/self/mounts (not Linux)")


def message(check, *args, **kwargs) -> str:
    with pytest.raises(PlacementError) as info:
        check(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text
    return text


@needs_proc
@pytest.mark.parametrize("place", ["/proc", "/sys"])
def test_special_filesystems_are_refused(place):
    assert special_filesystem(place) in ("proc", "sysfs")
    text = message(check_output_file, f"{place}/out.json", "--json x")
    assert text.startswith("--json x: ") and "special filesystem" in text
    text = message(check_output_dir, f"{place}/sweep", "-o x")
    assert text.startswith("-o x: ") and "special filesystem" in text


@needs_proc
def test_a_disk_directory_is_not_special(tmp_path):
    assert special_filesystem(tmp_path) is None
    assert special_filesystem(tmp_path / "not" / "yet") is None
    assert check_output_file(tmp_path / "out.json") == tmp_path / "out.json"
    assert check_output_dir(tmp_path / "new") == tmp_path / "new"


def test_a_file_where_a_directory_is_needed(tmp_path):
    (tmp_path / "some_file").write_text("x")
    assert "some_file is a file, not a directory" in message(
        check_output_dir, tmp_path / "some_file" / "dir", parents=True
    )
    assert "some_file is a file, not a directory" in message(
        check_output_file, tmp_path / "some_file" / "out.json"
    )
    assert "exists and is not a directory" in message(check_output_dir, tmp_path / "some_file")


def test_missing_parents(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    assert f"directory {tmp_path / 'a' / 'b'} does not exist" in message(check_output_dir, deep)
    assert check_output_dir(deep, parents=True) == deep  # mkdir(parents=True) will make them
    assert "does not exist" in message(check_output_file, deep / "x.json")
    assert "is a directory" in message(check_output_file, tmp_path)
    assert not (tmp_path / "a").exists()  # checking creates nothing


def test_remove_created_undoes_only_what_was_created(tmp_path):
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "mine.txt").write_text("user data")
    target = tmp_path / "keep" / "new" / "profiles"
    created = missing_dirs(target)
    assert created == [target, tmp_path / "keep" / "new"]  # deepest first
    target.mkdir(parents=True)
    (target / "p.json").write_text("{}")
    remove_created([target / "p.json"], created)
    assert not (tmp_path / "keep" / "new").exists()
    assert (tmp_path / "keep" / "mine.txt").read_text() == "user data"
    # A created directory that is not empty (someone else's file) stays.
    target.mkdir(parents=True)
    (target / "other.txt").write_text("x")
    remove_created([], created)
    assert (target / "other.txt").exists()


def test_repeated_values_are_named_once_in_order():
    assert repeated([25, 50, 25, 100, 50, 25]) == [25, 50]
    assert repeated([1, 2, 3]) == []


# --------------------------------------------------------------------------- atomic writes


@pytest.fixture
def umask():
    """Set the process umask for one test (and put the old one back)."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


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


def test_replacing_an_existing_file_gives_it_the_umask_mode(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "out.json"
    target.write_text("{}")
    target.chmod(0o600)
    write_json_atomic(target, {"new": True})
    assert target.read_text() == '{\n  "new": true\n}\n'
    assert mode(target) == 0o644


def test_a_failed_write_leaves_neither_the_file_nor_a_temporary(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(PlacementError, match="cannot write a test file"):
        write_text_atomic(tmp_path / "missing" / "out.txt", "x", "a test file")
    assert list(tmp_path.iterdir()) == []
