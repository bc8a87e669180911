"""`placement sweep` as processes: one sweep at a time in a directory (a second refuses in
one line, a killed one leaves nothing stuck), a sweep killed with SIGKILL leaves no
worker process running, and Ctrl-C with worker processes prints one line and no
worker's traceback. The commands run as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placement.errors import PlacementError
from placement.solvers.workers import WATCH_SECONDS
from placement.sweep.grid import build_grid
from placement.sweep.run import run_sweep
from placement.sweep.store import LOCK_FILE, SweepStore

ROOT = Path(__file__).resolve().parents[2]
INT8 = ROOT / "examples" / "resnet_tiny_int8.onnx"
PROFILE = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"


def sweep_command(out: Path, crossbars: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "placement.cli", "sweep", str(INT8), "--profile",
            str(PROFILE), "--hardware", "x86-ryzen", "--crossbars", crossbars, "--t-mvm-ns",
            "50,100,500,1000", "-o", str(out), "-q", *extra]  # fmt: skip


def start(argv: list[str], **kwargs) -> subprocess.Popen:
    # SIGINT back to its default in the child: a test run started in the background
    # ignores it, and an ignored SIGINT is inherited and kept by Python.
    return subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs,
    )  # fmt: skip


def logged(out: Path) -> list[dict]:
    path = out / "points.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


@pytest.mark.integration
def test_a_second_sweep_on_a_held_directory_refuses_in_one_line(tmp_path):
    out = tmp_path / "s"
    grid = build_grid("cim", ["x86-ryzen"], [("crossbars", "4")])
    with SweepStore(out).held():
        with pytest.raises(PlacementError) as info:
            run_sweep("cim", [INT8], grid, out, profiles=[PROFILE])
    message = str(info.value)
    assert "another sweep is running in this directory" in message and "\n" not in message
    assert f"(process {os.getpid()})" in message
    assert not out.exists()  # nothing was started there: the hold removed what it made


HOLD = """
import sys, time
from placement.sweep.store import SweepStore
hold = SweepStore(sys.argv[1]).held()
hold.__enter__()
print("held", flush=True)
time.sleep(120)
"""


@pytest.mark.integration
def test_a_killed_sweep_leaves_no_lock_behind(tmp_path):
    out = tmp_path / "s"
    holder = start([sys.executable, "-c", HOLD, str(out)])
    try:
        assert holder.stdout.readline().strip() == "held"
        assert (out / LOCK_FILE).read_text().strip() == str(holder.pid)
    finally:
        holder.kill()
        holder.communicate()
    assert (out / LOCK_FILE).exists()  # left by the killed holder, but no longer held
    grid = build_grid("cim", ["x86-ryzen"], [("crossbars", "4")])
    result = run_sweep("cim", [INT8], grid, out, profiles=[PROFILE])
    assert [r["status"] for r in result.rows] == ["optimal"]
    assert not (out / LOCK_FILE).exists()  # a finished sweep leaves no lock file


@pytest.mark.integration
def test_two_sweeps_started_at_once_solve_every_point_once(tmp_path):
    out = tmp_path / "s"
    argv = sweep_command(out, "1,2,3", "--workers", "1")
    first, second = start(argv), start(argv)
    runs = [(p.wait(timeout=600), p.communicate()[1]) for p in (first, second)]
    ids = [r["point_id"] for r in logged(out)]
    assert len(ids) == 12 and len(set(ids)) == 12  # 3 x 4 points, none twice
    assert 0 in [code for code, _ in runs]
    for code, err in runs:
        assert "Traceback" not in err
        if code != 0:  # the one that found the directory held
            assert code == 1 and err.count("\n") == 1, err
            assert "another sweep is running in this directory" in err


@pytest.mark.integration
def test_ctrl_c_in_a_sweep_with_workers_prints_one_line(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C: the workers ignore it
    and are ended by the sweep, which says in one line what it saved."""
    out = tmp_path / "s"
    crossbars = ",".join(str(c) for c in range(1, 41))
    proc = start(sweep_command(out, crossbars, "--workers", "2"), start_new_session=True)
    end = time.monotonic() + 300
    while time.monotonic() < end and proc.poll() is None and len(logged(out)) < 2:
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.count("\n") == 1 and err.startswith("placement: interrupted;"), err
    assert len(logged(out)) < 160


def descendants(pid: int) -> set[int]:
    """The processes below ``pid`` now, from /proc (each process's parent)."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while listed
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        above = todo.pop()
        below = [p for p, pp in parent.items() if pp == above]
        found.update(below)
        todo.extend(below)
    return found


def alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_sweep_killed_with_sigkill_leaves_no_worker_running(tmp_path):
    """The issue's case: ``kill -9`` of a sweep with two workers used to leave them solving.
    Every process below the sweep (workers, the resource tracker) ends on its own."""
    out = tmp_path / "s"
    crossbars = ",".join(str(c) for c in range(1, 41))
    proc = start(sweep_command(out, crossbars, "--workers", "2"), start_new_session=True)
    try:
        end = time.monotonic() + 300
        while time.monotonic() < end and proc.poll() is None and len(logged(out)) < 2:
            time.sleep(0.02)
        assert proc.poll() is None, "the sweep ended before it could be killed"
        below = descendants(proc.pid)
        assert len(below) >= 2, below  # the two workers at least
    finally:
        proc.kill()
        proc.communicate()
    end = time.monotonic() + 10 * WATCH_SECONDS + 5
    while time.monotonic() < end and any(alive(p) for p in below):
        time.sleep(0.05)
    left = [p for p in below if alive(p)]
    for p in left:  # do not leave them to the rest of the test run
        os.kill(p, signal.SIGKILL)
    assert not left, left
