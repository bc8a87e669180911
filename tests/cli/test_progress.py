"""The progress line of ``placement solve``: what it shows, when it writes, and that the
solvers' callbacks really reach it (in seconds, consistent with the verified result)."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path

import pytest
from oracles import block_structured_instance

from placement.cim.instance import CimEdge, CimInstance, CimOperator
from placement.cim.pipeline import solve
from placement.cli.progress import LOG_HEARTBEAT, LOG_INTERVAL, SolveProgress

ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def log_progress(limit: float | None = 600.0) -> tuple[SolveProgress, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return SolveProgress(limit, stream=out, tty=False, clock=clock), out, clock


@pytest.mark.unit
def test_the_line_says_time_against_the_limit_phase_best_bound_and_gap():
    progress, _, clock = log_progress()
    clock.now += 12.4
    assert progress.text() == "solving: 12 s of 600 s, starting"
    progress.phase("CP-SAT")
    progress.improved(0.0725, None)
    progress.improved(None, 0.0700)
    assert progress.text() == (
        "solving: 12 s of 600 s, CP-SAT, best 72.5 ms, bound 70 ms, gap 3.45%"
    )
    # the best of each is kept: a worse incumbent, a lower bound, inf and None change nothing
    progress.improved(0.0800, 0.0650)
    progress.improved(float("inf"), float("-inf"))
    assert progress.text().endswith("best 72.5 ms, bound 70 ms, gap 3.45%")
    progress.improved(0.0710, 0.0710)
    assert progress.text().endswith("best 71 ms, bound 71 ms, gap 0%")
    unlimited, _, _ = log_progress(limit=None)
    assert unlimited.text() == "solving: 0 s, starting"


@pytest.mark.unit
def test_in_a_log_a_line_at_most_every_few_seconds_and_only_on_change():
    progress, out, clock = log_progress()
    for _ in range(4):  # a solve shorter than LOG_INTERVAL writes nothing
        clock.now += 1.0
        progress.tick()
    assert out.getvalue() == ""
    clock.now += LOG_INTERVAL
    progress.tick()
    assert out.getvalue().splitlines() == ["solving: 9 s of 600 s, starting"]
    progress.phase("HiGHS")
    clock.now += LOG_INTERVAL / 2
    progress.tick()  # changed, but too soon
    assert len(out.getvalue().splitlines()) == 1
    clock.now += LOG_INTERVAL / 2
    progress.tick()
    assert out.getvalue().splitlines()[-1] == "solving: 14 s of 600 s, HiGHS"
    clock.now += LOG_INTERVAL * 2
    progress.tick()  # nothing changed: no line until the heartbeat
    assert len(out.getvalue().splitlines()) == 2
    clock.now += LOG_HEARTBEAT
    progress.tick()
    assert len(out.getvalue().splitlines()) == 3
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


@pytest.mark.unit
def test_on_a_terminal_one_line_redrawn_in_place_and_cleared_at_the_end():
    out, clock = io.StringIO(), Clock()
    with SolveProgress(40.0, stream=out, tty=True, clock=clock) as progress:
        clock.now += 10.0
        progress.phase("HiGHS")
        progress.tick()
        progress.line("decomposition round 1: 8 block solves")
        clock.now += 10.0
        progress.tick()
    text = out.getvalue()
    assert "\rsolving: 10 s of 40 s [#####...............], HiGHS\x1b[K" in text
    # a line of its own: the progress line is cleared, the line written, the line redrawn
    assert "\r\x1b[Kdecomposition round 1: 8 block solves\n\rsolving: 10 s of 40 s" in text
    assert "\rsolving: 20 s of 40 s [##########..........], HiGHS\x1b[K" in text
    assert text.endswith("\r\x1b[K")  # nothing left on the line for the summary


class Recorder:
    """A SolveMonitor that keeps everything it is told."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.incumbents: list[float] = []
        self.bounds: list[float] = []

    def phase(self, name: str) -> None:
        self.phases.append(name)

    def improved(self, incumbent: float | None, bound: float | None) -> None:
        if incumbent is not None:
            self.incumbents.append(incumbent)
        if bound is not None:
            self.bounds.append(bound)


