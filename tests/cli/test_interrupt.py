"""Ctrl-C at any moment of a command: one line, exit code 130, no traceback, no output.

The command runs as a real process (``python -m placement.cli``) and gets a real SIGINT:
while the interpreter starts and imports (the moments when a KeyboardInterrupt used
to escape as a traceback, or as ONNX Runtime's "ImportError: initialization failed"),
and while it profiles."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"


def _start(tmp_path: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "placement.cli", "solve", str(INT8), "--runs", "2000",
            "--json", str(tmp_path / "out.json"), "--plot", str(tmp_path / "g.png")]  # fmt: skip
    return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))  # fmt: skip


def _assert_interrupted(proc: subprocess.Popen, tmp_path: Path) -> None:
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    if proc.returncode == -signal.SIGINT:  # before Python's own handler existed
        assert err == ""
        return
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "placement: interrupted", err


@pytest.mark.integration
@pytest.mark.parametrize("after", [0.15, 0.4, 0.8, 1.5])
def test_ctrl_c_while_starting(tmp_path, after):
    proc = _start(tmp_path)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _assert_interrupted(proc, tmp_path)


@pytest.mark.integration
def test_ctrl_c_while_profiling(tmp_path):
    proc = _start(tmp_path)
    assert proc.stderr is not None
    for line in proc.stderr:  # wait for the profiler's progress
        if "profiling with ONNX Runtime" in line:
            break
    proc.send_signal(signal.SIGINT)
    _assert_interrupted(proc, tmp_path)
