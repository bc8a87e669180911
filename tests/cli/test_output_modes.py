"""Every file the commands write follows the umask (0666 less the umask), like the
outputs of any other program: none is 0600 for being written through a temporary file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cli_helpers import run

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"
CIM = ("--profile", PROFILE, "--hardware", "arm-a72", "--crossbars", "8", "-q")


@pytest.mark.integration
@pytest.mark.parametrize("mask", [0o027, 0o002])
def test_every_output_file_follows_the_umask(capsys, tmp_path, mask):
    old = os.umask(mask)
    try:
        commands = [
            ("solve", INT8, *CIM, "--json", tmp_path / "r.json", "--plot", tmp_path / "g.svg"),
            ("export", INT8, *CIM, "-o", tmp_path / "m.mps"),
            ("export", INT8, *CIM, "-o", tmp_path / "m.lp"),
            ("sweep", INT8, "--profile", PROFILE, "--hardware", "arm-a72", "--crossbars", "8,50",
             "--workers", "1", "-q", "-o", tmp_path / "sweep"),
            ("report", tmp_path / "sweep", "-q"),
        ]  # fmt: skip
        for argv in commands:
            code, _, err = run(capsys, *argv)
            assert code == 0, err
    finally:
        os.umask(old)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.relative_to(tmp_path).as_posix() for p in files}
    assert {"r.json", "g.svg", "m.mps", "m.mps.json", "m.lp", "m.lp.json",
            "sweep/manifest.json", "sweep/points.csv", "sweep/report.html"} <= names  # fmt: skip
    assert any(n.startswith("sweep/figures/") and n.endswith(".png") for n in names)
    wrong = {n: oct(stat.S_IMODE(p.stat().st_mode)) for p in files
             if stat.S_IMODE(p.stat().st_mode) != 0o666 & ~mask
             for n in [p.relative_to(tmp_path).as_posix()]}  # fmt: skip
    assert not wrong, f"umask {oct(mask)}: {wrong}"
    assert not [n for n in names if "/." in n or n.startswith(".")]  # no temporary left
