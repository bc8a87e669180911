"""Ctrl-C at any moment of a command: one line, exit code 130, no traceback, no output.

The command runs as a real process (``python -m placement.cli``) and gets a real SIGINT
at moments found from the process itself, not from a clock: while it imports (when a
KeyboardInterrupt used to escape as a traceback, or as ONNX Runtime's "ImportError:
initialization failed") and while it profiles."""

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


def _start(tmp_path: Path, runs: int = 2000) -> subprocess.Popen:
    """The command, profiling ``runs`` runs: 2000 (several seconds) keep it profiling long
    enough to be interrupted there; a swallowed interrupt ends it only once it is done."""
    argv = [sys.executable, "-m", "placement.cli", "solve", str(INT8), "--runs", str(runs),
            "--json", str(tmp_path / "out.json"), "--plot", str(tmp_path / "g.png")]  # fmt: skip
    # SIGINT back to its default in the child: a test run started in the background (as
    # CI may be) ignores it, and an ignored SIGINT is inherited and kept by Python.
    return subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _assert_interrupted(proc: subprocess.Popen, tmp_path: Path) -> None:
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    if proc.returncode == -signal.SIGINT:  # before Python's own handler existed
        assert err == ""
        return
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "placement: interrupted", err


def _wait_for_library(proc: subprocess.Popen, name: str, timeout: float = 60.0) -> None:
    """Until the process has mapped a shared library whose path contains ``name``: a
    moment inside ``main`` that does not depend on the machine's speed."""
    maps = Path(f"/proc/{proc.pid}/maps")
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            if name in maps.read_text():
                return
        except OSError:  # the process is gone
            break
        time.sleep(0.002)
    pytest.fail(f"the command never loaded {name}")


@pytest.mark.integration
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("library", ["_multiarray_umath", "onnxruntime_pybind11_state"])
def test_ctrl_c_while_importing(tmp_path, library):
    """numpy: the first heavy import, at the start of main; ONNX Runtime's extension: an
    interrupt while it initializes surfaced as ``ImportError: initialization failed``."""
    proc = _start(tmp_path, runs=20)  # interrupted long before profiling
    _wait_for_library(proc, library)
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


@pytest.mark.unit
def test_an_interrupt_a_library_swallowed_still_ends_the_command(capsys, tmp_path, monkeypatch):
    """A Ctrl-C whose KeyboardInterrupt a library caught (a bare ``except``): the flag
    the handler set stops every output file and ends the command as interrupted."""
    from placement.cli import main, presets
    from placement.io import INTERRUPTED, write_text_atomic

    out = tmp_path / "out.txt"

    def swallowing(args):
        INTERRUPTED.set()  # what the handler does before it raises
        try:
            raise KeyboardInterrupt
        except BaseException:  # the library's bare except
            pass
        write_text_atomic(out, "half of a result\n", "result")
        return 0

    monkeypatch.setattr(presets, "run", swallowing)
    assert main(["presets"]) == 130
    assert capsys.readouterr().err.splitlines() == ["placement: interrupted"]
    assert list(tmp_path.iterdir()) == []
    assert main(["presets"]) == 130  # the flag is cleared at each start, set again here
    # ... and at the end: what this process writes after the command is written (a test
    # run in random order once wrote a sweep's files after this test, and got Ctrl-C)
    assert not INTERRUPTED.is_set()
    write_text_atomic(out, "after the command\n", "result")
    assert out.read_text() == "after the command\n"


@pytest.mark.unit
def test_a_command_that_reports_its_interrupt_prints_one_line(capsys, tmp_path, monkeypatch):
    """sweep says what it saved and returns 130 itself: main adds no second line."""
    from cli_helpers import run

    import placement.sweep.run as sweep_run
    from placement.io import INTERRUPTED

    def interrupted(*args, **kwargs):
        INTERRUPTED.set()  # what the SIGINT handler does before raising
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_run, "run_sweep", interrupted)
    monkeypatch.chdir(tmp_path)
    profile = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"
    code, _, err = run(capsys, "sweep", INT8, "--profile", profile, "--crossbars", "25",
                       "-o", "sweep")  # fmt: skip
    assert code == 130
    assert [line for line in err.splitlines() if "interrupted" in line] == [err.splitlines()[-1]]
    assert err.splitlines()[-1].startswith("placement: interrupted; 0 finished point(s) are saved")