def branched(n_branches: int = 6, length: int = 4) -> CimInstance:
    """Parallel branches of CIM-capable operators between a source and a join: many
    ordering decisions, so the MIP branches (and logs) instead of closing in presolve."""
    ops = [CimOperator("src", 1e-4, None, 0, "Input")]
    edges = []
    for b in range(n_branches):
        prev = "src"
        for k in range(length):
            name = f"b{b}_{k}"
            ops.append(CimOperator(name, (3 + (5 * b + 3 * k) % 11) * 1e-4,
                                   (1 + (7 * b + k) % 5) * 1e-4, 1 + (b + k) % 3, "Conv"))
            edges.append(CimEdge(prev, name, 2e-5))
            prev = name
        edges.append(CimEdge(prev, "join", 2e-5))
    ops.append(CimOperator("join", 1e-4, None, 0, "Concat"))
    return CimInstance.build(ops, edges, crossbar_budget=6)


@pytest.mark.solver
@pytest.mark.parametrize("solver", ["highs", "cpsat", "cpsat+highs"])
def test_the_solvers_callbacks_reach_the_monitor_in_seconds(solver):
    from placement.solvers.registry import get_backend

    if "cpsat" in solver and not get_backend("cpsat").available():
        pytest.skip("OR-Tools is not installed")
    instance = branched()
    monitor = Recorder()
    placed = solve(instance, formulation="tightened", solver=solver, monitor=monitor,
                   threads=1, method="monolithic")  # fmt: skip
    makespan = placed.schedule.makespan
    assert placed.result.status.value == "optimal"
    expected = {"highs": ["heuristic", "building the model", "HiGHS"],
                "cpsat": ["heuristic", "CP-SAT"],
                "cpsat+highs": ["heuristic", "CP-SAT"]}[solver]  # fmt: skip
    assert monitor.phases[: len(expected)] == expected
    # incumbents in seconds: the last is the optimum (CP-SAT's on latencies rounded down
    # to its time unit, at most one unit per operator below); bounds never above it
    assert monitor.incumbents and min(monitor.incumbents) == pytest.approx(makespan, rel=1e-6)
    assert monitor.bounds and max(monitor.bounds) <= makespan * (1 + 1e-9)
    # the callbacks change nothing: the same optimum without a monitor
    alone = solve(instance, formulation="tightened", solver=solver, threads=1,
                  method="monolithic")  # fmt: skip
    assert alone.schedule.makespan == pytest.approx(makespan, rel=1e-9)


@pytest.mark.solver
def test_the_decomposition_reports_its_combination():
    instance = block_structured_instance(random.Random(5), 5)
    monitor = Recorder()
    placed = solve(instance, method="decomposition", monitor=monitor)
    assert monitor.phases[0] == "decomposition"
    assert min(monitor.incumbents) >= placed.schedule.makespan * (1 - 1e-9)
    assert max(monitor.bounds) <= placed.schedule.makespan * (1 + 1e-9)


@pytest.mark.integration
def test_solve_writes_no_progress_line_when_quiet_or_short(tmp_path):
    """A short solve into a pipe writes no progress line; -q writes nothing on stderr."""
    model = ROOT / "examples" / "resnet_tiny_int8.onnx"
    profile = ROOT / "tests" / "golden" / "resnet_tiny_int8.profile.json"
    base = [sys.executable, "-m", "placement.cli", "solve", str(model), "--profile",
            str(profile), "--hardware", "x86-ryzen"]  # fmt: skip
    loud = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert loud.returncode == 0, loud.stderr
    assert "solving by" in loud.stderr and "solving:" not in loud.stderr
    quiet = subprocess.run([*base, "-q"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=300)  # fmt: skip
    assert quiet.returncode == 0 and quiet.stderr == ""
