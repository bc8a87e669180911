"""Where outputs may go (placement.io): one line naming the flag and the reason, before any
work, for a file in place of a directory, a missing parent, a special filesystem; and
undoing what a failed command created."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.errors import PlacementError, repeated
from placement.io import (
    check_output_dir,
    check_output_file,
    missing_dirs,
    remove_created,
    special_filesystem,
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
